"""Callback URLs reach public addresses only, unless an operator allows a private network:
refused when given, and checked again where each webhook really connects."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

import pytest
from sqlalchemy import select

from agent_runtime import Actor, Decision, SystemClock
from bot.api.destinations import Destinations, webhook_session
from bot.api.exceptions import RefusedDestination
from bot.api.webhook_sender import WebhookSender
from bot.app.serving import ServingThread
from bot.app.settings import Settings, SettingsError
from store.models import outbox
from tests.integration import wait_until
from tests.integration.api_server import ApiServer, api_server
from tests.integration.webhook_receiver import LOOPBACK_ALLOWED, Receiver

REFUSED = [
    "http://127.0.0.1:9/hook",
    "http://localhost:9/hook",
    "http://[::1]:9/hook",
    "http://10.0.0.7/hook",
    "http://192.168.1.20/hook",
    "http://169.254.169.254/latest/meta-data",
    "http://100.64.0.1/hook",
    "http://0.0.0.0:9/hook",
    "http://[::ffff:127.0.0.1]:9/hook",
]


@pytest.fixture
def strict(sqlite_url: str) -> Iterator[ApiServer]:
    """The approvals API with no private network allowed (the default)."""
    with api_server(sqlite_url, allowed="") as served:
        yield served


@pytest.mark.parametrize("url", REFUSED)
def test_a_callback_to_a_private_address_is_refused_when_given(strict: ApiServer, url: str) -> None:
    """A callback URL reaching a loopback, private, link-local or shared address is a 400
    that says so and asks for nothing."""
    answer = strict.post({"tool": "refund", "arguments": {}, "callback_url": url})
    assert answer.status_code == 400
    assert "private, loopback or link-local" in answer.json()["error"]
    assert strict.services.approvals.store.list_approvals() == []


def test_public_addresses_and_allowed_networks_are_accepted(sqlite_url: str) -> None:
    """A public address is accepted by default; an allowed network's addresses are too,
    and other private ones still are not."""
    with api_server(sqlite_url, allowed="10.1.0.0/16") as api:
        for url in ("https://93.184.216.34/hook", "http://10.1.2.3:8080/hook"):
            assert api.post({"tool": "t", "callback_url": url}).status_code == 201, url
        assert api.post({"tool": "t", "callback_url": "http://10.2.0.1/"}).status_code == 400


def test_a_webhook_to_a_destination_refused_by_now_is_never_sent(sqlite_url: str) -> None:
    """A callback accepted when given but refused when its webhook is sent (its name now
    resolves to a refused address) is given up at once: nothing reaches the receiver."""
    receiver = Receiver(failures=0)
    with ServingThread(receiver, "receiver"), api_server(sqlite_url) as api:
        url = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
        created = api.post({"tool": "refund", "callback_url": url}).json()
        decided = api.services.approvals.decide(
            created["id"], Actor(user_id="U_APPROVER"), Decision.APPROVE
        )
        assert decided.accepted
        sender = WebhookSender(
            api.services.outbox,
            api.keys,
            SystemClock(),
            owner="sender",
            destinations=Destinations(),
        )
        wait_until(
            lambda: sender.send_once() >= 0 and _status(api, created["id"]) == "dead",
            timeout=20,
            what="the webhook to be given up",
        )
        assert receiver.received == []


def test_the_webhook_session_connects_only_where_allowed() -> None:
    """The webhooks' HTTP session refuses to connect to a loopback receiver unless loopback
    is allowed, whatever name the URL uses for it."""
    receiver = Receiver(failures=0)
    with ServingThread(receiver, "receiver"):
        port = receiver.server_address[1]
        for url in (f"http://127.0.0.1:{port}/", f"http://localhost:{port}/"):
            with pytest.raises(RefusedDestination):
                webhook_session(Destinations()).post(url, data=b"{}", timeout=10)
        assert receiver.received == []
        answer = webhook_session(LOOPBACK_ALLOWED).post(
            f"http://localhost:{port}/", data=b"{}", timeout=10
        )
        assert answer.status_code == 200


def test_an_allowed_network_admits_its_ipv4_mapped_form() -> None:
    """An allowed IPv4 network also admits its addresses written as IPv4-mapped IPv6."""
    allowed = Destinations((ipaddress.ip_network("127.0.0.0/8"),))
    allowed.check("::ffff:127.0.0.1")
    with pytest.raises(RefusedDestination):
        allowed.check("::1")


def _status(api: ApiServer, approval_id: str) -> str | None:
    with api.services.store.engine.connect() as conn:
        status = conn.execute(
            select(outbox.c.status).where(outbox.c.key == f"webhook:{approval_id}")
        ).scalar()
    return None if status is None else str(status)


def test_the_allowed_networks_setting_is_read_and_checked() -> None:
    """``SIGNOFF_WEBHOOK_ALLOWED_NETWORKS`` takes networks and single addresses; anything
    else is refused, naming the variable."""
    read = Settings.from_env({"SIGNOFF_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.1, fd00::/8"})
    assert [str(n) for n in read.webhook_networks] == ["127.0.0.1/32", "fd00::/8"]
    with pytest.raises(SettingsError, match="SIGNOFF_WEBHOOK_ALLOWED_NETWORKS"):
        Settings.from_env({"SIGNOFF_WEBHOOK_ALLOWED_NETWORKS": "intranet"})


CARRYING_PRIVATE = [
    "http://[64:ff9b::a9fe:a9fe]/latest/meta-data",
    "http://[64:ff9b::a00:7]/hook",
    "http://[64:ff9b::7f00:1]:9/hook",
    "http://[64:ff9b:1::a00:7]/hook",
    "http://[2002:a9fe:a9fe::1]/hook",
    "http://[::7f00:1]:9/hook",
    "http://[::a9fe:a9fe]/latest/meta-data",
]


@pytest.mark.parametrize("url", CARRYING_PRIVATE)
def test_an_ipv6_address_carrying_a_private_ipv4_one_is_refused(
    strict: ApiServer, url: str
) -> None:
    """A callback URL whose IPv6 address embeds a private or link-local IPv4 address is a
    400 that asks for nothing."""
    answer = strict.post({"tool": "refund", "arguments": {}, "callback_url": url})
    assert answer.status_code == 400, answer.text
    assert strict.services.approvals.store.list_approvals() == []


def test_the_nat64_form_of_a_public_address_is_still_accepted(strict: ApiServer) -> None:
    """93.184.216.34 reached through NAT64 (an IPv6-only network's only way) is accepted."""
    url = "https://[64:ff9b::5db8:d822]/hook"
    answer = strict.post({"tool": "refund", "arguments": {}, "callback_url": url})
    assert answer.status_code == 201, answer.text


def test_an_allowed_network_admits_its_nat64_form(sqlite_url: str) -> None:
    """An operator's allowed IPv4 network admits its addresses in their NAT64 form too."""
    with api_server(sqlite_url, allowed="10.1.0.0/16") as api:
        url = "http://[64:ff9b::a01:203]:8080/hook"
        answer = api.post({"tool": "refund", "arguments": {}, "callback_url": url})
        assert answer.status_code == 201, answer.text
