"""Apply and revert on trees: journal first, exact restore, and every bad state file refused."""

from __future__ import annotations

import errno
import json
import os

import pytest

from softrt.audit import Plan, Status, Step, apply_plan, plan_tune, revert, run_checks
from softrt.cpus import CpuSet
from softrt.errors import ConfigError

from .test_tune_plan import break_everything
from .trees import files_under as _all_files
from .trees import kernel_writer

RT = CpuSet([3])
FIXED = {
    "irq.nic",
    "irq.devices",
    "irq.default_affinity",
    "cores.workqueue",
    "services.watchdog",
    "kernel.rt_throttling",
    "idle.states",
    "kernel.governor",
    "services.ksm",
    "services.thp",
    "services.numa_balancing",
    "kernel.timer_migration",
    "kernel.clocksource",
    "kernel.fair_server",
}


def files_under(root):
    """Every file the tune may touch. effective_affinity is left out: the kernel picks it anew from
    the restored smp_affinity (the x86 vector allocator), it is not a value tune sets."""
    return {k: v for k, v in _all_files(root).items() if not k.endswith("effective_affinity")}


@pytest.fixture
def untuned(good):
    return break_everything(good)


def statuses(tree):
    return {f.id: f.status for f in run_checks(RT, str(tree), sample_s=0).findings}


def test_apply_fixes_the_checks_and_revert_restores_every_byte(untuned, state_dir):
    before_files = files_under(untuned.root)
    before = statuses(untuned)
    assert all(before[c] in (Status.FAIL, Status.WARN) for c in FIXED)

    result = apply_plan(plan_tune(RT, str(untuned)), writer=kernel_writer)
    assert result.complete and result.count("applied") == 16
    after = statuses(untuned)
    assert {c for c in FIXED if after[c] is not Status.OK} == set()

    undone = revert(str(untuned), writer=kernel_writer)
    assert undone.complete and undone.count("restored") == 16
    assert files_under(untuned.root) == before_files
    assert not result.state_path.exists()


@pytest.mark.parametrize("stop_after", [1, 4, 9, 15])
def test_an_interrupted_apply_can_be_reverted(untuned, state_dir, stop_after):
    before_files = files_under(untuned.root)
    calls = []

    def dies(path, value):
        calls.append(path)
        kernel_writer(path, value)
        if len(calls) == stop_after:
            raise KeyboardInterrupt  # the user pressed ^C right after this change

    with pytest.raises(KeyboardInterrupt):
        apply_plan(plan_tune(RT, str(untuned)), writer=dies)
    assert files_under(untuned.root) != before_files
    undone = revert(str(untuned), writer=kernel_writer)
    assert undone.complete and undone.count("restored") == stop_after
    assert files_under(untuned.root) == before_files


def test_a_half_written_last_line_is_ignored(untuned, state_dir):
    before_files = files_under(untuned.root)
    result = apply_plan(plan_tune(RT, str(untuned)), writer=kernel_writer)
    with open(result.state_path, "a") as fh:
        fh.write('{"kind": "file", "target": "/proc/sys/kern')  # killed while journalling; change never made
    assert revert(str(untuned), writer=kernel_writer).complete
    assert files_under(untuned.root) == before_files


@pytest.mark.parametrize("code", [errno.EIO, errno.EPERM])
def test_an_irq_the_kernel_refuses_to_move_is_reboot_only_not_a_failure(untuned, state_dir, code):
    """An older kernel gives every smp_affinity a write bit, so the plan cannot know a managed IRQ;
    the kernel's refusal (EIO, EPERM on newer kernels) says the change is a reboot's."""
    before_files = files_under(untuned.root)

    def managed_irq(path, value):
        if path.parent.name == "120":
            raise OSError(code, os.strerror(code))
        kernel_writer(path, value)

    result = apply_plan(plan_tune(RT, str(untuned)), writer=managed_irq)
    assert result.complete and result.count("failed") == 0
    kept = [o for o in result.outcomes if o.target == "/proc/irq/120/smp_affinity"]
    assert kept[0].status == "skipped" and "isolcpus=managed_irq" in kept[0].detail
    assert revert(str(untuned), writer=kernel_writer).complete
    assert files_under(untuned.root) == before_files


