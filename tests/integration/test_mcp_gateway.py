"""The MCP gateway as an MCP client uses it: a real SDK client, ``signoff mcp proxy`` as a
subprocess, a real SDK server behind it, on a SQLite file with no worker running."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client, types

from agent_runtime import Actor, Approval, ApprovalStatus, Decision, RunStatus
from bot.mcp.session_run import SessionKey
from bot.settings import Settings
from bot.wiring import Services, build_services
from tests.integration import REPO_ROOT, cli_ok, owner_pid, signoff_command, signoff_env

APPROVER = "U_APPROVER"
CLIENT = "U_AGENT"
KEY = SessionKey(gateway="notes", client=CLIENT)
DEADLINE_S = 20.0


@dataclass
class World:
    """A SQLite file, the upstream's ledger of real calls, and the services over the file."""

    tmp: Path
    services: Services
    env: dict[str, str]
    policy: Path | None = None
    progress: list[float] = field(default_factory=list)

    @property
    def ledger(self) -> Path:
        """The file the upstream's destructive tool appends one line to per real call."""
        return self.tmp / "ledger.txt"

    def calls(self) -> list[dict[str, Any]]:
        """Return the upstream's real ``delete_note`` calls."""
        if not self.ledger.exists():
            return []
        return [json.loads(line) for line in self.ledger.read_text().splitlines()]

    def approvals(self) -> list[Approval]:
        """Return the gateway run's approvals."""
        return self.services.approvals.store.list_approvals(run_id=KEY.run_id)

    def pending(self) -> Approval | None:
        """Return the gateway run's pending approval, if any."""
        found = [a for a in self.approvals() if a.status == ApprovalStatus.PENDING]
        return found[0] if found else None

    def gateway(self) -> StdioServerParameters:
        """Return how the client starts ``signoff mcp proxy``."""
        command = signoff_command()
        policy = [] if self.policy is None else ["--policy", str(self.policy)]
        return StdioServerParameters(
            command=command[0], cwd=REPO_ROOT, env=self.env,
            args=[*command[1:], "mcp", "proxy", "--name", "notes", "--as", CLIENT,
                  "--poll-interval", "0.05", *policy, "--",
                  sys.executable, "-m", "tests.mcp_upstream", str(self.ledger)])

    async def on_progress(self, progress: float, total: float | None,
                          message: str | None) -> None:
        """Record a progress notification."""
        self.progress.append(progress)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """A fresh database file with its services (approvers: U_APPROVER)."""
    url = f"sqlite:///{tmp_path / 'signoff.db'}"
    env = signoff_env(url, extra={"SIGNOFF_APPROVERS": APPROVER})
    services = build_services(Settings(database_url=url, approvers=(APPROVER,)))
    yield World(tmp=tmp_path, services=services, env=env)
    services.store.engine.dispose()


@asynccontextmanager
async def connected(world: World) -> AsyncIterator[ClientSession]:
    """Start a gateway and connect an initialised MCP client session to it."""
    async with stdio_client(world.gateway()) as (read, write), \
            ClientSession(read, write) as session:
        with anyio.fail_after(DEADLINE_S):
            await session.initialize()
        yield session


async def eventually(probe: Callable[[], Any], what: str) -> Any:
    """Poll ``probe`` (in a thread) until it returns something truthy; fail after a deadline."""
    with anyio.fail_after(DEADLINE_S):
        while True:
            value = await anyio.to_thread.run_sync(probe)
            if value:
                return value
            await anyio.sleep(0.05)
    raise AssertionError(what)  # pragma: no cover - fail_after raises first


async def decide_when_asked(world: World, decide: Callable[[Approval], Awaitable[None]],
                            session: ClientSession, args: dict[str, Any]) -> types.CallToolResult:
    """Call ``delete_note``; once it waits for a sign-off (and said so), run ``decide``."""
    result: list[types.CallToolResult] = []

    async def call() -> None:
        result.append(await session.call_tool("delete_note", args,
                                              progress_callback=world.on_progress))

    with anyio.fail_after(DEADLINE_S):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(call)
            approval: Approval = await eventually(world.pending, "a pending approval")
            await eventually(lambda: world.progress, "a progress notification")
            assert world.calls() == []
            await decide(approval)
    return result[0]


def text(result: types.CallToolResult) -> str:
    """Return the text of a tool result."""
    return " ".join(c.text for c in result.content if isinstance(c, types.TextContent))


def decide(world: World, decision: Decision, **kwargs: Any) -> Callable[[Approval],
                                                                        Awaitable[None]]:
    """Return a decider that records ``decision`` as the approver through the services API."""

    async def decider(approval: Approval) -> None:
        result = await anyio.to_thread.run_sync(lambda: world.services.approvals.decide(
            approval.id, Actor(user_id=APPROVER), decision, **kwargs))
        assert result.accepted, result.message

    return decider


