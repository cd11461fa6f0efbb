"""The README's code blocks and the marker that says how the suite checks each one.

Every fenced block is preceded by an HTML comment naming how it is tested:

- ``<!-- runs-as-test -->`` (``sh``): run, command by command, in a fresh directory on a temp
  SQLite database (``tests/integration/test_readme_walkthroughs.py``);
- ``<!-- example: PATH -->``: the block is the file PATH, byte for byte, which the suite runs;
- ``<!-- runs-with: MODULE -->`` (``python``): executed in the namespace of the tested example
  MODULE (its imports), with the few names the prose leaves out supplied by the test;
- ``<!-- not-run: WHY -->``: cannot run here (WHY says why: a Slack workspace, Docker, a
  model provider's key, …); it must still parse (``bash -n`` and the ``signoff`` parser for
  shell, ``ast`` for Python, the YAML or JSON parser) — transcripts (a block with no
  language) have their ``$`` lines checked as shell.

YAML, JSON and TOML blocks need no marker: they are parsed, and the rules and policy files
are loaded by the product's own loaders.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"

FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>\w*)\s*$")
MARKER = re.compile(r"^ *<!-- (?P<kind>[a-z-]+)(?::\s*(?P<arg>.*?))? -->\s*$")
KINDS = ("runs-as-test", "example", "runs-with", "not-run")
CONFIG_LANGS = ("yaml", "json", "toml")


@dataclass(frozen=True, slots=True)
class Block:
    """One fenced block: where it starts, its language, text and marker."""

    line: int
    lang: str
    text: str
    kind: str | None
    arg: str

    def __str__(self) -> str:
        return f"README.md:{self.line} ({self.lang or 'text'})"


def blocks(text: str | None = None) -> list[Block]:
    """Return the README's fenced blocks (or those of ``text``), in order."""
    lines = (README.read_text(encoding="utf-8") if text is None else text).splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        end = _closing(lines, index, opening.group("indent"))
        body = textwrap.dedent("\n".join(lines[index + 1 : end]) + "\n")
        kind, arg = _marker(lines, index)
        found.append(Block(index + 1, opening.group("lang"), body, kind, arg))
        index = end + 1
    return found


def _closing(lines: list[str], start: int, indent: str) -> int:
    for index in range(start + 1, len(lines)):
        if lines[index] == f"{indent}```":
            return index
    raise ValueError(f"README.md:{start + 1}: a code block is never closed")


def _marker(lines: list[str], fence: int) -> tuple[str | None, str]:
    previous = fence - 1
    while previous >= 0 and not lines[previous].strip():
        previous -= 1
    found = MARKER.match(lines[previous]) if previous >= 0 else None
    if found is None:
        return None, ""
    return found.group("kind"), (found.group("arg") or "").strip()


def marked(kind: str) -> list[Block]:
    """Return the README's blocks with the marker ``kind``."""
    return [block for block in blocks() if block.kind == kind]
