"""The composition root: opens the store and builds, on first use, the runtime, the agents
and the approvals over it.

A command builds only what it uses: ``Services`` opens the database at once, and makes each
other part (and imports the modules it needs, ``bot.app.assembly``'s) when first asked for
it, so that ``signoff runs`` reads the runs' store without loading the agents, the approvals
service or the notices of Slack and of the approvals API.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import agent_runtime
import store
from agent_runtime.built_once import built_once
from agent_runtime.ids import RunId
from agent_runtime.observers import combined
from bot.app.models import model_from_spec
from bot.app.settings import Settings

if TYPE_CHECKING:
    from agent_runtime import Agents, Approvals, Runtime
    from agent_runtime.grant_service import Grants
    from agent_runtime.models import Model
    from agent_runtime.observers import StepObserver
    from agent_runtime.worker import WorkerOptions
    from bot.app.assembly import Deployed
    from bot.tracing.stream import SpanStreamer
    from store import SqlOutbox, SqlStore, Stores


class Services:
    """Everything a command or a server needs, each part built once per process, when first
    used (see the module's docstring)."""

    def __init__(
        self,
        settings: Settings,
        stores: Stores,
        *,
        stream_traces: bool = False,
        observer: StepObserver | None = None,
    ) -> None:
        """The services over ``stores`` (see ``build_services`` for the options)."""
        self.settings = settings
        self.stores = stores
        self._stream_traces = stream_traces
        self._observer = observer

    @property
    def store(self) -> SqlStore:
        """The runtime's store of runs and their journals."""
        return self.stores.runs

    @property
    def outbox(self) -> SqlOutbox:
        """The messages waiting to go to Slack and webhooks."""
        return self.stores.outbox

    @property
    def runtime(self) -> Runtime:
        """Operations on runs: start, cancel, signal, resume, and the workers."""
        return self._deployed.deployment.runtime

    @property
    def approvals(self) -> Approvals:
        """The approvals service: request, decide, sweep."""
        return self._deployed.deployment.approvals

    @property
    def agents(self) -> Agents:
        """The configured agents, their model specs built."""
        return self._deployed.deployment.agents

    @property
    def grants(self) -> Grants:
        """The grants ("allow similar") over the approvals."""
        return self._deployed.grants

    def models(self, spec: str) -> Model:
        """The model ``spec`` names (``bot.app.models.model_from_spec``)."""
        return model_from_spec(spec, self.settings)

    @built_once
    def trace_stream(self) -> SpanStreamer | None:
        """The stream of spans to ``SIGNOFF_OTLP_ENDPOINT``, for a process built with
        ``stream_traces`` when the endpoint is set (OpenTelemetry is imported only then)."""
        if not (self._stream_traces and self.settings.otlp_endpoint):
            return None
        from bot.tracing.stream import SpanStreamer

        return SpanStreamer.to_endpoint(
            self.settings.otlp_endpoint, self.stores.runs, self.stores.approvals
        )

    @built_once
    def _deployed(self) -> Deployed:
        """The runtime, approvals, agents and grants, wired together."""
        from bot.app.assembly import deploy

        observer = combined(self.trace_stream, self._observer)
        return deploy(self.settings, self.stores, self.models, observer)

    def shutdown(self) -> None:
        """Stop the trace stream, if there is one, once it has sent what it holds."""
        if Services.trace_stream.built(self) and self.trace_stream is not None:
            self.trace_stream.close()


def build_services(
    settings: Settings,
    *,
    migrate: bool = True,
    stream_traces: bool = False,
    observer: StepObserver | None = None,
) -> Services:
    """Open the configured database (bringing its schema up to date unless told not to) and
    return the services over it, each built when first used.

    With ``stream_traces`` (for processes that execute or cancel runs) and
    ``SIGNOFF_OTLP_ENDPOINT`` set, what the runtime commits is streamed as spans; call
    ``Services.shutdown()`` before the process exits. ``observer`` (metrics, say) also
    hears of each entry committed and each run ended.
    """
    stores = store.open(settings.database_url, migrate=migrate, audit_keys=settings.audit_keys)
    return Services(settings, stores, stream_traces=stream_traces, observer=observer)


def worker_options(
    settings: Settings,
    *,
    concurrency: int,
    on_takeover: Callable[[RunId], object] | None = None,
    on_claim: Callable[[float], object] | None = None,
) -> WorkerOptions:
    """Return worker options from the settings (``on_takeover`` counts runs taken over,
    ``on_claim`` times claims); the sweeps are the scheduler's jobs (``bot.app.jobs``), not a
    thread of the worker."""
    return agent_runtime.WorkerOptions(
        concurrency=concurrency,
        lease_ttl=settings.lease_ttl,
        poll_interval=settings.poll_interval,
        on_takeover=on_takeover,
        on_claim=on_claim,
        sweep_thread=False,
    )
