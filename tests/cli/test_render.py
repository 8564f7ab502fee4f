"""cli.render.why_late: the "Why cycles were late" block, from an Attributor's real output."""

from __future__ import annotations

from rich.console import Console

from softrt.analysis.attribution import Attributor, unavailable
from softrt.analysis.events import TraceEvent
from softrt.cli.render import why_late
from softrt.schema.summary import RunSummary

from ..synthetic import synthetic_records

P = 250_000


def _summary(why: dict) -> RunSummary:
    """A summary holding *why* (the attribution's JSON) as its why_late."""
    return RunSummary.from_dict({"why_late": why})


def _text(group) -> str:
    console = Console(width=160, record=True, highlight=False)
    console.print(group)
    return console.export_text()


def _why(n_threads: int, lost: int) -> dict:
    """Late cycles each preempted by a different FIFO thread (more than the table shows)."""
    misses = [(1_000 + 500 * k, 1) for k in range(n_threads)]
    rec = synthetic_records(1_000 + 500 * n_threads, P, misses)
    events = [TraceEvent(int(rec["edge_ns"][0]) - 1, 1, "sched_wakeup", 7, "w", {"pid": "1"})]
    for k, (i, _m) in enumerate(misses):
        a, b = int(rec["detect_ns"][i]), int(rec["write_ns"][i])
        for ts, prev, nxt in (
            (a + 1_000, ("w", 7, 19), (f"hog{k}", 100 + k, 0)),
            (b - 1_000, (f"hog{k}", 100 + k, 0), ("w", 7, 19)),
        ):
            events.append(
                TraceEvent(
                    ts,
                    1,
                    "sched_switch",
                    prev[1],
                    prev[0],
                    {
                        "prev_comm": prev[0],
                        "prev_pid": str(prev[1]),
                        "prev_prio": str(prev[2]),
                        "prev_state": "R",
                        "next_comm": nxt[0],
                        "next_pid": str(nxt[1]),
                        "next_prio": str(nxt[2]),
                    },
                )
            )
    att = Attributor(period_ns=P, rt_cpu=1, worker_pid=7)
    att.add_events(events)
    att.add_records(rec)
    att.advance(int(rec["done_ns"][-1]))
    return att.finish(lost_events=lost).to_dict()


def test_top_culprits_worst_cycles_and_lost_events():
    why = _why(n_threads=10, lost=42)
    out = _text(why_late(_summary(why), top=8, worst=3))
    assert "Why cycles were late" in out and "42 trace events were lost" in out
    assert len(why["culprits"]) == 11  # 10 threads and the loop's own work
    assert "… and 3 more (softrt show --json)" in out
    assert out.count("FIFO/RR 99") == 8 + 3  # 8 culprit rows, 3 worst cycles with their thread
    assert f"Worst cycles (3 of {why['late_cycles']})" in out


def test_no_lost_events_line_when_none_were_lost():
    out = _text(why_late(_summary(_why(n_threads=2, lost=0))))
    assert "lost" not in out and "hog0 (pid 100, FIFO/RR 99)" in out


def test_untraced_and_old_runs():
    out = _text(why_late(_summary(unavailable("unavailable: tracefs not mounted and not root"))))
    assert out.strip() == "Why cycles were late: tracing unavailable: tracefs not mounted and not root"
    assert why_late(RunSummary()) is None


def test_a_late_run_says_which_samples_it_kept(tmp_path):
    import json

    from softrt.cli.render import render_summary

    from ..synthetic import write_synthetic_run

    for samples in ("late", "all"):
        run = write_synthetic_run(tmp_path / samples, cycles=8_000, misses=[(4_000, 2)], samples=samples)
        text = _text(render_summary(RunSummary.read(json.loads((run / "summary.json").read_text()))))
        assert ("Samples kept: late cycles with context" in text) == (samples == "late")


