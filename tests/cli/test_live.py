"""What softrt shows and serves while a run goes: the live view, progress lines, the metrics endpoint."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console

from softrt.analysis import RunStats
from softrt.cli.live import PLAIN_EVERY_S, Watch, live_view
from softrt.cli.options import WatchOptions
from softrt.cli.render import progress_line
from softrt.ipc.layout import RECORD_DTYPE
from softrt.schema.config import RunConfig
from softrt.schema.summary import RunSummary
from softrt.session import interrupts
from softrt.session.drain import Progress

PERIOD = 250_000
DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def _progress(n=20_000, elapsed_s=75.0, duration_s=3600.0):
    rng = np.random.default_rng(2)
    rec = np.zeros(n, RECORD_DTYPE)
    period = rng.normal(PERIOD, 1_000, n).astype(np.int64)
    for i, late_ns in ((500, 280_000), (9_000, 1_500_000), (15_000, 600_000)):  # late cycles; 9,000 the worst
        if i < n:
            period[i] = late_ns
    rec["seq"] = np.arange(n)
    rec["detect_ns"] = 10**12 + np.cumsum(period)
    rec["edge_ns"] = rec["detect_ns"] - 2_000
    rec["done_ns"] = rec["detect_ns"] + 5_000
    rec["missed"][min(9_000, n - 1)] = 5
    stats = RunStats(PERIOD).add(rec)
    return Progress(
        elapsed_s=elapsed_s,
        duration_s=duration_s,
        cycles=n,
        stats=stats,
        snapshot=stats.snapshot(),
        run_id="20261130-120000-vm-abcd",
        config=RunConfig(cpu=1, scenario="tuned+load"),
    )


def test_live_view_shows_the_runs_figures():
    p = _progress()
    console = Console(record=True, width=100)
    console.print(live_view(p, "softrt compare"))
    text = console.export_text()
    assert "softrt compare · tuned+load · 20261130-120000-vm-abcd · CPU 1" in text
    assert "elapsed 0:01:15 of 1:00:00 (0:58:45 left)   cycles 20,000" in text
    assert "max 1,500.0 µs" in text and "missed updates 5" in text
    assert re.search(r"late cycles 3 \(period > 270\.0 µs, latency > 20\.0 µs or a miss\)", text)
    assert "worst cycle #9,000 at 0:00:02 (period 1,500.0 µs)" in text
    rows = dict(re.findall(r"^\s*(\S.*µs) +([\d,]+)", text.split("period histogram")[1], re.M))
    assert sum(int(v.replace(",", "")) for v in rows.values()) == 19_999  # every period, in one row each
    assert rows["500–1,000 µs"] == "1" and rows["1,000–5,000 µs"] == "1" and rows["275–300 µs"] == "1"
    p99, p9999 = p.stats.hist["period"].percentiles((99.0, 99.99))
    assert f"p99 {p99 / 1e3:,.1f} µs   p99.99 {p9999 / 1e3:,.1f} µs" in text


def test_live_view_before_the_first_figures():
    p = _progress()
    p.stats = RunStats(PERIOD)
    console = Console(record=True, width=100)
    console.print(live_view(p))
    text = console.export_text()
    assert "cycles 20,000" in text and "p99 -" in text and "histogram" not in text


def test_plain_lines_come_early_then_every_ten_seconds():
    err = io.StringIO()
    with Watch(Console(file=err, width=200), WatchOptions()) as watch:
        assert watch.mode == "plain"
        for elapsed in (0.2, 0.5, 1.1, 2.0, 9.9, 10.05, 15.0, 20.2, 21.0):
            p = _progress()
            p.elapsed_s = elapsed
            watch._latest[p.run_id] = p  # one run throughout (a new Progress object is a new run)
            watch.on_progress(p)
    lines = err.getvalue().splitlines()
    assert [line.split(":")[2].split(" of")[0].strip() for line in lines] == ["1", "10", "20"]
    assert all(line.startswith("softrt run: tuned+load: ") and "late cycles 3" in line for line in lines)
    assert PLAIN_EVERY_S == 10.0


def test_quiet_shows_nothing():
    err = io.StringIO()
    with Watch(Console(file=err, force_terminal=True), WatchOptions(quiet=True)) as watch:
        watch.on_progress(_progress(elapsed_s=30.0))
        watch.say("softrt compare: round 1/1: tuned")
    assert err.getvalue() == ""


def test_the_endpoint_serves_each_run_and_its_final_state():
    err = io.StringIO()
    with Watch(Console(file=err, width=200), WatchOptions(metrics_port=0), title="softrt compare") as watch:
        first = _progress(elapsed_s=3.0)
        watch.on_progress(first)
        url = re.search(r"serving metrics at (\S+)", err.getvalue()).group(1)
        watch.finished(
            RunSummary.from_dict(
                {"run_id": first.run_id, "status": "partial", "ring": {"overflows": 3}, "misses": {"missed_updates": 9}}
            )
        )  # the board saw more than the records the ring kept
        second = _progress(n=1_000, elapsed_s=0.5)
        second.run_id = "20261130-120100-vm-ef01"
        watch.on_progress(second)
        got = _scrape(url)
    state = {(labels["run_id"], labels["state"]): v for labels, v in got["softrt_run_state"] if v}
    assert state == {(first.run_id, "partial"): 1.0, (second.run_id, "running"): 1.0}
    overflows = {labels["run_id"]: v for labels, v in got["softrt_ring_overflows_total"]}
    assert overflows == {first.run_id: 3.0, second.run_id: 0.0}
    missed = {labels["run_id"]: v for labels, v in got["softrt_missed_updates_total"]}
    assert missed == {first.run_id: 9.0, second.run_id: 5.0}
    assert err.getvalue().count("serving metrics") == 1


def _frames(output: str, pattern: str) -> list[str]:
    """What a live view drew (its ANSI codes removed): every match of *pattern*, in order."""
    return re.findall(pattern, re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", output))


def test_the_live_views_last_frame_shows_the_final_figures():
    """The streaming pass lags by a batch and the board may count misses the ring dropped: the last
    frame is drawn from the run's summary, not left at the last drain's figures (51 vs 64 misses)."""
    err = io.StringIO()
    with Watch(Console(file=err, force_terminal=True, width=160), WatchOptions()) as watch:
        assert watch.mode == "live"
        p = _progress(elapsed_s=9.5, duration_s=10.0)
        watch.on_progress(p)
        watch.finished(
            RunSummary.from_dict(
                {
                    "run_id": p.run_id,
                    "status": "complete",
                    "elapsed_s": 10.0,
                    "cycles": 20_000,
                    "late_cycles": 3,
                    "ring": {"overflows": 2},
                    "misses": {"missed_updates": 9},
                }
            )
        )
    missed = _frames(err.getvalue(), r"missed updates (\d+)")
    assert missed[0] == "5" and missed[-1] == "9"
    assert _frames(err.getvalue(), r"elapsed (\S+) of")[-1] == "0:00:10"
    assert _frames(err.getvalue(), r"ring overflows (\d+)")[-1] == "2"
    assert _frames(err.getvalue(), r"vm-abcd · CPU 1( · complete)?")[-1] == " · complete"


@pytest.mark.rt
def test_every_late_count_agrees_to_the_cycle_on_a_real_run(tmp_path, state_dir, rt_settings_restored):
    """softrt's one late rule: the live view, Prometheus, the summary, the trace's "why late" and the
    --samples late store count the same late cycles (the drainer's view of each chunk, handed to all)."""
    from softrt.analysis.cycles import LateRule, cycle_view
    from softrt.session.run import run
    from softrt.store.late import read_aggregates
    from softrt.store.rundir import read_samples

    threshold = 10_000  # 10 µs: late cycles even on a quiet machine
    config = RunConfig(duration_ns=2 * 10**9, out_dir=tmp_path, samples="late", late_threshold_ns=threshold)
    err = io.StringIO()
    with Watch(Console(file=err, force_terminal=True, width=200), WatchOptions(metrics_port=0)) as watch:
        result = run(config, on_progress=watch.on_progress)
        watch.finished(result.summary)
        got = _scrape(watch.server.url)
    s = result.summary
    assert s.status == "complete" and s.metrics.records_missing == 0, s.partial_reason
    late = s.metrics.late_cycles
    assert late > 0
    live = [int(n.replace(",", "")) for n in _frames(err.getvalue(), r"late cycles ([\d,]+) \(period")]
    assert len(live) >= 2 and live == sorted(live) and live[-1] == late  # counted while it ran; the last frame
    assert got["softrt_late_cycles_total"][0][1] == late
    if not s.why_late.on:
        pytest.skip(f"tracing {s.why_late.tracing}: the trace's count cannot be compared")
    assert s.why_late.late_cycles == late
    # The store: the per-second aggregates saw every record; the kept file holds every late cycle.
    path = result.path
    cols, meta = read_aggregates(path)
    assert int(cols["records"].sum()) == s.metrics.cycles and meta["first_seq"] == 0
    assert int(cols["late"].sum()) == s.samples.late_cycles == late
    kept = read_samples(path)
    # Split the kept records into their stretches of consecutive seq; in each, every record but the
    # first has its period, so the late ones can be found again with the one rule.
    rule = LateRule(config.period_ns, threshold)
    stretches = np.split(kept, np.flatnonzero(np.diff(kept["seq"]) != 1) + 1)
    late_seqs = []
    for part in stretches:
        flags = cycle_view(part, None, rule).late
        late_seqs += part["seq"][flags].tolist()
        assert part["seq"][0] == 0 or not flags[0]  # a stretch starts with context, never with a late record
    assert len(late_seqs) == late
    # …and every missed update, with its context: 50 records either side unless the run began or ended within them.
    assert int(kept["missed"].sum()) == s.metrics.misses.missed_updates
    last, seqs = s.metrics.cycles - 1, set(kept["seq"].tolist())
    for q in late_seqs:
        assert all(x in seqs for x in range(max(q - 50, 0), min(q + 50, last) + 1))


def _final(watch, p):
    watch.finished(RunSummary.from_dict({"run_id": p.run_id, "status": "complete"}))


def test_the_final_state_stays_served_for_the_linger_time_then_the_endpoint_closes():
    err = io.StringIO()
    with Watch(Console(file=err, width=200), WatchOptions(metrics_port=0, metrics_linger_ns=600_000_000)) as watch:
        p = _progress()
        watch.on_progress(p)
        _final(watch, p)
    url = re.search(r"serving metrics at (\S+)", err.getvalue()).group(1)
    got = _scrape(url)  # the command printed its result; the endpoint is still there
    assert {labels["state"]: v for labels, v in got["softrt_run_state"]}["complete"] == 1.0
    t0 = time.monotonic()
    watch.linger()
    assert 0.4 < time.monotonic() - t0 < 3.0
    assert "serving the final metrics at " + url + " for 0.6 s" in err.getvalue()
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=2)