def test_a_refused_write_is_reported_and_still_reverted(untuned, state_dir):
    before_files = files_under(untuned.root)

    def refuses(path, value):
        if path.name == "timer_migration":
            raise OSError(errno.EINVAL, "Invalid argument")
        kernel_writer(path, value)

    result = apply_plan(plan_tune(RT, str(untuned)), writer=refuses)
    failed = [o for o in result.outcomes if o.status == "failed"]
    assert not result.complete and [o.target for o in failed] == ["/proc/sys/kernel/timer_migration"]
    assert failed[0].detail == "Invalid argument"
    assert revert(str(untuned), writer=kernel_writer).complete
    assert files_under(untuned.root) == before_files


def test_a_second_apply_is_refused_and_changes_nothing(untuned, state_dir):
    apply_plan(plan_tune(RT, str(untuned)), writer=kernel_writer)
    untuned.set("/proc/sys/kernel/timer_migration", "1")  # so that a second plan has something to do
    tuned_files = files_under(untuned.root)
    with pytest.raises(ConfigError, match="already applied"):
        apply_plan(plan_tune(RT, str(untuned)), writer=kernel_writer)
    assert files_under(untuned.root) == tuned_files


@pytest.mark.parametrize(
    "content,words",
    [
        (None, "nothing to revert"),
        ("this is not json\n{}\n", "corrupt"),
        ('{"format": "something-else", "version": 1}\n', "not a softrt tune state"),
        ('{"format": "softrt-tune-state", "version": 99, "root": "R"}\n', "version 99"),
        ('{"format": "softrt-tune-state", "version": 1, "root": "/elsewhere"}\n', "saved for root"),
        ('{"format": "softrt-tune-state", "version": 1, "root": "R", "boot_id": "another-boot"}\n', "earlier boot"),
        (
            '{"format": "softrt-tune-state", "version": 1, "root": "R"}\n{"kind": "teleport", "target": "x"}\n',
            "corrupt",
        ),
        ('{"format": "softrt-tune-state", "version": 1, "root": "R"}\n{"kind": "file"}\n', "corrupt"),
        (
            '{"format": "softrt-tune-state", "version": 1, "root": "R"}\nnot json\n{"kind": "file"}\n',
            "corrupt",
        ),  # Crafted entries: revert must never write outside /proc and /sys, nor crash on wrong types.
        (
            '{"format": "softrt-tune-state", "version": 1, "root": "R"}\n{"kind": "file", "target": "/../../tmp/victim", "before": "x", "restore": "x"}\n',
            "corrupt",
        ),
        (
            '{"format": "softrt-tune-state", "version": 1, "root": "R"}\n{"kind": "file", "target": "/etc/passwd", "before": "x", "restore": "x"}\n',
            "corrupt",
        ),
        (
            '{"format": "softrt-tune-state", "version": 1, "root": "R"}\n{"kind": "file", "target": "/proc/../etc/x", "before": "x", "restore": "x"}\n',
            "corrupt",
        ),
        (
            '{"format": "softrt-tune-state", "version": 1, "root": "R"}\n{"kind": "file", "target": 5, "before": "x", "restore": "x"}\n',
            "corrupt",
        ),
        (
            '{"format": "softrt-tune-state", "version": 1, "root": "R"}\n{"kind": "file", "target": "/proc/sys/x", "before": "x", "restore": 0}\n',
            "corrupt",
        ),
        ('{"format": "softrt-tune-state", "version": 1, "root": "R"}\n{"kind": [], "target": "x"}\n', "corrupt"),
        (
            '{"format": "softrt-tune-state", "version": 1, "root": "R"}\n{"kind": "affinity", "target": "abc", "tid": 1, "before": "0"}\n',
            "corrupt",
        ),
        (
            '{"format": "softrt-tune-state", "version": 1, "root": "R"}\n{"kind": "affinity", "target": "12", "tid": 12, "before": "zero"}\n',
            "corrupt",
        ),
        (
            '{"format": "softrt-tune-state", "version": 1, "root": "R"}\n{"kind": "service", "target": "../../bin/sh", "before": "active"}\n',
            "corrupt",
        ),
    ],
)
def test_bad_state_files_are_refused_and_nothing_changes(untuned, state_dir, content, words):
    path = state_dir / "tune-state.jsonl"
    if content is not None:
        state_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(content.replace('"R"', json.dumps(str(untuned))))
    before_files = files_under(untuned.root)
    with pytest.raises(ConfigError, match=words):
        revert(str(untuned), writer=kernel_writer)
    assert files_under(untuned.root) == before_files
    assert path.exists() == (content is not None)  # a refused state file is never deleted