def test_the_distribution_shows_each_tail_slack_s_is_its_low_one():
    from softrt.cli.render import percentile_table

    def stats(p50, top, low):
        return {
            "mean": p50,
            "min": low,
            "max": top,
            "std": 1.0,
            "p50": p50,
            "p99": top * 0.9,
            "p99_9": top * 0.95,
            "p99_99": top * 0.99,
        }

    slack = {
        "mean": 240.0,
        "min": -2_852.2,
        "max": 249.3,
        "std": 1.0,
        "p50": 246.9,
        "p1": 236.3,
        "p0_1": -602.9,
        "p0_01": -2_317.0,
    }
    summary = {
        "period_us": stats(250.0, 3_337.1, 101.9),
        "latency_us": stats(0.2, 3_087.4, 0.1),
        "process_us": stats(2.9, 175.0, 0.6),
        "slack_us": slack,
    }
    text = _text(percentile_table(RunSummary.from_dict(summary)))
    lines = {line.split()[0]: line for line in text.splitlines() if line.strip()}
    header = next(line for line in text.splitlines() if "p50" in line)
    assert header.rstrip().endswith("worst") and "max" not in header
    assert lines["period"].rstrip().endswith("3,337.1")
    # slack's own header names its low tail, and its row shows it (negative: overruns)
    assert next(line for line in text.splitlines() if "p0.01" in line).split() == [
        "│",
        "p50",
        "│",
        "p1",
        "│",
        "p0.1",
        "│",
        "p0.01",
        "│",
        "min",
    ]
    assert lines["slack"].split()[::2] == ["slack", "246.9", "236.3", "-602.9", "-2,317.0", "-2,852.2"]
    assert "shortest slack" in text and "overran" in text  # the caption says what "worst" is
    # A summary written before softrt kept slack's low tail (it held p99…): its low tail is unknown, not its top.
    old = _text(percentile_table(RunSummary.from_dict({**summary, "slack_us": stats(246.9, 249.3, -2_852.2)})))
    old_slack = next(line for line in old.splitlines() if line.split()[:1] == ["slack"])
    assert old_slack.split()[::2] == ["slack", "246.9", "-", "-", "-", "-2,852.2"]


TRACE = {
    "events": ["sched:sched_switch"],
    "events_missing": ["raw_syscalls:sys_enter"],
    "events_read": 51234,
    "lost_events": 7,
    "unparsed_lines": 0,
    "consumer_cpu_s": 0.4,
    "attribution_cpu_s": 0.1,
    "traced_s": 5.0,
    "buffer_kb": 8192,
}


def test_the_trace_figures_in_one_line_never_the_raw_dict():
    why = {**_why(n_threads=2, lost=7), "tracing": "on", "trace": TRACE}
    out = _text(why_late(_summary(why)))
    assert (
        "trace: 51,234 events read, 7 lost; reader and attribution used 0.50 s CPU over 5.0 s "
        "(10 % of a housekeeping CPU); not on this kernel: raw_syscalls:sys_enter"
    ) in out
    assert "{" not in out and "buffer_kb" not in out
    # a run stored while the figures were under "tracing" reads the same
    old = {**_why(n_threads=2, lost=7), "tracing": {"status": "on", **TRACE}}
    assert _text(why_late(_summary(old))) == out


def test_a_workqueue_item_keeps_its_function_in_the_table():
    why = _why(n_threads=1, lost=0)
    why["culprits"][0]["name"] = "kworker/1:0H [blk_mq_run_work_fn]"
    assert "kworker/1:0H [blk_mq_run_work_fn]" in _text(why_late(_summary(why)))


def test_a_failed_ethercat_run_says_why_and_shows_the_drives_as_last_confirmed(tmp_path):
    import json

    from softrt.cli.render import render_summary

    from ..synthetic import write_synthetic_run

    run = write_synthetic_run(tmp_path, cycles=3_000, misses=[])
    summary = json.loads((run / "summary.json").read_text())
    reason = "bus lost: no frame answered: 40 frames sent in a row (10.0 ms of cycles) since cycle 2,871"
    summary.update(status="failed", partial_reason=reason)
    summary["board"] = {
        "writes": 2_880,
        "missed_updates": 10,
        "drives": [
            {
                "name": "AX5101",
                "slave": 0,
                "statusword": 0x0237,
                "state": "operation enabled",
                "error_code": 0,
                "position_counts": 1,
                "origin_counts": 0,
                "confirmed_cycle": 2_870,
                "confirmed_at_s": 0.7175,
            },
            {
                "name": "EL7211",
                "slave": 1,
                "statusword": 0x0040,
                "state": "switch on disabled",
                "error_code": 0,
                "position_counts": 1,
                "origin_counts": 0,
                "confirmed_cycle": -1,
                "confirmed_at_s": None,
            },
        ],
    }
    text = _text(render_summary(RunSummary.from_dict(summary)))
    assert f"[FAILED: {reason}]" in text
    assert (
        "Drive 'AX5101' (slave 0): operation enabled (statusword 0x0237, error code 0x0000), "
        "last confirmed at cycle 2,870 (0.718 s)"
    ) in text
    assert "Drive 'EL7211' (slave 1): switch on disabled" in text and "never (no valid frame in the run)" in text