def test_ctrl_c_ends_the_linger_at_once():
    err = io.StringIO()
    with interrupts.deferred():
        with Watch(Console(file=err, width=200), WatchOptions(metrics_port=0, metrics_linger_ns=30 * 10**9)) as watch:
            p = _progress()
            watch.on_progress(p)
            _final(watch, p)
        assert watch.server is not None
        ctrl_c = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
        ctrl_c.start()
        t0 = time.monotonic()
        watch.linger()
        ctrl_c.join()
        assert 0.25 < time.monotonic() - t0 < 5.0  # ended by the Ctrl-C, not by the 30 s
    assert watch.server is None


@pytest.mark.parametrize("linger_ns", [0, 30_000_000_000])
def test_no_linger_when_zero_or_when_the_command_failed(linger_ns):
    err = io.StringIO()
    with (
        pytest.raises(RuntimeError),
        Watch(Console(file=err, width=200), WatchOptions(metrics_port=0, metrics_linger_ns=linger_ns)) as w,
    ):
        url = w.server.url
        if linger_ns:
            raise RuntimeError("the run could not start")
        raise RuntimeError("closed on the way out all the same")
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=2)
    w.linger()  # nothing left to serve: returns at once
    assert "final metrics" not in err.getvalue()


@pytest.mark.parametrize("value", ["-5s", "soon", "5 parsecs"])
def test_a_bad_linger_time_is_one_line_exit_2(run_cli, tmp_path, state_dir, value):
    code, out, err = run_cli(
        "run", "--out-dir", str(tmp_path / "runs"), "--metrics-port", "0", "--metrics-linger", value
    )
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "--metrics-linger" in lines[0], err
    assert not (tmp_path / "runs").exists()


