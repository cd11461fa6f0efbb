"""The MCP gateway as an MCP client uses it: a real SDK client, ``signoff mcp proxy`` as a
subprocess, a real SDK server behind it, on a SQLite file with no worker running."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import Future
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client, types
from mcp.shared.dispatcher import ProgressFnT

from agent_runtime import Actor, Approval, ApprovalStatus, Decision, RunStatus
from bot.app.settings import Settings
from bot.app.wiring import Services, build_services
from bot.mcp.session_run import SessionKey
from tests.integration import (
    REPO_ROOT,
    cli_ok,
    owner_pid,
    run_cli,
    signoff_command,
    signoff_env,
    wait_until,
)
from tests.mcp_upstream import begun

APPROVER = "U_APPROVER"
CLIENT = "U_AGENT"
DEADLINE_S = 30.0
POLICY = "tools:\n  archive_note: {deadline_seconds: 1}\n"


@dataclass
class World:
    """A SQLite file, a policy file, the upstream's ledger of real calls, and services."""

    tmp: Path
    services: Services
    env: dict[str, str]

    @property
    def ledger(self) -> Path:
        """The file the upstream appends one line to per real call with a side effect."""
        return self.tmp / "ledger.txt"

    def calls(self, title: str) -> list[dict[str, Any]]:
        """Return the upstream's real calls on the note ``title``."""
        if not self.ledger.exists():
            return []
        found = [json.loads(line) for line in self.ledger.read_text().splitlines()]
        return [c for c in found if c["title"] == title]

    def approvals(self, session: str, title: str) -> list[Approval]:
        """Return the approvals asked in ``session`` for calls on the note ``title``."""
        run = SessionKey(gateway="notes", client=CLIENT, session=session).run_id
        found = self.services.approvals.store.list_approvals(run_id=run)
        return [a for a in found if a.args.get("title") == title]

    def pending(self, session: str, title: str) -> Approval | None:
        """Return the pending approval of a call on ``title``, if any."""
        found = [a for a in self.approvals(session, title) if a.status == ApprovalStatus.PENDING]
        return found[0] if found else None

    def proxy(self, session: str, url: str | None = None) -> list[str]:
        """Return the ``signoff`` arguments of a gateway for ``session`` (in front of the
        upstream at ``url``, else of one it starts)."""
        upstream = (
            ["--upstream-url", url]
            if url
            else ["--", sys.executable, "-m", "tests.mcp_upstream", str(self.ledger)]
        )
        return [
            "mcp",
            "proxy",
            "--name",
            "notes",
            "--as",
            CLIENT,
            "--session",
            session,
            "--policy",
            str(self.tmp / "policy.yaml"),
            "--poll-interval",
            "0.05",
            *upstream,
        ]

    def gateway(self, session: str, url: str | None) -> StdioServerParameters:
        """Return how the client starts the gateway (see ``proxy``)."""
        command = signoff_command()
        return StdioServerParameters(
            command=command[0],
            cwd=REPO_ROOT,
            env=self.env,
            args=[*command[1:], *self.proxy(session, url)],
        )


@asynccontextmanager
async def connected(
    world: World, session: str, url: str | None = None
) -> AsyncIterator[ClientSession]:
    """Start a gateway and connect an initialised MCP client session to it."""
    async with (
        stdio_client(world.gateway(session, url)) as (read, write),
        ClientSession(read, write) as client,
    ):
        with anyio.fail_after(DEADLINE_S):
            await client.initialize()
        yield client


