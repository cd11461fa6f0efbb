"""Reading a process's operator endpoints (``/healthz``, ``/readyz``, ``/metrics``) in tests."""

from __future__ import annotations

from typing import Any

import requests
from prometheus_client.parser import text_string_to_metric_families

HTTP_TIMEOUT_S = 5.0


def get(port: int, path: str) -> requests.Response:
    """GET ``path`` from the process listening on ``port`` (no proxy)."""
    with requests.Session() as session:
        session.trust_env = False
        return session.get(f"http://127.0.0.1:{port}{path}", timeout=HTTP_TIMEOUT_S)


def probe(port: int, path: str) -> tuple[int, dict[str, Any]] | None:
    """Return the status and JSON body of a health endpoint, or None while it cannot answer."""
    try:
        response = get(port, path)
    except requests.RequestException:
        return None
    return response.status_code, response.json()


def metrics(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Return every sample of ``/metrics`` by name and labels."""
    response = get(port, "/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def sample(
    found: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float | None:
    """Return the value of one sample, or None if it is not there."""
    return found.get((name, frozenset(labels.items())))
