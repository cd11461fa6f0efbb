"""The checks of ``signoff doctor``: what a person would otherwise learn from failures."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

import store
from agent_runtime import InvalidConfiguration, SignoffError, SystemClock
from agent_runtime.deployment import resolved
from bot.app.assembly import load_agents
from bot.app.models import model_from_spec
from bot.app.settings import Settings, SettingsError
from bot.app.slack_mode import web_client
from bot.slack.installations import SignoffInstallationStore
from bot.slack.oauth import INSTALL_PATH
from bot.slack.scopes import BOT_SCOPES
from bot.slack.token_cipher import TokenCipher, TokenUnreadable


@dataclass(frozen=True, slots=True)
class Check:
    """One check's outcome: what was checked, whether it passed, and what was found."""

    name: str
    ok: bool
    detail: str


def run_checks(settings: Settings, channel: str | None, team: str | None = None) -> Iterator[Check]:
    """Yield each check in turn (the Slack ones only when a token is set, or, in OAuth mode,
    for each workspace the app is installed in, ``channel`` in the one ``team`` names)."""
    yield _signing_secret(settings)
    yield from _database(settings)
    yield from _agents(settings)
    if settings.is_oauth:
        yield from _installations(settings, channel, team)
        return
    if not settings.slack_bot_token:
        yield Check("slack token", False, "SLACK_BOT_TOKEN is not set")
        return
    yield from _token(web_client(settings), "slack token", channel)


def _token(client: WebClient, name: str, channel: str | None) -> Iterator[Check]:
    """Check the client's token, its scopes and, if asked, its bot's membership of ``channel``."""
    token = _slack(lambda: client.auth_test())
    if isinstance(token, Check):
        yield Check(name, False, token.detail)
        return
    yield Check(name, True, f"valid for team {token.get('team')} as bot @{token.get('user')}")
    yield _scopes(token.headers)
    if channel:
        yield _membership(client, channel)


def _installations(settings: Settings, channel: str | None, team: str | None) -> Iterator[Check]:
    """OAuth mode: check the token of each workspace the app is installed in."""
    stores = store.open(settings.database_url, migrate=False)
    try:
        cipher = TokenCipher(settings.token_keys)
        found = SignoffInstallationStore(stores.installations, SystemClock(), cipher).all()
    except (SignoffError, TokenUnreadable) as exc:
        yield Check("installations", False, f"unreadable: {exc}")
        return
    finally:
        stores.close()
    if not found:
        yield Check(
            "installations", False, f"none yet: open {INSTALL_PATH} on this server to install"
        )
        return
    yield Check("installations", True, f"installed in {len(found)} workspace(s)")
    for installation in found:
        where = installation.team_id or installation.enterprise_id
        client = WebClient(token=installation.bot_token, base_url=settings.slack_api_url)
        yield from _token(client, f"workspace {where}", channel if where == team else None)
    if channel and team not in {i.team_id or i.enterprise_id for i in found}:
        yield Check("channel", False, f"name an installed workspace with --team, not {team!r}")


def _signing_secret(settings: Settings) -> Check:
    if settings.slack_signing_secret:
        return Check("signing secret", True, "set")
    return Check(
        "signing secret",
        False,
        "SLACK_SIGNING_SECRET is not set: Slack's requests cannot be verified",
    )


def _database(settings: Settings) -> Iterator[Check]:
    """The database's reachability and schema, and on PostgreSQL its planner's statistics."""
    stores = store.open(settings.database_url, migrate=False)
    try:
        try:
            schema = stores.schema()
        except SignoffError as exc:
            yield Check("database", False, f"unreachable: {exc}")
            return
        if not schema.up_to_date:
            yield Check(
                "database",
                False,
                f"schema at {schema.current or 'nothing'}, code needs {schema.latest}: "
                "run `signoff db upgrade`",
            )
            return
        newer = f" (a later release's: this code's is {schema.latest})" if schema.newer else ""
        yield Check("database", True, f"reachable, schema at {schema.current}{newer}")
        if stores.engine.dialect.name == "postgresql":
            try:
                stale = stores.stale_statistics()
            except SignoffError:
                return  # gone since the schema was read: the next run's database check says so
            yield _planner_statistics(stale)
            yield _pooling(stores)
    finally:
        stores.close()