@dataclass
class Client:
    """An MCP client connected to one gateway for the whole module, driven from tests."""

    world: World
    portal: BlockingPortal
    session: ClientSession
    name: str = "main"

    def call(self, tool: str, title: str) -> types.CallToolResult:
        """Call ``tool`` on the note ``title`` and return the answer."""
        return self.portal.call(self._call, tool, title, None)

    def call_deciding(
        self, tool: str, title: str, decide: Callable[[Approval], object]
    ) -> types.CallToolResult:
        """Call ``tool``; once it waits for a sign-off and said so, ``decide`` it."""
        progress: list[float] = []
        answer: Future[types.CallToolResult] = self.portal.start_task_soon(
            self._call, tool, title, progress
        )
        approval = wait_until(
            lambda: self.world.pending(self.name, title),
            timeout=DEADLINE_S,
            what="a pending approval",
        )
        wait_until(lambda: progress, timeout=DEADLINE_S, what="a progress notification")
        assert self.world.calls(title) == []
        decide(approval)
        return answer.result(timeout=DEADLINE_S)

    async def _call(self, tool: str, title: str, notes: list[float] | None) -> types.CallToolResult:
        async def heard(progress: float, total: float | None, message: str | None) -> None:
            assert notes is not None
            notes.append(progress)

        callback: ProgressFnT | None = None if notes is None else heard
        with anyio.fail_after(DEADLINE_S):
            return await self.session.call_tool(tool, {"title": title}, progress_callback=callback)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A fresh database file with its services (approvers: U_APPROVER) and a policy file."""
    tmp = tmp_path_factory.mktemp("mcp")
    (tmp / "policy.yaml").write_text(POLICY)
    url = f"sqlite:///{tmp / 'signoff.db'}"
    services = build_services(Settings(database_url=url, approvers=(APPROVER,)))
    extra = {"SIGNOFF_APPROVERS": APPROVER, "SLACK_BOT_TOKEN": "xoxb-0", "NOTES_TOKEN": "tok-1"}
    yield World(tmp=tmp, services=services, env=signoff_env(url, extra=extra))
    services.store.engine.dispose()


@pytest.fixture(scope="module")
def client(world: World) -> Iterator[Client]:
    """One gateway (session ``main``) and its client, shared by the module's tests."""
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(connected(world, "main")) as session,
    ):
        yield Client(world=world, portal=portal, session=session)


def text(result: types.CallToolResult) -> str:
    """Return the text of a tool result."""
    return " ".join(c.text for c in result.content if isinstance(c, types.TextContent))


def decide(world: World, decision: Decision, **kwargs: Any) -> Callable[[Approval], object]:
    """Return a decider that records ``decision`` as the approver through the services API."""

    def decider(approval: Approval) -> None:
        result = world.services.approvals.decide(
            approval.id, Actor(user_id=APPROVER), decision, **kwargs
        )
        assert result.accepted, result.message

    return decider


def test_tools_list_says_which_tools_a_person_signs_off(client: Client) -> None:
    """``tools/list`` passes through; destructive and open-world tools say they are gated."""
    listed = client.portal.call(client.session.list_tools)
    signed = {t.name: "signs off" in (t.description or "") for t in listed.tools}
    assert signed == {"read_note": False, "delete_note": True, "archive_note": True}


def test_read_only_tool_passes_through_without_approval(client: Client) -> None:
    """A read-only tool is called at once, with no approval, and journaled in the run."""
    result = client.call("read_note", "a")
    assert not result.is_error
    assert text(result) == "the note a says hello"
    assert client.world.approvals("main", "a") == []
    run = SessionKey(gateway="notes", client=CLIENT, session="main").run_id
    names = [s.name for s in client.world.services.runtime.journal(run)]
    assert names[-3:] == ["mcp.call:read_note", "tool.started:read_note", "tool:read_note"]


def test_the_upstream_inherits_the_environment_but_not_signoffs_settings(
    client: Client,
) -> None:
    """The upstream command sees the gateway's environment (a token set for it there), but
    none of Signoff's own settings or Slack credentials."""
    assert text(client.call("read_note", "env:NOTES_TOKEN")).endswith("says tok-1")
    for name in ("SIGNOFF_DATABASE_URL", "SLACK_BOT_TOKEN"):
        assert text(client.call("read_note", f"env:{name}")).endswith("says (unset)")


