"""The MCP approval gateway: an MCP server to its client, an MCP client to the real server.

``tools/list`` passes through (gated tools say that a person signs them off). Each
``tools/call`` is journaled in the gateway's run, or in its conversation's run when its
``_meta`` names one (see ``bot.mcp.conversations``); a gated one waits for a recorded
decision (progress notifications meanwhile, if the client asked for them) and reaches
the upstream server at most once, with exactly the approved arguments. The MCP SDK is
async; Signoff's services are synchronous and are called through ``anyio.to_thread``.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from datetime import timedelta
from typing import Any

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup
from mcp import ClientSession, StdioServerParameters, stdio_client, stdio_server, types
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from agent_runtime import LeaseLost, RunId
from agent_runtime.approvals import args_hash
from agent_runtime.decisions import Approved, read_decision
from agent_runtime.json_limits import json_problem
from agent_runtime.side_effects import ToolResult
from agent_runtime.tools import schema_errors, schema_validator
from bot.app.approver_scope import UnscopedApprovers, require_scoped
from bot.app.wiring import Services
from bot.mcp.calls import Call
from bot.mcp.conversations import Conversations, conversation_id
from bot.mcp.exceptions import (
    GatewayError,
    InvalidConversation,
    RunUnavailable,
    TooManyConversations,
)
from bot.mcp.options import GatewayOptions, Upstream
from bot.mcp.session_run import attach
from bot.mcp.signoffs import CallRequest, Go, SignOffs

logger = logging.getLogger(__name__)

SIGNED_OFF = " [Signoff: a person signs off each call of this tool before it runs.]"
RUN_LOST = (
    "refused: this gateway's run was cancelled or taken over, so nothing more can be "
    "recorded in it; no new call reaches the upstream server"
)


class Gateway:
    """Answers one client's MCP requests from the upstream server and the run's journal."""

    def __init__(
        self,
        options: GatewayOptions,
        services: Services,
        conversations: Conversations,
        upstream: ClientSession,
        calls: TaskGroup,
    ) -> None:
        """``calls`` runs the upstream calls: the gateway's, not the requests' (see
        ``_upstream_once``)."""
        self.options = options
        self.services = services
        self.upstream = upstream
        self.conversations = conversations
        self._calls = calls
        self._tools: dict[str, types.Tool] = {}
        self._validators: dict[str, tuple[dict[str, Any], Any]] = {}
        self._settling: dict[tuple[RunId, int], anyio.Lock] = {}
        """One lock per call: a retry joining a call in flight waits for its answer."""
        self._flights: dict[tuple[RunId, int], Flight] = {}
        """The upstream calls under way, by run and position."""

    def server(self) -> Server[Any]:
        """Return the MCP server the client talks to."""
        return Server(
            f"signoff-{self.options.key.gateway}",
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
        )

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        """Pass the upstream tools through, saying which ones a person signs off."""
        listed = await self._refresh(params)
        tools = [self._described(t) for t in listed.tools]
        return types.ListToolsResult(tools=tools, next_cursor=listed.next_cursor)

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        """Journal the call in its conversation's run, wait for its sign-off if gated, and call
        upstream at most once. A call of a tool the upstream does not list, or a gated one
        whose arguments its input schema refuses, is refused before anything is recorded:
        nobody is asked to approve a call that cannot succeed."""
        request = await self._request(params.name, params.arguments or {})
        if isinstance(request, str):
            return _error(f"refused: {request}")
        try:
            signoffs = await self.conversations.signoffs(conversation_id(params.meta))
        except (InvalidConversation, RunUnavailable, TooManyConversations) as exc:
            return _error(f"refused: {exc}")
        if request.policy is not None and not self.options.requester.workspace:
            try:
                require_scoped(request.policy, self.services.settings, "the MCP gateway")
            except UnscopedApprovers as exc:
                return _error(f"refused: {exc}")
        try:
            call = await anyio.to_thread.run_sync(signoffs.open, request)
            async with self._settling.setdefault((signoffs.run_id, call.position), anyio.Lock()):
                if call.result is None:  # else another request for the same call settled it
                    await self._settle(ctx, signoffs, call, request.definition)
        except LeaseLost:
            return _error(RUN_LOST)
        assert call.result is not None
        return types.CallToolResult.model_validate(call.result)

    async def _refresh(
        self,
        params: types.PaginatedRequestParams | None = None,
    ) -> types.ListToolsResult:
        listed = await self.upstream.list_tools(params=params)
        self._tools.update({t.name: t for t in listed.tools})
        return listed

    async def _settle(
        self, ctx: ServerRequestContext[Any], signoffs: SignOffs, call: Call, definition: str
    ) -> None:
        flight = self._flights.get((signoffs.run_id, call.position))
        if flight is not None:  # under way here: its answer is this request's too
            await flight.landed()
            return
        refused = await self._refused(ctx, signoffs, call)
        if refused is not None:
            await _finish(signoffs, call, refused)
            return
        await self._upstream_once(signoffs, call, definition)

    async def _refused(
        self, ctx: ServerRequestContext[Any], signoffs: SignOffs, call: Call
    ) -> types.CallToolResult | None:
        """Why the call is not made (it was started by a gateway that stopped, or declined),
        None once it may be."""
        if call.started:
            return _error(
                f"not executed again: the gateway stopped while calling {call.tool}, "
                "so whether it happened is unknown"
            )
        if call.gated:
            match read_decision(await self._wait_for_decision(ctx, signoffs, call)):
                case Approved():
                    pass
                case declined:
                    return _error(ToolResult.declined(declined).content)
        return None

    async def _upstream_once(self, signoffs: SignOffs, call: Call, definition: str) -> None:
        """Make the upstream call as the gateway's own task, and wait for its answer to be
        recorded. A client that stops waiting (a timeout, a cancellation) does not cut the
        call off and lose what it did: a retry of the call gets its answer."""
        key = (signoffs.run_id, call.position)
        flight = self._flights[key] = Flight()

        async def fly() -> None:
            try:
                go = await anyio.to_thread.run_sync(signoffs.start, call, definition)
                if isinstance(go, str):
                    result = _error(f"not executed: {go}")
                else:
                    result = await self._call_upstream(call.tool, go)
                await _finish(signoffs, call, result)
                if not flight.waiting:  # every request for it stopped waiting
                    await anyio.to_thread.run_sync(signoffs.answer_lost, call)
            except Exception as exc:  # a lost lease, the store: for the requests waiting
                flight.error = exc
            except anyio.get_cancelled_exc_class():  # the gateway stops under the call
                flight.error = GatewayError(f"the gateway stopped while calling {call.tool}")
                raise
            finally:
                del self._flights[key]
                flight.done.set()

        self._calls.start_soon(fly)
        await flight.landed()

    async def _wait_for_decision(
        self, ctx: ServerRequestContext[Any], signoffs: SignOffs, call: Call
    ) -> dict[str, Any]:
        token = (ctx.meta or {}).get("progress_token")
        polls = 0
        while True:
            decision = await anyio.to_thread.run_sync(signoffs.decision, call)
            if decision is not None:
                return decision
            if token is not None:
                polls += 1
                await ctx.session.send_progress_notification(
                    token,
                    polls,
                    message=f"waiting for sign-off (approval {call.approval_id})",
                    related_request_id=None if ctx.request_id is None else str(ctx.request_id),
                )
            await anyio.sleep(self.options.poll_interval.total_seconds())

    async def _call_upstream(self, tool: str, go: Go) -> types.CallToolResult:
        meta: Any = {"io.signoff/idempotency-key": go.key}
        try:
            return await self.upstream.call_tool(tool, go.args, meta=meta)
        except Exception as exc:  # the upstream's failure is the call's answer
            logger.warning("upstream call failed", extra={"action": "mcp.call"})
            return _error(f"the upstream server failed: {exc}")

    async def _request(self, name: str, args: dict[str, Any]) -> CallRequest | str:
        """The call as the policy takes it, or why it is refused."""
        if name not in self._tools:
            await self._refresh()
        definition = self._tools.get(name)
        if definition is None:
            return f"the upstream server lists no tool {name!r}"
        annotations = (
            None
            if definition.annotations is None
            else (definition.annotations.model_dump(by_alias=True, exclude_none=True))
        )
        gated = self.options.policy.gated(name, annotations)
        problem = self._argument_problem(definition, args) if gated else None
        if problem is not None:
            return problem
        policy = (
            self.options.policy.approval(name, self.services.settings.approvers).snapshot(
                self.services.settings.approver_groups
            )
            if gated
            else None
        )
        digest = args_hash(
            {
                "tool": definition.model_dump(mode="json", by_alias=True, exclude_none=True),
                "gated": gated,
                "policy": {} if policy is None else policy.to_json(),
            }
        )
        return CallRequest(
            tool=name,
            args=args,
            gated=gated,
            definition=digest,
            policy=policy,
            read_only=(annotations or {}).get("readOnlyHint") is True,
        )

    def _argument_problem(self, tool: types.Tool, args: dict[str, Any]) -> str | None:
        """What keeps a gated call's arguments from being asked about: JSON the journal
        cannot hold, or arguments the tool's input schema refuses (as the upstream would,
        after a person approved them)."""
        problem = json_problem(args)
        if problem is not None:
            return f"the arguments hold {problem}"
        schema = tool.input_schema
        known = self._validators.get(tool.name)
        if known is None or known[0] != schema:
            from jsonschema import SchemaError

            try:
                known = self._validators[tool.name] = (schema, schema_validator(schema))
            except SchemaError as exc:
                return f"{tool.name}'s input schema is no valid JSON Schema: {exc.message}"
        errors = schema_errors(known[1], args)
        return f"invalid arguments for {tool.name}: {'; '.join(errors)}" if errors else None

    def _described(self, tool: types.Tool) -> types.Tool:
        annotations = (
            None
            if tool.annotations is None
            else tool.annotations.model_dump(by_alias=True, exclude_none=True)
        )
        if not self.options.policy.gated(tool.name, annotations):
            return tool
        return tool.model_copy(update={"description": (tool.description or "") + SIGNED_OFF})


class Flight:
    """An upstream call under way: set done when its answer is recorded, or with the error
    that kept it from being recorded."""

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.error: Exception | None = None
        self.waiting = 0
        """The requests waiting for it (one whose client cancelled it no longer is)."""

    async def landed(self) -> None:
        """Wait for the answer to be recorded; raise what kept it from being recorded."""
        self.waiting += 1
        try:
            await self.done.wait()
        finally:
            self.waiting -= 1
        if self.error is not None:
            raise self.error


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


async def _finish(signoffs: SignOffs, call: Call, result: types.CallToolResult) -> None:
    """Record ``result`` as the call's answer."""
    answer = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    await anyio.to_thread.run_sync(signoffs.finish, call, answer)