def test_read_only_tool_passes_through_without_approval(world: World) -> None:
    """A read-only tool is called at once, with no approval, and journaled in the run."""

    async def scenario() -> None:
        async with connected(world) as session:
            listed = await session.list_tools()
            result = await session.call_tool("read_note", {"title": "a"})
        descriptions = {t.name: t.description or "" for t in listed.tools}
        assert "signs off" in descriptions["delete_note"]
        assert "signs off" not in descriptions["read_note"]
        assert not result.is_error
        assert text(result) == "the note a says hello"

    anyio.run(scenario)
    assert world.approvals() == []
    names = [s.name for s in world.services.runtime.journal(KEY.run_id)]
    assert names == ["mcp.call:read_note", "tool.started:read_note", "tool:read_note"]


def test_destructive_call_runs_once_after_signoff_approve(world: World) -> None:
    """A destructive call waits, sending progress, and runs once after ``signoff approve``."""

    async def approve(approval: Approval) -> None:
        await anyio.to_thread.run_sync(
            lambda: cli_ok(world.env, "approve", approval.id, "--as", APPROVER))

    async def scenario() -> types.CallToolResult:
        async with connected(world) as session:
            return await decide_when_asked(world, approve, session, {"title": "b"})

    result = anyio.run(scenario)
    assert not result.is_error
    assert text(result) == "deleted b"
    assert world.calls() == [{"title": "b"}]
    [approval] = world.approvals()
    assert approval.tool == "mcp:notes:delete_note"
    assert approval.requester.user_id == CLIENT
    assert approval.consumed_by is not None


def test_edited_arguments_are_the_ones_called(world: World) -> None:
    """An edit-then-approve runs the upstream tool with exactly the edited arguments."""

    async def scenario() -> types.CallToolResult:
        async with connected(world) as session:
            return await decide_when_asked(
                world, decide(world, Decision.EDIT, edited_args={"title": "c-copy"}),
                session, {"title": "c"})

    result = anyio.run(scenario)
    assert text(result) == "deleted c-copy"
    assert world.calls() == [{"title": "c-copy"}]


def test_rejected_call_returns_the_reason_and_never_runs(world: World) -> None:
    """A rejection reaches the client as a tool error carrying the reason."""

    async def scenario() -> types.CallToolResult:
        async with connected(world) as session:
            return await decide_when_asked(
                world, decide(world, Decision.REJECT, reason="keep that note"),
                session, {"title": "d"})

    result = anyio.run(scenario)
    assert result.is_error
    assert "keep that note" in text(result)
    assert world.calls() == []


def test_deadline_fails_closed(world: World) -> None:
    """An undecided call is refused at its deadline, without the upstream being called."""
    world.policy = world.tmp / "policy.yaml"
    world.policy.write_text("tools:\n  delete_note: {deadline_seconds: 1}\n")

    async def scenario() -> types.CallToolResult:
        async with connected(world) as session:
            with anyio.fail_after(DEADLINE_S):
                return await session.call_tool("delete_note", {"title": "e"})

    result = anyio.run(scenario)
    assert result.is_error
    assert "deadline" in text(result)
    assert world.calls() == []
    assert [a.status for a in world.approvals()] == [ApprovalStatus.EXPIRED]


def test_gateway_killed_while_waiting_gives_the_decided_result_once(world: World) -> None:
    """A client retrying after the gateway was SIGKILLed gets the approved call's result;
    the upstream tool ran once and only one approval was ever asked."""
    args = {"title": "f"}

    async def killed_while_waiting() -> None:
        async with connected(world) as session, anyio.create_task_group() as tasks:
            tasks.start_soon(_call_until_cut, session, args)
            approval = await eventually(world.pending, "a pending approval")
            pid = owner_pid(world.services.runtime.get(KEY.run_id).lease_owner)
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
        assert world.services.approvals.decide(
            approval.id, Actor(user_id=APPROVER), Decision.APPROVE).accepted

    async def retried() -> types.CallToolResult:
        async with connected(world) as session:
            with anyio.fail_after(DEADLINE_S):
                return await session.call_tool("delete_note", args)

    anyio.run(killed_while_waiting)
    first, again = anyio.run(retried), anyio.run(retried)
    assert text(first) == text(again) == "deleted f"
    assert world.calls() == [args]
    assert len(world.approvals()) == 1
    assert world.services.runtime.get(KEY.run_id).status == RunStatus.WAITING


async def _call_until_cut(session: ClientSession, args: dict[str, Any]) -> None:
    """Call the tool; the connection is cut before any answer comes."""
    with anyio.fail_after(DEADLINE_S), pytest.raises(Exception):  # noqa: B017, PT011
        await session.call_tool("delete_note", args)