def test_progress_line():
    line = progress_line(_progress())
    assert line.startswith("75 of 3,600 s  20,000 cycles  period p99 ")
    assert line.endswith("max 1,500.0 µs  missed updates 5  late cycles 3")


@pytest.fixture
def taken_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


@pytest.mark.parametrize("command", [["run"], ["compare", "tuned"]])
def test_a_taken_port_is_one_line_exit_2_before_anything_starts(run_cli, tmp_path, state_dir, taken_port, command):
    out_dir = tmp_path / "runs"
    code, out, err = run_cli(*command, "--out-dir", str(out_dir), "--metrics-port", str(taken_port))
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("softrt: error: cannot serve metrics") and "in use" in lines[0], err
    assert not out_dir.exists() or not any(out_dir.iterdir())


@pytest.mark.parametrize(
    "args,needle",
    [
        (
            ["--metrics-port", "0", "--metrics-addr", "no-such-host.invalid"],
            "cannot serve metrics on no-such-host.invalid",
        ),
        (["--metrics-port", "0", "--metrics-addr", "203.0.113.7"], "cannot serve metrics on 203.0.113.7"),
        (["--metrics-port", "70000"], "--metrics-port"),
        (["--metrics-port", "http"], "--metrics-port"),
        (["--metrics-port", "0", "--cpu", "99"], "CPU 99"),  # bad input found by the run: still one line
    ],
)
def test_a_bad_address_or_port_is_one_line_exit_2(run_cli, tmp_path, state_dir, args, needle):
    out_dir = tmp_path / "runs"
    code, out, err = run_cli("run", "--out-dir", str(out_dir), *args)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("softrt: error:") and needle in lines[0], err
    assert not out_dir.exists() or not any(out_dir.iterdir())


