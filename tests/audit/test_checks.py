"""Every check, against a good synthetic tree and a tree broken in exactly the way it detects."""

from __future__ import annotations

import struct

import pytest

from softrt.audit import Status, run_checks
from softrt.audit.linux.checks import ALL
from softrt.audit.linux.checks.cores import check_sample, check_tasks
from softrt.audit.linux.context import Context
from softrt.cpus import CpuSet
from softrt.schema.audit import LiveSample

RT = CpuSet([3])

OK, WARN, FAIL, NA = Status.OK, Status.WARN, Status.FAIL, Status.NA
FAIR3 = "/sys/kernel/debug/sched/fair_server/cpu3/runtime"
KCONFIG_NO_RT = "CONFIG_PREEMPT_DYNAMIC=y\nCONFIG_PREEMPT_VOLUNTARY=y\nCONFIG_HZ=250\nCONFIG_NO_HZ_IDLE=y\nCONFIG_RT_GROUP_SCHED=y\n"


def finding(tree, check_id, rt=RT):
    report = run_checks(rt, str(tree), sample_s=0)
    return next(f for f in report.findings if f.id == check_id)


def _no_isolation(t):
    t.set("/sys/devices/system/cpu/isolated", "")
    t.set("/proc/cmdline", "root=/dev/sda1 nohz_full=3 rcu_nocbs=3")


def _partition(t):
    _no_isolation(t)
    t.set("/sys/fs/cgroup/rt/cpuset.cpus.partition", "isolated")
    t.set("/sys/fs/cgroup/rt/cpuset.cpus.effective", "3")


def _deep_idle(t):
    t.idle_state(3, 2, "C6", 133, False)
    t.set("/dev/cpu_dma_latency", struct.pack("=i", 2000000000)).rm("/proc/500/fd")  # no PM QoS holder


def _deep_idle_under_qos(t):
    t.idle_state(3, 2, "C6", 133, False)
    t.set("/dev/cpu_dma_latency", struct.pack("=i", 20))


def _no_debugfs(t):
    return t.set("/proc/mounts", "proc /proc proc rw 0 0").rm("/sys/kernel/debug")


def _irqbalance(t):
    # irqbalance leaves isolcpus and nohz_full CPUs alone (irqbalance(1)); take those away first.
    t.set("/sys/devices/system/cpu/isolated", "").set("/sys/devices/system/cpu/nohz_full", "")
    t.task(700, "irqbalance", "0-3")
    t.link("/etc/systemd/system/multi-user.target.wants/irqbalance.service", "/lib/systemd/system/irqbalance.service")


