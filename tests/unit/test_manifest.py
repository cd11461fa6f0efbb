"""The Slack app manifest (manifest.yml) against Slack's manifest JSON schema, offline."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from jsonschema.protocols import Validator
from referencing import Registry

from bot.slack.scopes import BOT_SCOPES

ROOT = Path(__file__).resolve().parents[2]
MANIFEST_PATH = ROOT / "manifest.yml"
# Vendored unmodified from slackapi/manifest-schema (see the README next to it). The versioned
# file is self-contained: every $ref points into its own "definitions".
SCHEMA_PATH = ROOT / "bot" / "slack" / "manifest_schema" / "manifest.schema.1.0.0.json"
SCHEMA_MAJOR_VERSION = 1

EVENTS_PATH = "/slack/events"  # Bolt's default request path, used for HTTP mode

Json = dict[str, Any]


@pytest.fixture(scope="module")
def manifest() -> Json:
    """The parsed manifest.yml."""
    loaded = yaml.safe_load(MANIFEST_PATH.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture(scope="module")
def schema() -> Json:
    """The vendored manifest schema (a missing file is an error, never a skip)."""
    loaded = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture(scope="module")
def validator(schema: Json) -> Validator:
    """A validator for the draft the schema declares that can never fetch a remote $ref."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    cls.check_schema(schema)
    # An empty Registry refuses every retrieval (NoSuchResource); jsonschema's default registry
    # would fetch unknown http(s) references from the network instead.
    registry: Registry[Any] = Registry()
    return cls(schema, registry=registry, format_checker=cls.FORMAT_CHECKER)


def _refs(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _errors(validator: Validator, instance: Json) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in validator.iter_errors(instance)
    ]


def _agent_command(manifest: Json) -> Json:
    commands = [c for c in manifest["features"]["slash_commands"] if c["command"] == "/agent"]
    assert len(commands) == 1
    command: Json = commands[0]
    return command


def test_schema_is_draft7_with_local_refs_only(schema: Json) -> None:
    """The vendored schema declares draft-07 and resolves every $ref inside itself."""
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    refs = list(_refs(schema))
    assert refs
    assert [ref for ref in refs if not ref.startswith("#/")] == []


def test_manifest_validates_against_schema(manifest: Json, validator: Validator) -> None:
    """manifest.yml is valid against the vendored schema for its manifest major version."""
    assert manifest["_metadata"]["major_version"] == SCHEMA_MAJOR_VERSION
    assert _errors(validator, manifest) == []


def test_validator_rejects_slash_command_without_command(
    manifest: Json, validator: Validator
) -> None:
    """A slash command missing its `command` field fails validation."""
    broken = copy.deepcopy(manifest)
    del broken["features"]["slash_commands"][0]["command"]
    errors = _errors(validator, broken)
    assert errors == ["features/slash_commands/0: 'command' is a required property"]


def test_validator_rejects_unknown_settings_key(manifest: Json, validator: Validator) -> None:
    """A misspelled settings key fails validation instead of being silently ignored."""
    broken = copy.deepcopy(manifest)
    broken["settings"]["socket_mode"] = broken["settings"].pop("socket_mode_enabled")
    assert len(_errors(validator, broken)) == 1


def test_agent_command_posts_to_events_url(manifest: Json) -> None:
    """`/agent` exists, posts to /slack/events over HTTPS and is not escaped."""
    command = _agent_command(manifest)
    assert command["url"].startswith("https://")
    assert command["url"].endswith(EVENTS_PATH)
    assert command["should_escape"] is False
    assert command["description"]
    assert "cancel RUN" in command["usage_hint"]


def test_interactivity_is_on_at_the_same_url(manifest: Json) -> None:
    """Buttons and modals are enabled and delivered to the slash command's URL."""
    interactivity = manifest["settings"]["interactivity"]
    assert interactivity["is_enabled"] is True
    assert interactivity["request_url"] == _agent_command(manifest)["url"]


def test_bot_scopes_are_exactly_what_the_bot_uses(manifest: Json) -> None:
    """The bot token asks for exactly commands, chat:write and im:write, and no user scopes."""
    scopes = manifest["oauth_config"]["scopes"]
    assert sorted(scopes["bot"]) == sorted(BOT_SCOPES)
    assert set(scopes) == {"bot"}


def test_settings_match_http_mode_default(manifest: Json) -> None:
    """The manifest is for HTTP mode: no Socket Mode, no token rotation."""
    settings = manifest["settings"]
    assert settings["socket_mode_enabled"] is False
    assert settings["org_deploy_enabled"] is False
    assert settings["token_rotation_enabled"] is False


def test_home_tab_is_on_with_its_one_event(manifest: Json) -> None:
    """The Home tab is enabled and app_home_opened, the only event, goes to /agent's URL."""
    assert manifest["features"]["app_home"]["home_tab_enabled"] is True
    events = manifest["settings"]["event_subscriptions"]
    assert events == {
        "request_url": _agent_command(manifest)["url"],
        "bot_events": ["app_home_opened"],
    }


def test_schema_knows_the_ai_app_surfaces(manifest: Json, validator: Validator) -> None:
    """The vendored schema accepts assistant_view and agent_view, and still checks them."""
    ai_app = copy.deepcopy(manifest)
    ai_app["features"]["assistant_view"] = {"assistant_description": "Runs agents."}
    ai_app["features"]["agent_view"] = {"agent_description": "Runs agents."}
    assert _errors(validator, ai_app) == []
    del ai_app["features"]["assistant_view"]["assistant_description"]
    assert len(_errors(validator, ai_app)) == 1


def test_bot_user(manifest: Json) -> None:
    """The bot user is called Signoff and does not pretend to be always online."""
    assert manifest["display_information"]["name"] == "Signoff"
    assert manifest["features"]["bot_user"] == {"display_name": "Signoff", "always_online": False}