async def serve(options: GatewayOptions, services: Services, *, patience: timedelta) -> None:
    """Serve one MCP client on stdio until it disconnects.

    The run is taken (after a crash: once the dead gateway's lease expired) while the
    upstream server starts.
    """
    attached: list[Conversations] = []
    ready = anyio.Event()

    async def take_run() -> None:
        run = await anyio.to_thread.run_sync(
            lambda: attach(services, options.key, patience=patience, channel=options.channel)
        )
        attached.append(
            Conversations(
                services,
                run,
                requester=options.requester,
                channel=options.channel,
                patience=patience,
                most=options.max_conversations,
            )
        )
        ready.set()

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(take_run)
            tasks.start_soon(_stop_on_signal, tasks.cancel_scope)
            async with _upstream(options.upstream) as upstream:
                await _check_rules(options, upstream)
                await ready.wait()
                try:
                    async with anyio.create_task_group() as calls:
                        gateway = Gateway(options, services, attached[0], upstream, calls)
                        await _serve_client(gateway)
                        # the client is gone: a call still under way ends with the gateway
                        # (the next one finds it started, its outcome unknown)
                        calls.cancel_scope.cancel()
                finally:
                    await _detach(attached[0])  # before the upstream closes, which is slow
            tasks.cancel_scope.cancel()
    finally:
        if attached:
            await _detach(attached[0])


