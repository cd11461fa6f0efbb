"""The demo payment provider over real HTTP on loopback: one charge per key, a full ledger.

Every test talks to a real server (port 0) with ``requests``; the ledger file lives in
``tmp_path``, so restarting on the same file and reading it from another connection are
tested as they happen in the demo.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests

from devkit.demo import ledger_cli
from devkit.demo.errors import PortInUse
from devkit.demo.ledger import Ledger
from devkit.demo.provider import REPLAYED_HEADER
from devkit.demo.provider_server import RunningProvider, serve, start_in_thread
from tests.integration import wait_until

TIMEOUT_S = 10.0
DANA_REFUND: dict[str, Any] = {"order_id": 1042, "amount_cents": 4999}


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    """The provider's ledger file."""
    return tmp_path / "ledger.db"


@pytest.fixture
def provider(ledger_path: Path) -> Iterator[RunningProvider]:
    """A provider serving on a free loopback port, stopped after the test."""
    with start_in_thread(ledger_path) as running:
        yield running


def refund(url: str, key: str | None, body: Any = None) -> requests.Response:
    """POST a refund (Dana's full order unless ``body`` says otherwise) under ``key``."""
    headers = {} if key is None else {"Idempotency-Key": key}
    payload = DANA_REFUND if body is None else body
    return requests.post(f"{url}/v1/refunds", json=payload, headers=headers, timeout=TIMEOUT_S)


def email(url: str, dedupe_id: str, subject: str = "Your refund") -> requests.Response:
    """POST an email to Dana with ``dedupe_id``."""
    body = {
        "to": "dana@example.com",
        "subject": subject,
        "body": "Refunded.",
        "dedupe_id": dedupe_id,
    }
    return requests.post(f"{url}/v1/emails", json=body, timeout=TIMEOUT_S)


def ledger(url: str) -> list[dict[str, Any]]:
    """Return ``GET /ledger``."""
    response = requests.get(f"{url}/ledger", timeout=TIMEOUT_S)
    assert response.status_code == 200
    entries: list[dict[str, Any]] = response.json()
    return entries


def test_orders_are_fixtures_and_unknown_ones_are_404(provider: RunningProvider) -> None:
    """Order 1042 is Dana's delivered $49.99 order; an unknown order is a JSON 404."""
    found = requests.get(f"{provider.url}/v1/orders/1042", timeout=TIMEOUT_S)
    missing = requests.get(f"{provider.url}/v1/orders/9999", timeout=TIMEOUT_S)

    assert found.status_code == 200
    order = found.json()
    assert order["customer"] == {"name": "Dana Example", "email": "dana@example.com"}
    assert (order["amount_cents"], order["currency"], order["status"]) == (4999, "USD", "delivered")
    assert requests.get(f"{provider.url}/v1/orders/1043", timeout=TIMEOUT_S).ok
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "not_found"


def test_an_order_changed_by_patch_is_what_later_requests_see(provider: RunningProvider) -> None:
    """PATCH changes an order's currency for lookups and refunds; unknown fields, bad values
    and unknown orders are refused and change nothing."""
    url = f"{provider.url}/v1/orders/1042"
    changed = requests.patch(url, json={"currency": "eur"}, timeout=TIMEOUT_S)
    refused = [
        requests.patch(url, json={"id": "7"}, timeout=TIMEOUT_S),
        requests.patch(url, json={"amount_cents": -1}, timeout=TIMEOUT_S),
        requests.patch(f"{provider.url}/v1/orders/9999", json={}, timeout=TIMEOUT_S),
    ]

    assert (changed.status_code, changed.json()["currency"]) == (200, "EUR")
    assert [r.status_code for r in refused] == [400, 400, 404]
    order = requests.get(url, timeout=TIMEOUT_S).json()
    assert (order["amount_cents"], order["currency"]) == (4999, "EUR")
    assert refund(provider.url, "key-eur").json()["currency"] == "EUR"


def test_first_refund_creates_a_charge(provider: RunningProvider) -> None:
    """A new key creates one succeeded refund and answers 201 without the replay header."""
    response = refund(provider.url, "key-1")

    assert response.status_code == 201
    body = response.json()
    assert body["id"].startswith("re_")
    assert (body["order_id"], body["amount_cents"], body["currency"], body["status"]) == (
        "1042",
        4999,
        "USD",
        "succeeded",
    )
    assert REPLAYED_HEADER not in response.headers
    assert [c.id for c in provider.ledger.charges()] == [body["id"]]


