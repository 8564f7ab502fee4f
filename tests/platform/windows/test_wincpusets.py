"""GetSystemCpuSetInformation and PROCESS_POWER_THROTTLING_STATE buffers parsed from bytes (platform.windows.wincpusets)."""

from __future__ import annotations

import pytest

from softrt.cpus import CpuSet
from softrt.platform.windows import wincpusets as W

from ...audit.windows import cpusets as C


def test_the_parser_reads_every_field_ctypes_lays_out():
    raw = C.cpu_sets(C.i5_14500(ht=True), realtime=CpuSet([19]))
    sets = W.parse_cpu_sets(raw)
    assert len(sets) == 20 and len(raw) == 20 * W.RECORD.size
    assert sets[3] == W.CpuSetInfo(0x103, 0, 3, 1, 1, False, False)  # P-core 1's second thread
    assert sets[19] == W.CpuSetInfo(0x113, 0, 19, 13, 0, False, True)


@pytest.mark.parametrize(
    "ht, perf, eff, siblings_of_0",
    [
        (True, "0-11", "12-19", "1"),
        (False, "0-5", "6-13", ""),
    ],
)
def test_the_i5_14500_with_ht_on_and_off(ht, perf, eff, siblings_of_0):
    topo = W.topology(C.cpu_sets(C.i5_14500(ht)))
    assert topo.hybrid and str(topo.performance()) == perf and str(topo.efficiency()) == eff
    assert str(topo.siblings(0)) == siblings_of_0 and not topo.siblings(len(topo.sets) - 1)


def test_records_are_walked_by_their_size_and_other_types_skipped():
    """A record's Size decides where the next starts (a larger future layout, or another Type, is stepped over)."""
    first = bytearray(C.cpu_sets(C.uniform(1)))
    first[0] = 40  # Size 40: eight more bytes than today's layout
    other = (16).to_bytes(4, "little") + (7).to_bytes(4, "little") + bytes(8)
    sets = W.parse_cpu_sets(bytes(first) + bytes(8) + other + C.cpu_sets(C.uniform(2))[32:])
    assert [s.index for s in sets] == [0, 1]


@pytest.mark.parametrize("raw", [b"\x20\x00", C.cpu_sets(C.uniform(2))[:40], bytes(8)])
def test_a_truncated_or_looping_buffer_is_a_valueerror(raw):
    with pytest.raises(ValueError):
        W.parse_cpu_sets(raw)


@pytest.mark.parametrize("control, state, said", [(0, 0, "system"), (1, 1, "on"), (1, 0, "off"), (0, 1, "system")])
def test_power_throttling_states(control, state, said):
    assert W.parse_throttling(C.throttling(control, state)) == said


def test_linux_hybrid_p_cores_from_sysfs(tmp_path):
    from softrt.platform import performance_cpus

    assert performance_cpus(str(tmp_path)) is None  # not an Intel hybrid CPU (no cpu_core PMU)
    (tmp_path / "sys/devices/cpu_core").mkdir(parents=True)
    (tmp_path / "sys/devices/cpu_core/cpus").write_text("0-11\n")
    assert str(performance_cpus(str(tmp_path))) == "0-11"


@pytest.mark.skipif(not W.IS_WINDOWS, reason="this machine's CPU sets (Windows, or Wine in scripts/ci-wine)")
def test_this_machines_cpu_sets_or_one_line_why():
    from softrt.errors import SoftRTError

    try:
        topo = W.topology(W.system_cpu_sets())
    except SoftRTError as err:  # Wine may lack the call: the reason, not a crash
        assert "GetSystemCpuSetInformation" in str(err)
    else:
        assert topo.performance()


@pytest.mark.skipif(not W.IS_WINDOWS, reason="this process's power throttling (Windows, or Wine in scripts/ci-wine)")
def test_this_process_throttling_or_one_line_why():
    """Wine 8's kernel32 has no GetProcessInformation: a SoftRTError (the check's n/a), never an AttributeError."""
    from softrt.errors import SoftRTError

    try:
        assert W.parse_throttling(W.process_throttling()) in ("on", "off", "system")
    except SoftRTError as err:
        assert "GetProcessInformation" in str(err)
