"""The passwords a database URL carries, in its user part or its query, are hidden and
known as secrets."""

from __future__ import annotations

import pytest

from store import masked_url, url_secrets


@pytest.mark.parametrize(
    ("url", "shown", "secrets"),
    [
        ("postgresql://bob:pw1@db/x", "postgresql://bob:***@db/x", ("pw1",)),
        ("postgresql://bob@db/x?password=pw2", "postgresql://bob@db/x?password=***", ("pw2",)),
        (
            "postgresql://bob@db/x?sslmode=require&sslpassword=k%20y&connect_timeout=5",
            "postgresql://bob@db/x?sslmode=require&sslpassword=***&connect_timeout=5",
            ("k%20y", "k y"),
        ),
        (
            "postgresql://bob:p%40ss@db:notaport/x",
            "postgresql://bob:***@db:notaport/x",
            ("p%40ss", "p@ss"),
        ),
        ("sqlite:///signoff.db", "sqlite:///signoff.db", ()),
        ("host=db password=pw3", "(the configured database URL)", ()),
    ],
    ids=["user part", "query", "ssl key's password", "unparsable port", "none", "not a URL"],
)
def test_every_password_a_url_carries_is_hidden_and_a_secret(
    url: str, shown: str, secrets: tuple[str, ...]
) -> None:
    """Each form libpq takes a password in is masked; the values are what logs never print
    in the URL's text and decoded."""
    assert masked_url(url) == shown
    assert url_secrets(url) == secrets