def test_repeats_replay_the_same_refund(provider: RunningProvider) -> None:
    """The same key and body again answer 200, the same refund and Idempotent-Replayed."""
    first = refund(provider.url, "key-1").json()
    repeats = [refund(provider.url, "key-1") for _ in range(5)]

    assert {r.status_code for r in repeats} == {200}
    assert all(r.headers[REPLAYED_HEADER] == "true" for r in repeats)
    assert all(r.json() == first for r in repeats)
    assert len(provider.ledger.charges()) == 1


def test_same_key_with_another_body_is_409(provider: RunningProvider) -> None:
    """Reusing a key for a different refund is a conflict and changes nothing."""
    first = refund(provider.url, "key-1").json()
    conflict = refund(provider.url, "key-1", {"order_id": 1042, "amount_cents": 100})

    assert conflict.status_code == 409
    assert conflict.json()["error"]["type"] == "idempotency_conflict"
    assert [c.id for c in provider.ledger.charges()] == [first["id"]]
    assert provider.ledger.charges()[0].amount_cents == 4999


@pytest.mark.parametrize("key", [None, ""])
def test_refund_without_a_key_is_400(provider: RunningProvider, key: str | None) -> None:
    """A refund without an Idempotency-Key (or with an empty one) is refused."""
    response = refund(provider.url, key)

    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request"
    assert "Idempotency-Key" in response.json()["error"]["message"]
    assert provider.ledger.charges() == []


def test_refund_above_the_order_amount_is_422(provider: RunningProvider) -> None:
    """Refunding more than the order cost is unprocessable and creates no charge."""
    response = refund(provider.url, "key-1", {"order_id": 1042, "amount_cents": 5000})

    assert response.status_code == 422
    assert response.json()["error"]["type"] == "amount_too_large"
    assert provider.ledger.charges() == []


def test_concurrent_requests_with_one_key_create_exactly_one_charge(
    provider: RunningProvider,
) -> None:
    """Threads sending the same key at once get one 201, the rest replays of the same refund."""
    threads = 32
    barrier = threading.Barrier(threads)

    def send(_: int) -> requests.Response:
        barrier.wait(timeout=TIMEOUT_S)
        return refund(provider.url, "hammered")

    with ThreadPoolExecutor(threads) as pool:
        responses = list(pool.map(send, range(threads)))

    assert sorted(r.status_code for r in responses) == [200] * (threads - 1) + [201]
    assert len({r.json()["id"] for r in responses}) == 1
    assert len(provider.ledger.charges()) == 1
    created = [e for e in ledger(provider.url) if e["created_charge"]]
    assert len(created) == 1


def test_verify_finds_the_refund_by_key(provider: RunningProvider) -> None:
    """GET /v1/refunds?idempotency_key=K returns the refund made with K, else 404."""
    made = refund(provider.url, "key-1").json()
    url = f"{provider.url}/v1/refunds"

    found = requests.get(url, params={"idempotency_key": "key-1"}, timeout=TIMEOUT_S)
    missing = requests.get(url, params={"idempotency_key": "key-2"}, timeout=TIMEOUT_S)
    no_key = requests.get(url, timeout=TIMEOUT_S)

    assert (found.status_code, found.json()) == (200, made)
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "not_found"
    assert no_key.status_code == 400


def test_emails_are_sent_once_per_dedupe_id(provider: RunningProvider) -> None:
    """The first email is 201; any later one with its dedupe_id replays the first (200)."""
    first = email(provider.url, "refund-1042")
    again = email(provider.url, "refund-1042", subject="Reworded by the model")
    other = email(provider.url, "refund-1043")

    assert (first.status_code, again.status_code, other.status_code) == (201, 200, 201)
    assert again.headers[REPLAYED_HEADER] == "true"
    assert again.json() == first.json()
    assert [e.dedupe_id for e in provider.ledger.emails()] == ["refund-1042", "refund-1043"]
    assert provider.ledger.charges() == []


