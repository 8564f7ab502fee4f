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


# -- bounds (issue 12, defect 4: "0-99999999999" made softrt compare allocate until the OOM killer came) --
import tracemalloc  # noqa: E402

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from softrt.cpus import MAX_CPUS, choose_cpus  # noqa: E402
from softrt.errors import InvalidCpu  # noqa: E402


@pytest.mark.parametrize("text", ["0-99999999999", "99999999999", "0-8192", "1" * 5000, "0-" + "9" * 5000])
def test_parse_refuses_cpus_beyond_the_bound_without_allocating(text):
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError, match="cannot exist"):
            CpuSet.parse(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000  # today's code allocated 24 GB for the first one


def test_parse_takes_the_machines_limit():
    assert CpuSet.parse("0-3", limit=4) == CpuSet(range(4))
    with pytest.raises(ConfigError, match="0 to 3"):
        CpuSet.parse("0-4", limit=4)
    assert len(CpuSet.parse(f"0-{MAX_CPUS - 1}")) == MAX_CPUS


@pytest.mark.parametrize("text", ["f" * 100_000, "1" + "0" * 2048, "0x1", "1_0", " 1 2", "g"])
def test_from_mask_refuses_huge_or_foreign_masks(text):
    with pytest.raises(ConfigError):
        CpuSet.from_mask(text)


def test_from_mask_at_the_bound():
    assert CpuSet.from_mask("0" * 5000 + "1") == CpuSet([0])
    assert CpuSet.from_mask("8" + "0" * 2047).last() == MAX_CPUS - 1


def test_choose_cpus_is_the_last_usable_cpu_and_the_rest():
    online, allowed = CpuSet.parse("0-3"), CpuSet.parse("0-2,5")
    assert choose_cpus(online, allowed) == (2, CpuSet([0, 1]))
    assert choose_cpus(online, allowed, 1) == (1, CpuSet([0, 2]))
    assert choose_cpus(CpuSet([0]), CpuSet([0])) == (0, CpuSet())
    with pytest.raises(InvalidCpu, match="offline"):
        choose_cpus(online, allowed, 5)
    with pytest.raises(InvalidCpu, match="not allowed"):
        choose_cpus(online, allowed, 3)
    with pytest.raises(ConfigError, match="no online CPU"):
        choose_cpus(CpuSet([0]), CpuSet([1]))


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="0123456789-, \t\nx", max_size=40) | st.text(max_size=20), st.integers(1, MAX_CPUS))
def test_parse_fuzz(text, limit):
    """Any text: a CpuSet within the limit, or one ConfigError line."""
    try:
        cpus = CpuSet.parse(text, limit=limit)
    except ConfigError as err:
        assert "\n" not in str(err)
    else:
        assert all(0 <= c < limit for c in cpus)
        assert CpuSet.parse(str(cpus)) == cpus


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="0123456789abcdefABCDEF,x \n", max_size=3000) | st.text(max_size=20))
def test_from_mask_fuzz(text):
    try:
        cpus = CpuSet.from_mask(text)
    except ConfigError as err:
        assert "\n" not in str(err)
    else:
        assert all(0 <= c < MAX_CPUS for c in cpus)
        assert CpuSet.from_mask(cpus.to_mask()) == cpus


def test_choose_cpus_prefers_the_highest_usable_performance_core():
    """The seed's i5-14500 with HT off: P-cores 0-5, E-cores 6-13; an unusable preference falls back to all."""
    online = CpuSet.parse("0-13")
    assert choose_cpus(online, online, preferred=CpuSet.parse("0-5")) == (5, CpuSet.parse("0-4,6-13"))
    assert choose_cpus(online, CpuSet.parse("8-13"), preferred=CpuSet.parse("0-5"))[0] == 13
    assert choose_cpus(online, online, 12, preferred=CpuSet.parse("0-5"))[0] == 12
