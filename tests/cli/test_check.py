"""``softrt check`` end to end: tables, JSON, exit status, and one clear line for bad input."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "softrt_audit_trees", Path(__file__).parent.parent / "audit" / "trees.py"
)
trees = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(trees)
CAPTURED = str(trees.CAPTURED)


@pytest.fixture
def good(tmp_path):
    return trees.build_good(tmp_path / "good")


def test_ready_machine_exits_0_with_tables_and_verdict(run_cli, state_dir, good, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    code, out, err = run_cli("check", "--root", str(good), "--rt-cpus", "3")
    assert code == 0, err
    for title in (
        "Reserved cores",
        "(1) CPU idle states",
        "(2) Disturbing services",
        "(3) Updates and maintenance",
        "(4) Interrupts",
        "Kernel and CPU",
    ):
        assert title in out
    assert "READY: a 250 µs loop can be expected to hold on CPU 3" in out


def test_captured_vm_is_not_ready_and_says_what_to_fix_first(run_cli, state_dir, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run_cli("check", "--root", CAPTURED)  # default RT CPU: the last allowed one
    assert code == 1
    assert "NOT READY" in out and "on CPU 1" in out
    assert "Fix first:" in out and "1. Preemption model" in out
    assert "fix: sysctl kernel.sched_rt_runtime_us=-1" in out
    assert "virtio2-input.0" in out  # the NIC queue routed to CPU 1


def test_json_output(run_cli, state_dir):
    code, out, _ = run_cli("check", "--root", CAPTURED, "--rt-cpus", "1", "--json")
    assert code == 1
    data = json.loads(out)
    assert data["ready"] is False and data["rt_cpus"] == "1" and data["housekeeping_cpus"] == "0"
    assert len(data["findings"]) == 30
    nic = next(f for f in data["findings"] if f["id"] == "irq.nic")
    assert nic["status"] == "fail" and nic["severity"] == "high" and nic["tunable"] and nic["evidence"]
    assert data["fix_first"][0] == "kernel.preemption"


@pytest.mark.parametrize(
    "args,words",
    [
        (["--rt-cpus", "5"], "CPU 5 does not exist"),
        (["--rt-cpus", "0-1"], "one housekeeping CPU must stay"),
        (["--rt-cpus", ""], "no real-time CPU"),
        (["--rt-cpus", "one"], "invalid CPU list"),
        (["--rt-cpus", "1-0"], "invalid CPU range"),
        (["--sample", "-1"], "--sample"),
        (["--sample", "90s"], "at most 1 min"),
        (["--sample", "2 parsecs"], "unknown unit"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(run_cli, state_dir, args, words):
    code, out, err = run_cli("check", "--root", CAPTURED, *args)
    assert code == 2
    assert out == ""
    assert err.startswith("softrt: error: ") and words in err and err.count("\n") == 1


def test_offline_cpu_is_bad_input(run_cli, state_dir, tmp_path):
    tree = tmp_path / "t"
    shutil.copytree(CAPTURED, tree, symlinks=True)
    (tree / "sys/devices/system/cpu/online").write_text("0\n")
    code, _, err = run_cli("check", "--root", str(tree), "--rt-cpus", "1")
    assert code == 2 and "CPU 1 is offline" in err


def test_this_machine_with_a_short_sample(run_cli, state_dir):
    code, out, err = run_cli("check", "--json", "--sample", "200ms")  # a TIME, as every other option takes
    assert code in (0, 1), err
    data = json.loads(out)
    assert data["ready"] is (code == 0)
    sample = next(f for f in data["findings"] if f["id"] == "cores.sample")
    assert sample["status"] in ("ok", "warn", "n/a")
    assert data["sample"] is None or data["sample"]["seconds"] == 0.2


WINDOWS = Path(__file__).parent.parent / "audit" / "windows" / "fixtures"


def test_windows_captures_are_checked_with_the_windows_checks(run_cli, state_dir, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run_cli("check", "--root", str(WINDOWS / "bad"))  # default: the highest P-core (an i5-14500, HT off)
    assert code == 1
    assert "real-time CPU(s) 5, housekeeping CPU(s) 0-4,6-13" in out
    assert "fix: powercfg.exe /setacvalueindex SCHEME_CURRENT SUB_PROCESSOR IdleDisable 1" in out
    code, out, _ = run_cli("check", "--root", str(WINDOWS / "good"), "--rt-cpus", "10-13", "--json")
    data = json.loads(out)
    assert code == 0 and data["ready"] and data["meta"]["os"] == "windows"


def test_a_windows_rt_cpu_that_does_not_exist_is_a_finding(run_cli, state_dir):
    code, out, _ = run_cli("check", "--root", str(WINDOWS / "good"), "--rt-cpus", "20", "--json")
    data = json.loads(out)
    assert code == 1 and next(f for f in data["findings"] if f["id"] == "cores.rt_cpus")["status"] == "fail"


def test_no_windows_rt_cpu_is_bad_input(run_cli, state_dir):
    code, _, err = run_cli("check", "--root", str(WINDOWS / "good"), "--rt-cpus", "")
    assert code == 2 and "no real-time CPU" in err


def test_an_empty_cpu_list_suggests_a_cpu_this_machine_has(run_cli, state_dir, good):
    """The example in the hint is the CPU check would choose (the last online one), never a fixed 3."""
    good.set("/sys/devices/system/cpu/online", "0-1").set("/proc/self/status", "Cpus_allowed_list:\t0-1\n")
    code, _, err = run_cli("check", "--root", str(good), "--rt-cpus", "")
    assert code == 2 and err.strip().endswith("e.g. --rt-cpus 1)")


def test_as_system_is_refused_where_it_reads_nothing(run_cli):
    """--as-system reads Windows' CSP as SYSTEM on the machine itself: not on Linux, not from a capture."""
    from pathlib import Path

    code, out, err = run_cli("check", "--as-system", "--sample", "0")
    assert code == 2 and out == "" and "this is not a Windows machine" in err
    capture = Path(__file__).parent.parent / "audit" / "windows" / "fixtures" / "good"
    code, out, err = run_cli("check", "--root", str(capture), "--as-system", "--sample", "0")
    assert code == 2 and out == "" and "holds captured command outputs: --as-system reads this machine" in err
