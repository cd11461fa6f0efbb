"""Settings from the environment. The only module that reads ``os.environ``.

Each ``Settings`` field comes from one variable (``database_url`` from
``SIGNOFF_DATABASE_URL``, ``port`` from ``SIGNOFF_PORT``, …); fields whose meaning is not
plain from the name say so where they are declared.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from agent_runtime.audit_keys import AuditKey, AuditKeys
from agent_runtime.exceptions import InvalidConfiguration
from agent_runtime.rules import Rules
from store import DEFAULT_URL, url_secrets

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
DEMO_APPROVERS = ("U_APPROVER",)
"""Who approves when ``SIGNOFF_DEMO=1`` and ``SIGNOFF_APPROVERS`` is not set: the sandbox's
approver. Outside the demo there is no default approver."""
DEFAULT_CONCURRENCY = 64
"""How many runs ``signoff serve`` and ``signoff worker`` execute at once unless told
(``--concurrency``). A run holds its thread while it waits for the model, a tool or its turn
(``agent_runtime.resume_first``), and a burst of decisions wakes many runs at once, each of
which waits for a free thread before it can resume. In ``bench.slack_ack`` (50 clicks at
once, a loaded 2-core machine) click-to-resume p50 / p99 was 2.9-3.6 / 4.6-6.4 s with 4
threads, 1.0-1.2 / 2.7-3.6 s with 32 and 0.85-1.04 / 1.3 s with 64, for 6 MB more resident
memory than with 4 (an idle thread costs about 100 KB). Database connections stay bounded
whatever the concurrency: the engine's pool (at most 30) and the hot path's own (at most
``store.driver.MOST_CONNECTIONS`` each for the journal and the outbox); a run's statement
waits for one of them."""
DEMO_AGENT = "devkit.demo.agent:agent_from_settings"
DEMO_WORKFLOWS = "devkit.demo.workflows:demo_workflows"
"""What ``SIGNOFF_DEMO=1`` loads beside the operator's own agent and workflows: the demo
agent and the ``demo.*`` workflows, from the dev tools (the product never imports them
otherwise)."""

TRACES_PATH = "/v1/traces"
"""Where an OTLP/HTTP collector takes traces."""


class SettingsError(InvalidConfiguration, ValueError):
    """An environment variable holds a value Signoff cannot use."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Everything configurable from the environment."""

    database_url: str = DEFAULT_URL
    workflow_modules: tuple[str, ...] = ()
    lease_ttl: timedelta = timedelta(seconds=3)
    poll_interval: timedelta = timedelta(seconds=1)
    agent: str | None = None
    demo: bool = False
    """``SIGNOFF_DEMO=1``: also load the demo agent and the ``demo.*`` workflows, and let
    ``U_APPROVER`` approve unless ``SIGNOFF_APPROVERS`` names approvers (``signoff dev`` sets
    it; production leaves it unset)."""
    approvers: tuple[str, ...] = ()
    approver_groups: dict[str, tuple[str, ...]] = field(default_factory=dict)
    approvals_required: int = 1
    """``SIGNOFF_APPROVALS_REQUIRED``: how many of the approvers must sign each of the demo
    agent's actions off (a quorum; one rejection rejects)."""
    demo_provider_url: str = "http://127.0.0.1:8765"
    demo_provider_port: int = 8765
    demo_ledger_path: str = "signoff-demo-ledger.db"
    demo_budget_usd: float = 0.50
    """``SIGNOFF_DEMO_BUDGET_USD``: the demo agent's cost limit per run (only the demo agent
    reads it; 0.002 lets one demo model call through and stops the run at its second)."""
    model_provider: str = "scripted"
    model_name: str = ""
    model_base_url: str = ""
    model_api_key: str = field(default="", repr=False)
    provider_keys: dict[str, str] = field(default_factory=dict, repr=False)
    """``OPENAI_API_KEY`` and ``ANTHROPIC_API_KEY``, by provider: the keys of models named by
    a spec (``openai:gpt-4o-mini``) in an agent, a fork or an eval."""
    slack_bot_token: str = field(default="", repr=False)
    slack_signing_secret: str = field(default="", repr=False)
    slack_app_token: str = field(default="", repr=False)
    slack_api_url: str = "https://slack.com/api/"
    slack_mode: str = "single"
    """``SIGNOFF_SLACK_MODE``: ``single`` (the default: one workspace, its bot token in
    ``SLACK_BOT_TOKEN``) or ``oauth`` (the app is installed in many workspaces through
    ``/slack/install``; ``SLACK_CLIENT_ID`` and ``SLACK_CLIENT_SECRET`` are required, each
    workspace's bot token is kept in the database, and ``SLACK_BOT_TOKEN`` must be unset)."""
    slack_client_id: str = ""
    slack_client_secret: str = field(default="", repr=False)
    slack_redirect_uri: str = ""
    """``SLACK_REDIRECT_URI``: the public URL of ``/slack/oauth_redirect``, when Slack must be
    told it (it must match the app's configuration). Empty: the app's configured one."""
    allowed_teams: tuple[str, ...] = ()
    """``SIGNOFF_ALLOWED_TEAMS``: the Slack workspaces (team ids) that may install and use the
    app; with ``allowed_enterprises``, a workspace listed in either may. Both empty: any."""
    allowed_enterprises: tuple[str, ...] = ()
    """``SIGNOFF_ALLOWED_ENTERPRISES``: the Enterprise Grid organizations whose workspaces (and
    organization-wide installs) may install and use the app."""
    token_keys: tuple[str, ...] = field(default=(), repr=False)
    """``SIGNOFF_TOKEN_ENCRYPTION_KEY`` (or ``SIGNOFF_TOKEN_ENCRYPTION_KEY_FILE``): Fernet keys,
    newest first, that encrypt the workspaces' tokens in the database; required in OAuth
    mode. Tokens are written with the newest and read with any."""
    slack_token_rotation: timedelta = timedelta(minutes=120)
    """``SIGNOFF_SLACK_ROTATE_MINUTES``: in OAuth mode, a workspace's rotating bot token is
    refreshed when it expires within this long (installations without a refresh token keep
    theirs)."""
    port: int = 8080
    outbox_claim: timedelta = timedelta(seconds=60)
    """``SIGNOFF_OUTBOX_CLAIM_SECONDS``: how long a dispatcher holds a notice it is sending;
    Slack calls time out at a quarter of it, so no other dispatcher can take a notice whose
    call is still in flight. A round's batch is held a quarter of it until each notice's
    send begins."""
    outbox_backoff_cap: timedelta = timedelta(minutes=5)
    """``SIGNOFF_OUTBOX_BACKOFF_CAP_SECONDS``: the longest wait between two attempts to
    deliver a notice while Slack fails (429s wait for their ``Retry-After`` instead)."""
    assistant_status: bool = False
    """``SIGNOFF_ASSISTANT_STATUS=1``: where the app has Slack's AI-app surface, show what a
    waiting run waits for as its thread's status (``assistant.threads.setStatus``, which the
    ``chat:write`` scope allows), cleared when the wait ends. The root message's status line
    says it either way."""
    slack_post_interval: timedelta = timedelta(seconds=1)
    """``SIGNOFF_SLACK_POST_INTERVAL_SECONDS``: each process posts to one channel at most once
    per this interval on average (Slack's limit is about one a second per channel)."""
    slack_post_burst: int = 3
    socket_ping_interval: timedelta = timedelta(seconds=2)
    """``SIGNOFF_SOCKET_PING_SECONDS``: in Socket Mode, how often the connection is pinged; a
    connection that stops answering is replaced after about five missed pings (10 s at the
    default; Slack's client library pings every 10 s, so it noticed a dead socket after a
    minute)."""
    """``SIGNOFF_SLACK_POST_BURST``: how many posts to one channel may go at once before the
    interval applies."""
    otlp_endpoint: str = field(default="", repr=False)
    """``SIGNOFF_OTLP_ENDPOINT``: an OTLP/HTTP traces URL such as
    ``http://127.0.0.1:4318/v1/traces`` (a URL without a path gets ``/v1/traces``). When set,
    every process that executes runs (``signoff worker``, ``signoff serve``, the worker of
    ``signoff dev``) sends each journal entry as a span once it is committed, and the run's
    span once the run ends (as do ``signoff cancel`` and the Slack app for a run no worker
    holds): the spans ``signoff trace`` gives for the run. Sending happens in the background
    and never holds up or fails a run; spans the endpoint does not take are logged once per
    outage and dropped. Empty (the default): nothing is sent."""
    audit_keys: AuditKeys | None = field(default=None, repr=False)
    """``SIGNOFF_AUDIT_KEYS`` (``kid:secret`` pairs separated by commas or spaces) or
    ``SIGNOFF_AUDIT_KEYS_FILE`` (a file with one pair a line, ``#`` comments; a mounted
    secret, say): the first key signs every new audit entry, every key listed verifies.
    Secrets are at least 16 bytes; key ids 1-32 of ``A-Za-z0-9_.-``. Unset: entries are
    only hash-chained, which someone with write access to the database can recompute."""
    api_policies: str = ""
    """``SIGNOFF_API_POLICIES``: a policy file (the MCP gateway's format) whose default
    rule applies to every approvals API request and whose ``tools`` are the named policies
    a request may ask for by name. Empty: the default policy only."""
    webhook_networks: tuple[Network, ...] = ()
    """``SIGNOFF_WEBHOOK_ALLOWED_NETWORKS``: private networks (``10.1.0.0/16,127.0.0.1``)
    that the approvals API's webhooks may reach. Empty: public addresses only."""
    audit_anchor_file: str = ""
    """``SIGNOFF_AUDIT_ANCHOR_FILE``: ``signoff serve`` appends the audit chains' heads to this
    append-only file (one JSON line) whenever they changed, every
    ``SIGNOFF_AUDIT_ANCHOR_INTERVAL_SECONDS`` (default 60). Empty: no anchoring."""
    audit_anchor_interval: timedelta = timedelta(seconds=60)
    log_format: str = "text"
    """``SIGNOFF_LOG_FORMAT``: ``text`` (one readable line per record) or ``json`` (one JSON
    object per line: timestamp, level, logger, message and the record's structured fields).
    Either way the tokens, the signing secret, the API key and the audit keys are masked."""
    loop_stall: timedelta = timedelta(seconds=60)
    """``SIGNOFF_LOOP_STALL_SECONDS``: a background loop (worker, dispatcher, scheduler job)
    silent for its interval plus this long makes ``/readyz`` answer 503."""
    loop_exit: timedelta = timedelta(seconds=180)
    """``SIGNOFF_LOOP_EXIT_SECONDS``: a loop silent for its interval plus this long ends the
    process with exit status 3, for its orchestrator to restart it (at least the stall)."""
    startup_db_wait: timedelta = timedelta(seconds=60)
    """``SIGNOFF_STARTUP_DB_WAIT_SECONDS``: how long ``signoff serve`` and ``signoff worker``
    keep trying, while they start, to reach the database and bring its schema up to date
    (a database that starts after them, or restarts), before exiting with status 1."""
    drain_timeout: timedelta = timedelta(seconds=25)
    """``SIGNOFF_DRAIN_SECONDS``: after SIGTERM, how long ``signoff serve`` and ``signoff
    worker`` wait for the steps and the outbox batch in flight before exiting anyway (keep it
    under the orchestrator's grace period, 30 s by default on Kubernetes)."""
    rules: Rules = field(default_factory=Rules)
    """``SIGNOFF_RULES_FILE``: a YAML or JSON file of approval rules (``rules:`` a list of
    ``{id, tool, action, mode, reason, when, limits}``; see ``agent_runtime.rules``) that
    approve or deny some calls without a person, or only record what they would do
    (``mode: shadow``). Unset: every approval waits for people."""
    grant_approvers: tuple[str, ...] = ()
    """``SIGNOFF_GRANT_APPROVERS``: Slack user ids who may, from a card, allow similar calls
    for 24 hours across runs (anyone who may approve a call may allow similar ones for its
    run)."""

    @property
    def is_oauth(self) -> bool:
        """Whether the app is installed in many workspaces through OAuth."""
        return self.slack_mode == "oauth"

    def secrets(self) -> tuple[str, ...]:
        """Return every secret value set (never to be logged)."""
        keys = self.audit_keys.keys if self.audit_keys is not None else ()
        found = (
            self.slack_bot_token,
            self.slack_signing_secret,
            self.slack_app_token,
            self.slack_client_secret,
            self.model_api_key,
            *self.provider_keys.values(),
            *url_secrets(self.database_url),
            *(key.secret.decode(errors="replace") for key in keys),
            *self.token_keys,
        )
        return tuple(secret for secret in found if secret)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read ``SIGNOFF_*`` variables (from ``os.environ`` unless given)."""
        env = os.environ if environ is None else environ
        demo = _flag(env, "SIGNOFF_DEMO")
        approvers = _split(env.get("SIGNOFF_APPROVERS", "")) or (DEMO_APPROVERS if demo else ())
        return cls(
            database_url=env.get("SIGNOFF_DATABASE_URL") or DEFAULT_URL,
            workflow_modules=_split(env.get("SIGNOFF_WORKFLOWS", "")),
            lease_ttl=_seconds(env, "SIGNOFF_LEASE_TTL_SECONDS", 3.0),
            poll_interval=_seconds(env, "SIGNOFF_POLL_INTERVAL_SECONDS", 1.0),
            agent=env.get("SIGNOFF_AGENT") or None,
            demo=demo,
            approvers=approvers,
            approver_groups=_groups(env.get("SIGNOFF_APPROVER_GROUPS", "")),
            approvals_required=_quorum(env, approvers),
            demo_provider_url=env.get("SIGNOFF_DEMO_PROVIDER_URL") or "http://127.0.0.1:8765",
            demo_provider_port=_port(env, "SIGNOFF_DEMO_PROVIDER_PORT", 8765),
            demo_ledger_path=env.get("SIGNOFF_DEMO_LEDGER_PATH") or "signoff-demo-ledger.db",
            demo_budget_usd=_usd(env, "SIGNOFF_DEMO_BUDGET_USD", 0.50),
            otlp_endpoint=_traces_endpoint(env, "SIGNOFF_OTLP_ENDPOINT"),
            audit_keys=_audit_keys(env),
            audit_anchor_file=env.get("SIGNOFF_AUDIT_ANCHOR_FILE", ""),
            api_policies=env.get("SIGNOFF_API_POLICIES", ""),
            webhook_networks=_networks(env.get("SIGNOFF_WEBHOOK_ALLOWED_NETWORKS", "")),
            audit_anchor_interval=_seconds(env, "SIGNOFF_AUDIT_ANCHOR_INTERVAL_SECONDS", 60.0),
            outbox_claim=_seconds(env, "SIGNOFF_OUTBOX_CLAIM_SECONDS", 60.0),
            outbox_backoff_cap=_seconds(env, "SIGNOFF_OUTBOX_BACKOFF_CAP_SECONDS", 300.0),
            assistant_status=_flag(env, "SIGNOFF_ASSISTANT_STATUS"),
            slack_post_interval=_seconds(env, "SIGNOFF_SLACK_POST_INTERVAL_SECONDS", 1.0),
            slack_post_burst=_count(env, "SIGNOFF_SLACK_POST_BURST", 3),
            socket_ping_interval=_seconds(env, "SIGNOFF_SOCKET_PING_SECONDS", 2.0),
            log_format=_log_format(env),
            rules=_rules(env),
            grant_approvers=_split(env.get("SIGNOFF_GRANT_APPROVERS", "")),
            **_supervision(env),
            **_model(env),
            **_slack(env),
        )


def child_environment() -> dict[str, str]:
    """This process's environment for a program it starts (an MCP upstream server): all of
    it but Signoff's own settings and Slack's credentials (``SIGNOFF_*``, ``SLACK_*``)."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("SIGNOFF_", "SLACK_"))}