CASES = [
    # (check, how to break the good machine, expected status, words in the summary)
    ("cores.isolation", None, OK, "isolcpus"),
    ("cores.isolation", _no_isolation, FAIL, "not reserved"),
    ("cores.isolation", _partition, OK, "partition"),
    ("cores.isolation", lambda t: t.rm("/sys/devices/system/cpu/isolated").rm("/proc/cmdline"), NA, "readable"),
    (
        "cores.nohz_full",
        lambda t: t.set("/sys/devices/system/cpu/nohz_full", "(null)").set("/proc/cmdline", "ro"),
        WARN,
        "tick",
    ),
    ("cores.nohz_full", lambda t: t.kconfig(KCONFIG_NO_RT), WARN, "NO_HZ_FULL"),
    ("cores.rcu_nocbs", None, OK, "rcuo"),
    ("cores.rcu_nocbs", lambda t: t.set("/proc/cmdline", "ro isolcpus=3"), WARN, "softirq"),
    ("cores.rcu_nocbs", lambda t: t.set("/proc/cmdline", "ro nohz_full=2-3"), OK, "rcuo"),
    ("cores.tasks", None, OK, "pinned application"),
    ("cores.tasks", lambda t: t.task(900, "MsMpEng", "0-3"), FAIL, "1 user process"),
    (
        "cores.tasks",
        lambda t: t.task(900, "python3", "0-2").task(900, "worker", "0-3", tid=905),
        FAIL,
        "1 user process",
    ),
    ("cores.tasks", lambda t: t.task(40, "khugepaged", "0-3", kthread=True), WARN, "kernel thread"),
    ("cores.tasks", lambda t: t.rm("/proc/1").rm("/proc/2").rm("/proc/30").rm("/proc/500"), NA, "no readable"),
    ("cores.workqueue", None, OK, "0-2"),
    ("cores.workqueue", lambda t: t.set("/sys/devices/virtual/workqueue/cpumask", "f"), WARN, "CPU 3"),
    ("cores.workqueue", lambda t: t.set("/sys/devices/virtual/workqueue/cpumask", "zz"), NA, "not a CPU mask"),
    ("idle.states", None, OK, "no idle state"),
    ("idle.states", _deep_idle, FAIL, "C6"),
    ("idle.states", _deep_idle_under_qos, OK, "PM QoS limit of 20"),
    ("idle.states", lambda t: t.idle_state(3, 1, "C1", 1, False), WARN, "shallow"),
    ("idle.states", lambda t: t.rm("/sys/devices/system/cpu/cpu3/cpuidle"), WARN, "halts"),
    (
        "idle.states",
        lambda t: t.rm("/sys/devices/system/cpu/cpu3/cpuidle").set("/proc/cmdline", "idle=poll"),
        OK,
        "poll",
    ),
    ("idle.cmdline", None, OK, "capped"),
    ("idle.cmdline", lambda t: t.set("/proc/cmdline", "ro isolcpus=3"), WARN, "133"),
    ("idle.pm_qos", None, OK, "rtapp (500)"),
    ("idle.pm_qos", lambda t: t.rm("/proc/500/fd"), OK, "nobody"),
    ("idle.pm_qos", lambda t: t.rm("/proc/500/fd").rm("/dev/cpu_dma_latency"), NA, "unreadable"),
    ("services.irqbalance", None, OK, "not running"),
    ("services.irqbalance", _irqbalance, FAIL, "may move IRQs onto CPU 3"),
    (
        "services.irqbalance",
        lambda t: (_irqbalance(t), t.set("/etc/default/irqbalance", 'IRQBALANCE_BANNED_CPULIST="3"')),
        OK,
        "alone",
    ),
    ("services.irqbalance", lambda t: t.task(700, "irqbalance", "0-3"), OK, "alone"),
    (
        "services.irqbalance",
        lambda t: (
            t.set("/sys/devices/system/cpu/isolated", ""),
            t.set("/sys/devices/system/cpu/nohz_full", ""),
            t.link("/etc/systemd/system/multi-user.target.wants/irqbalance.service", "/x"),
        ),
        WARN,
        "next boot",
    ),
    (
        "services.tuned",
        lambda t: t.task(710, "tuned", "0-2").set("/etc/tuned/active_profile", "throughput-performance"),
        WARN,
        "throughput-performance",
    ),
    (
        "services.tuned",
        lambda t: t.task(710, "tuned", "0-2").set("/etc/tuned/active_profile", "realtime"),
        OK,
        "realtime",
    ),
    ("services.ksm", lambda t: t.set("/sys/kernel/mm/ksm/run", "1"), WARN, "ksmd"),
    ("services.ksm", lambda t: t.rm("/sys/kernel/mm/ksm"), NA, "CONFIG_KSM"),
    ("services.watchdog", None, OK, "no lockup detector runs"),
    ("services.watchdog", lambda t: t.set("/proc/sys/kernel/watchdog_cpumask", "0-3"), FAIL, "CPU 3"),
    (
        "services.watchdog",
        lambda t: t.set("/proc/sys/kernel/watchdog_cpumask", "0-3").set("/proc/sys/kernel/watchdog", "0"),
        OK,
        "off",
    ),
    (
        "services.watchdog",
        lambda t: t.rm("/proc/sys/kernel/watchdog").rm("/proc/sys/kernel/soft_watchdog"),
        NA,
        "LOCKUP",
    ),
    (
        "services.thp",
        lambda t: t.set("/sys/kernel/mm/transparent_hugepage/enabled", "[always] madvise never"),
        WARN,
        "enabled",
    ),
    (
        "services.thp",
        lambda t: t.set("/sys/kernel/mm/transparent_hugepage/defrag", "[always] defer madvise never"),
        WARN,
        "defrag",
    ),
    ("services.thp", lambda t: t.rm("/sys/kernel/mm/transparent_hugepage"), NA, "TRANSPARENT"),
    (
        "services.numa_balancing",
        lambda t: t.set("/proc/sys/kernel/numa_balancing", "1").set("/sys/devices/system/node/online", "0-1"),
        WARN,
        "on",
    ),
    ("services.numa_balancing", lambda t: t.set("/proc/sys/kernel/numa_balancing", "1"), OK, "one NUMA node"),
    ("updates.agents", None, OK, "none"),
    (
        "updates.agents",
        lambda t: t.link("/etc/systemd/system/timers.target.wants/apt-daily.timer", "/lib/x"),
        WARN,
        "1 enabled",
    ),
    (
        "updates.agents",
        lambda t: t.link("/etc/systemd/system/timers.target.wants/apt-daily.timer", "/lib/x").rm("/run/systemd"),
        OK,
        "systemd is not running",
    ),
    (
        "updates.agents",
        lambda t: (
            t.link("/etc/systemd/system/timers.target.wants/apt-daily.timer", "/lib/x"),
            t.link("/etc/systemd/system/apt-daily.timer", "/dev/null"),
        ),
        OK,
        "none",
    ),
    ("updates.agents", lambda t: t.task(720, "unattended-upgr", "0-2"), WARN, "running now"),
    (
        "updates.maintenance",
        lambda t: t.link("/etc/systemd/system/timers.target.wants/man-db.timer", "/lib/x"),
        WARN,
        "1 enabled",
    ),
    ("irq.nic", None, OK, "eth0"),
    (
        "irq.nic",
        lambda t: t.set("/proc/irq/120/smp_affinity", "8").set("/proc/irq/120/effective_affinity", "8"),
        FAIL,
        "routed",
    ),
    ("irq.nic", lambda t: t.set("/proc/irq/120/smp_affinity", "f"), WARN, "allowed"),
    ("irq.nic", lambda t: t.rm("/sys/class/net/eth0"), OK, "no network-card"),
    ("irq.nic", lambda t: t.rm("/proc/irq"), NA, "unreadable"),
    (
        "irq.devices",
        lambda t: t.set("/proc/irq/121/smp_affinity", "8").set("/proc/irq/121/effective_affinity", "8"),
        FAIL,
        "1 IRQ(s) routed",
    ),
    ("irq.devices", lambda t: t.set("/proc/irq/121/smp_affinity", "c"), WARN, "allowed"),
    (
        "irq.devices",
        lambda t: t.set("/proc/irq/121/smp_affinity", "8").rm("/proc/irq/121/effective_affinity"),
        FAIL,
        "routed",
    ),
    ("irq.default_affinity", lambda t: t.set("/proc/irq/default_smp_affinity", "f"), WARN, "CPU 3"),
    ("irq.default_affinity", lambda t: t.rm("/proc/irq/default_smp_affinity"), NA, "unreadable"),
    (
        "kernel.rt_throttling",
        lambda t: t.set("/proc/sys/kernel/sched_rt_runtime_us", "950000").kconfig(KCONFIG_NO_RT),
        FAIL,
        "950000",
    ),
    ("kernel.rt_throttling", lambda t: t.set("/proc/sys/kernel/sched_rt_runtime_us", "950000"), OK, "admission"),
    (
        "kernel.rt_throttling",
        lambda t: t.set("/proc/sys/kernel/sched_rt_runtime_us", "950000").set(
            "/proc/sys/kernel/osrelease", "6.1.0-18-amd64"
        ),
        FAIL,
        "950000",
    ),
    ("kernel.rt_throttling", lambda t: t.rm("/proc/sys/kernel/sched_rt_runtime_us"), NA, "unreadable"),
    ("kernel.fair_server", None, OK, "off on the RT CPUs"),
    ("kernel.fair_server", lambda t: t.set(FAIR3, "50000000").task(700, "python3", "0-3"), FAIL, "python3 (700)"),
    ("kernel.fair_server", lambda t: t.set(FAIR3, "50000000"), WARN, "only per-CPU kernel threads"),
    ("kernel.fair_server", lambda t: t.set("/proc/sys/kernel/osrelease", "6.6.0-amd64"), NA, "came with 6.12"),
    ("kernel.fair_server", lambda t: _no_debugfs(t).task(700, "python3", "0-3"), FAIL, "in force on CPU 3"),
    ("kernel.preemption", None, OK, "PREEMPT_RT"),
    (
        "kernel.preemption",
        lambda t: (
            t.rm("/sys/kernel/realtime"),
            t.kconfig(KCONFIG_NO_RT),
            t.set("/proc/sys/kernel/version", "#1 SMP PREEMPT_DYNAMIC"),
        ),
        FAIL,
        "voluntary",
    ),
    (
        "kernel.preemption",
        lambda t: (
            t.rm("/sys/kernel/realtime"),
            t.kconfig(KCONFIG_NO_RT),
            t.set("/proc/sys/kernel/version", "#1 SMP PREEMPT_DYNAMIC"),
            t.set("/sys/kernel/debug/sched/preempt", "none voluntary (full) lazy"),
        ),
        WARN,
        "full",
    ),
    (
        "kernel.preemption",
        lambda t: (
            t.rm("/sys/kernel/realtime"),
            t.kconfig(KCONFIG_NO_RT),
            t.set("/proc/sys/kernel/version", "#1 SMP PREEMPT_DYNAMIC"),
            t.set("/proc/cmdline", "preempt=lazy"),
        ),
        WARN,
        "lazy",
    ),
    (
        "kernel.preemption",
        lambda t: (t.rm("/sys/kernel/realtime"), t.rm("/proc/config.gz"), t.set("/proc/sys/kernel/version", "#1 SMP")),
        NA,
        "cannot tell",
    ),
    ("kernel.tick", lambda t: t.kconfig(KCONFIG_NO_RT), WARN, "NO_HZ_IDLE"),
    ("kernel.tick", lambda t: t.kconfig("CONFIG_HZ=1000\nCONFIG_HZ_PERIODIC=y\n"), OK, "periodic"),
    ("kernel.tick", lambda t: t.rm("/proc/config.gz"), NA, "config"),
    (
        "kernel.smt",
        lambda t: t.set("/sys/devices/system/cpu/smt/control", "on").set(
            "/sys/devices/system/cpu/cpu3/topology/core_cpus_list", "1,3"
        ),
        FAIL,
        "CPU 1 share",
    ),
    ("kernel.smt", None, OK, "off"),
    ("kernel.governor", None, OK, "performance"),
    (
        "kernel.governor",
        lambda t: t.set("/sys/devices/system/cpu/cpu3/cpufreq/scaling_governor", "powersave"),
        FAIL,
        "powersave",
    ),
    ("kernel.governor", lambda t: t.rm("/sys/devices/system/cpu/cpu3/cpufreq"), NA, "cpufreq"),
    ("kernel.boost", lambda t: t.set("/sys/devices/system/cpu/intel_pstate/no_turbo", "0"), WARN, "on"),
    ("kernel.boost", lambda t: t.rm("/sys/devices/system/cpu/intel_pstate"), NA, "boost"),
    (
        "kernel.clocksource",
        lambda t: t.set("/sys/devices/system/clocksource/clocksource0/current_clocksource", "hpet"),
        WARN,
        "hpet",
    ),
    ("kernel.clocksource", lambda t: t.rm("/sys/devices/system/clocksource"), NA, "unreadable"),
    ("kernel.timer_migration", lambda t: t.set("/proc/sys/kernel/timer_migration", "1"), WARN, "on"),
    (
        "kernel.swap",
        lambda t: t.set("/proc/swaps", "Filename Type Size Used Priority\n/dev/sda2 partition 1024 0 -2"),
        WARN,
        "/dev/sda2",
    ),
]