def _pooling(stores: store.Stores) -> Check:
    """Whether a pooler lending server connections per transaction is declared if there is
    one (``store.pooler``)."""
    if stores.pooled_by_transaction:
        return Check(
            "connection pooling",
            True,
            "by transaction (pooling=transaction): no LISTEN; other processes' wake-ups "
            "come at the poll",
        )
    try:
        stores.check_pooling()
    except InvalidConfiguration as exc:
        return Check("connection pooling", False, str(exc))
    except SignoffError as exc:  # a second connection refused, or waited for in vain
        return Check("connection pooling", False, f"could not tell: {exc}")
    return Check("connection pooling", True, "no pooler seen lending by transaction")


def _planner_statistics(stale: list[store.StaleTable]) -> Check:
    """Whether the planner's statistics describe Signoff's tables (``store.planner_stats``)."""
    if not stale:
        return Check("planner statistics", True, "current for every table")
    tables = ", ".join(
        f"{t.name} ({'never analyzed' if t.never_analyzed else f'{t.changed_rows:,} rows changed'}"
        f", {t.live_rows:,} rows)"
        for t in stale
    )
    return Check(
        "planner statistics",
        False,
        f"stale for {tables}: statements that find a row by its index may read whole "
        "tables; run ANALYZE, and turn autovacuum on (or analyze on a schedule)",
    )


def _agents(settings: Settings) -> Iterator[Check]:
    """Whether every gated tool of the agents can be approved and, if so, whether each
    agent's model can be built (its API key set, say)."""
    try:
        agents = load_agents(settings)
    except SettingsError as exc:
        yield Check("approvers", False, str(exc))
        return
    if not list(agents):
        yield Check("approvers", True, "no agent is configured (SIGNOFF_AGENT)")
        return
    yield Check("approvers", True, "every gated tool can be approved")
    try:
        resolved(agents, lambda spec: model_from_spec(spec, settings))
    except InvalidConfiguration as exc:
        yield Check("models", False, str(exc))
        return
    except Exception as exc:  # a model factory of the operator's own failing its own way
        yield Check("models", False, f"building a model failed: {type(exc).__name__}: {exc}")
        return
    yield Check("models", True, "every agent's model can be built")


def _scopes(headers: Any) -> Check:
    granted_text = next(
        (v for k, v in dict(headers or {}).items() if k.lower() == "x-oauth-scopes"), ""
    )
    granted = {s.strip() for s in str(granted_text).split(",") if s.strip()}
    missing = [scope for scope in BOT_SCOPES if scope not in granted]
    if missing:
        return Check(
            "scopes",
            False,
            f"missing {', '.join(missing)}: add them to the app (manifest.yml) and reinstall it",
        )
    return Check("scopes", True, "the token has every scope manifest.yml asks for")


def _membership(client: WebClient, channel: str) -> Check:
    info = _slack(lambda: client.conversations_info(channel=channel))
    if isinstance(info, Check):
        return Check("channel", False, f"{channel}: {info.detail}")
    found = info.get("channel") or {}
    if not found.get("is_member"):
        return Check(
            "channel",
            False,
            f"the bot is not in #{found.get('name', channel)}: type /invite @Signoff there",
        )
    return Check("channel", True, f"the bot is in #{found.get('name', channel)}")


def _slack(call: Callable[[], Any]) -> Any:
    """Return the call's response, or a failed Check saying why Slack refused or failed."""
    try:
        return call()
    except SlackApiError as exc:
        return Check("slack", False, f"Slack answered {exc.response.get('error')}")
    except OSError as exc:
        return Check("slack", False, f"Slack is unreachable ({exc})")


__all__ = ["Check", "run_checks"]