def test_destructive_call_runs_once_after_signoff_approve(client: Client) -> None:
    """A destructive call waits, sending progress, and runs once after ``signoff approve``."""
    world = client.world
    result = client.call_deciding(
        "delete_note",
        "b",
        lambda approval: cli_ok(world.env, "approve", approval.id, "--as", APPROVER),
    )
    assert not result.is_error
    assert text(result) == "delete_note: done with b"
    assert world.calls("b") == [{"tool": "delete_note", "title": "b"}]
    [approval] = world.approvals("main", "b")
    assert approval.tool == "mcp:notes:delete_note"
    assert approval.requester.user_id == CLIENT
    assert approval.consumed_by is not None


def test_edited_arguments_are_the_ones_called(client: Client) -> None:
    """An edit-then-approve runs the upstream tool with exactly the edited arguments."""
    result = client.call_deciding(
        "delete_note", "c", decide(client.world, Decision.EDIT, edited_args={"title": "c2"})
    )
    assert text(result) == "delete_note: done with c2"
    assert client.world.calls("c") == []
    assert client.world.calls("c2") == [{"tool": "delete_note", "title": "c2"}]


def test_rejected_call_returns_the_reason_and_never_runs(client: Client) -> None:
    """A rejection reaches the client as a tool error carrying the reason."""
    result = client.call_deciding(
        "delete_note", "d", decide(client.world, Decision.REJECT, reason="keep that note")
    )
    assert result.is_error
    assert "keep that note" in text(result)
    assert client.world.calls("d") == []


def test_a_call_retried_after_a_client_timeout_joins_the_waiting_one(client: Client) -> None:
    """A client that gives up waiting and calls again is asked no second approval; the
    upstream tool runs once."""
    with pytest.raises(MCPError):
        client.portal.call(
            partial(
                client.session.call_tool, "delete_note", {"title": "h"}, read_timeout_seconds=0.5
            )
        )
    result = client.call_deciding("delete_note", "h", decide(client.world, Decision.APPROVE))
    assert text(result) == "delete_note: done with h"
    assert len(client.world.approvals("main", "h")) == 1
    assert client.world.calls("h") == [{"tool": "delete_note", "title": "h"}]


def test_deadline_fails_closed(client: Client) -> None:
    """An open-world call left undecided is refused at its deadline, never run."""
    result = client.call("archive_note", "e")
    assert result.is_error
    assert "deadline" in text(result)
    assert client.world.calls("e") == []
    assert [a.status for a in client.world.approvals("main", "e")] == [ApprovalStatus.EXPIRED]


def test_a_cancelled_gateway_run_refuses_every_call(world: World) -> None:
    """Once a person cancels the gateway's run, a call gets a tool error and never runs, and
    a new gateway for that client says why it cannot serve."""
    run = SessionKey(gateway="notes", client=CLIENT, session="cancel").run_id

    async def scenario() -> types.CallToolResult:
        async with connected(world, "cancel") as session:
            await anyio.to_thread.run_sync(lambda: cli_ok(world.env, "cancel", run))
            with anyio.fail_after(DEADLINE_S):
                return await session.call_tool("delete_note", {"title": "i"})

    result = anyio.run(scenario)
    assert result.is_error
    assert "cancelled" in text(result)
    assert world.approvals("cancel", "i") == []
    assert world.calls("i") == []
    restarted = run_cli(world.env, *world.proxy("cancel"), cwd=REPO_ROOT)
    assert restarted.returncode == 1
    assert restarted.stderr.strip() == f"signoff: error: the gateway run {run} is cancelled"


