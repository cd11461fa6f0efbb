"""Conversations through the MCP gateway: a real SDK client names a conversation in a
call's ``_meta``; ``signoff mcp proxy`` (a subprocess, in front of a real SDK server)
journals each conversation in a durable run of its own, on a SQLite file."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from functools import partial
from typing import Any, cast

import anyio
import pytest
from anyio.from_thread import start_blocking_portal
from mcp import ClientSession, types
from mcp.types import RequestParamsMeta

from agent_runtime import Approval, ApprovalStatus, Decision, RunId
from agent_runtime.side_effects import idempotency_key
from bot.app.settings import Settings
from bot.app.wiring import build_services
from bot.mcp.conversations import CONVERSATION_KEYS
from bot.mcp.session_run import SessionKey
from tests.integration import cli_ok, owner_pid, signoff_env, wait_until
from tests.integration.test_mcp_gateway import (
    APPROVER,
    CLIENT,
    DEADLINE_S,
    POLICY,
    World,
    connected,
    decide,
    text,
)

KEY = CONVERSATION_KEYS[0]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A fresh database file with its services (approvers: U_APPROVER) and a policy file."""
    tmp = tmp_path_factory.mktemp("mcp-conversations")
    (tmp / "policy.yaml").write_text(POLICY)
    url = f"sqlite:///{tmp / 'signoff.db'}"
    services = build_services(Settings(database_url=url, approvers=(APPROVER,)))
    yield World(
        tmp=tmp, services=services, env=signoff_env(url, extra={"SIGNOFF_APPROVERS": APPROVER})
    )
    services.store.engine.dispose()


def run_of(session: str, conversation: str | None = None) -> RunId:
    """Return the run id of the gateway ``notes`` for ``session`` and ``conversation``."""
    key = SessionKey(gateway="notes", client=CLIENT, session=session, conversation=conversation)
    return key.run_id


def approvals(world: World, run: RunId, title: str) -> list[Approval]:
    """Return the approvals asked in ``run`` for calls on the note ``title``."""
    found = world.services.approvals.store.list_approvals(run_id=run)
    return [a for a in found if a.args.get("title") == title]


def pending(world: World, run: RunId, title: str) -> Approval | None:
    """Return the pending approval of a call on ``title`` in ``run``, if any."""
    found = [a for a in approvals(world, run, title) if a.status == ApprovalStatus.PENDING]
    return found[0] if found else None


async def call(
    session: ClientSession, tool: str, title: str, meta: dict[str, Any] | None
) -> types.CallToolResult:
    """Call ``tool`` on the note ``title`` with ``meta`` as the request's ``_meta``."""
    with anyio.fail_after(DEADLINE_S):
        return await session.call_tool(
            tool, {"title": title}, meta=cast("RequestParamsMeta | None", meta)
        )


def journal_names(world: World, run: RunId) -> list[str]:
    """Return the names of ``run``'s journal entries, as ``signoff history --json`` shows."""
    history = json.loads(cli_ok(world.env, "history", run, "--json"))
    return [entry["name"] for entry in history["timeline"]]