@pytest.mark.parametrize(
    "check_id,breaks,status,words", CASES, ids=[f"{c[0]}-{c[2].name.lower()}-{i}" for i, c in enumerate(CASES)]
)
def test_check(good, check_id, breaks, status, words):
    if breaks:
        breaks(good)
    f = finding(good, check_id)
    assert f.status is status, f
    assert words in f.summary, f.summary
    if status in (FAIL, WARN):
        assert f.fix and f.why, f"{check_id} must say why it matters and how to fix it"
    if status is NA:
        assert f.summary, "n/a must give its reason"


def test_smt_two_rt_siblings_share_a_core(good):
    good.set("/sys/devices/system/cpu/smt/control", "on")
    for cpu in (2, 3):
        good.set(f"/sys/devices/system/cpu/cpu{cpu}/topology/core_cpus_list", "2-3")
    good.set("/sys/devices/system/cpu/isolated", "2-3")
    f = finding(good, "kernel.smt", rt=CpuSet([2, 3]))
    assert f.status is WARN and "share one core" in f.summary


def test_every_check_has_a_case():
    ids = {c[0] for c in CASES} | {"cores.sample"}
    assert ids == {f"{c.__module__.rsplit('.', 1)[-1]}.{c.__name__.removeprefix('check_')}" for c in ALL}