def _documented_series() -> list[str]:
    return re.findall(r"^\| `(softrt_\w+)` \|", DOC.read_text(), re.M)


def _scrape(url: str) -> dict:
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    out: dict = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


@pytest.mark.rt
def test_the_metrics_endpoint_during_a_real_run_serves_the_documented_series(tmp_path, state_dir, rt_settings_restored):
    documented = _documented_series()
    assert len(documented) >= 14
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "softrt",
            "run",
            "--duration",
            "2.5s",
            "--no-trace",
            "--json",
            "--metrics-port",
            "0",
            "--metrics-linger",
            "1s",
            "--out-dir",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    try:
        first = proc.stderr.readline()
        match = re.search(r"serving metrics at (http://\S+)", first)
        assert match, first + proc.stderr.read()
        url = match.group(1)
        cycles, scrapes, ended = [], [], []
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                got = _scrape(url)
            except OSError:  # the command is ending: its endpoint stops with it
                proc.wait(timeout=30)
                break
            state = [labels["state"] for labels, v in got.get("softrt_run_state", []) if v == 1.0]
            if state == ["running"]:
                scrapes.append(got)
                cycles.append(got["softrt_cycles_total"][0][1])
            elif state:
                ended.append((state[0], got["softrt_cycles_total"][0][1]))
            time.sleep(0.2)  # (the figures change with each batch of the streaming pass: 4,096 cycles, ~1 s)
        out, rest = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, rest
    assert len(scrapes) >= 3, rest
    got = scrapes[-1]
    # The culprits come from the trace: without it (--no-trace) the series is absent, as documented;
    # with it, tests/metrics/test_prometheus.py sees them arrive.
    assert "softrt_late_seconds_total" in documented and "softrt_late_seconds_total" not in got
    for name in set(documented) - {"softrt_late_seconds_total"}:  # every other series, by its samples' names
        names = [name] if not name.endswith("_seconds") or f"{name}_count" not in got else [f"{name}_count"]
        assert any(n in got for n in names), f"{name} missing from the scrape"
    positive = [c for c in cycles if c > 0]  # (the first copy may come before the first batch of figures)
    assert cycles == sorted(cycles) and len(set(positive)) >= 2, cycles  # the counter grows while the run goes
    labels = got["softrt_cycles_total"][0][0]
    assert labels["scenario"] == "run" and labels["host"] == socket.gethostname()
    assert labels["run_id"] in out and labels["rt_cpu"] == str(os.cpu_count() - 1)
    # --metrics-linger: after the summary was printed the final state was served, with every cycle.
    assert ended and {s for s, _ in ended} == {"complete"}, rest
    assert ended[-1][1] == json.loads(out)["cycles"]
    with pytest.raises(OSError):  # the endpoint stopped with the command
        urllib.request.urlopen(url, timeout=2)
