"""``softrt tune`` end to end on captured trees: plan, apply, revert, and every kind of bad input."""

from __future__ import annotations

import importlib.util
import json
import os
import pwd
import shutil
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "softrt_audit_trees", Path(__file__).parent.parent / "audit" / "trees.py"
)
trees = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(trees)


@pytest.fixture
def vm(tmp_path):
    """A writable copy of the captured VM."""
    tree = tmp_path / "vm"
    shutil.copytree(trees.CAPTURED, tree, symlinks=True)
    return tree


def test_plan_changes_nothing_and_prints_the_kernel_command_line(run_cli, state_dir, vm, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    before = trees.files_under(vm)
    code, out, err = run_cli("tune", "--root", str(vm), "--rt-cpus", "1")
    assert code == 0, err
    assert "/proc/irq/38/smp_affinity" in out and "/proc/sys/kernel/sched_rt_runtime_us" in out
    assert "Needs a reboot" in out and "isolcpus=managed_irq,domain,1" in out and "preempt=full" in out
    assert "Nothing was changed" in out
    assert trees.files_under(vm) == before
    assert not state_dir.exists() or not (state_dir / "tune-state.jsonl").exists()


def test_apply_then_revert_on_a_tree(run_cli, state_dir, vm):
    before = trees.files_under(vm)
    code, out, err = run_cli("tune", "--root", str(vm), "--rt-cpus", "1", "--apply", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["applied"]["complete"] and (state_dir / "tune-state.jsonl").exists()
    assert (vm / "proc/sys/kernel/sched_rt_runtime_us").read_text() == "-1\n"
    assert (vm / "proc/irq/38/smp_affinity").read_text() == "00000001\n"

    code, out, _ = run_cli("check", "--root", str(vm), "--rt-cpus", "1", "--json")
    statuses = {f["id"]: f["status"] for f in json.loads(out)["findings"]}
    assert statuses["kernel.rt_throttling"] == statuses["idle.states"] == statuses["services.watchdog"] == "ok"
    assert statuses["irq.default_affinity"] == statuses["kernel.timer_migration"] == "ok"

    code, out, err = run_cli("tune", "--revert", "--root", str(vm))
    assert code == 0, err
    assert "Reverted:" in out and "restored" in out
    # What each kind of change was restored to.
    assert "IRQ affinity: restored 19 to 3" in out and "default IRQ affinity: restored 1 to 3" in out
    assert "sched_rt_runtime_us 950000" in out and "idle states: restored 1 to enabled" in out
    assert trees.files_under(vm) == before  # byte for byte


def test_the_rt_cpu_defaults_and_an_irq_the_kernel_keeps_is_reboot_only(run_cli, state_dir, vm, monkeypatch):
    """On the 2-CPU VM: CPU 1 (as check and run choose it), and the command it prints names it. IRQ 36
    (virtio-blk's managed queue) has a read-only smp_affinity, as this kernel shows it: no step, listed
    as reboot-only (tune --apply exited 1 on it)."""
    monkeypatch.setenv("COLUMNS", "200")
    (vm / "proc/irq/36/smp_affinity").chmod(0o444)
    code, out, err = run_cli("tune", "--root", str(vm))
    assert code == 0, err
    assert "real-time CPU(s) 1 " in out and "softrt tune --rt-cpus 1 --apply" in out
    assert "/proc/irq/36/smp_affinity" not in out and "/proc/irq/38/smp_affinity" in out
    assert "only at boot (managed or per-CPU): IRQ 36 virtio1-req.0" in out


@pytest.mark.parametrize(
    "args,words",
    [
        (["--rt-cpus", "7"], "CPU 7 does not exist"),
        (["--rt-cpus", "0-1"], "one housekeeping CPU must stay"),
        (["--rt-cpus", ""], "no real-time CPU"),
        (["--rt-cpus", "1", "--apply", "--revert"], "cannot be combined"),
        (["--revert", "--rt-cpus", "1"], "drop --rt-cpus"),
        (["--revert"], "nothing to revert"),
    ],
)
def test_bad_input(run_cli, state_dir, vm, args, words):
    before = trees.files_under(vm)
    code, out, err = run_cli("tune", "--root", str(vm), *args)
    assert code == 2 and out == ""
    assert err.startswith("softrt: error: ") and words in err and err.count("\n") == 1
    assert trees.files_under(vm) == before


@pytest.mark.parametrize(
    "content,words",
    [
        ("garbage\n{}\n", "corrupt"),
        ('{"format": "someone-else"}\n', "not a softrt tune state file"),
    ],
)
def test_corrupt_or_foreign_state(run_cli, state_dir, vm, content, words):
    state_dir.mkdir(parents=True)
    (state_dir / "tune-state.jsonl").write_text(content)
    before = trees.files_under(vm)
    code, _, err = run_cli("tune", "--revert", "--root", str(vm))
    assert code == 2 and words in err and err.count("\n") == 1
    assert trees.files_under(vm) == before


def test_second_apply_is_refused(run_cli, state_dir, vm):
    assert run_cli("tune", "--root", str(vm), "--rt-cpus", "1", "--apply")[0] == 0
    code, _, err = run_cli("tune", "--root", str(vm), "--rt-cpus", "1", "--apply")
    assert code == 2 and "already applied" in err
    assert run_cli("tune", "--revert", "--root", str(vm))[0] == 0


def test_apply_without_root_is_refused(run_cli, state_dir, monkeypatch):
    """On this machine, as a user who is not root: one line, exit status 2, and no state file."""
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    code, out, err = run_cli("tune", "--rt-cpus", "1", "--apply")
    assert code == 2 and out == ""
    assert err.startswith("softrt: error: ") and "needs root" in err and err.count("\n") == 1
    assert not (state_dir / "tune-state.jsonl").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="apply on this machine needs root")
@pytest.mark.parametrize("verb", [["--rt-cpus", "1", "--apply"], ["--revert"]])
def test_apply_and_revert_wait_for_a_real_time_run(run_cli, state_dir, verb):
    """A spin run restores RT throttling when it ends: a tune under it would be undone (issue 12, defect 7)."""
    from softrt.platform import get_platform

    if verb == ["--revert"]:  # something to revert, on a tree-free state: an empty tune of this machine
        state_dir.mkdir(parents=True)
        boot = open("/proc/sys/kernel/random/boot_id").read().strip()
        (state_dir / "tune-state.jsonl").write_text(
            json.dumps({"format": "softrt-tune-state", "version": 1, "root": "/", "boot_id": boot}) + "\n"
        )
    plat = get_platform()
    fd = plat.try_lock(plat.machine_lock_path("rt-loop"))  # held as softrt run holds it
    try:
        code, out, err = run_cli("tune", *verb)
    finally:
        os.close(fd)
    assert code == 2 and out == ""
    assert (
        f"real-time softrt run is in progress (pid {os.getpid()} (user {pwd.getpwuid(os.geteuid()).pw_name}" in err
        and err.count("\n") == 1
    )
    assert f"kill {os.getpid()}" in err
    assert (state_dir / "tune-state.jsonl").exists() == (verb == ["--revert"])


WINDOWS = Path(__file__).parent.parent / "audit" / "windows" / "fixtures"


def test_windows_plan_from_captures_and_apply_refused_there(run_cli, state_dir, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run_cli("tune", "--root", str(WINDOWS / "bad"), "--rt-cpus", "10-13")
    assert code == 0
    assert "sc.exe stop SysMain & sc.exe config SysMain start= disabled" in out
    assert "$obj.SetRTCores = 4" in out and "never applied" in out
    code, _, err = run_cli("tune", "--root", str(WINDOWS / "bad"), "--rt-cpus", "10-13", "--apply")
    assert code == 2 and "captured command outputs" in err


def test_threads_that_exited_are_counted_not_listed():
    """A revert after a busy hour: one line per kind, never one per exited thread."""
    from pathlib import Path

    from rich.console import Console

    from softrt.audit import Result
    from softrt.cli.tune import render_result
    from softrt.platform.journal import Outcome

    result = Result(
        Path("state"),
        [Outcome(target=f"python3 (30492/{tid})", status="gone", detail="the thread exited") for tid in range(51)]
        + [Outcome(target=f"bash ({pid}/{pid})", status="restored", detail="CPUs 0-1") for pid in range(64)]
        + [Outcome(target="/proc/sys/kernel/sched_rt_runtime_us", status="restored", detail="950000")],
    )
    console = Console(width=200, record=True)
    console.print(render_result(result, "Reverted"))
    lines = console.export_text().splitlines()
    assert lines == [
        "Reverted: 65 restored, 51 gone",
        "  kernel settings: restored sched_rt_runtime_us 950000",
        "  threads: restored 64 to CPUs 0-1; 51 left alone (exited, gone or already set)",
    ]


def test_the_undo_hint_acts_where_the_apply_did(run_cli, state_dir, vm, tmp_path, monkeypatch):
    """Issue 32: ``tune --apply --root TREE --state-file F`` ended with "Undo with: softrt tune --revert",
    which would act on this machine; the hint carries both options, and running it reverts the tree."""
    monkeypatch.setenv("COLUMNS", "400")
    before = trees.files_under(vm)
    state = tmp_path / "my state.jsonl"
    code, out, _ = run_cli("tune", "--root", str(vm), "--rt-cpus", "1")
    assert code == 0 and f"--apply --root {vm} (as root); undo with: softrt tune --revert --root {vm}\n" in out
    code, out, err = run_cli("tune", "--root", str(vm), "--rt-cpus", "1", "--apply", "--state-file", str(state))
    assert code == 0, err
    hint = out.rsplit("Undo with: ", 1)[1].strip()
    assert hint == f"softrt tune --revert --root {vm} --state-file '{state}'"
    code, out, err = run_cli(*__import__("shlex").split(hint)[1:])
    assert code == 0 and "Reverted:" in out, err
    assert trees.files_under(vm) == before and not state.exists()


def test_windows_tune_on_a_blind_machine_lists_what_it_could_not_read(run_cli, state_dir, monkeypatch, tmp_path):
    """Wine's Windows (issue 34): PowerShell prints nothing and powercfg is missing. The well-tuned machine's
    plan then has no step, and says so without claiming that no change is needed; each unreadable check is
    listed with what would read it, and the command to apply says Administrator, not root."""
    from softrt.audit.windows.facts import CSP, DEFENDER, POWER, RSS

    from ..audit.windows.captures import Captures

    monkeypatch.setenv("COLUMNS", "250")
    caps = Captures.copy("good", tmp_path / "blind")
    for argv in (CSP, DEFENDER, RSS):
        caps.set(argv, "")
    caps.fail(POWER, "'powercfg.exe' is not recognized as an internal or external command", rc=127)
    code, out, _ = run_cli("tune", "--root", str(caps), "--rt-cpus", "10-13")
    assert code == 0
    assert "No run-time change needed" not in out
    assert "No run-time change found, but 2 fatal/high check(s) could not be read" in out
    lines = out.splitlines()
    head = lines.index("Could not be read, so nothing is planned for them (4):")
    assert [ln.split(":", 1)[0] for ln in lines[head + 1 : head + 5]] == [
        "  idle.idle_disable (high)",
        "  irq.rss (high)",
        "  cores.csp (medium)",
        "  services.defender (medium)",
    ]
    listed = "\n".join(lines[head + 1 : head + 5])
    assert "read it with: powercfg.exe, missing here" in listed
    assert listed.count("read it with: a working Windows PowerShell (it printed nothing") == 3
    assert "(as Administrator); undo with: softrt tune --revert" in out and "as root" not in out
    code, out, _ = run_cli("tune", "--root", str(caps), "--rt-cpus", "10-13", "--json")
    plan = json.loads(out)["plan"]
    assert plan["unknown"] == ["idle.idle_disable", "irq.rss"] and len(plan["unreadable"]) == 4
    assert plan["unreadable"][0]["reader"].startswith("powercfg.exe, missing here")