def test_ledger_lists_every_request_including_rejected_ones(provider: RunningProvider) -> None:
    """Each request is listed in order with its key, status and whether it created a charge."""
    url = provider.url
    requests.get(f"{url}/v1/orders/1042", timeout=TIMEOUT_S)
    requests.get(f"{url}/v1/orders/9999", timeout=TIMEOUT_S)
    refund(url, None)
    refund(url, "k")
    refund(url, "k")
    refund(url, "k", {"order_id": 1042, "amount_cents": 1})
    refund(url, "big", {"order_id": 1042, "amount_cents": 999_999})
    requests.post(
        f"{url}/v1/refunds",
        data=b"{not json",
        headers={"Idempotency-Key": "bad"},
        timeout=TIMEOUT_S,
    )
    requests.get(f"{url}/v1/refunds", params={"idempotency_key": "k"}, timeout=TIMEOUT_S)
    email(url, "mail-1")
    requests.delete(f"{url}/v1/refunds", timeout=TIMEOUT_S)
    requests.get(f"{url}/nowhere", timeout=TIMEOUT_S)

    entries = ledger(url)

    assert [e["seq"] for e in entries] == list(range(1, 13))
    assert [(e["method"], e["status"], e["idempotency_key"]) for e in entries] == [
        ("GET", 200, None),
        ("GET", 404, None),
        ("POST", 400, None),
        ("POST", 201, "k"),
        ("POST", 200, "k"),
        ("POST", 409, "k"),
        ("POST", 422, "big"),
        ("POST", 400, "bad"),
        ("GET", 200, None),
        ("POST", 201, "mail-1"),
        ("DELETE", 405, None),
        ("GET", 404, None),
    ]
    assert [e["created_charge"] for e in entries] == [False] * 3 + [True] + [False] * 8
    assert entries[3]["charge_id"] == entries[4]["charge_id"] is not None
    assert entries[3]["body"] == DANA_REFUND
    assert entries[7]["body"] == "{not json"
    assert entries[8]["path"] == "/v1/refunds?idempotency_key=k"
    assert entries[9]["email_id"].startswith("em_")
    assert len(ledger(url)) == 12, "reading the ledger is not itself recorded"


def test_ledger_survives_a_restart(ledger_path: Path) -> None:
    """A new provider on the same file keeps the ledger and still refuses a second charge."""
    with start_in_thread(ledger_path) as first:
        made = refund(first.url, "key-1").json()

    with start_in_thread(ledger_path) as second:
        replay = refund(second.url, "key-1")
        entries = ledger(second.url)

    assert (replay.status_code, replay.json()) == (200, made)
    assert [(e["seq"], e["status"], e["created_charge"]) for e in entries] == [
        (1, 201, True),
        (2, 200, False),
    ]
    with Ledger(ledger_path) as reopened:
        assert [c.id for c in reopened.charges()] == [made["id"]]


def test_ledger_is_readable_from_another_connection_while_serving(
    provider: RunningProvider, ledger_path: Path
) -> None:
    """Another reader of the SQLite file sees committed charges while the provider runs."""
    made = refund(provider.url, "key-1").json()

    with Ledger(ledger_path) as reader:
        assert [c.id for c in reader.charges()] == [made["id"]]
        assert reader.charge_for_key("key-1") is not None


def test_a_taken_port_raises_port_in_use(provider: RunningProvider, tmp_path: Path) -> None:
    """Starting on a port that is already listening fails with a clear error."""
    with pytest.raises(PortInUse, match=rf"port {provider.port} .* already in use"):
        start_in_thread(tmp_path / "other.db", port=provider.port)