def test_every_check_reports_under_the_id_title_and_severity_it_declares(good):
    report = run_checks(RT, str(good), sample_s=0)
    assert [(f.id, f.title) for f in report.findings] == [(c.found.id, c.found.title) for c in ALL]
    assert all(f.severity is c.found.severity for f, c in zip(report.findings, ALL) if f.status is not Status.NA)
    assert [c.found.id for c in ALL] == [
        f"{c.__module__.rsplit('.', 1)[-1]}.{c.__name__.removeprefix('check_')}" for c in ALL
    ]


@pytest.mark.parametrize("name", ["check_preemption", "check_rt_throttling"])
def test_a_fatal_or_high_check_that_raises_keeps_the_verdict_from_ready(good, monkeypatch, name):
    """A Linux check that raised was reported n/a at low severity: a fatal or high one that could not
    be read let the verdict say READY."""
    from softrt.audit.linux import runner
    from softrt.audit.linux.checks import kernel

    report = run_checks(RT, str(good), sample_s=0)
    check = getattr(kernel, name)
    assert report.ready, "the captured machine must be ready for this test to mean anything"

    def broken(ctx, found):
        raise ValueError("bad bytes")

    crashing = kernel.declare(check.found.id, check.found.title, check.found.severity)(broken)
    monkeypatch.setattr(runner, "ALL", tuple(crashing if c is check else c for c in runner.ALL))
    report = run_checks(RT, str(good), sample_s=0)
    f = next(f for f in report.findings if f.id == check.found.id)
    assert f.status is Status.NA and f.unreadable and "bad bytes" in f.summary
    assert (f.title, f.severity) == (check.found.title, check.found.severity) and f.severity.rank <= 1
    assert not report.ready and report.verdict.startswith("UNKNOWN")


