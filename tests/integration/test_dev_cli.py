"""``signoff dev`` as a person runs it: the port check, the worker child, clean stops."""

from __future__ import annotations

import json
import os
import re
import selectors
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from tests.integration import REPO_ROOT, run_cli, signoff_command, wait_until

APPROVE = "approval.approve"
TASK = "/agent refund order 1042 and email the customer"
URL_LINE = re.compile(r"open (http://127\.0\.0\.1:\d+/) ")
START_TIMEOUT_S = 30.0


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIGNOFF_", "SLACK_"))}
    python_path = [str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])]
    return env | {
        "PYTHONPATH": os.pathsep.join(python_path),
        "PYTHONUNBUFFERED": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        "SIGNOFF_LEASE_TTL_SECONDS": "2",
    }


@contextmanager
def _dev(tmp_path: Path, port: int = 0) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Start ``signoff dev --port PORT``; yield it and its URL; kill it if the test did not."""
    log = (tmp_path / "dev.log").open("a")
    proc = subprocess.Popen(
        [*signoff_command(), "dev", "--port", str(port), "--dir", "dev"],
        env=_env(),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    try:
        yield proc, _url(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)
        log.close()


def _url(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if selector.select(timeout=deadline - time.monotonic()):
                line = proc.stdout.readline()
                if not line:
                    break
                found = URL_LINE.search(line)
                if found:
                    return found.group(1)
    raise AssertionError(f"signoff dev printed no URL (exit {proc.poll()})")


def _get(url: str) -> Any:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as response:
        body = response.read()
    return json.loads(body) if "/ui/" in url else body.decode()


def _post(url: str, body: dict[str, Any]) -> Any:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with opener.open(request, timeout=10) as response:
        return json.loads(response.read())


def _cards(url: str) -> list[dict[str, Any]]:
    """The messages in the first run's thread that still offer Approve, as Rita sees them."""
    state = _get(url + "ui/state?user=U_RITA")
    roots = [m for m in state["messages"] if m["reply_count"]]
    if not roots:
        return []
    thread = _get(url + f"ui/state?user=U_RITA&channel={state['channel']}&thread={roots[0]['ts']}")[
        "thread"
    ]
    return [m for m in thread["replies"] if APPROVE in json.dumps(m["blocks"])]


def _running_worker(url: str, restarts: int = 0) -> dict[str, Any]:
    """Wait until the dev panel reports a live worker child restarted ``restarts`` times."""

    def probe() -> dict[str, Any] | None:
        status: dict[str, Any] = _get(url + "ui/panel")["worker"]
        return status if status["alive"] and status["restarts"] == restarts else None

    return wait_until(probe, timeout=20, what=f"a worker child (restarts {restarts})")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _port_open(url: str) -> bool:
    port = int(url.rstrip("/").rsplit(":", 1)[1])
    with closing(socket.socket()) as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_dev_refuses_a_port_that_is_taken(tmp_path: Path) -> None:
    """A taken port: exit 2, one line saying so, and nothing started or created."""
    with closing(socket.socket()) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_cli(_env(), "dev", "--port", str(port), "--dir", str(tmp_path / "dev"))
    assert done.returncode == 2
    assert done.stderr == (
        f"signoff: error: port {port} on 127.0.0.1 is already in use; choose another with --port\n"
    )
    assert done.stdout == ""
    assert not (tmp_path / "dev").exists()


def test_dev_serves_the_page_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    """SIGTERM: exit 0, the worker child gone, the port closed, the database file kept."""
    with _dev(tmp_path) as (proc, url):
        assert '<script type="module" src="/static/app.js">' in _get(url)
        assert [p["id"] for p in _get(url + "ui/bootstrap")["personas"]] == [
            "U_RITA",
            "U_DANA",
            "U_OMAR",
            "U_EVE",
        ]
        worker = _running_worker(url)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert _gone(worker["pid"])
        assert not _port_open(url)
    assert (tmp_path / "dev" / "signoff.db").exists()


def test_dev_restarts_a_dead_worker_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    """The worker child SIGKILLed from outside is restarted; Ctrl-C (SIGINT) stops it all."""
    with _dev(tmp_path) as (proc, url):
        first = _running_worker(url)
        os.kill(first["pid"], signal.SIGKILL)
        second = _running_worker(url, restarts=1)
        assert second["pid"] != first["pid"]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
        assert _gone(second["pid"])


def test_dev_restarted_on_its_port_keeps_the_cards_and_they_still_work(tmp_path: Path) -> None:
    """Ctrl-C then a restart on the same port: it starts, shows the cards, and a click approves."""
    with _dev(tmp_path) as (proc, url):
        channel = _get(url + "ui/state?user=U_RITA")["channel"]
        assert _post(url + "ui/command", {"user": "U_RITA", "channel": channel, "text": TASK})["ok"]
        cards = wait_until(
            lambda: _cards(url) if len(_cards(url)) == 1 else None,
            timeout=30,
            what="the refund's approval card",
        )
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
    port = int(url.rstrip("/").rsplit(":", 1)[1])
    with _dev(tmp_path, port) as (proc, again):
        assert again == url
        assert [c["ts"] for c in _cards(url)] == [c["ts"] for c in cards]
        block = next(b for b in cards[0]["blocks"] if APPROVE in json.dumps(b))
        assert _post(
            url + "ui/click",
            {
                "user": "U_DANA",
                "channel": channel,
                "ts": cards[0]["ts"],
                "action_id": APPROVE,
                "block_id": block["block_id"],
            },
        )["ok"]
        wait_until(
            lambda: cards[0]["ts"] not in [c["ts"] for c in _cards(url)] or None,
            timeout=30,
            what="the approved card updated in place",
        )
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0


def _held_connection(url: str) -> socket.socket:
    """A browser's connection: one page request answered, the socket left open on our side."""
    port = int(url.rstrip("/").rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    assert sock.recv(64).startswith(b"HTTP/1.")
    return sock


def test_dev_stopped_with_ctrl_c_while_a_browser_is_connected_restarts_at_once(
    tmp_path: Path,
) -> None:
    """Ctrl-C with a browser's connection still open, then at once the same port: it starts."""
    with _dev(tmp_path) as (proc, url), closing(_held_connection(url)):
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        with _dev(tmp_path, port) as (again, second_url):
            assert second_url == url
            assert '<script type="module" src="/static/app.js">' in _get(url)
            again.send_signal(signal.SIGINT)
            assert again.wait(30) == 0
