"""The hybrid, SMT and EcoQoS checks on the seed's i5-14500 with HT on and off (audit.windows.hybrid)."""

from __future__ import annotations

import pytest

from softrt.audit import Status, run_checks
from softrt.audit.windows import facts as F
from softrt.audit.windows.runner import default_rt_cpu
from softrt.cpus import CpuSet

from . import cpusets as C


def _machine(good, ht: bool, realtime=CpuSet()):
    n = 20 if ht else 14
    good.set(F.CPU_COUNT, f"{n}\r\n")
    (good.root / "cpu_sets.hex").write_text(C.cpu_sets(C.i5_14500(ht), realtime).hex())


def _finding(good, cid, rt):
    return next(f for f in run_checks(rt, str(good), sample_s=0).findings if f.id == cid)


@pytest.mark.parametrize(
    "ht, rt, status, words",
    [
        (False, CpuSet(range(10, 14)), Status.WARN, "CPUs 10-13 are efficiency cores"),  # the seed's own setting
        (False, CpuSet([5]), Status.OK, "CPU 5 on performance cores"),
        (True, CpuSet([19]), Status.WARN, "CPU 19 is an efficiency core"),
        (True, CpuSet([11]), Status.OK, "on performance cores"),
    ],
)
def test_hybrid(good, ht, rt, status, words):
    _machine(good, ht)
    f = _finding(good, "cores.hybrid", rt)
    assert f.status is status and words in f.summary, f


@pytest.mark.parametrize(
    "ht, rt, realtime, status, words",
    [
        (True, CpuSet([11]), CpuSet(), Status.WARN, "sibling 10 of the RT CPUs is online and not reserved"),
        (True, CpuSet([11]), CpuSet([10, 11]), Status.OK, "no RT CPU shares"),  # the sibling reserved too
        (True, CpuSet([10, 11]), CpuSet(), Status.OK, "no RT CPU shares"),
        (False, CpuSet([5]), CpuSet(), Status.OK, "no RT CPU shares"),
    ],
)
def test_smt(good, ht, rt, realtime, status, words):
    _machine(good, ht, realtime)
    good.replace(F.KERNEL, "    ReservedCpuSets    REG_BINARY    003C000000000000\n", "")
    f = _finding(good, "cores.smt", rt)
    assert f.status is status and words in f.summary, f


@pytest.mark.parametrize("ht, cpu", [(True, 11), (False, 5)])
def test_the_default_rt_cpu_is_the_highest_performance_core(good, ht, cpu):
    _machine(good, ht)
    assert default_rt_cpu(str(good)) == cpu


def test_without_cpu_sets_the_checks_are_unknown_and_the_default_is_the_top_cpu(good):
    (good.root / "cpu_sets.hex").unlink()
    (good.root / "power_throttling.hex").unlink()
    found = {f.id: f for f in run_checks(CpuSet([13]), str(good), sample_s=0).findings}
    assert all(
        found[c].status is Status.NA and found[c].unreadable
        for c in ("cores.hybrid", "cores.smt", "cores.power_throttling")
    )
    assert default_rt_cpu(str(good)) == 13


@pytest.mark.parametrize("control, state, status", [(0, 0, Status.WARN), (1, 1, Status.FAIL), (1, 0, Status.OK)])
def test_power_throttling(good, control, state, status):
    (good.root / "power_throttling.hex").write_text(C.throttling(control, state).hex())
    f = _finding(good, "cores.power_throttling", CpuSet([13]))
    assert f.status is status and (status is Status.OK or "/powerthrottling disable" in f.fix)