def test_ethercat_replies_that_were_not_taken_are_said(tmp_path):
    import json

    from softrt.cli.render import render_summary

    from ..synthetic import write_synthetic_run

    run = write_synthetic_run(tmp_path, cycles=3_000, misses=[])
    summary = json.loads((run / "summary.json").read_text())
    summary["rtt_us"] = {"mean": 40.0, "min": 30.0, "max": 90.0, "p50": 40.0, "p99": 60.0, "p99_9": 80.0}
    summary["board"] = {
        "frames": {
            "sent": 3_000,
            "answered": 2_990,
            "unanswered": 10,
            "late": 7,
            "late_rtt_us": {"min": 900.0, "max": 8_700.0, "mean": 2_000.0, "p50": 1_000.0, "p99": 8_000.0},
            "duplicates": 1,
            "bad": {"command": 2, "short": 1},
            "foreign": 0,
            "send_errors": 0,
        }
    }
    text = _text(render_summary(RunSummary.from_dict(summary)))
    assert (
        "; 7 replies late (up to 8.7 ms), not taken; 3 changed (command 2, short 1), not taken; 1 duplicates"
        in " ".join(text.split())
    ), text


def test_the_axes_of_a_two_axis_drive_are_told_apart():
    from softrt.cli.render import drives_lines
    from softrt.schema.device import Board

    axis = {
        "name": "2-axis drive",
        "slave": 0,
        "statusword": 0x0237,
        "state": "operation enabled",
        "error_code": 0,
        "position_counts": 1,
        "origin_counts": 0,
        "confirmed_cycle": 10,
        "confirmed_at_s": 0.01,
    }
    board = Board.from_dict(
        {
            "drives": [
                {**axis, "axis": 0},
                {**axis, "axis": 1, "statusword": 0x0218, "state": "fault"},
                {**axis, "name": "1-axis drive", "slave": 1, "axis": 0},
            ]
        }
    )
    lines = drives_lines(board)
    assert lines[0].startswith("Drive '2-axis drive' (slave 0, axis 0): operation enabled")
    assert lines[1].startswith("Drive '2-axis drive' (slave 0, axis 1): fault (statusword 0x0218")
    assert lines[2].startswith("Drive '1-axis drive' (slave 1): operation enabled")


def test_the_dc_block_with_a_lock_and_without_dc():
    from softrt.cli.render import dc_text
    from softrt.schema.device import Board

    dc = {
        "reference": {"slave": 0, "name": "drive"},
        "sync0": {"active": True, "cycle_ns": 1_000_000, "start_ns": 0},
        "target_shift_us": -200.0,
        "cycles": 3000,
        "phase": {
            "n": 2990,
            "mean_us": 1.5,
            "min_us": -40.0,
            "max_us": 60.0,
            "p1_us": -20.0,
            "p50_us": 1.0,
            "p99_us": 30.0,
            "abs_mean_us": 8.0,
            "abs_p99_us": 35.0,
            "abs_max_us": 60.0,
            "resolution_us": 0.98,
        },
        "phase_series": {"every_cycles": 100, "mean_us": [], "abs_mean_us": []},
        "dc_vs_host_ppm": 300.2,
        "lock": {
            "kp": 0.05,
            "ki": 0.000625,
            "max_step_us": 10.0,
            "correction_ppm": -299.0,
            "moved_us": -900.0,
            "first_tenth_abs_mean_us": 120.0,
            "last_tenth_abs_mean_us": 8.0,
        },
        "sample_every": 100,
        "slaves": [
            {
                "slave": 1,
                "name": "drive",
                "samples": 29,
                "unanswered": 1,
                "abs_diff_ns": {"min": 10, "max": 30_000, "mean": 12_000.0, "p50": 11_000.0, "p99": 29_000.0},
            },
            {"slave": 2, "name": "other", "samples": 0, "unanswered": 29, "abs_diff_ns": None},
        ],
    }
    text = " ".join(dc_text(Board.from_dict({"distributed_clocks": dc})).plain.split())
    assert "frame at the reference vs SYNC0 -200.0 µs: mean +1.5 µs" in text
    assert "DC time runs +300.2 ppm against the host clock" in text and "walks" not in text
    assert "host cycle corrected -299.0 ppm" in text and "first tenth of the run 120.0 µs, last tenth 8.0 µs" in text
    assert "slave 1 'drive': |0x092C| mean 12.000 µs, p99 29.000, max 30.000 (29 samples" in text
    assert "slave 2 'other': 0x092C never answered" in text
    absent = dc_text(Board.from_dict({"distributed_clocks": {"absent": "no slave has distributed clocks"}})).plain
    assert absent == "Distributed clocks: none (no slave has distributed clocks)"
    assert dc_text(Board.from_dict({})) is None


