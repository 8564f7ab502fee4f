"""The metrics endpoint: a run's figures scraped over HTTP, exact buckets, bad addresses refused."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from softrt.analysis import RunStats
from softrt.errors import ConfigError
from softrt.ipc.layout import RECORD_DTYPE
from softrt.metrics import MetricsServer, period_bounds_ns, view_of
from softrt.schema.config import RunConfig
from softrt.session.run import Progress

PERIOD = 250_000


def _records(n=40_000, seed=5):
    rng = np.random.default_rng(seed)
    rec = np.zeros(n, RECORD_DTYPE)
    period = rng.normal(PERIOD, 2_000, n).astype(np.int64)
    period[rng.choice(n, 40, replace=False)] = rng.integers(270_000, 3_000_000, 40)  # late cycles
    rec["seq"] = np.arange(n)
    rec["detect_ns"] = 10**12 + np.cumsum(period)
    rec["edge_ns"] = rec["detect_ns"] - rng.integers(200, 30_000, n)
    rec["done_ns"] = rec["detect_ns"] + 4_000
    rec["missed"][[100, 200]] = [1, 3]
    return rec


def _progress(rec, **kw):
    stats = RunStats(PERIOD).add(rec)
    return Progress(elapsed_s=10.0, duration_s=60.0, cycles=rec.size, stats=stats, snapshot=stats.snapshot(),
                    run_id="20261130-120000-rig-01ab", config=RunConfig(cpu=1, scenario="tuned"), **kw)


def scrape(url: str) -> dict:
    """{series name: [(labels, value)]} of one scrape (histograms by sample name: _bucket, _count…)."""
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    out: dict = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def test_a_scrape_serves_the_runs_figures_with_exact_buckets():
    rec = _records()
    periods = np.diff(rec["detect_ns"])
    latency = rec["detect_ns"] - rec["edge_ns"]
    p = _progress(rec, ring_overflows=7)
    with MetricsServer("127.0.0.1", 0) as server:
        server.publish(view_of(p, "rig-01"))
        got = scrape(server.url)
    ident = {"host": "rig-01", "scenario": "tuned", "run_id": "20261130-120000-rig-01ab", "rt_cpu": "1"}
    assert got["softrt_cycles_total"] == [(ident, rec.size)]
    assert got["softrt_missed_updates_total"] == [(ident, 4)]
    assert got["softrt_ring_overflows_total"] == [(ident, 7)]
    assert got["softrt_late_bound_seconds"][0][1] == 270e-6
    late = (latency > 20_000) | (rec["missed"] > 0)  # softrt's one rule (analysis.cycles)
    late[1:] |= periods > 270_000
    assert got["softrt_late_cycles_total"][0][1] == np.count_nonzero(late) == p.stats.counters["late_cycles"]
    assert got["softrt_period_max_seconds"][0][1] == periods.max() / 1e9
    buckets = {float(labels["le"]): v for labels, v in got["softrt_period_seconds_bucket"]}
    assert sorted(buckets)[:-1] == [b / 1e9 for b in period_bounds_ns(PERIOD)]
    for le, count in buckets.items():
        assert count == np.count_nonzero(periods <= round(le * 1e9)) if le != float("inf") else periods.size
    assert got["softrt_period_seconds_count"][0][1] == periods.size
    assert got["softrt_period_seconds_sum"][0][1] == pytest.approx(periods.sum() / 1e9)
    for labels, count in got["softrt_latency_seconds_bucket"]:
        le = float(labels["le"])
        assert count == (np.count_nonzero(latency <= round(le * 1e9)) if le != float("inf") else latency.size)
    q = {labels["quantile"]: v for labels, v in got["softrt_period_quantile_seconds"]}
    assert q["0.99"] == pytest.approx(np.percentile(periods, 99) / 1e9, rel=2**-10)
    state = {labels["state"]: v for labels, v in got["softrt_run_state"]}
    assert state == {"running": 1.0, "complete": 0.0, "partial": 0.0, "failed": 0.0}
    assert "process_cpu_seconds_total" in got  # the supervisor's own cost, for long runs


def test_a_finished_run_keeps_its_series_beside_the_next_one():
    rec = _records()
    with MetricsServer("127.0.0.1", 0) as server:
        first = _progress(rec)
        server.publish(view_of(first, "rig-01", state="partial"))
        second = _progress(rec[:1000])
        second.run_id = "20261130-120100-rig-02cd"
        server.publish(view_of(second, "rig-01"))
        server.publish(view_of(second, "rig-01"))  # a newer copy replaces the older one
        got = scrape(server.url)
    cycles = {labels["run_id"]: v for labels, v in got["softrt_cycles_total"]}
    assert cycles == {"20261130-120000-rig-01ab": rec.size, "20261130-120100-rig-02cd": 1000}
    partial = {labels["run_id"]: v for labels, v in got["softrt_run_state"] if labels["state"] == "partial"}
    assert partial == {"20261130-120000-rig-01ab": 1.0, "20261130-120100-rig-02cd": 0.0}


def test_the_endpoint_stops_when_closed():
    server = MetricsServer("127.0.0.1", 0)
    url = server.url
    scrape(url)
    server.close()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=2)


def test_a_port_that_is_taken_is_bad_input():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=f"cannot serve metrics on 127.0.0.1 port {port}: .*in use"):
            MetricsServer("127.0.0.1", port)


@pytest.mark.parametrize("addr", ["no-such-host.invalid", "203.0.113.7", "300.1.1.1"])
def test_an_address_that_is_not_this_machines_is_bad_input(addr):
    with pytest.raises(ConfigError, match=f"cannot serve metrics on {addr}"):
        MetricsServer(addr, 0)
