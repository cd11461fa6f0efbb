"""Errors of the MCP gateway."""

from __future__ import annotations

from agent_runtime.exceptions import InvalidConfiguration, SignoffError


class GatewayError(SignoffError):
    """The gateway cannot serve its client."""


class PolicyError(InvalidConfiguration):
    """The gateway's policy file cannot be used as written."""

    def __init__(self, source: str, problem: str) -> None:
        super().__init__(f"{source}: {problem}")
        self.source = source
        self.problem = problem


class RunUnavailable(GatewayError):
    """The gateway's run is finished (cancelled, say) or held by another live gateway."""

    retryable = True

    def __init__(self, run_id: str, why: str) -> None:
        super().__init__(f"the gateway run {run_id} {why}")
        self.run_id = run_id
        self.why = why


class InvalidConversation(GatewayError):
    """A call's ``_meta`` names a conversation id that is not a short plain string."""

    retryable = False

    def __init__(self, key: str, rule: str) -> None:
        super().__init__(f'the conversation id in _meta["{key}"] must be {rule}')
        self.key = key
        self.rule = rule


class TooManyConversations(GatewayError):
    """A call names a new conversation while the gateway holds as many as it may."""

    retryable = False

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"this gateway holds {limit} conversations, as many as it may: a call naming a new "
            "one is refused (continue one of them, or start another gateway)"
        )
        self.limit = limit
