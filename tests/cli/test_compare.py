"""``softrt compare`` end to end: real loads, real runs (structure only, never latency bounds).

Bad input is refused before anything runs, so those tests are not ``rt`` (they run beside the rest)."""

from __future__ import annotations

import json
import os
import time
import uuid

import psutil
import pytest

TEST_ID = "SOFTRT_TEST_ID"


@pytest.fixture(autouse=True)
def _test_id(monkeypatch):
    """Mark the environment of every process this test starts (inherited by the loads' processes)."""
    monkeypatch.setenv(TEST_ID, uuid.uuid4().hex)


def no_load_processes_left():
    """Load processes (stress-ng, ffmpeg) this test started that are still there.

    Known by the test's mark in their environment, also once orphaned; loads that another test
    starts at the same time (a parallel pytest-xdist worker) are not this test's.
    """
    mine = []
    for p in psutil.process_iter(["pid", "name"]):
        if p.info["name"].startswith("stress-ng") or p.info["name"] == "ffmpeg":  # (stress-ng-disk: a worker)
            try:
                if p.environ().get(TEST_ID) == os.environ[TEST_ID]:
                    mine.append(p.info)
            except psutil.Error:  # gone, or a zombie
                pass
    return mine


@pytest.mark.rt
@pytest.mark.housekeeping("load")
def test_short_compare_of_the_four_builtins(tmp_path, state_dir, rt_settings_restored, softrt_cmd):
    # Untraced: the traced compare is test_repeat_alternates_and_require_gates's.
    # The default settle (1 s): the loads start once the worker is armed, so they run that and the
    # 0.3 s; with 0.1 s a stress-ng was stopped before it wrote its figures, and an ffmpeg on these
    # two busy CPUs had decoded no frame yet.
    proc = softrt_cmd(
        "compare", "--duration", "0.3s", "--settle", "1s", "--no-trace", "--json", "--out-dir", str(tmp_path)
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["scenarios"] == ["untuned", "tuned", "tuned+load", "tuned+load-on-rt-cpus"]
    for name, figures in result["pooled"].items():
        assert figures["cycles"] > 500, name  # of 1,200 board cycles
        assert figures["period_us"]["max"] >= figures["period_us"]["mean"] >= figures["period_us"]["min"]
        assert figures["motion"]["max_deviation_counts"] is not None
    assert result["pooled"]["untuned"]["modes"] == ["untuned"]
    loaded = result["pooled"]["tuned+load"]["loads"]
    ran = [one for one in loaded if not one["skipped_reason"]]
    assert {one["name"] for one in ran} >= {"disk", "network", "memory", "churn"}
    for load in ran:  # every load reports real, non-zero work
        assert load["achieved"] and max(load["achieved"].values()) > 0, load
    for load in loaded:
        if load["skipped_reason"]:
            assert load["name"] in ("gpu", "video")
    assert any("Tuning" in line or "Under load" in line for line in result["verdict"])
    assert len(result["rounds"]) == 4
    first = result["rounds"][0]["run_id"]
    for rnd in result["rounds"]:  # each scenario's run is stored like any softrt run, with the comparison's id
        summary = json.loads((tmp_path / rnd["run_id"] / "summary.json").read_text())
        assert summary["scenario"] == rnd["scenario"] and "loads" in summary and summary["compare_id"] == first
    # Progress while loads start, settle and stop, with what remains (it was silent between runs).
    assert "[1/4] untuned: no loads; 0 of 4 done, about " in proc.stderr
    assert "[3/4] tuned+load: starting " in proc.stderr and "[3/4] tuned+load: stopping the loads" in proc.stderr
    assert "[4/4] tuned+load-on-rt-cpus: measuring 0.3 s; 3 of 4 done, about " in proc.stderr
    assert no_load_processes_left() == []


@pytest.mark.rt
def test_repeat_alternates_and_require_gates(tmp_path, state_dir, rt_settings_restored, softrt_cmd):
    report = tmp_path / "compare.html"
    proc = softrt_cmd(
        "compare",
        "tuned",
        "untuned",
        "--duration",
        "0.3s",
        "--repeat",
        "2",
        "--json",
        "--require",
        "period.max<=1us",
        "--out-dir",
        str(tmp_path),
        "--report",
        str(report),
    )
    assert proc.returncode == 1, proc.stderr  # a ~250 µs period never meets max <= 1 µs
    result = json.loads(proc.stdout)
    # --report: the comparison's report, its scenarios side by side (rounds pooled) with the verdict lines.
    html = report.read_text()
    side = html[html.index('<table id="side-table">') : html.index("</table>", html.index('<table id="side-table">'))]
    assert ">tuned</th>" in side and ">untuned</th>" in side and "<td>rounds</td><td>2</td><td>2</td>" in side
    assert all(f"<li>{line}</li>" in html for line in result["verdict"])
    assert all(r["run_id"] in html for r in result["rounds"])
    assert f"report of 4 run(s) written to {report}" in proc.stderr
    assert [(r["scenario"], r["round"]) for r in result["rounds"]] == [
        ("tuned", 1),
        ("untuned", 1),
        ("tuned", 2),
        ("untuned", 2),
    ]
    assert result["pooled"]["tuned"]["rounds"] == 2
    assert [c["scenario"] for c in result["requirements"]] == ["tuned"]  # only tuned scenarios are judged
    assert result["passed"] is False


@pytest.mark.rt
def test_table_output_and_a_requirement_met(tmp_path, state_dir, rt_settings_restored, softrt_cmd):
    proc = softrt_cmd(
        "compare",
        "tuned",
        "untuned",
        "--duration",
        "0.3s",
        "--require",
        "period.min>=1us,period.max>=1us",
        "--out-dir",
        str(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr  # the requirement passed
    for needle in (
        "period max",
        "process mean",
        "missed updates",
        "max deviation",
        "untuned",
        "tuned",
        "Tuning",
        "pass tuned: period.min>=1us (measured ",
        "pass tuned: period.max>=1us (measured ",
    ):
        assert needle in proc.stdout
    assert "fail " not in proc.stdout


@pytest.mark.parametrize(
    "args,needle",
    [
        (["nosuch"], "unknown scenario 'nosuch'"),
        (["{bad}"], "malformed TOML"),
        (["{on_rt}"], "placed on real-time CPU"),
        (["tuned", "--require", "jitter<3us"], "unknown metric"),
        (["tuned", "tuned"], "listed twice"),
        (["tuned", "--repeat", "0"], "--repeat"),
        (["tuned", "--samples", "some"], "--samples"),
        (["tuned", "--report", "{runs}/no/such/dir/r.html"], "cannot write the report"),
        (["tuned", "--report", "{runs}"], "--report"),  # a directory (made below)
    ],
)
def test_bad_input(tmp_path, state_dir, args, needle, run_cli):
    (tmp_path / "bad.toml").write_text('name = "bad"\nprofile = \n')
    (tmp_path / "on_rt.toml").write_text('name = "on_rt"\n[[load]]\nname = "cpu"\ncpus = "all"\n')
    args = [a.format(bad=tmp_path / "bad.toml", on_rt=tmp_path / "on_rt.toml", runs=tmp_path / "out") for a in args]
    (tmp_path / "out").mkdir()
    code, _, err = run_cli("compare", *args, "--duration", "0.5s", "--out-dir", str(tmp_path / "runs"))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], err
    assert not (tmp_path / "runs").exists()
    assert no_load_processes_left() == []


def _fifo_child(pid: int) -> bool:
    for child in psutil.Process(pid).children():
        try:
            if os.sched_getscheduler(child.pid) == os.SCHED_FIFO:
                return True
        except OSError:
            pass
    return False


@pytest.mark.rt
@pytest.mark.parametrize("moment", ["first", pytest.param("second", marks=pytest.mark.housekeeping("load"))])
def test_a_burst_of_ctrl_c_keeps_every_finished_scenario(tmp_path, state_dir, rt_settings_restored, interrupts, moment):
    import subprocess
    import sys

    from softrt.store.history import History

    out_dir = tmp_path / "runs"
    loaded = tmp_path / "loaded.toml"  # two of tuned+load's loads: those that start at once (no clip to encode)
    # Its own 5 s: it is interrupted while its loop runs, however long its loads took to start.
    loaded.write_text(
        'name = "loaded"\nprofile = "rt"\nwait = "spin"\nduration = "5s"\n'
        '[[load]]\nname = "disk"\n[[load]]\nname = "memory"\n'
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "softrt",
            "compare",
            "untuned",
            str(loaded),
            "--duration",
            "0.5s",
            "--settle",
            "0.3s",
            "--json",
            "--out-dir",
            str(out_dir),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if moment == "first":  # the untuned run's worker (no SCHED_FIFO) is up
        interrupts.wait_for(lambda: interrupts.worker_started(proc.pid))
    else:  # the first scenario is stored and the second one's loop is running under its loads
        # (its first checkpoint is written as its loop is released, after the loads settled)
        interrupts.wait_for(lambda: len(list(out_dir.glob("*/summary.json"))) >= 2)
    interrupts.sigint_burst(proc)
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 1, err
    assert "Traceback" not in err and "interrupted" in err
    result = json.loads(out)
    assert result["interrupted"] is True and result["passed"] is False
    rounds = result["rounds"]
    assert [r["scenario"] for r in rounds] == (["untuned"] if moment == "first" else ["untuned", "loaded"])
    assert rounds[-1]["status"] == "partial"
    assert [r.run_id for r in History().list_runs()] == [r["run_id"] for r in rounds]
    for r in rounds:  # every stored run has its loads block, the interrupted one too
        summary = json.loads((out_dir / r["run_id"] / "summary.json").read_text())
        assert "loads" in summary and summary["scenario"] == r["scenario"]
    if moment == "second":
        assert rounds[-1]["loads"] and {load["name"] for load in rounds[-1]["loads"]} >= {"disk", "memory"}
    assert no_load_processes_left() == []


@pytest.mark.rt
@pytest.mark.housekeeping("load")
def test_the_worker_is_armed_before_the_loads_start_and_released_after_they_settled(
    tmp_path, state_dir, rt_settings_restored
):
    """Arm, then load, then release (rteval's order): the worker's start (a new interpreter, its
    imports, memory locking) no longer competes with the loads; under tuned+load-on-rt-cpus it took
    seconds there. The loads still settle before the first measured cycle."""
    from softrt.scenario.compare import compare, plan
    from softrt.scenario.parse import parse_scenario
    from softrt.schema.config import RunConfig
    from softrt.store.rundir import read_samples

    scenario = parse_scenario('name = "armed-first"\nprofile = "rt"\nwait = "spin"\n[[load]]\nname = "memory"\n')
    base = RunConfig(duration_ns=300_000_000, out_dir=tmp_path, trace=False)
    seen = []

    def on_event(msg: str) -> None:  # the worker is this process's child, SCHED_FIFO once armed
        if "starting 1 load(s)" in msg or "measuring" in msg:
            seen.append((msg.split(": ")[1].split(";")[0], _fifo_child(os.getpid()), time.monotonic_ns()))

    result = compare(plan([scenario], base, "builtin"), settle_s=0.3, on_event=on_event)
    assert [(what.split(" ")[0], armed) for what, armed, _ in seen] == [("starting", True), ("measuring", True)]
    (run,) = result.runs
    assert run.result.summary.status == "complete" and run.loads[0].name == "memory"
    # The loop was released after the settling: its first record follows the "measuring" line.
    first_ns = int(read_samples(run.result.path)["detect_ns"][0])
    assert first_ns > seen[1][2] >= seen[0][2] + 300_000_000
    assert no_load_processes_left() == []
