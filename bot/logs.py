"""Log set-up for the command line: one line per record, structured fields appended."""

from __future__ import annotations

import logging

FIELDS = ("action", "run_id", "step")


class FieldsFormatter(logging.Formatter):
    """Appends the structured fields a record carries (``action``, ``run_id``, ``step``)."""

    def format(self, record: logging.LogRecord) -> str:
        """Format the record, then add ``key=value`` for each field present."""
        text = super().format(record)
        fields = " ".join(f"{k}={getattr(record, k)}" for k in FIELDS if hasattr(record, k))
        return f"{text} {fields}" if fields else text


def configure(level: int = logging.INFO) -> None:
    """Send log records to stderr."""
    handler = logging.StreamHandler()
    handler.setFormatter(FieldsFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("alembic", "waitress"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    logging.getLogger("apscheduler").setLevel(logging.ERROR)  # skipped overlapping runs are fine
