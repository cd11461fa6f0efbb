"""Block Kit for an approval's preview: what the call would do, shown before its arguments.

A preview's text and table come from the tool, which read them from live data (an order's
customer name, say): they are untrusted and escaped like arguments.
"""

from __future__ import annotations

from typing import Any

from agent_runtime import Approval
from agent_runtime.previews import stored, stored_error
from bot.slack.text import SECTION_LIMIT, has_hidden, shown

FIELD_LIMIT = 2000
"""Characters in one of a section's fields."""
NO_PREVIEW = (
    "⚠️ *No preview:* the tool could not say what this call would do ({error}). "
    "It will not run on a preview nobody saw: if approved, it is asked again "
    "once its preview can be shown."
)


def preview_blocks(approval: Approval) -> list[dict[str, Any]]:
    """The preview's sentence and table (or why there is none); empty without a preview."""
    error = stored_error(approval.preview)
    if error is not None:
        return [_section(NO_PREVIEW.format(error=shown(error, 500)))]
    preview = stored(approval.preview)
    if preview is None:
        return []
    found: list[dict[str, Any]] = []
    if preview.text:
        found.append(_section("*What it will do*\n" + shown(preview.text, SECTION_LIMIT - 100)))
    if preview.table:
        fields = [
            {"type": "mrkdwn", "text": f"*{shown(label, 200)}*\n{shown(value, FIELD_LIMIT - 300)}"}
            for label, value in preview.table
        ]
        found.append({"type": "section", "fields": fields})
    return found


def preview_line(approval: Approval, limit: int = 300) -> str:
    """The preview's sentence on one line, escaped ('' without one)."""
    preview = stored(approval.preview)
    if preview is None or not preview.text:
        return ""
    return shown(" ".join(preview.text.split()), limit)


def preview_hides(approval: Approval) -> bool:
    """Tell whether the preview holds invisible or direction-changing characters."""
    preview = stored(approval.preview)
    if preview is None:
        return False
    return has_hidden(preview.text + "".join(cell for row in preview.table for cell in row))


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}
