"""The metrics endpoint: a run's figures scraped over HTTP, exact buckets, bad addresses refused."""

from __future__ import annotations

import os
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
from softrt.metrics.exporter import TOP_CULPRITS
from softrt.schema.config import RunConfig
from softrt.session.drain import Progress

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
    return Progress(
        elapsed_s=10.0,
        duration_s=60.0,
        cycles=rec.size,
        stats=stats,
        snapshot=stats.snapshot(),
        run_id="20261130-120000-rig-01ab",
        config=RunConfig(cpu=1, scenario="tuned"),
        **kw,
    )


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


def test_latency_process_and_slack_figures_and_the_info_series():
    rec = _records()
    latency = rec["detect_ns"] - rec["edge_ns"]
    process = rec["done_ns"] - rec["detect_ns"]
    slack = rec["edge_ns"][1:] - rec["done_ns"][:-1] + PERIOD  # next edge − end of work (RunStats' rule)
    p = _progress(rec)
    with MetricsServer("127.0.0.1", 0, info=("1.2.3", "6.18.0-rt", "PREEMPT_RT")) as server:
        server.publish(view_of(p, "rig-01"))
        got = scrape(server.url)
    assert got["softrt_latency_max_seconds"][0][1] == latency.max() / 1e9
    assert got["softrt_process_max_seconds"][0][1] == process.max() / 1e9
    assert got["softrt_slack_min_seconds"][0][1] == p.stats.hist["slack"].min / 1e9
    assert p.stats.hist["slack"].min <= slack.min() + PERIOD  # a real figure of the run, not a default
    for name, values in (("latency", latency), ("process", process)):
        q = {labels["quantile"]: v for labels, v in got[f"softrt_{name}_quantile_seconds"]}
        assert set(q) == {"0.5", "0.99", "0.9999"}
        assert q["0.99"] == pytest.approx(np.percentile(values, 99) / 1e9, rel=2**-9, abs=1e-9)
    ((labels, value),) = got["softrt_info"]
    assert value == 1.0
    assert {k: labels[k] for k in ("version", "kernel", "preemption", "rt_cpu")} == {
        "version": "1.2.3",
        "kernel": "6.18.0-rt",
        "preemption": "PREEMPT_RT",
        "rt_cpu": "1",
    }


def test_the_info_series_describes_this_machine_by_default():
    with MetricsServer("127.0.0.1", 0) as server:
        version, kernel, preemption = server.info
    assert kernel == os.uname().release and preemption and version


def test_culprits_are_the_largest_sources_and_their_number_is_bounded():
    rec = _records()
    table = [{"kind": "thread", "name": f"kworker/1:{k}", "total_us": 100.0 * k} for k in range(1, 16)]
    table += [
        {"kind": "kernel", "name": "local timer", "total_us": 5_000.0},
        {"kind": "thread", "name": "kworker/1:3", "total_us": 2_000.0},
    ]  # the same name again: added up
    p = _progress(rec, culprits=lambda: table)
    with MetricsServer("127.0.0.1", 0, info=("t", "k", "p")) as server:
        server.publish(view_of(p, "rig-01"))
        live = scrape(server.url)["softrt_late_seconds_total"]
        # At the end the summary's table (schema objects) replaces the live one.
        final = [type("Culprit", (), {"kind": "irq", "name": "eth0", "total_us": 1_500.0})()]
        server.publish(view_of(p, "rig-01", state="complete", culprits=final))
        ended = scrape(server.url)["softrt_late_seconds_total"]
    got = {(labels["kind"], labels["source"]): v for labels, v in live}
    assert len(got) == TOP_CULPRITS
    assert got[("kernel", "local timer")] == pytest.approx(5e-3)
    assert got[("thread", "kworker/1:3")] == pytest.approx(2.3e-3)
    assert min(got.values()) == pytest.approx(0.8e-3)  # kworker/1:15 … 8 (and 3) are kept, 7 … 1 are not
    assert [(labels["kind"], labels["source"], v) for labels, v in ended] == [("irq", "eth0", 1.5e-3)]


def test_the_live_culprits_are_the_attributions_own_sums():
    from softrt.analysis.attribution import Attributor
    from softrt.metrics.exporter import top_culprits

    from ..synthetic import WORKER_PID, synthetic_records, synthetic_trace

    rec = synthetic_records(3_000, misses=[(500, 2), (1_500, 1), (2_500, 3)])
    events, steal = synthetic_trace(rec)
    att = Attributor(period_ns=PERIOD, rt_cpu=1, worker_pid=WORKER_PID)
    att.add_steal(steal)
    att.add_events(events)
    seen = []
    for a in range(0, rec.size, 1_000):  # as the supervisor drains: the table grows
        att.add_records(rec[a : a + 1_000])
        att.advance(int(rec["done_ns"][min(a + 999, rec.size - 1)]))
        seen.append(top_culprits(att.culprit_totals()))
    final = att.finish().to_dict()
    assert seen[-1] == top_culprits(final["culprits"]) and seen[-1]
    assert len(seen[0]) < len(seen[-1]) or seen[0] != seen[-1]  # live: it moved during the run
