"""A short ``signoff`` command runs with automatic garbage collection paused; any other gets
it back before it runs, and the pause leaves the process's collection as it found it."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from bot.cli.collection_pause import ONE_SHOT, CollectionPause


@pytest.fixture(autouse=True)
def collection_restored() -> Iterator[None]:
    """Each test starts with automatic collection on, and leaves it as it found it."""
    was = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        if was:
            gc.enable()
        else:
            gc.disable()


def test_a_one_shot_command_runs_paused_and_gets_collection_back_at_the_end() -> None:
    """`approve` runs with automatic collection off; the block's end turns it back on."""
    with CollectionPause() as pause:
        pause.end_unless_one_shot("approve")
        assert not gc.isenabled()
    assert gc.isenabled()


def test_long_lived_commands_get_collection_back_before_they_run() -> None:
    """`serve`, `worker` and any command not one-shot run with automatic collection on."""
    for command in ("serve", "worker", "eval", "import", "mcp", None):
        with CollectionPause(process_exits=True) as pause:
            assert not gc.isenabled()
            pause.end_unless_one_shot(command)
            assert gc.isenabled(), command
        assert gc.isenabled(), command
    assert not ONE_SHOT & {"serve", "worker", "eval", "import", "prune", "mcp", "db"}


def test_the_process_own_one_shot_command_leaves_collection_off_for_its_exit() -> None:
    """With `process_exits`, a one-shot command leaves collection off; `end()` still restores it."""
    with CollectionPause(process_exits=True) as pause:
        pause.end_unless_one_shot("runs")
    assert not gc.isenabled()
    gc.enable()
    with CollectionPause(process_exits=True) as pause:
        pause.end_unless_one_shot("runs")
        pause.end()
    assert gc.isenabled()


def test_the_process_own_help_leaves_collection_off_for_its_exit() -> None:
    """With `process_exits`, `--help` (a SystemExit before any command) leaves collection off."""
    with pytest.raises(SystemExit), CollectionPause(process_exits=True):
        raise SystemExit(0)
    assert not gc.isenabled()


def test_collection_already_off_stays_off() -> None:
    """A pause entered with automatic collection off never turns it on."""
    gc.disable()
    with CollectionPause() as pause:
        pause.end_unless_one_shot("worker")
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_an_error_in_the_block_still_gives_collection_back() -> None:
    """A command called in a process that goes on gives collection back even if it fails."""
    with pytest.raises(SystemExit), CollectionPause():
        raise SystemExit(2)
    assert gc.isenabled()
