"""A machine's host facts: what a reader of a result needs to know about it (schema layer).

Built by each platform backend (``Platform.host_facts``: Linux from uname(2), /proc/cpuinfo,
/proc/cmdline and the clocksource; Windows from the registry's CurrentVersion and CentralProcessor
keys), with the keys in the order the backend gives them (:meth:`Doc.build`). A run's summary keeps
them as its free-form ``host`` object (``RunSummary.host``: an imported tool's ``sysinfo`` gives other
keys), so ``HostFacts.to_dict()`` is what it stores. None where the OS does not tell (Windows has no
preemption model, kernel command line or RT throttling).
"""

from __future__ import annotations

from .doc import Doc, count, opt


class HostFacts(Doc):
    """This machine: its OS, kernel, CPU, Python and softrt (platform host_facts)."""

    os: str | None = None  # "linux" or "windows"
    hostname: str | None = None
    kernel: str | None = None  # the release (Windows: "Windows 11 23H2 (build 22631.4460)")
    kernel_version: str | None = None  # uname's version: the build's date and its preemption flags
    windows_build: int | None = opt()  # CurrentBuildNumber (Windows only)
    edition: str | None = opt()  # "IoTEnterprise", "IoTEnterpriseS" (LTSC), ... (Windows only)
    machine: str | None = None
    preemption: str | None = None  # "PREEMPT_RT", "PREEMPT_DYNAMIC:full", ... (Linux only)
    cpu_model: str | None = None
    cpu_count: int | None = count()  # the online CPUs
    cmdline: str | None = None  # the kernel command line (Linux only)
    python: str | None = None
    softrt: str | None = None
    clocksource: str | None = None
    rt_runtime_us: int | None = None  # /proc/sys/kernel/sched_rt_runtime_us before the run (-1: no throttling)
