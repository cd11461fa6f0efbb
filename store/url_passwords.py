"""The secrets a database URL can carry, and the URL with them hidden.

A password can be given in the URL's user part (``postgresql://bob:pw@host/db``) or, as
libpq also takes it, as a query parameter (``?password=pw``, ``?sslpassword=pw``). Both are
hidden wherever a URL is shown, and both are among the values the logs never print.
Without SQLAlchemy: settings read this in every command.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_plus

_USER_PASSWORD = re.compile(r"(://[^:/@]*:)[^@/]*@")
_QUERY_PASSWORD = re.compile(r"([?&][^=&#]*password[^=&#]*=)[^&#]*", re.IGNORECASE)


def masked_url(url: str) -> str:
    """``url`` with every password it carries shown as ``***``; text that is no URL at all
    (where a password could be written any way) is not shown."""
    if "://" not in url:
        return "(the configured database URL)"
    return _QUERY_PASSWORD.sub(r"\1***", _USER_PASSWORD.sub(r"\1***@", url))


def url_secrets(url: str) -> tuple[str, ...]:
    """The passwords ``url`` carries (in its user part, or as query parameters), each as
    written in the URL and as it reads once decoded (``p%40ss`` and ``p@ss``)."""
    raw = []
    user = _USER_PASSWORD.search(url)
    if user is not None:
        raw.append(url[user.end(1) : user.end() - 1])
    query = url.partition("?")[2].partition("#")[0]
    for pair in query.split("&"):
        name, _, value = pair.partition("=")
        if "password" in unquote_plus(name).lower():
            raw.append(value)
    found: list[str] = []
    for text in raw:
        for form in (text, unquote_plus(text)):
            if form and form not in found:
                found.append(form)
    return tuple(found)
