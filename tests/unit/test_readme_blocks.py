"""Every README code block is tested: marked as run, as an example file, or parsed."""

from __future__ import annotations

import ast
import importlib
import json
import re
import shlex
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.app.settings import Settings, read_rules_file
from bot.cli.main import build_parser
from bot.mcp.policy import load_policy
from tests.readme import CONFIG_LANGS, KINDS, README, Block, blocks, marked

FRAGMENT_NAMES: dict[str, Any] = {
    "api_key": "sk-readme",
    "payments": importlib.import_module("examples.payments").Payments(),
}
"""The names the README's Python fragments take from their surrounding prose."""

PLACEHOLDERS = {"RUN": "a" * 32, "RUN1": "b" * 32, "RUN2": "c" * 32, "…": "d" * 32}
"""Well-formed ids for the placeholders of commands not run (the parser checks ids)."""


def _unmarked(block: Block) -> bool:
    return block.kind not in KINDS and block.lang not in CONFIG_LANGS


def check_parses(block: Block, tmp_path: Path) -> None:
    """Fail unless ``block`` parses as what its language says it is."""
    if block.lang == "sh":
        _check_shell(block.text)
    elif block.lang == "python":
        ast.parse(block.text, filename=str(block))
    elif block.lang in CONFIG_LANGS:
        _check_config(block, tmp_path)
    elif block.lang == "":
        _check_shell(
            "".join(line[2:] + "\n" for line in block.text.splitlines() if line[:2] == "$ ")
        )
    else:
        raise AssertionError(f"{block}: no check for the language {block.lang!r}")


def _check_shell(script: str) -> None:
    done = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    for line in _commands(script):
        if not line.startswith("signoff "):
            continue
        words = [PLACEHOLDERS.get(word, word) for word in shlex.split(line, comments=True)]
        try:
            build_parser(Settings(), words[1:]).parse_args(words[1:])
        except SystemExit as exc:
            raise AssertionError(f"signoff refuses: {line}") from exc


def _commands(script: str) -> list[str]:
    """The script's lines, with backslash continuations joined."""
    return [line for line in script.replace("\\\n", " ").splitlines() if line.strip()]


def _check_config(block: Block, tmp_path: Path) -> None:
    if block.lang == "toml":
        tomllib.loads(block.text)
        return
    data = json.loads(block.text) if block.lang == "json" else yaml.safe_load(block.text)
    assert isinstance(data, dict), f"{block}: not a mapping"
    path = tmp_path / f"block.{block.lang}"
    path.write_text(block.text, encoding="utf-8")
    if "rules" in data:
        assert read_rules_file(str(path)).rules
    elif "tools" in data:
        assert load_policy(path).tools


def test_every_readme_block_says_how_it_is_tested() -> None:
    """Each block carries a known marker (a reason, for those not run) or is a config file."""
    found = blocks()
    assert [str(b) for b in found if _unmarked(b)] == []
    assert [str(b) for b in found if b.kind == "not-run" and not b.arg] == []
    assert {b.kind for b in found} >= {"runs-as-test", "example", "runs-with", "not-run"}


@pytest.mark.parametrize("block", marked("not-run"), ids=str)
def test_a_block_not_run_here_still_parses(block: Block, tmp_path: Path) -> None:
    """A block that cannot run here parses; its ``signoff`` commands are ones the CLI takes."""
    check_parses(block, tmp_path)


@pytest.mark.parametrize("block", [b for b in blocks() if b.lang in CONFIG_LANGS], ids=str)
def test_a_config_block_parses_and_loads(block: Block, tmp_path: Path) -> None:
    """A YAML, JSON or TOML block parses; a rules or policy file loads with the product's loader."""
    check_parses(block, tmp_path)


@pytest.mark.parametrize("block", marked("runs-with"), ids=str)
def test_a_python_fragment_runs_in_its_example_module(block: Block) -> None:
    """The fragment executes among its example module's imports and defines what it shows."""
    namespace = dict(vars(importlib.import_module(block.arg))) | FRAGMENT_NAMES
    before = set(namespace)
    exec(compile(block.text, str(block), "exec"), namespace)
    assert set(namespace) - before


@pytest.mark.parametrize(
    ("lang", "text"),
    [
        ("sh", "signoff show RUN --no-such-flag\n"),
        ("sh", "if then\n"),
        ("python", "def f(:\n"),
        ("yaml", "rules: [\n"),
        ("json", '{"a": }\n'),
        ("yaml", "rules:\n  - {id: r, tool: t, action: maybe}\n"),
        ("", "$ signoff rules test --since\n"),
    ],
    ids=["unknown flag", "shell syntax", "python", "yaml", "json", "bad rule", "transcript"],
)
def test_a_broken_block_fails_its_check(lang: str, text: str, tmp_path: Path) -> None:
    """The checks catch broken blocks: a refused flag, bad syntax, an invalid rule."""
    with pytest.raises((AssertionError, SyntaxError, ValueError, yaml.YAMLError)):
        check_parses(Block(1, lang, text, "not-run", "why"), tmp_path)


def test_an_unmarked_block_is_reported() -> None:
    """A shell block with no marker is found and reported as untested."""
    (block,) = blocks("Try:\n\n```sh\nsignoff worker\n```\n")
    assert _unmarked(block)
    (marked_block,) = blocks("<!-- not-run: needs Slack -->\n```sh\nx\n```\n")
    assert (marked_block.kind, marked_block.arg) == ("not-run", "needs Slack")


def test_every_file_the_readme_names_exists() -> None:
    """Each path of the repository the README names in backquotes (a test, an example, a
    module) is there."""
    text = README.read_text(encoding="utf-8")
    named = set(re.findall(rf"`((?:{'|'.join(TOP_LEVEL)})/[\w./-]+)`", text))
    root = README.parent
    assert len(named) > 20, "the pattern finds the README's paths"
    assert sorted(p for p in named if not (root / p.rstrip("/")).exists()) == []


TOP_LEVEL = (
    "agent_runtime",
    "bench",
    "bot",
    "devkit",
    "docs",
    "examples",
    "scripts",
    "store",
    "tests",
)
"""The folders of the repository whose files the README names."""
