#!/usr/bin/env python3
"""The metrics endpoint under a slowloris, side by side with prometheus_client's own server
(issue 22, item 6). Everything stays on 127.0.0.1 and ends by itself.

For each endpoint: K idle clients connect and send nothing (or half a request head); then the
bench measures how long a normal scrape takes, how many complete scrapes a second one client gets
for 2 s, and after ``--hold`` seconds how many idle clients the server still keeps open.

    python bench/metrics_endpoint.py                    # K = 50 idle clients, hold 7 s
    python bench/metrics_endpoint.py --idle 200 --json

Results: docs/metrics.md ("The endpoint's bounds").
"""

from __future__ import annotations

import argparse
import json
import socket
import time
import urllib.request

from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server

from softrt.metrics import MetricsServer


def _scrape(url: str, timeout_s: float) -> float | None:
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as reply:
            reply.read()
    except OSError:
        return None
    return time.monotonic() - t0


def _still_open(clients: list[socket.socket]) -> int:
    n = 0
    for s in clients:
        s.setblocking(False)
        try:
            n += s.recv(1) != b""  # data: not expected; EOF: the server closed it
        except BlockingIOError:
            n += 1  # nothing to read and no EOF: still held
        except OSError:
            pass
    return n


def measure(port: int, idle: int, hold_s: float) -> dict:
    url = f"http://127.0.0.1:{port}/metrics"
    clients = []
    t0 = time.monotonic()
    for k in range(idle):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
        except OSError:
            break
        if k % 2:
            s.sendall(b"GET /metrics HTTP/1.1\r\n")  # half a request head
        clients.append(s)
    connect_s = time.monotonic() - t0
    first = _scrape(url, 10.0)
    count, end = 0, time.monotonic() + 2.0
    while time.monotonic() < end:
        count += _scrape(url, 2.0) is not None
    time.sleep(max(hold_s - (time.monotonic() - t0), 0.0))
    held = _still_open(clients)
    for s in clients:
        s.close()
    return {
        "idle_clients": len(clients),
        "connect_s": round(connect_s, 3),
        "scrape_s": None if first is None else round(first, 4),
        "scrapes_per_s": count / 2.0,
        f"idle_still_open_after_{hold_s:g}_s": held,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--idle", type=int, default=50)
    ap.add_argument("--hold", type=float, default=7.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    out = {}
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)  # the same content as softrt's endpoint with no run yet
    httpd, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        out["prometheus_client.start_http_server"] = measure(httpd.server_address[1], args.idle, args.hold)
    finally:
        httpd.shutdown()
        httpd.server_close()
    with MetricsServer("127.0.0.1", 0) as server:
        out["softrt (metrics/http.py)"] = measure(server.port, args.idle, args.hold)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for name, r in out.items():
        print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in r.items()))


if __name__ == "__main__":
    main()
