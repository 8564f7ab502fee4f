"""Windows host facts and performance counters, read through :class:`._win32.Win32` (platform layer).

Split from :mod:`.backend` (issue 29: no module over 500 lines); :class:`.backend.WindowsPlatform`'s
``host_facts`` and ``sample_counters`` call these. Sources: Microsoft, "PdhAddEnglishCounterW" and
"PdhCollectQueryData" (pdh.dll); the CurrentVersion and CentralProcessor registry keys.
"""

from __future__ import annotations

import platform as _pyplatform
import time
from collections.abc import Callable

from ...schema.host import HostFacts
from ..base import softrt_version
from ._win32 import (
    CURRENT_VERSION_KEY,
    PDH_CSTATUS_NEW_DATA,
    PDH_CSTATUS_VALID_DATA,
    PROCESSOR_KEY,
    Win32,
    Win32Failed,
    to_softrt_error,
)


def _do(target: str, call: Callable, *args):
    """Run one Win32 call; a failure becomes a softrt error naming *target*, with its fix."""
    try:
        return call(*args)
    except Win32Failed as err:
        raise to_softrt_error(err, target) from None


def sample_counters(w: Win32, paths: list[str], seconds: float) -> dict[str, float]:
    """Average each counter over *seconds*: ``{path: value}``, a ``*`` instance path once per instance
    (same-named instances numbered ``name#1``, ``name#2`` as typeperf does).

    The paths are English (PdhAddEnglishCounterW), so they are found on a localized Windows too,
    where typeperf wants the translated names (Microsoft, "PdhAddEnglishCounterW"). Two
    PdhCollectQueryData calls *seconds* apart make a rate counter's value.

    Raises:
        SoftRTError: a counter this machine does not have, or pdh.dll refusing (with its PDH status).
    """
    query = _do("a performance-counter query", w.PdhOpenQueryW)
    try:
        counters = {p: _do(f"counter {p}", w.PdhAddEnglishCounterW, query, p) for p in paths}
        _do("the counters", w.PdhCollectQueryData, query)
        time.sleep(seconds)
        _do("the counters", w.PdhCollectQueryData, query)
        out: dict[str, float] = {}
        for path, counter in counters.items():
            seen: dict[str, int] = {}
            for name, status, value in _do(f"counter {path}", w.PdhGetFormattedCounterArrayW, counter):
                if status not in (PDH_CSTATUS_VALID_DATA, PDH_CSTATUS_NEW_DATA):
                    continue  # an instance that went away during the sample
                n = seen[name] = seen.get(name, -1) + 1
                out[path.replace("(*)", f"({name}#{n})" if n else f"({name})") if "(*)" in path else path] = value
        return out
    finally:
        w.PdhCloseQuery(query)


def host_facts(w: Win32, cpu_count: int) -> HostFacts:
    """Return what a reader of a result needs to know about this machine (Linux's keys; None where none).

    The release is named from the build number (CurrentBuildNumber; Windows 11 is build 22000 and
    later, which ``platform.release()`` still calls "10"), the CPU by its brand string
    (CentralProcessor\\0 ProcessorNameString; PROCESSOR_IDENTIFIER is only family, model, stepping).
    """
    uname = _pyplatform.uname()
    build = w.read_registry(CURRENT_VERSION_KEY, "CurrentBuildNumber")
    build = int(build) if isinstance(build, str) and build.isdigit() else None
    ubr = w.read_registry(CURRENT_VERSION_KEY, "UBR")  # the update revision, a DWORD
    display = w.read_registry(CURRENT_VERSION_KEY, "DisplayVersion") or ""  # "23H2"
    brand = w.read_registry(PROCESSOR_KEY, "ProcessorNameString")
    kernel = (
        (
            f"Windows {11 if build >= 22000 else 10} {display} (build {build}"
            + (f".{ubr})" if isinstance(ubr, int) else ")")
        ).replace("  ", " ")
        if build
        else uname.release
    )
    return HostFacts.build(
        os="windows",
        hostname=uname.node,
        kernel=kernel,
        kernel_version=uname.version,
        windows_build=build,
        edition=_pyplatform.win32_edition() or None,  # "IoTEnterprise", "IoTEnterpriseS" (LTSC)...
        machine=uname.machine,
        preemption=None,
        cpu_model=(brand.strip() if isinstance(brand, str) and brand.strip() else uname.processor) or None,
        cpu_count=cpu_count,
        cmdline=None,
        python=_pyplatform.python_version(),
        softrt=softrt_version(),
        clocksource="QueryPerformanceCounter",
        rt_runtime_us=None,
    )