@pytest.mark.parametrize(
    "tasks,status",
    [
        (
            [
                {"comm": "swapper/3", "pid": 0, "cpu_ms": 1990.0, "kind": "idle"},
                {"comm": "ksoftirqd/3", "pid": 30, "cpu_ms": 0.2, "kind": "kthread-percpu"},
            ],
            OK,
        ),
        ([{"comm": "MsMpEng", "pid": 900, "cpu_ms": 12.5, "kind": "user"}], WARN),
        ([{"comm": "cc1", "pid": 901, "cpu_ms": 300.0, "kind": "exited"}], WARN),
        ([{"comm": "rtapp", "pid": 500, "cpu_ms": 1999.0, "kind": "rt-app"}], OK),
        # Pinned to the RT CPUs only but SCHED_OTHER: not the real-time application, a finding.
        (
            [
                {"comm": "rtapp", "pid": 500, "cpu_ms": 1999.0, "kind": "rt-app"},
                {"comm": "MsMpEng", "pid": 902, "cpu_ms": 35.25, "kind": "pinned"},
            ],
            WARN,
        ),
    ],
)
def test_sample_check(good, tasks, status):
    ctx = Context(str(good), RT, CpuSet(range(4)))
    ctx.sample = LiveSample.from_dict(
        {
            "method": "tracefs sched_switch",
            "seconds": 2.0,
            "idle_share": 0.5,
            "lost_events": 0,
            "tasks": tasks,
            "error": None,
        }
    )
    f = check_sample(ctx)
    assert f.status is status
    if status is WARN:
        intruder = tasks[-1]
        assert f"{intruder['comm']} (pid {intruder['pid']}" in f.summary and f"{intruder['cpu_ms']:.2f} ms" in f.summary
        assert "rtapp" not in f.summary
        assert ("taskset -apc" in f.fix) is (intruder["kind"] == "pinned")