def test_a_terminated_gateway_parks_its_run(world: World) -> None:
    """On SIGTERM the gateway parks its run on the way out, so the next gateway for the
    same client need not wait for a lease to expire."""
    run = SessionKey(gateway="notes", client=CLIENT, session="term").run_id

    def parked() -> bool:
        found = world.services.runtime.get(run)
        return found.status == RunStatus.WAITING and found.lease_owner is None

    async def scenario() -> None:
        async with connected(world, "term"):
            pid = owner_pid(world.services.runtime.get(run).lease_owner)
            assert pid is not None
            os.kill(pid, signal.SIGTERM)
            await anyio.to_thread.run_sync(
                lambda: wait_until(parked, timeout=DEADLINE_S, what="the run parked")
            )

    anyio.run(scenario)


def test_gateway_killed_while_waiting_gives_the_decided_result_once(world: World) -> None:
    """A client retrying after the gateway was SIGKILLed gets the approved call's result;
    the upstream tool ran once and only one approval was ever asked."""
    run = SessionKey(gateway="notes", client=CLIENT, session="crash").run_id

    async def killed_while_waiting() -> Approval:
        async with connected(world, "crash") as session, anyio.create_task_group() as tasks:
            tasks.start_soon(_call_until_cut, session)
            approval: Approval = await anyio.to_thread.run_sync(
                lambda: wait_until(
                    lambda: world.pending("crash", "f"), timeout=DEADLINE_S, what="an approval"
                )
            )
            pid = owner_pid(world.services.runtime.get(run).lease_owner)
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
        return approval

    async def retried() -> types.CallToolResult:
        async with connected(world, "crash") as session:
            with anyio.fail_after(DEADLINE_S):
                return await session.call_tool("delete_note", {"title": "f"})

    approval = anyio.run(killed_while_waiting)
    decide(world, Decision.APPROVE)(approval)
    result = anyio.run(retried)
    assert text(result) == "delete_note: done with f"
    assert world.calls("f") == [{"tool": "delete_note", "title": "f"}]
    assert len(world.approvals("crash", "f")) == 1


async def _call_until_cut(session: ClientSession) -> None:
    """Call the tool; the connection is cut before any answer comes."""
    with anyio.fail_after(DEADLINE_S), pytest.raises(Exception):  # noqa: B017, PT011
        await session.call_tool("delete_note", {"title": "f"})