def test_two_conversations_through_one_gateway_are_two_runs(world: World) -> None:
    """The same call in two conversations of one gateway is asked, decided, keyed and run
    once in each conversation's own run, which ``signoff runs`` and ``history`` show."""
    alpha, beta = run_of("two", "alpha"), run_of("two", "beta")
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(connected(world, "two")) as session,
    ):
        answers = [
            portal.start_task_soon(call, session, "delete_note", "p", {KEY: name})
            for name in ("alpha", "beta")
        ]
        asked = [
            wait_until(partial(pending, world, run, "p"), timeout=DEADLINE_S, what="a card")
            for run in (alpha, beta)
        ]
        assert world.calls("p") == []
        decide(world, Decision.APPROVE)(asked[0])
        assert text(answers[0].result(timeout=DEADLINE_S)) == "delete_note: done with p"
        assert world.calls("p") == [{"tool": "delete_note", "title": "p"}]
        assert pending(world, beta, "p") == asked[1]
        cli_ok(world.env, "approve", asked[1].id, "--as", APPROVER)
        assert text(answers[1].result(timeout=DEADLINE_S)) == "delete_note: done with p"
    assert world.calls("p") == [{"tool": "delete_note", "title": "p"}] * 2
    listed = {run["id"] for run in json.loads(cli_ok(world.env, "runs", "--json"))}
    assert {alpha, beta, run_of("two")} <= listed
    for run in (alpha, beta):
        assert journal_names(world, run)[-5:] == [
            f"{kind}:delete_note"
            for kind in (
                "mcp.call",
                "approval.request",
                "approval.decision",
                "tool.started",
                "tool",
            )
        ]
        assert len(approvals(world, run, "p")) == 1
    assert approvals(world, run_of("two"), "p") == []
    keys = {
        run: step.output["key"]
        for run in (alpha, beta)
        for step in world.services.runtime.journal(run)
        if step.name == "tool.started:delete_note"
    }
    assert keys == {alpha: idempotency_key(alpha, 0), beta: idempotency_key(beta, 0)}


def test_a_call_without_a_conversation_stays_in_the_gateways_run(world: World) -> None:
    """With no conversation id a call is journaled in the gateway's own run; another
    documented ``_meta`` key names a conversation as well."""

    async def scenario() -> None:
        async with connected(world, "plain") as session:
            assert not (await call(session, "read_note", "r", None)).is_error
            assert not (await call(session, "read_note", "r", {"openai/session": "s-1"})).is_error

    anyio.run(scenario)
    assert "tool:read_note" in journal_names(world, run_of("plain"))
    assert "tool:read_note" in journal_names(world, run_of("plain", "s-1"))


INVALID: list[object] = ["x" * 129, "has space", "", 42, "<@U0ADMIN>"]


def test_an_invalid_conversation_id_is_a_tool_error(world: World) -> None:
    """A conversation id too long, empty, not a string or with other characters is refused
    with a tool error that says what an id may be; nothing is asked or run."""

    async def scenario() -> list[types.CallToolResult]:
        async with connected(world, "invalid") as session:
            return [await call(session, "delete_note", "v", {KEY: bad}) for bad in INVALID]

    for result in anyio.run(scenario):
        assert result.is_error
        assert text(result).startswith(f'refused: the conversation id in _meta["{KEY}"] must be')
    assert world.calls("v") == []
    assert world.services.approvals.store.list_approvals(run_id=run_of("invalid")) == []


def test_a_conversation_killed_while_waiting_gives_the_decided_result_once(world: World) -> None:
    """After the gateway is SIGKILLed while a conversation's call waits, a new gateway
    continues that conversation's run: the client's retry gets the approved result, with
    one approval and one upstream call."""
    run = run_of("crash", "gamma")

    async def killed_while_waiting() -> Approval:
        async with connected(world, "crash") as session, anyio.create_task_group() as tasks:
            tasks.start_soon(_call_until_cut, session)
            approval: Approval = await anyio.to_thread.run_sync(
                lambda: wait_until(
                    lambda: pending(world, run, "q"), timeout=DEADLINE_S, what="an approval"
                )
            )
            pid = owner_pid(world.services.runtime.get(run).lease_owner)
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
        return approval

    async def retried() -> types.CallToolResult:
        async with connected(world, "crash") as session:
            return await call(session, "delete_note", "q", {KEY: "gamma"})

    approval = anyio.run(killed_while_waiting)
    cli_ok(world.env, "approve", approval.id, "--as", APPROVER)
    result = anyio.run(retried)
    assert text(result) == "delete_note: done with q"
    assert world.calls("q") == [{"tool": "delete_note", "title": "q"}]
    assert len(approvals(world, run, "q")) == 1
    assert approvals(world, run_of("crash"), "q") == []


async def _call_until_cut(session: ClientSession) -> None:
    """Call the tool in conversation ``gamma``; the connection is cut before any answer."""
    with anyio.fail_after(DEADLINE_S), pytest.raises(Exception):  # noqa: B017, PT011
        await call(session, "delete_note", "q", {KEY: "gamma"})
