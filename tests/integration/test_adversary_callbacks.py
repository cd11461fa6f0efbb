"""Callback URLs whose IPv6 address carries a private IPv4 one: NAT64, 6to4, IPv4-compatible.

On a network with NAT64 (IPv6-only clusters and subnets), ``64:ff9b::a9fe:a9fe`` is
169.254.169.254 reached through the NAT64 gateway; 6to4 and IPv4-compatible addresses embed
an IPv4 address too. Each is judged by the IPv4 address it carries.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.api_server import ApiServer, api_server

CARRYING_PRIVATE = [
    "http://[64:ff9b::a9fe:a9fe]/latest/meta-data",
    "http://[64:ff9b::a00:7]/hook",
    "http://[64:ff9b::7f00:1]:9/hook",
    "http://[64:ff9b:1::a00:7]/hook",
    "http://[2002:a9fe:a9fe::1]/hook",
    "http://[::7f00:1]:9/hook",
    "http://[::a9fe:a9fe]/latest/meta-data",
]


@pytest.fixture
def strict(sqlite_url: str) -> Iterator[ApiServer]:
    """The approvals API with no private network allowed (the default)."""
    with api_server(sqlite_url, allowed="") as served:
        yield served


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