def test_revert_reports_a_value_that_does_not_read_back(untuned, state_dir):
    result = apply_plan(plan_tune(RT, str(untuned)), writer=kernel_writer)

    def stuck(path, value):  # a file that ignores the restore (as a driver might)
        if path.name != "timer_migration":
            kernel_writer(path, value)

    undone = revert(str(untuned), writer=stuck)
    assert not undone.complete
    assert [o.target for o in undone.outcomes if o.status == "mismatch"] == ["/proc/sys/kernel/timer_migration"]
    assert result.state_path.exists()  # kept, so the user can retry


def test_apply_on_this_machine_needs_root(monkeypatch, state_dir):
    plan = Plan(
        CpuSet([1]),
        CpuSet([0]),
        "/",
        steps=[Step(kind="file", target="/proc/sys/kernel/timer_migration", now="1", after="0", check="x", why="y")],
    )
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(ConfigError, match="needs root"):
        apply_plan(plan)
    assert not (state_dir / "tune-state.jsonl").exists()


class FakeSystemctl:
    """Records systemctl calls; units start active."""

    def __init__(self):
        self.active = {"irqbalance.service": True, "apt-daily.timer": True}
        self.calls = []

    def __call__(self, argv):
        self.calls.append(argv[1:])
        verb, unit = argv[1], argv[2]
        if verb == "is-active":
            return (0, "active") if self.active.get(unit) else (3, "inactive")
        self.active[unit] = verb == "start"
        return 0, ""


def test_services_are_stopped_and_started_again(good, state_dir):
    plan = Plan(
        RT,
        CpuSet([0, 1, 2]),
        str(good),
        steps=[
            Step(kind="service", target=unit, now="active", after="inactive", check=check, why="why")
            for unit, check in (("irqbalance.service", "services.irqbalance"), ("apt-daily.timer", "updates.agents"))
        ],
    )
    systemctl = FakeSystemctl()
    assert apply_plan(plan, runner=systemctl).complete
    assert systemctl.active == {"irqbalance.service": False, "apt-daily.timer": False}
    assert revert(str(good), runner=systemctl).complete
    assert systemctl.active == {"irqbalance.service": True, "apt-daily.timer": True}
    assert systemctl.calls[-4:] == [
        ["start", "apt-daily.timer"],
        ["is-active", "apt-daily.timer"],
        ["start", "irqbalance.service"],
        ["is-active", "irqbalance.service"],
    ]


def test_an_apply_that_changes_nothing_keeps_no_state(untuned, state_dir):
    untuned.set("/proc/sys/kernel/timer_migration", "0")  # already as planned when apply reads it
    plan = Plan(
        RT,
        CpuSet([0, 1, 2]),
        str(untuned),
        steps=[
            Step(
                kind="file",
                target="/proc/sys/kernel/timer_migration",
                now="1",
                after="0",
                check="kernel.timer_migration",
                why="why",
            )
        ],
    )
    result = apply_plan(plan, writer=kernel_writer)
    assert [o.status for o in result.outcomes] == ["skipped"] and not result.saved
    assert not result.state_path.exists() and result.document().to_dict()["state_path"] is None
    # ... so a real apply afterwards is not refused as "already applied".
    assert apply_plan(plan_tune(RT, str(untuned)), writer=kernel_writer).saved
    assert revert(str(untuned), writer=kernel_writer).complete


