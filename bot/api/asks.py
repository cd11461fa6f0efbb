"""What ``POST /v1/approvals`` takes, read and checked from its JSON body."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from agent_runtime.approvals import args_hash
from agent_runtime.exceptions import InvalidConfiguration
from agent_runtime.policy import PolicySnapshot
from bot.api.exceptions import BadRequest
from bot.mcp.policy import GatePolicy, ToolRule, read_rule

FIELDS = frozenset(
    {
        "tool",
        "arguments",
        "policy",
        "idempotency_key",
        "conversation_id",
        "callback_url",
        "channel",
        "team",
    }
)
NAME_LIMIT = 100
KEY_LIMIT = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class Ask:
    """One request for sign-off: the tool, its arguments, and under which policy."""

    tool: str
    arguments: dict[str, Any]
    rule: ToolRule | str
    """The request's own rule, or the name of a policy the server's policy file defines."""
    idempotency_key: str
    conversation: str
    callback_url: str | None
    channel: str | None
    team: str | None
    """The Slack workspace (team id) the conversation's run is in, its cards posted and its
    approvers' plain user ids counted there."""

    @property
    def digest(self) -> str:
        """The hash of what is asked (tool and arguments), the same for a repeated request."""
        return args_hash({"tool": self.tool, "arguments": self.arguments})

    def policy(
        self, policies: GatePolicy, approvers: tuple[str, ...], groups: dict[str, tuple[str, ...]]
    ) -> PolicySnapshot:
        """Return the approval policy snapshot: the request's rule (or the named one) over
        the default of ``policies``, with ``approvers`` when neither names any."""
        if isinstance(self.rule, str) and self.rule not in policies.tools:
            raise BadRequest(f"no policy named {self.rule!r}")
        rule = policies.tools[self.rule] if isinstance(self.rule, str) else self.rule
        return (
            GatePolicy(default=rule.over(policies.default))
            .approval(self.tool, approvers)
            .snapshot(groups)
        )


def read_ask(body: Any) -> Ask:
    """Read the JSON body of ``POST /v1/approvals``; ``BadRequest`` says what is wrong."""
    if not isinstance(body, dict) or set(body) - FIELDS:
        raise BadRequest(f"the body is a JSON object with keys among {', '.join(sorted(FIELDS))}")
    tool, arguments = body.get("tool"), body.get("arguments", {})
    if not isinstance(tool, str) or not 0 < len(tool) <= NAME_LIMIT:
        raise BadRequest(f"'tool' is a name of 1 to {NAME_LIMIT} characters")
    if not isinstance(arguments, dict):
        raise BadRequest("'arguments' is a JSON object")
    return Ask(
        tool=tool,
        arguments=arguments,
        rule=_rule(body.get("policy")),
        idempotency_key=_text(body, "idempotency_key") or uuid.uuid4().hex,
        conversation=_text(body, "conversation_id") or "default",
        callback_url=_url(body.get("callback_url")),
        channel=_text(body, "channel"),
        team=_text(body, "team"),
    )


def _rule(policy: Any) -> ToolRule | str:
    if policy is None:
        return ToolRule()
    if isinstance(policy, str):
        return policy
    try:
        rule = read_rule("policy", "the policy", policy)
    except InvalidConfiguration as exc:
        raise BadRequest(str(exc)) from None
    if rule.gated is not None:
        raise BadRequest("the policy: 'gated' does not apply to the API")
    return rule


def _text(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is not None and (not isinstance(value, str) or not 0 < len(value) <= KEY_LIMIT):
        raise BadRequest(f"'{key}' is a string of 1 to {KEY_LIMIT} characters")
    return value


def _url(value: Any) -> str | None:
    if value is None:
        return None
    parts = urlsplit(value) if isinstance(value, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        raise BadRequest("'callback_url' is an http or https URL")
    return str(value)