async def _check_rules(options: GatewayOptions, upstream: ClientSession) -> None:
    """Refuse a policy naming tools the upstream does not list: a misspelt name would leave
    the tool it meant under the default rule (ungated, if its annotations say it only
    reads)."""
    named = set(options.policy.tools)
    if not named:
        return
    listed: set[str] = set()
    cursor: str | None = None
    while True:
        page = await upstream.list_tools(
            params=None if cursor is None else types.PaginatedRequestParams(cursor=cursor)
        )
        listed.update(t.name for t in page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    unknown = sorted(named - listed)
    if unknown:
        raise GatewayError(
            f"the policy has rules for tools the upstream server does not list: "
            f"{', '.join(unknown)} (it lists: {', '.join(sorted(listed)) or 'none'})"
        )


async def _stop_on_signal(scope: anyio.CancelScope) -> None:
    """Stop serving on SIGTERM or SIGINT, so that the run is parked on the way out (not left
    leased until its lease expires, which would hold up the next gateway)."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            scope.cancel()
            return


async def _detach(runs: Conversations) -> None:
    with anyio.CancelScope(shield=True):  # park the runs even when interrupted
        await anyio.to_thread.run_sync(runs.detach)


async def _serve_client(gateway: Gateway) -> None:
    server = gateway.server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


@asynccontextmanager
async def _upstream(upstream: Upstream) -> AsyncIterator[ClientSession]:
    async with AsyncExitStack() as stack:
        try:
            read, write = await stack.enter_async_context(_transport(upstream))
        except OSError as exc:  # no such command, not executable
            raise GatewayError(
                f"the upstream MCP server ({_where(upstream)}) could not be started: "
                f"{exc.strerror or exc}"
            ) from None
        session = await stack.enter_async_context(ClientSession(read, write))
        try:
            await session.initialize()
        except MCPError as exc:  # it exited, or answered nothing an MCP server would
            raise GatewayError(
                f"the upstream MCP server ({_where(upstream)}) did not start: {exc}"
            ) from None
        yield session


def unreachable(error: BaseException, upstream: Upstream) -> BaseException:
    """``error`` as the gateway says it, when it is the upstream's HTTP transport failing
    to connect (raised from the transport's own tasks); any other error as it is."""
    if type(error).__module__.split(".")[0] in ("httpx", "httpx2", "httpcore"):
        return GatewayError(f"the upstream MCP server ({_where(upstream)}) is unreachable: {error}")
    return error


def _where(upstream: Upstream) -> str:
    return upstream.url or " ".join((upstream.command, *upstream.args))


def _transport(upstream: Upstream) -> AbstractAsyncContextManager[tuple[Any, Any]]:
    if upstream.url is not None:
        return streamable_http_client(upstream.url)
    params = StdioServerParameters(
        command=upstream.command,
        args=list(upstream.args),
        env=None if upstream.env is None else dict(upstream.env),
    )
    return stdio_client(params)