def test_cli_apply_that_changes_nothing_says_so(run_cli, good, state_dir):
    code, out, err = run_cli("tune", "--rt-cpus", "3", "--apply", "--root", str(good))
    assert code == 0, err
    assert "Nothing was changed" in out and "saved in" not in out
    assert not (state_dir / "tune-state.jsonl").exists()


def test_state_root_is_compared_by_real_path(untuned, state_dir, tmp_path):
    alias = tmp_path / "alias"
    alias.symlink_to(untuned.root)
    before_files = files_under(untuned.root)
    result = apply_plan(plan_tune(RT, str(alias) + "/"), writer=kernel_writer)
    header = json.loads(result.state_path.read_text().splitlines()[0])
    assert header["root"] == os.path.realpath(untuned.root)
    assert revert(str(untuned), writer=kernel_writer).complete  # the same tree, named differently
    assert files_under(untuned.root) == before_files
    apply_plan(plan_tune(RT, str(untuned)), writer=kernel_writer)
    assert revert(str(alias), writer=kernel_writer).complete
    assert files_under(untuned.root) == before_files


def test_kernel_file_writers_share_one_raw_write(tmp_path, monkeypatch):
    from softrt.audit.linux import apply
    from softrt.errors import SoftRTError
    from softrt.platform import kfiles
    from softrt.platform.linux import writable
    from softrt.trace import tracefs

    f = tmp_path / "proc" / "sys" / "x"
    f.parent.mkdir(parents=True)
    f.write_text("old value\n")
    writes = []
    real_write = os.write

    def counting(fd, data):
        writes.append(bytes(data))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", counting)
    kfiles.write_raw(f, "1")
    assert f.read_bytes() == b"1" and writes == [b"1"]  # as given, in one write(2)
    apply.write_kernel_file(f, "2")
    assert f.read_bytes() == b"2\n" and writes[-1] == b"2\n"  # echo's newline
    kfiles.write_text(tmp_path, "/proc/sys/x", "3")
    assert f.read_bytes() == b"3" and len(writes) == 3
    with pytest.raises(FileNotFoundError):  # raw: the OSError itself, for the caller's own message
        kfiles.write_raw(tmp_path / "missing", "1")
    with pytest.raises(SoftRTError, match="cannot write /missing"):
        kfiles.write_text(tmp_path, "/missing", "1")
    assert tracefs.write_raw is kfiles.write_raw  # the trace layer writes tracefs
    assert apply.write_kernel_file is writable.write_line  # the journal's restores write the same way


# --- hostile state files: revert writes only the kernel files tune writes (issue 12, defect 1) -------


def _state_with(root, target, boot_id=None):
    header = {"format": "softrt-tune-state", "version": 1, "root": os.path.realpath(str(root))}
    if boot_id:
        header["boot_id"] = boot_id
    entry = {"kind": "file", "target": target, "before": "x\n", "restore": "PWNED"}
    return json.dumps(header) + "\n" + json.dumps(entry) + "\n"


@pytest.mark.parametrize("proc_root", ["/proc/self/root", "/proc/1/root"])
def test_revert_never_writes_through_a_proc_root_link_in_a_tree(untuned, state_dir, tmp_path, proc_root):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    untuned.link(f"{proc_root}", "/")  # as /proc/PID/root is, a link to the process's root directory
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / "tune-state.jsonl").write_text(_state_with(untuned, f"{proc_root}{victim}"))
    with pytest.raises(ConfigError, match="corrupt"):
        revert(str(untuned), writer=kernel_writer)
    assert victim.read_text() == "precious\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="revert on this machine needs root")