@pytest.fixture
def http_upstream(world: World) -> Iterator[str]:
    """The test server over Streamable HTTP, on a socket listening before it starts."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        fd = listener.fileno()
        server = subprocess.Popen(
            [sys.executable, "-m", "tests.mcp_upstream", str(world.ledger), "--http-fd", str(fd)],
            cwd=REPO_ROOT,
            env=world.env,
            pass_fds=[fd],
        )
        try:
            yield f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
        finally:
            server.kill()
            server.wait()


def test_a_streamable_http_upstream_is_gated_too(world: World, http_upstream: str) -> None:
    """With ``--upstream-url`` reads pass at once and a destructive call waits for its
    sign-off, then runs once on the HTTP server."""
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(connected(world, "http", http_upstream)) as session,
    ):
        client = Client(world=world, portal=portal, session=session, name="http")
        assert text(client.call("read_note", "g")) == "the note g says hello"
        result = client.call_deciding("delete_note", "g", decide(world, Decision.APPROVE))
    assert text(result) == "delete_note: done with g"
    assert world.calls("g") == [{"tool": "delete_note", "title": "g"}]


def test_a_call_of_a_tool_the_upstream_does_not_list_is_refused_asking_nobody(
    client: Client,
) -> None:
    """No approval is asked, nothing journaled, for a tool the upstream does not have (it
    was asked for, as gated, and could only fail once approved)."""
    journal = _journal_length(client.world, "main")
    result = client.portal.call(
        partial(client.session.call_tool, "nonexistent_tool", {"title": "n"})
    )
    assert result.is_error
    assert text(result) == "refused: the upstream server lists no tool 'nonexistent_tool'"
    assert client.world.approvals("main", "n") == []
    assert _journal_length(client.world, "main") == journal


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ({"title": "s", "nope": 1}, "refused: invalid arguments for delete_note: "),
        ({"headline": "s"}, "refused: invalid arguments for delete_note: "),
        ({"title": "s\x00"}, "refused: the arguments hold a NUL character"),
    ],
    ids=["an unknown argument", "a required one missing", "a NUL character"],
)
def test_a_gated_call_its_tool_would_refuse_is_refused_asking_nobody(
    client: Client, args: dict[str, Any], says: str
) -> None:
    """Arguments the tool's input schema refuses, or the journal could not hold, are refused
    before anyone is asked to approve them (as a native tool's are)."""
    journal = _journal_length(client.world, "main")
    result = client.portal.call(partial(client.session.call_tool, "delete_note", args))
    assert result.is_error
    assert text(result).startswith(says), text(result)
    assert _journal_length(client.world, "main") == journal
    assert client.world.calls("s") == []


def test_a_policy_with_a_rule_for_a_tool_the_upstream_does_not_list_stops_the_gateway(
    world: World, tmp_path: Path
) -> None:
    """A misspelt tool name in the policy would leave the tool meant under the default rule:
    the gateway stops at start naming it and the tools the upstream lists."""
    typo = tmp_path / "typo.yaml"
    typo.write_text("tools:\n  raed_note: {gated: true}\n")
    args = world.proxy("typo")
    args[args.index("--policy") + 1] = str(typo)
    done = run_cli(world.env, *args, stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stderr
    assert done.stderr == (
        "signoff: error: the policy has rules for tools the upstream server does not list: "
        "raed_note (it lists: archive_note, delete_note, read_note)\n"
    )


@pytest.mark.parametrize("retried", ["while it runs", "once it ran"])
def test_a_call_whose_client_stopped_waiting_runs_on_and_its_retry_gets_the_answer(
    world: World, retried: str
) -> None:
    """A client that cancels an approved call while the upstream runs it (a timeout) does
    not cut it off: the retry gets its real answer, the tool ran once, one approval was
    asked. (The answer was lost and the retry told the call's outcome was unknown.)"""
    session_name = "slow-" + retried.split()[0]
    slow = {"title": session_name, "seconds": 1.0}
    run = SessionKey(gateway="notes", client=CLIENT, session=session_name).run_id

    def answered() -> bool:
        return "tool:delete_note" in [s.name for s in world.services.runtime.journal(run)]

    async def scenario() -> types.CallToolResult:
        async with connected(world, session_name) as session:
            async with anyio.create_task_group() as tasks:
                first = anyio.CancelScope()

                async def call_then_give_up() -> None:
                    with first:
                        await session.call_tool("delete_note", slow)

                tasks.start_soon(call_then_give_up)
                approval = await anyio.to_thread.run_sync(
                    lambda: wait_until(
                        lambda: world.pending(session_name, session_name),
                        timeout=DEADLINE_S,
                        what="an approval",
                    )
                )
                await anyio.to_thread.run_sync(decide(world, Decision.APPROVE), approval)
                await anyio.to_thread.run_sync(
                    lambda: wait_until(
                        lambda: session_name in _begun(world),
                        timeout=DEADLINE_S,
                        what="the upstream call under way",
                    )
                )
                first.cancel()
            assert not answered()
            if retried == "once it ran":
                await anyio.to_thread.run_sync(
                    lambda: wait_until(answered, timeout=DEADLINE_S, what="the answer recorded")
                )
            with anyio.fail_after(DEADLINE_S):
                return await session.call_tool("delete_note", slow)

    result = anyio.run(scenario)
    assert text(result) == f"delete_note: done with {session_name}"
    assert world.calls(session_name) == [{"tool": "delete_note", **slow}]
    assert len(world.approvals(session_name, session_name)) == 1


def _journal_length(world: World, session: str) -> int:
    run = SessionKey(gateway="notes", client=CLIENT, session=session).run_id
    return len(world.services.runtime.journal(run))


def _begun(world: World) -> str:
    """The slow calls the upstream began, as text."""
    started = begun(world.ledger)
    return started.read_text() if started.exists() else ""
