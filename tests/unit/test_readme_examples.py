"""README code blocks marked as examples are the example files the suite runs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKED = re.compile(r"<!-- example: (\S+) -->\n```\w*\n(.*?)```", re.S)
"""A block preceded by ``<!-- example: examples/x.py -->`` must be that file, verbatim."""


def test_marked_readme_blocks_are_the_tested_example_files() -> None:
    """Each README block marked with an example file is, byte for byte, that file."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    marked = MARKED.findall(readme)
    assert sorted(path for path, _ in marked) == [
        "examples/approval_workflow.py",
        "examples/refund_agent.py",
        "examples/test_refund_agent.py",
    ]
    for path, body in marked:
        assert body == (ROOT / path).read_text(encoding="utf-8"), f"README block != {path}"


def test_the_marker_matches_a_block() -> None:
    """The marker pattern finds a marked block and its file name."""
    text = "<!-- example: examples/a.py -->\n```python\nx = 1\n```\n"
    assert MARKED.findall(text) == [("examples/a.py", "x = 1\n")]