@pytest.mark.parametrize("proc_root", ["/proc/self/root", "/proc/1/root"])
def test_revert_on_this_machine_never_writes_through_proc_root(state_dir, tmp_path, proc_root):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    boot = open("/proc/sys/kernel/random/boot_id").read().strip()
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / "tune-state.jsonl").write_text(_state_with("/", f"{proc_root}{victim}", boot))
    with pytest.raises(ConfigError, match="corrupt"):
        revert("/")
    assert victim.read_text() == "precious\n"


def test_revert_refuses_a_target_that_is_a_symlink_out_of_the_tree(untuned, state_dir, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    untuned.link("/proc/sys/kernel/timer_migration", str(victim))
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / "tune-state.jsonl").write_text(_state_with(untuned, "/proc/sys/kernel/timer_migration"))
    with pytest.raises(ConfigError, match="corrupt"):
        revert(str(untuned), writer=kernel_writer)
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize(
    "target,restore",
    [
        ("/proc/sys/kernel/sched_rt_runtime_us", "2000000"),  # above sched_rt_period_us
        ("/proc/sys/kernel/sched_rt_runtime_us", "-1; reboot"),
        ("/proc/irq/120/smp_affinity", "zz"),
        ("/sys/devices/system/cpu/cpu3/cpuidle/state1/disable", "2"),
        ("/sys/devices/system/cpu/cpu3/cpufreq/scaling_governor", "../../x"),
        ("/proc/sys/kernel/core_pattern", "|/tmp/x"),  # a kernel file, but not one tune writes
    ],
)
def test_revert_refuses_a_value_the_file_does_not_take(untuned, state_dir, target, restore):
    header = {"format": "softrt-tune-state", "version": 1, "root": os.path.realpath(str(untuned))}
    entry = {"kind": "file", "target": target, "before": "x\n", "restore": restore}
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / "tune-state.jsonl").write_text(json.dumps(header) + "\n" + json.dumps(entry) + "\n")
    untuned.set("/proc/sys/kernel/core_pattern", "core")
    before_files = files_under(untuned.root)
    with pytest.raises(ConfigError, match="corrupt"):
        revert(str(untuned), writer=kernel_writer)
    assert files_under(untuned.root) == before_files


def test_apply_never_writes_through_a_symlink_in_the_tree(untuned, state_dir, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("1\n")  # reads like timer_migration on, so the plan wants to switch it off
    untuned.link("/proc/sys/kernel/timer_migration", str(victim))
    result = apply_plan(plan_tune(RT, str(untuned)), writer=kernel_writer)
    # A link out of the tree is not even read (platform.kfiles opens beneath the root): no step for it.
    assert [o for o in result.outcomes if o.target == "/proc/sys/kernel/timer_migration"] == []
    assert victim.read_text() == "1\n"
    assert "timer_migration" not in result.state_path.read_text()  # never journalled either
    assert revert(str(untuned), writer=kernel_writer).complete
    assert victim.read_text() == "1\n"


def test_the_state_file_is_created_0600_in_a_0700_directory_and_never_through_a_symlink(untuned, state_dir, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    state_dir.mkdir(mode=0o700)
    (state_dir / "tune-state.jsonl").symlink_to(victim)
    with pytest.raises(ConfigError, match="already applied"):  # O_EXCL|O_NOFOLLOW: an existing name is never opened
        apply_plan(plan_tune(RT, str(untuned)), writer=kernel_writer)
    assert victim.read_text() == "precious\n"
    (state_dir / "tune-state.jsonl").unlink()
    result = apply_plan(plan_tune(RT, str(untuned)), writer=kernel_writer)
    assert oct(result.state_path.stat().st_mode & 0o777) == oct(0o600)
    assert revert(str(untuned), writer=kernel_writer).complete
