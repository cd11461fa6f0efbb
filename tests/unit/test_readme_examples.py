"""README code blocks marked as examples are the example files the suite runs."""

from __future__ import annotations

from pathlib import Path

from tests.readme import blocks, marked

ROOT = Path(__file__).resolve().parents[2]


def test_marked_readme_blocks_are_the_tested_example_files() -> None:
    """Each README block marked with an example file is, byte for byte, that file."""
    examples = marked("example")
    assert sorted(block.arg for block in examples) == [
        "examples/approval_workflow.py",
        "examples/refund_agent.py",
        "examples/test_refund_agent.py",
    ]
    for block in examples:
        assert block.text == (ROOT / block.arg).read_text(encoding="utf-8"), (
            f"{block} != {block.arg}"
        )


def test_the_marker_matches_a_block() -> None:
    """The marker pattern finds a marked block and its file name."""
    (block,) = blocks("<!-- example: examples/a.py -->\n```python\nx = 1\n```\n")
    assert (block.kind, block.arg, block.text) == ("example", "examples/a.py", "x = 1\n")
