"""Where webhooks may go: public addresses, and the private networks an operator allows.

A callback URL is checked when it is given (``POST /v1/approvals``) and again at every
send, where the webhook's connection goes to the very address that was checked, so that a
name that resolves elsewhere by then (DNS rebinding) reaches no refused address either.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.util.connection import create_connection

from bot.api.exceptions import RefusedDestination
from bot.app.settings import Network

DEFAULT_PORTS = {"http": 80, "https": 443}
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
NAT64 = ipaddress.ip_network("64:ff9b::/96")
"""The well-known NAT64 prefix: its last 32 bits are the IPv4 address reached (RFC 6052)."""
LOCAL_NAT64 = ipaddress.ip_network("64:ff9b:1::/48")
"""The local-use NAT64 prefix (RFC 8215): IPv4 addresses of the operator's own network,
private unless allowed (Python before 3.13 counts it global)."""
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
"""Deprecated IPv4-compatible addresses (RFC 4291): the last 32 bits are an IPv4 address."""


@dataclass(frozen=True, slots=True)
class Destinations:
    """Public addresses, and ``allowed`` networks however private."""

    allowed: tuple[Network, ...] = ()

    def check_url(self, url: str) -> None:
        """Refuse ``url`` unless its host resolves only to addresses webhooks may reach."""
        parts = urlsplit(url)
        if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
            raise RefusedDestination("'callback_url' is an http or https URL")
        try:
            self.resolve(parts.hostname, parts.port or DEFAULT_PORTS[parts.scheme])
        except OSError:
            raise RefusedDestination("'callback_url': its host name does not resolve") from None

    def resolve(self, host: str, port: int) -> str:
        """Return the address to connect to for ``host``; ``RefusedDestination`` if any of
        its addresses is one webhooks may not reach."""
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addresses = [str(info[4][0]) for info in found]
        for address in addresses:
            self.check(address)
        return addresses[0]

    def check(self, address: str) -> None:
        """Refuse a private, loopback, link-local, reserved or multicast ``address`` (or one
        carrying such an IPv4 address) unless an allowed network holds it."""
        given = ipaddress.ip_address(address.partition("%")[0])
        ip = carried(given)
        if any(a in network for a in (given, ip) for network in self.allowed):
            return
        if not ip.is_global or ip.is_multicast or ip in LOCAL_NAT64:
            raise RefusedDestination(
                "'callback_url' reaches a private, loopback or link-local address, where "
                "webhooks may not go (SIGNOFF_WEBHOOK_ALLOWED_NETWORKS may allow its network)"
            )


def carried(ip: IPAddress) -> IPAddress:
    """The address a connection to ``ip`` really reaches, as far as ``ip`` tells: the IPv4
    address an IPv4-mapped, NAT64, 6to4 or IPv4-compatible address carries, else ``ip``."""
    if isinstance(ip, ipaddress.IPv4Address):
        return ip
    if ip in NAT64 or ip in IPV4_COMPATIBLE:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip.ipv4_mapped or ip.sixtofour or ip


def webhook_session(destinations: Destinations) -> requests.Session:
    """A session whose connections go only where ``destinations`` allows, ignoring proxy
    variables (a proxy would hide where a webhook really goes)."""
    session = requests.Session()
    session.trust_env = False
    adapter = _CheckedAdapter(destinations)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


class _CheckedAdapter(HTTPAdapter):
    """Connects to the checked address of each host (TLS still checks the host's name)."""

    def __init__(self, destinations: Destinations) -> None:
        self._destinations = destinations
        super().__init__()

    def init_poolmanager(self, *args: object, **kwargs: object) -> None:
        """Make the pools' connections check where they connect."""
        super().init_poolmanager(*args, **kwargs)  # type: ignore[arg-type]
        self.poolmanager.pool_classes_by_scheme = _pools(self._destinations)


def _pools(destinations: Destinations) -> dict[str, type[HTTPConnectionPool]]:
    class Checked(HTTPConnection):
        def _new_conn(self) -> socket.socket:
            return _connect(self, destinations)

    class CheckedTls(Checked, HTTPSConnection):
        pass

    class Pool(HTTPConnectionPool):
        ConnectionCls = Checked

    class TlsPool(HTTPSConnectionPool):
        ConnectionCls = CheckedTls

    return {"http": Pool, "https": TlsPool}


def _connect(connection: HTTPConnection, destinations: Destinations) -> socket.socket:
    """Resolve, check and connect to the checked address (urllib3's errors, but refused
    addresses raise ``RefusedDestination``, which no retry hides)."""
    try:
        address = destinations.resolve(connection.host, connection.port)
        return create_connection(
            (address, connection.port),
            connection.timeout,
            source_address=connection.source_address,
            socket_options=connection.socket_options,
        )
    except socket.gaierror as exc:
        raise NameResolutionError(connection.host, connection, exc) from exc
    except TimeoutError as exc:
        raise ConnectTimeoutError(connection, f"connecting to {connection.host} timed out") from exc
    except OSError as exc:
        raise NewConnectionError(connection, f"cannot connect to {connection.host}: {exc}") from exc
