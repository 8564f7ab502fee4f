"""The metrics endpoint under a slowloris: idle and trickling clients on 127.0.0.1 neither block a
scrape nor hold a connection past the read timeout; beyond the bound on open connections the
longest idle one is closed."""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

from softrt.metrics import MetricsServer
from softrt.metrics.http import BACKLOG

TIMEOUT_S = 0.6


def _idle(port: int, n: int, first_bytes: bytes = b"") -> list[socket.socket]:
    out = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        if first_bytes:
            s.sendall(first_bytes)
        out.append(s)
    return out


def _closed_by_server(s: socket.socket, within_s: float) -> bool:
    """True when the server closed *s* (EOF or reset) within *within_s*."""
    s.settimeout(within_s)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def _scrape_s(url: str) -> float:
    """Seconds a whole scrape took (its answer checked)."""
    t0 = time.monotonic()
    with urllib.request.urlopen(url, timeout=5) as reply:
        assert reply.status == 200 and b"softrt_info" in reply.read()
    return time.monotonic() - t0


@pytest.fixture
def server():
    with MetricsServer(
        "127.0.0.1", 0, info=("test", "6.18", "PREEMPT_DYNAMIC"), read_timeout_s=TIMEOUT_S, max_connections=24
    ) as s:
        yield s


def test_a_scrape_is_answered_while_idle_clients_hold_connections(server):
    idle = _idle(server.port, 10) + _idle(server.port, 10, b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
    try:
        deadline = time.monotonic() + 2
        while server.http.open < 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.http.open == 20  # all held open by the server, none answered (no full request head)
        for _ in range(3):
            assert _scrape_s(server.url) < TIMEOUT_S  # answered at once, not after the idle ones
        # The idle clients are dropped once the read timeout has passed, the half-sent ones too.
        assert all(_closed_by_server(s, TIMEOUT_S + 2.0) for s in idle)
        assert server.http.timed_out == 20 and server.http.open == 0
    finally:
        for s in idle:
            s.close()


def test_a_trickling_client_is_dropped_at_the_timeout_however_often_it_sends(server):
    s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    stop = threading.Event()

    def trickle():  # one byte every 0.1 s: each read succeeds, the request head never ends
        for ch in b"GET /metrics HTTP/1.1\r\nX-Slow: " + b"a" * 1000:
            if stop.wait(0.1):
                return
            try:
                s.send(bytes([ch]))
            except OSError:
                return

    t = threading.Thread(target=trickle, daemon=True)
    t0 = time.monotonic()
    t.start()
    try:
        assert _closed_by_server(s, TIMEOUT_S + 2.0)
        assert time.monotonic() - t0 < TIMEOUT_S + 1.0
    finally:
        stop.set()
        t.join()
        s.close()


def test_beyond_the_bound_the_longest_idle_connection_makes_room(server):
    clients = _idle(server.port, 30)  # the bound is 24
    try:
        assert all(_closed_by_server(s, 2.0) for s in clients[:6])  # the six oldest, at once
        assert server.http.evicted == 6 and server.http.open == 24
        assert _scrape_s(server.url) < TIMEOUT_S  # a scrape gets in all the same (pushing out one more)
        assert server.http.evicted == 7
        assert all(_closed_by_server(s, TIMEOUT_S + 2.0) for s in clients[6:])
        assert server.http.open == 0
    finally:
        for s in clients:
            s.close()


def test_only_get_of_metrics_is_served(server):
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(server.url.replace("/metrics", "/other"), timeout=5)
    assert err.value.code == 404
    request = urllib.request.Request(server.url, data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=5)
    assert err.value.code == 405
    head = urllib.request.urlopen(urllib.request.Request(server.url, method="HEAD"), timeout=5)
    assert head.status == 200 and head.read() == b"" and int(head.headers["Content-Length"]) > 0


@pytest.mark.skipif(shutil.which("ss") is None, reason="ss (iproute2) is not installed")
def test_the_listen_backlog_is_a_normal_one(server):
    # For a listening socket ss shows the backlog the kernel uses as Send-Q (min(backlog, somaxconn)).
    out = subprocess.run(
        ["ss", "-Hltn", f"sport = :{server.port}"], capture_output=True, text=True, check=True
    ).stdout.split()
    somaxconn = int(open("/proc/sys/net/core/somaxconn").read())
    assert int(out[2]) == min(BACKLOG, somaxconn) >= 128