def read_rules_file(path: str, name: str = "SIGNOFF_RULES_FILE") -> Rules:
    """Read approval rules from a YAML or JSON file, raising SettingsError naming the fault."""
    import yaml

    try:
        with open(path, encoding="utf-8") as file:
            data = yaml.safe_load(file)  # JSON is YAML too
    except OSError as exc:
        raise SettingsError(f"{name}: cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise SettingsError(f"{name}: {path} is not valid YAML or JSON: {exc}") from None
    try:
        return Rules.parse(data, f"{name} {path}")
    except InvalidConfiguration as exc:
        raise SettingsError(str(exc)) from None


def _rules(env: Mapping[str, str]) -> Rules:
    path = env.get("SIGNOFF_RULES_FILE", "").strip()
    return read_rules_file(path) if path else Rules()


def _flag(env: Mapping[str, str], name: str) -> bool:
    raw = (env.get(name) or "0").strip().lower()
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off", ""):
        return False
    raise SettingsError(f"{name} must be 1 or 0 (true or false), not {raw!r}")


def _split(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


def _networks(value: str) -> tuple[Network, ...]:
    """Parse ``10.1.0.0/16,127.0.0.1,fd00::/8`` into networks (an address is its own)."""
    try:
        return tuple(ipaddress.ip_network(part, strict=False) for part in _split(value))
    except ValueError as exc:
        raise SettingsError(f"SIGNOFF_WEBHOOK_ALLOWED_NETWORKS: {exc}") from None


def _groups(value: str) -> dict[str, tuple[str, ...]]:
    """Parse ``finance:U1,U2;legal:U3`` into group members."""
    groups: dict[str, tuple[str, ...]] = {}
    for part in value.split(";"):
        if not part.strip():
            continue
        name, sep, members = part.partition(":")
        if not sep or not name.strip():
            raise SettingsError(
                f"SIGNOFF_APPROVER_GROUPS: expected 'group:U1,U2;other:U3', not {part!r}"
            )
        groups[name.strip()] = _split(members)
    return groups


def _audit_keys(env: Mapping[str, str]) -> AuditKeys | None:
    """Read the audit keys; no error message ever holds a secret."""
    text, path = env.get("SIGNOFF_AUDIT_KEYS", ""), env.get("SIGNOFF_AUDIT_KEYS_FILE", "")
    if text.strip() and path:
        raise SettingsError("set SIGNOFF_AUDIT_KEYS or SIGNOFF_AUDIT_KEYS_FILE, not both")
    if path:
        return parse_audit_keys(
            _read_secret_file("SIGNOFF_AUDIT_KEYS_FILE", path), "SIGNOFF_AUDIT_KEYS_FILE"
        )
    return parse_audit_keys(text, "SIGNOFF_AUDIT_KEYS") if text.strip() else None


def parse_audit_keys(text: str, source: str) -> AuditKeys:
    """Parse ``kid:secret`` pairs (separated by commas, spaces or lines; ``#`` comments)."""
    pairs = re.split(r"[\s,]+", re.sub(r"(?m)(^|\s)#.*$", " ", text).strip())
    keys = []
    for number, pair in enumerate(filter(None, pairs), start=1):
        kid, sep, secret = pair.partition(":")
        if not sep or not secret:
            raise SettingsError(f"{source}: key {number} is not of the form kid:secret")
        try:
            keys.append(AuditKey(kid, secret.encode()))
        except InvalidConfiguration as exc:
            raise SettingsError(f"{source}: {exc}") from None
    if not keys:
        raise SettingsError(f"{source}: no kid:secret pair")
    try:
        return AuditKeys(tuple(keys))
    except InvalidConfiguration as exc:
        raise SettingsError(f"{source}: {exc}") from None


def _read_secret_file(name: str, path: str) -> str:
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise SettingsError(f"{name}: cannot read {path}: {reason}") from None


def _model(env: Mapping[str, str]) -> dict[str, Any]:
    provider = (env.get("SIGNOFF_MODEL_PROVIDER") or "scripted").lower()
    if provider not in ("scripted", "openai", "anthropic"):
        raise SettingsError("SIGNOFF_MODEL_PROVIDER must be scripted, openai or anthropic")
    fallback_key = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}.get(provider, "")
    return {
        "model_provider": provider,
        "model_name": env.get("SIGNOFF_MODEL", ""),
        "model_base_url": env.get("SIGNOFF_MODEL_BASE_URL", ""),
        "model_api_key": env.get("SIGNOFF_MODEL_API_KEY") or env.get(fallback_key, ""),
        "provider_keys": {
            name: key
            for name, key in (
                ("openai", env.get("OPENAI_API_KEY", "")),
                ("anthropic", env.get("ANTHROPIC_API_KEY", "")),
            )
            if key
        },
    }


def _slack(env: Mapping[str, str]) -> dict[str, Any]:
    api_url = env.get("SIGNOFF_SLACK_API_URL") or "https://slack.com/api/"
    parts = urlsplit(api_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SettingsError(
            f"SIGNOFF_SLACK_API_URL must be an http(s) URL such as https://slack.com/api/, "
            f"not {api_url!r}"
        )
    return {
        **_slack_mode(env),
        "slack_bot_token": env.get("SLACK_BOT_TOKEN", ""),
        "slack_signing_secret": env.get("SLACK_SIGNING_SECRET", ""),
        "slack_app_token": env.get("SLACK_APP_TOKEN", ""),
        "slack_api_url": api_url if api_url.endswith("/") else api_url + "/",
        "port": _port(env, "SIGNOFF_PORT", 8080, any_free=True),
    }


def _slack_mode(env: Mapping[str, str]) -> dict[str, Any]:
    """Read the Slack mode; a mix of the two modes' variables is refused, naming them."""
    mode = (env.get("SIGNOFF_SLACK_MODE") or "single").strip().lower()
    if mode not in ("single", "oauth"):
        raise SettingsError(f"SIGNOFF_SLACK_MODE must be single or oauth, not {mode!r}")
    oauth_vars = [name for name in ("SLACK_CLIENT_ID", "SLACK_CLIENT_SECRET") if env.get(name)]
    if oauth_vars and env.get("SLACK_BOT_TOKEN"):
        raise SettingsError(
            f"both SLACK_BOT_TOKEN and {' and '.join(oauth_vars)} are set: set SLACK_BOT_TOKEN "
            "alone (SIGNOFF_SLACK_MODE=single, one workspace) or SLACK_CLIENT_ID and "
            "SLACK_CLIENT_SECRET alone (SIGNOFF_SLACK_MODE=oauth, many workspaces)"
        )
    if mode == "single" and oauth_vars:
        raise SettingsError(
            f"{' and '.join(oauth_vars)} set but SIGNOFF_SLACK_MODE is single: set "
            "SIGNOFF_SLACK_MODE=oauth to install the app in many workspaces, or unset them"
        )
    missing = [n for n in ("SLACK_CLIENT_ID", "SLACK_CLIENT_SECRET") if n not in oauth_vars]
    if mode == "oauth" and missing:
        raise SettingsError(f"SIGNOFF_SLACK_MODE=oauth needs {' and '.join(missing)}")
    return {
        "slack_mode": mode,
        "slack_client_id": env.get("SLACK_CLIENT_ID", ""),
        "slack_client_secret": env.get("SLACK_CLIENT_SECRET", ""),
        "slack_redirect_uri": env.get("SLACK_REDIRECT_URI", ""),
        "token_keys": _token_keys(env) if mode == "oauth" else (),
        "allowed_teams": _split(env.get("SIGNOFF_ALLOWED_TEAMS", "")),
        "allowed_enterprises": _split(env.get("SIGNOFF_ALLOWED_ENTERPRISES", "")),
        "slack_token_rotation": timedelta(minutes=_count(env, "SIGNOFF_SLACK_ROTATE_MINUTES", 120)),
    }


def _token_keys(env: Mapping[str, str]) -> tuple[str, ...]:
    """Read the token encryption keys, newest first; no error message ever holds a key."""
    name = "SIGNOFF_TOKEN_ENCRYPTION_KEY"
    text, path = env.get(name, ""), env.get(f"{name}_FILE", "")
    if text.strip() and path:
        raise SettingsError(f"set {name} or {name}_FILE, not both")
    source = f"{name}_FILE" if path else name
    keys = _split((_read_secret_file(source, path) if path else text).replace("\n", ","))
    if not keys:
        raise SettingsError(
            f"SIGNOFF_SLACK_MODE=oauth needs {name} (or {name}_FILE): the key that encrypts "
            "the workspaces' tokens in the database"
        )
    from bot.slack.token_cipher import BadTokenKey, TokenCipher

    try:
        TokenCipher(keys)
    except BadTokenKey as exc:
        raise SettingsError(f"{source}: {exc}") from None
    return keys


def traces_url(text: str) -> str:
    """Return an OTLP/HTTP traces URL: http(s) with a host; no path gets ``/v1/traces``.

    Raises ``SettingsError`` for anything else.
    """
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SettingsError(
            f"expected an http(s) URL such as http://127.0.0.1:4318{TRACES_PATH}, not {text!r}"
        )
    if parts.path in ("", "/"):
        return parts._replace(path=TRACES_PATH).geturl()
    return text


def _traces_endpoint(env: Mapping[str, str], name: str) -> str:
    raw = env.get(name, "").strip()
    if not raw:
        return ""
    try:
        return traces_url(raw)
    except SettingsError:
        raise SettingsError(
            f"{name} must be an OTLP/HTTP traces URL such as http://127.0.0.1:4318{TRACES_PATH}"
        ) from None


def _log_format(env: Mapping[str, str]) -> str:
    value = (env.get("SIGNOFF_LOG_FORMAT") or "text").lower()
    if value not in ("text", "json"):
        raise SettingsError(f"SIGNOFF_LOG_FORMAT must be text or json, not {value!r}")
    return value


def _supervision(env: Mapping[str, str]) -> dict[str, Any]:
    stall = _seconds(env, "SIGNOFF_LOOP_STALL_SECONDS", 60.0)
    exit_after = _seconds(env, "SIGNOFF_LOOP_EXIT_SECONDS", max(180.0, stall.total_seconds()))
    if exit_after < stall:
        raise SettingsError("SIGNOFF_LOOP_EXIT_SECONDS must be at least SIGNOFF_LOOP_STALL_SECONDS")
    return {
        "loop_stall": stall,
        "loop_exit": exit_after,
        "drain_timeout": _seconds(env, "SIGNOFF_DRAIN_SECONDS", 25.0),
        "startup_db_wait": _seconds(env, "SIGNOFF_STARTUP_DB_WAIT_SECONDS", 60.0),
    }


def _quorum(env: Mapping[str, str], approvers: tuple[str, ...]) -> int:
    raw = env.get("SIGNOFF_APPROVALS_REQUIRED") or "1"
    if not raw.isdigit() or not 1 <= int(raw) <= max(len(approvers), 1):
        raise SettingsError(
            "SIGNOFF_APPROVALS_REQUIRED must be a whole number from 1 to the "
            f"number of SIGNOFF_APPROVERS ({len(approvers)}), not {raw!r}"
        )
    return int(raw)


def _port(env: Mapping[str, str], name: str, default: int, *, any_free: bool = False) -> int:
    """A TCP port; with ``any_free``, 0 too (the system picks a free one)."""
    raw = env.get(name)
    if not raw:
        return default
    lowest = 0 if any_free else 1
    if not raw.isdigit() or not lowest <= int(raw) < 65536:
        raise SettingsError(f"{name} must be a TCP port number, not {raw!r}")
    return int(raw)


def _count(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise SettingsError(f"{name} must be a whole number of at least 1, not {raw!r}")
    return int(raw)


def _seconds(env: Mapping[str, str], name: str, default: float) -> timedelta:
    raw = env.get(name)
    if not raw:
        return timedelta(seconds=default)
    try:
        seconds = float(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a number of seconds, not {raw!r}") from None
    if seconds <= 0:
        raise SettingsError(f"{name} must be positive, not {raw!r}")
    return timedelta(seconds=seconds)


def _usd(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if not raw:
        return default
    try:
        amount = float(raw)
    except ValueError:
        raise SettingsError(f"{name} must be an amount in USD, not {raw!r}") from None
    if not math.isfinite(amount) or amount <= 0:
        raise SettingsError(f"{name} must be a positive amount, not {raw!r}")
    return amount
