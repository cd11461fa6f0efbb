"""The ``signoff dev`` stacks the browser tests drive."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from devkit.dev import DevOptions, DevStack, start_dev


@contextmanager
def running_dev(tmp_path: Path, **settings: str) -> Iterator[DevStack]:
    """``signoff dev``'s parts in this process (the worker is a child process) on free ports,
    with these ``SIGNOFF_*`` settings beside the short lease; stopped on exit."""
    env = dict(os.environ) | {"SIGNOFF_LEASE_TTL_SECONDS": "2"} | settings
    stack = start_dev(DevOptions(port=0, data_dir=tmp_path / "dev", concurrency=2), env)
    try:
        yield stack
    finally:
        stack.stop()
