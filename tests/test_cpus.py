import pytest

from softrt.cpus import CpuSet
from softrt.errors import ConfigError


def test_parse_and_format_round_trip():
    cpus = CpuSet.parse("0-3, 8,10-11")
    assert list(cpus) == [0, 1, 2, 3, 8, 10, 11]
    assert str(cpus) == "0-3,8,10-11"
    assert CpuSet.parse("") == CpuSet()


@pytest.mark.parametrize("bad", ["a", "3-1", "1-b", "-1"])
def test_parse_rejects_garbage(bad):
    with pytest.raises(ConfigError):
        CpuSet.parse(bad)


def test_masks_match_proc_irq_format():
    assert CpuSet([0, 1]).to_mask() == "00000003"
    assert CpuSet([33]).to_mask() == "00000002,00000000"
    assert CpuSet.from_mask("00000002,00000001") == CpuSet([0, 33])
    assert CpuSet.from_mask(CpuSet.parse("1,4-6").to_mask(64)) == CpuSet.parse("1,4-6")


def test_set_operations():
    a, b = CpuSet.parse("0-3"), CpuSet.parse("2-5")
    assert a & b == CpuSet([2, 3])
    assert a - b == CpuSet([0, 1])
    assert (a | b).last() == 5
    assert CpuSet([1]) <= a
    with pytest.raises(ConfigError):
        CpuSet().last()
