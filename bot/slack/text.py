"""Untrusted text on its way to Slack: escaped so it cannot mention, link, format or hide."""

from __future__ import annotations

import json
import re
import unicodedata
from datetime import datetime

SECTION_LIMIT = 3000
"""Characters in a section's text."""
TEXT_LIMIT = 4000
"""Characters in a message's top-level ``text``."""
NAME_LIMIT = 80
"""Characters of a tool name shown anywhere (names come from the model)."""

_KEPT = frozenset("\n\t")
_HIDING = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_EMOJI = "\U0001f000-\U0001faff\u2600-\u27bf"
_EMOJI_JOINER = re.compile(f"(?<=[{_EMOJI}\ufe0f])\u200d(?=[{_EMOJI}])")
"""A zero-width joiner inside an emoji sequence (👩🏽‍💻): it shows as the emoji, so it stays."""
# what a cut may leave unfinished at the end: an entity, a mention or link, a \u escape
_UNFINISHED = re.compile(r"(&[a-z]{0,4}|<[^<>]*|\\(u[0-9a-f]{0,3})?)$")


def is_hiding(char: str) -> bool:
    """Tell whether ``char`` is invisible or changes direction (controls, formats, separators)."""
    return not char.isprintable() and char not in _KEPT and (unicodedata.category(char) in _HIDING)


def has_hidden(text: str) -> bool:
    """Tell whether ``text`` holds a character that would not show as itself."""
    if text.replace("\n", "").replace("\t", "").isprintable():
        return False
    return any(is_hiding(c) for c in _EMOJI_JOINER.sub("", text))


def visible(text: str) -> str:
    r"""Show invisible and direction-changing characters as JSON escapes (``\u202e``)."""
    if not has_hidden(text):
        return text
    return "\u200d".join(
        "".join(json.dumps(c)[1:-1] if is_hiding(c) else c for c in part)
        for part in _EMOJI_JOINER.split(text)
    )


def escape(text: str) -> str:
    """Make hidden characters visible and escape ``&``, ``<`` and ``>`` for mrkdwn.

    Without this, untrusted text could produce ``<!channel>``, ``<@U123>``, links, or
    display differently from what it is (``\\u202e`` reverses what follows).
    """
    return visible(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def truncate(text: str, limit: int) -> str:
    """Shorten ``text`` to at most ``limit`` characters, marking the cut with an ellipsis.

    The cut never splits an entity (``&amp;``), a mention or link (``<@U1>``) or an escape.
    """
    if len(text) <= limit:
        return text
    kept = text[: limit - 1]
    unfinished = _UNFINISHED.search(kept)
    return (kept[: unfinished.start()] if unfinished else kept) + "…"


def shown(text: str, limit: int) -> str:
    """Untrusted ``text`` escaped for mrkdwn, then shortened to ``limit`` characters."""
    # escaping never shortens, so the first limit + 1 characters are all that can show
    return truncate(escape(text[: limit + 1]), limit)


def tool_name(name: str) -> str:
    """A tool name (the model proposes it) escaped and shortened for any message."""
    return shown(name, NAME_LIMIT)


def message(text: str) -> str:
    """A message's top-level ``text``, already escaped, shortened to what Slack accepts."""
    return truncate(text, TEXT_LIMIT)


def chunks(text: str, size: int) -> list[str]:
    """Split ``text`` into pieces of at most ``size`` characters (at least one piece)."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def user(user_id: str) -> str:
    """Mention a Slack user by id (ids are checked to be plain before use)."""
    plain = "".join(c for c in user_id if c.isalnum() or c in "_-")
    return f"<@{plain}>" if plain == user_id and plain else escape(user_id)


def date(moment: datetime) -> str:
    """A moment in each reader's own time zone, with a UTC fallback for old clients."""
    fallback = moment.strftime("%H:%M UTC %b %d")
    return f"<!date^{int(moment.timestamp())}^{{date_short_pretty}} {{time}}|{fallback}>"