def test_a_dc_phase_lacking_figures_shows_dashes_not_a_traceback():
    """Every Phase figure is optional in the model (a hand-edited or partial summary may lack one)."""
    from softrt.cli.render import dc_text
    from softrt.schema.device import Board

    dc = {
        "reference": {"slave": 0, "name": "drive"},
        "sync0": {"active": True, "cycle_ns": 1_000_000},
        "phase": {"n": 10, "mean_us": 1.5, "p99_us": None},
    }
    text = " ".join(dc_text(Board.from_dict({"distributed_clocks": dc})).plain.split())
    assert "mean +1.5 µs, p1 -, p99 -; |error| mean -" in text


def test_the_mode_block_says_whether_the_fair_server_was_in_force():
    from softrt.cli.render import mode_text

    def mode(fair: dict | None) -> str:
        tuning = {"applied": []} | ({"fair_server": fair} if fair else {})
        return _text(mode_text(RunSummary.from_dict({"mode": "real-time", "status": "complete", "tuning": tuning})))

    locked = mode(
        {"cpu": 1, "in_force": True, "runtime_ns": None, "period_ns": None, "unreadable": "debugfs is locked down"}
    )
    assert "fair server: in force on CPU 1 (runtime unreadable: debugfs is locked down; the default is 50 ms" in locked
    assert "fair server: in force on CPU 3 (50 ms of every 1000 ms" in mode(
        {"cpu": 3, "in_force": True, "runtime_ns": 50_000_000, "period_ns": 1_000_000_000}
    )
    assert "fair server: off on CPU 3 (runtime 0)" in mode({"cpu": 3, "in_force": False, "runtime_ns": 0})
    assert "fair server" not in mode(None)  # a kernel without one


def test_loads_are_shown_failed_with_their_problems_in_compare_and_show():
    """compare's load lines and show's (a compare run): a load that achieved nothing is FAILED with its problems,
    pooled over the rounds, never "disk (builtin): io_MB_per_s 0.0"."""
    from softrt.cli.compare import pooled_loads_text
    from softrt.cli.render import render_summary
    from softrt.scenario.compare import Pooled, _merge_loads
    from softrt.schema.summary import LoadRun

    from ..report.test_build import LOADS

    per_round = {1: [LoadRun.from_dict(d, "load") for d in LOADS], 2: [LoadRun.from_dict(d, "load") for d in LOADS]}
    per_round[2][0] = per_round[2][0].replace(achieved={"copy_MB_per_s": 0.0, "cpu_pct_per_worker": 50.0})
    text = _text(pooled_loads_text({"tuned+load": Pooled(loads=_merge_loads(per_round))}))
    assert text.rstrip("\n").splitlines() == [
        "tuned+load: memory (builtin): copy_MB_per_s 1,050.2, cpu_pct_per_worker 74.5",
        "tuned+load:   memory problem: achieved nothing in 1 of 2 rounds (round 2)",
        "tuned+load: disk (builtin): FAILED, it achieved nothing (see its problems)",
        "tuned+load:   disk problem: io worker ended on its own (exit status 1)",
        "tuned+load:   disk problem: AttributeError: module 'os' has no attribute 'pwrite'",
        "tuned+load: gpu skipped: ffmpeg is not on PATH",
    ]
    shown = _text(render_summary(RunSummary.from_dict({"loads": LOADS})))
    assert "  disk (builtin): FAILED, it achieved nothing (see its problems)\n" in shown
    assert "    disk problem: AttributeError: module 'os' has no attribute 'pwrite'\n" in shown
    assert "io_MB_per_s 0.0" not in shown
