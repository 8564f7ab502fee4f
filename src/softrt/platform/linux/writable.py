"""The kernel files softrt writes and the values each takes: the one check before every write (platform layer).

softrt runs as root and reads back what it wrote to journals and state files, so every write of a
kernel file (a run's RT throttling, each step of ``softrt tune``, every restore) passes
:func:`check` first. A target is an allow-listed pattern, resolved with realpath(3) under the
root and matched again *after* resolution, never by prefix: ``/proc/self/root/etc/passwd``,
``/proc/1/root/...``, a symlink out of a tree and ``..`` are refused. A value must be one the file
takes:

* ``sched_rt_runtime_us``: an integer from -1 to ``sched_rt_period_us``
  (Documentation/scheduler/sched-rt-group.rst);
* the fair server's ``runtime`` (debugfs ``sched/fair_server/cpuN``, Linux 6.12+): ns from 0 to its
  ``period`` (kernel/sched/debug.c ``sched_fair_server_write``);
* IRQ and workqueue masks: a hex CPU mask, IRQ lists and ``watchdog_cpumask``: a CPU list
  (Documentation/core-api/irq/irq-affinity.rst, Documentation/admin-guide/sysctl/kernel.rst);
* cpuidle ``disable`` and on/off sysctls: 0 or 1 (Documentation/admin-guide/pm/cpuidle.rst);
* governor, clocksource and THP selectors: one word of ``[A-Za-z0-9_+.-]``.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Callable
from pathlib import Path

from ...errors import ConfigError
from ..kfiles import read_int, write_raw

MAX_TARGET_CHARS = 256
MAX_MASK_CHARS = 2400  # 8192 CPUs: 2048 hex digits and a comma every 8
DEFAULT_RT_PERIOD_US = 1_000_000  # the kernel's default, when a tree has no sched_rt_period_us
DEFAULT_FAIR_PERIOD_NS = 1_000_000_000  # the fair server's default period (Linux 6.12+)

_MASK = re.compile(r"[0-9a-fA-F]{1,8}(,[0-9a-fA-F]{1,8})*")
_CPULIST = re.compile(r"[0-9]{1,5}(-[0-9]{1,5})?(,[0-9]{1,5}(-[0-9]{1,5})?)*")
_WORD = re.compile(r"[A-Za-z0-9_+.-]{1,32}")
_INT = re.compile(r"-?[0-9]{1,10}")


def _mask(value: str, root: str) -> bool:
    return len(value) <= MAX_MASK_CHARS and _MASK.fullmatch(value) is not None


def is_cpulist(value: str, root: str = "/") -> bool:
    """True for a CPU list such as ``0-2,5`` (the syntax of cpuset(7) "List format"), within bounds."""
    return len(value) <= MAX_MASK_CHARS and _CPULIST.fullmatch(value) is not None


def _word(value: str, root: str) -> bool:
    return _WORD.fullmatch(value) is not None and ".." not in value


def _between(low: int, high: int) -> Callable[[str, str], bool]:
    def accepts(value: str, root: str) -> bool:
        return _INT.fullmatch(value) is not None and low <= int(value) <= high

    return accepts


def _fair_runtime(value: str, root: str) -> bool:
    # The kernel refuses a runtime above the period (sched_fair_server_write(), kernel/sched/debug.c);
    # the period of every CPU is the same unless someone changed one: the largest bounds it.
    periods = [
        read_int(root, f"/sys/kernel/debug/sched/fair_server/{d.name}/period", fallback=0)
        for d in _dirs(root, "/sys/kernel/debug/sched/fair_server")
    ]
    return _INT.fullmatch(value) is not None and 0 <= int(value) <= max(periods, default=DEFAULT_FAIR_PERIOD_NS)


def _dirs(root: str, rel: str) -> list[os.DirEntry]:
    try:
        return [d for d in os.scandir(os.path.join(root, rel.lstrip("/"))) if d.name.startswith("cpu")]
    except OSError:
        return []


def _rt_runtime(value: str, root: str) -> bool:
    # The kernel refuses a runtime above the period (sched_rt_handler(), kernel/sched/rt.c).
    period = read_int(root, "/proc/sys/kernel/sched_rt_period_us", fallback=DEFAULT_RT_PERIOD_US)
    return _INT.fullmatch(value) is not None and -1 <= int(value) <= period


_CPU = "/sys/devices/system/cpu"
#: (pattern of the path under the root, what the file takes, that in words for an error message)
WRITABLE: tuple[tuple[re.Pattern, Callable[[str, str], bool], str], ...] = tuple(
    (re.compile(pattern), accepts, takes)
    for pattern, accepts, takes in (
        (r"/proc/sys/kernel/sched_rt_runtime_us", _rt_runtime, "an integer from -1 to sched_rt_period_us"),
        (
            r"/sys/kernel/debug/sched/fair_server/cpu[0-9]{1,5}/runtime",
            _fair_runtime,
            "ns from 0 to the fair server's period",
        ),
        (r"/proc/irq/[0-9]{1,6}/smp_affinity", _mask, "a hex CPU mask"),
        (r"/proc/irq/[0-9]{1,6}/smp_affinity_list", is_cpulist, "a CPU list"),
        (r"/proc/irq/default_smp_affinity", _mask, "a hex CPU mask"),
        (r"/sys/devices/virtual/workqueue/cpumask", _mask, "a hex CPU mask"),
        (r"/proc/sys/kernel/watchdog_cpumask", is_cpulist, "a CPU list"),
        (r"/proc/sys/kernel/(nmi_watchdog|soft_watchdog|watchdog)", _between(0, 1), "0 or 1"),
        (r"/proc/sys/kernel/timer_migration", _between(0, 1), "0 or 1"),
        (r"/proc/sys/kernel/numa_balancing", _between(0, 3), "0 to 3"),
        (rf"{_CPU}/cpu[0-9]{{1,5}}/cpuidle/state[0-9]{{1,3}}/disable", _between(0, 1), "0 or 1"),
        # cpuN/cpufreq is a link to cpufreq/policyM on most machines: either side of it.
        (rf"{_CPU}/(cpu[0-9]{{1,5}}/cpufreq|cpufreq/policy[0-9]{{1,5}})/scaling_governor", _word, "a governor name"),
        (r"/sys/devices/system/clocksource/clocksource[0-9]{1,3}/current_clocksource", _word, "a clocksource name"),
        (r"/sys/kernel/mm/ksm/run", _between(0, 2), "0, 1 or 2"),
        (r"/sys/kernel/mm/transparent_hugepage/(enabled|defrag)", _word, "one of the words it lists"),
    )
)


def _spec(rel: str):
    return next((spec for spec in WRITABLE if spec[0].fullmatch(rel)), None)


def _resolve(root: str | os.PathLike[str], rel: object) -> tuple[Path, str]:
    if not isinstance(rel, str) or not rel.startswith("/") or len(rel) > MAX_TARGET_CHARS or "\0" in rel:
        raise ConfigError(f"{str(rel)[:MAX_TARGET_CHARS]!r} is not an absolute kernel file path")
    if posixpath.normpath(rel) != rel or _spec(rel) is None:
        raise ConfigError(f"{rel} is not a kernel file softrt writes")
    base = os.path.realpath(root)
    real = os.path.realpath(os.path.join(base, rel.lstrip("/")))
    inside = real != base and os.path.commonpath([base, real]) == base
    resolved = "/" + os.path.relpath(real, base) if inside else real
    if not inside or _spec(resolved) is None:
        raise ConfigError(f"{rel} resolves to {real}, not a kernel file softrt writes")
    return Path(real), resolved


def resolve(root: str | os.PathLike[str], rel: object) -> Path:
    """Return the real path of the allow-listed kernel file *rel* under *root*.

    Raises:
        ConfigError: *rel* is not a plain absolute path to a file softrt writes, or resolves
            (through a symlink or a /proc/PID/root link) to anything else.
    """
    return _resolve(root, rel)[0]


def check(root: str | os.PathLike[str], rel: object, value: object) -> Path:
    """Return the real path of *rel* under *root* when *value* is one that file takes.

    The value must suit both the file named and the file it resolves to (a link in a tree
    from one allowed file to another must not carry a mask into sched_rt_runtime_us).

    Raises:
        ConfigError: as :func:`resolve`, or a value the file does not take.
    """
    path, resolved = _resolve(root, rel)
    for name in dict.fromkeys((rel, resolved)):
        _pattern, accepts, takes = _spec(name)  # type: ignore[misc]
        if not isinstance(value, str) or not accepts(value.removesuffix("\n"), str(root)):
            raise ConfigError(f"{name} takes {takes}, not {str(value)[:40]!r}")
    return path


def write_line(path: str | os.PathLike[str], value: str) -> None:
    """Write *value* as ``echo value > path`` does (one write(2), trailing newline); OSError as raised."""
    write_raw(path, value + "\n")


def manual_fix(rel: str, value: str) -> str:
    """The command that puts *value* back by hand: ``echo 950000 > /proc/sys/kernel/sched_rt_runtime_us``."""
    return f"echo {value} > {rel}"
