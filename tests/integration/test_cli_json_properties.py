"""JSON on the command line: whatever text ``--input`` or ``--data`` gets, ``signoff`` either
stores exactly what it parsed or refuses with a message naming the flag, and stores nothing.

The commands run in this process (``bot.cli.main``, what the ``signoff`` script calls) on a
SQLite file, so that many texts can be tried. Before these tests, 10,000 levels of nesting
crashed the command with a traceback, NaN failed it with exit status 1, a lone surrogate
(what invalid UTF-8 in ``argv`` decodes to) crashed it in the database driver, and duplicate
keys were resolved silently.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from hypothesis import given

from bot.cli.main import main
from store import open_store
from tests.hostile import HOSTILE_TEXTS, huge_text, json_texts
from tests.integration import signoff_env

WORKFLOW = "test.sleepy"
"""A workflow whose input needs only a ``path``; the rest of the input is kept as given."""


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A migrated SQLite file shared by every example of this module."""
    url = f"sqlite:///{tmp_path_factory.mktemp('cli-json') / 'signoff.db'}"
    open_store(url).engine.dispose()
    return url


@contextlib.contextmanager
def signoff_environment(database: str) -> Iterator[None]:
    """``os.environ`` as the ``signoff`` script would see it, for this block only."""
    env = {k: v for k, v in signoff_env(database).items() if k.startswith("SIGNOFF_")}
    with mock.patch.dict(os.environ, env):
        yield


def signoff(database: str, *args: str) -> tuple[int, str, str]:
    """Run ``signoff ARGS`` in this process; return its exit status, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with (
        signoff_environment(database),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        status = main(list(args))
    return status, out.getvalue(), err.getvalue()


def run_count(database: str) -> int:
    """How many runs the database holds."""
    store = open_store(database)
    try:
        return len(store.list_runs(limit=100_000))
    finally:
        store.engine.dispose()


def input_of(text: str) -> str:
    """The ``--input`` text: ``text`` as the value of ``extra`` beside a valid ``path``."""
    return '{"path": "out.txt", "extra": ' + text + "}"


def assert_stored_or_refused(database: str, flag_text: str) -> None:
    """``signoff start --input`` stores exactly the parsed value, or refuses and stores none."""
    before = run_count(database)
    status, out, err = signoff(database, "start", WORKFLOW, "--input", flag_text, "--json")
    if status == 0:
        stored: Any = json.loads(out)["input"]
        assert stored == json.loads(flag_text)
        assert run_count(database) == before + 1
    else:
        assert status == 2, err
        assert "--input" in err, err
        assert run_count(database) == before, "a refused input left a run behind"


@given(text=json_texts)
def test_any_input_text_is_stored_exactly_or_refused(database: str, text: str) -> None:
    """Any text (valid JSON or not, NaN, surrogates, deep) is stored as parsed or refused."""
    assert_stored_or_refused(database, input_of(text))


@pytest.mark.parametrize("text", [*HOSTILE_TEXTS, huge_text(1024 * 1024)])
def test_hostile_input_texts_are_refused(database: str, text: str) -> None:
    """Duplicate keys, NaN, Infinity, surrogates, 10,000 levels, 1 MB: refused (exit 2)."""
    before = run_count(database)
    status, _, err = signoff(database, "start", WORKFLOW, "--input", input_of(text))
    assert status == 2, err
    assert err.startswith("signoff: error: --input"), err[:300]
    assert run_count(database) == before


def test_an_argument_from_invalid_utf8_is_refused(database: str) -> None:
    """Invalid UTF-8 in ``argv`` (decoded to a lone surrogate) is refused, not stored."""
    text = os.fsdecode(b'{"path": "out.txt", "extra": "\xff"}')
    status, _, err = signoff(database, "start", WORKFLOW, "--input", text)
    assert status == 2, err
    assert "--input" in err


@given(text=json_texts)
def test_any_event_data_is_delivered_exactly_or_refused(database: str, text: str) -> None:
    """``signoff signal --data`` delivers exactly the parsed value, or refuses with exit 2."""
    status, out, err = signoff(database, "start", WORKFLOW, "--input", input_of("1"))
    assert status == 0, err
    run_id = out.strip()
    status, _, err = signoff(database, "signal", run_id, "event", "--data", text)
    if status == 2:
        assert "--data" in err, err
        return
    assert status == 0, err
    store = open_store(database)
    try:
        event = store.get_event(run_id, "event")  # type: ignore[arg-type]
    finally:
        store.engine.dispose()
    assert event is not None
    assert event.data == json.loads(text)