def test_sample_error_is_not_applicable(good):
    ctx = Context(str(good), RT, CpuSet(range(4)))
    ctx.sample = LiveSample.build(error="permission denied", tasks=[])
    assert check_sample(ctx).status is NA


def test_classify_takes_only_a_real_time_task_for_the_application(good):
    """A task pinned to the RT CPUs only is the real-time application only with FIFO/RR/DEADLINE."""
    from softrt.audit.linux.sample import classify

    good.task(600, "indexer", "3", policy=0, processor=3)  # SCHED_OTHER, pinned to CPU 3 only
    good.task(601, "dl-app", "3", policy=6, processor=3)  # SCHED_DEADLINE
    good.task(602, "batch", "2-3", policy=3, processor=3)  # allowed elsewhere too
    rt = CpuSet([3])
    assert classify(str(good), 500, rt) == "rt-app"  # rtapp: SCHED_FIFO 80, CPU 3 only
    assert classify(str(good), 601, rt) == "rt-app"
    assert classify(str(good), 600, rt) == "pinned"
    assert classify(str(good), 602, rt) == "user"
    assert classify(str(good), 0, rt) == "idle" and classify(str(good), 99999, rt) == "exited"


def test_tasks_check_separates_pinned_real_time_from_pinned_other(good):
    good.task(600, "indexer", "3", policy=0, processor=3)
    ctx = Context(str(good), RT, CpuSet(range(4)))
    evidence = "\n".join(check_tasks(ctx).evidence)
    assert "real-time application): rtapp (500) SCHED_FIFO" in evidence
    assert "not real-time (reported by the live sample if they run there): indexer (600) SCHED_OTHER" in evidence


def test_an_irq_the_kernel_keeps_is_a_reboot_fix_not_a_tune_one(good):
    """A managed queue routed to the RT CPU: softrt tune cannot move it, so check must not send the user there."""
    good.set("/proc/irq/121/smp_affinity", "8").set("/proc/irq/121/effective_affinity", "8")
    f = finding(good, "irq.devices")
    assert f.status is Status.FAIL and f.tunable
    good.path("/proc/irq/121/smp_affinity").chmod(0o444)  # read-only: the kernel keeps it (kernel/irq/proc.c)
    f = finding(good, "irq.devices")
    assert f.status is Status.FAIL and not f.tunable and f.reboot
    assert "the kernel moves it only at boot" in f.evidence[0] and "isolcpus=managed_irq" in f.fix


def test_fair_server_unreadable_says_why_and_how_to_fix(good):
    """debugfs not mounted (a tree: nothing can mount it there), or not in the kernel at all."""
    _no_debugfs(good).task(700, "python3", "0-3")
    f = finding(good, "kernel.fair_server")
    assert "debugfs is not mounted at /sys/kernel/debug" in f.evidence[0] and "50 ms" in f.evidence[0]
    assert f.fix.startswith("mount -t debugfs none /sys/kernel/debug, then softrt tune --rt-cpus 3")
    good.set("/proc/filesystems", "nodev\tproc")
    f = finding(good, "kernel.fair_server")
    assert "CONFIG_DEBUG_FS off" in f.evidence[0] and f.fix.startswith("the runtime cannot be changed here")
    assert "python3 (700)" in f.evidence[1] and "ksoftirqd/3" in f.evidence[2]


def test_fair_server_readable_gives_the_exact_write(good):
    good.set(FAIR3, "50000000").task(700, "python3", "0-3")
    f = finding(good, "kernel.fair_server")
    assert f.evidence[0] == "cpu3: runtime 50 ms of every 1000 ms"
    assert f.fix.startswith("echo 0 > /sys/kernel/debug/sched/fair_server/cpu3/runtime (softrt tune does it")