def test_cli_on_a_taken_port_prints_one_line(
    provider: RunningProvider, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``demo provider`` on a taken port exits 1 with a single ``signoff: error:`` line."""
    argv = [
        "demo",
        "provider",
        "--port",
        str(provider.port),
        "--ledger",
        str(tmp_path / "other.db"),
    ]

    code = ledger_cli.main(argv)

    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith(f"signoff: error: port {provider.port} ")
    assert err.count("\n") == 1


def test_pause_holds_the_response_after_the_charge_until_the_file_is_deleted(
    ledger_path: Path, tmp_path: Path
) -> None:
    """Armed, the first new charge is committed, PATH appears, and the answer waits for it."""
    pause = tmp_path / "paused"
    arm = tmp_path / "paused.arm"
    arm.touch()
    with (
        start_in_thread(ledger_path, pause_after_charge_file=pause) as running,
        ThreadPoolExecutor(1) as pool,
    ):
        pending = pool.submit(refund, running.url, "key-1")
        wait_until(pause.exists, timeout=TIMEOUT_S, what="the provider to pause")

        signalled = json.loads(pause.read_text(encoding="utf-8"))
        with Ledger(ledger_path) as reader:
            assert [c.id for c in reader.charges()] == [signalled["charge_id"]]
        assert not pending.done()
        assert not arm.exists()
        pause.unlink()
        answered = pending.result(timeout=TIMEOUT_S)
        later = refund(running.url, "key-2")

    assert (answered.status_code, answered.json()["id"]) == (201, signalled["charge_id"])
    assert later.status_code == 201
    assert not pause.exists()


def test_pause_needs_arming_and_stop_releases_it(ledger_path: Path, tmp_path: Path) -> None:
    """Unarmed, nothing pauses; a paused response is released when the provider stops."""
    pause = tmp_path / "paused"
    running = start_in_thread(ledger_path, pause_after_charge_file=pause)
    try:
        assert refund(running.url, "key-1").status_code == 201
        assert not pause.exists()
        (tmp_path / "paused.arm").touch()
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(refund, running.url, "key-2")
            wait_until(pause.exists, timeout=TIMEOUT_S, what="the provider to pause")
            running.stop()
            assert pending.result(timeout=TIMEOUT_S).status_code == 201
    finally:
        running.stop()


def test_cli_ledger_prints_a_table_and_stable_json(
    provider: RunningProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    """``demo ledger`` shows one row per request; ``--json`` is the endpoint's list, sorted."""
    made = refund(provider.url, "key-1").json()
    refund(provider.url, "key-1")
    refund(provider.url, None)
    parser = argparse.ArgumentParser()
    ledger_cli.add_demo_commands(parser.add_subparsers(), provider_url=provider.url)

    table_args = parser.parse_args(["demo", "ledger"])
    assert table_args.handler(table_args, object()) == 0
    table = capsys.readouterr().out.splitlines()
    assert ledger_cli.main(["demo", "ledger", "--json", "--url", provider.url]) == 0
    out = capsys.readouterr().out

    assert table[0].split() == [
        "SEQ",
        "TIME",
        "(UTC)",
        "METHOD",
        "PATH",
        "IDEMPOTENCY",
        "KEY",
        "STATUS",
        "CHARGE",
    ]
    assert table[1].split()[3:] == ["POST", "/v1/refunds", "key-1", "201", "yes", made["id"]]
    assert table[2].split()[3:] == ["POST", "/v1/refunds", "key-1", "200", "no"]
    assert table[3].split()[3:] == ["POST", "/v1/refunds", "-", "400", "no"]
    assert table[4] == "3 request(s), 1 charge(s) created"
    assert json.loads(out) == ledger(provider.url)
    assert out.strip() == json.dumps(json.loads(out), ensure_ascii=False, sort_keys=True)


def test_cli_ledger_without_a_provider_fails_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``demo ledger`` against a stopped provider exits 1 and says what to start."""
    with start_in_thread(tmp_path / "gone.db") as gone:
        url = gone.url

    code = ledger_cli.main(["demo", "ledger", "--url", url])

    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith(f"signoff: error: cannot reach the demo provider at {url}")
    assert err.count("\n") == 1


def test_serve_stops_when_asked(ledger_path: Path) -> None:
    """``serve`` blocks until its stop event is set, then closes cleanly."""
    stop = threading.Event()
    lines: list[str] = []
    thread = threading.Thread(
        target=serve, args=(0, ledger_path), kwargs={"stop": stop, "log": lines.append}
    )
    thread.start()
    try:
        banner = wait_until(lambda: lines[:1], timeout=TIMEOUT_S, what="the banner")[0]
        url = re.search(r"http://\S+", banner)
        assert url is not None
        assert requests.get(f"{url.group()}/v1/orders/1042", timeout=TIMEOUT_S).ok
    finally:
        stop.set()
        thread.join(timeout=TIMEOUT_S)
    assert not thread.is_alive()
    assert any("GET /v1/orders/1042" in line and "-> 200" in line for line in lines)


def test_provider_process_exits_0_on_sigterm(ledger_path: Path) -> None:
    """The ``demo provider`` command stops cleanly on SIGTERM and its ledger is kept."""
    command = [
        sys.executable,
        "-m",
        "devkit.demo.ledger_cli",
        "demo",
        "provider",
        "--port",
        "0",
        "--ledger",
        str(ledger_path),
    ]
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True) as process:
        try:
            assert process.stderr is not None
            banner = process.stderr.readline()
            url = re.search(r"http://\S+", banner)
            assert url is not None, banner
            assert refund(url.group(), "key-1").status_code == 201
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=TIMEOUT_S) == 0
        finally:
            if process.poll() is None:
                process.kill()
    with Ledger(ledger_path) as reopened:
        assert len(reopened.charges()) == 1
