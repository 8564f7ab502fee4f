"""ethercat.steps: a bring-up step that runs out of time says so, and only a bus that does not answer is silent."""

from __future__ import annotations

import time

import pytest

from softrt.ethercat.errors import EcatError
from softrt.ethercat.steps import Steps

pysoem = pytest.importorskip("pysoem")


class _Bus:
    """Slaves that answer every AL status read that waits as long as a bus needs; a read cut to
    SOEM's 1 µs (what the step's deadline does to every wait) finds nothing, as on a real bus."""

    def read_state(self) -> int:
        return 0 if pysoem.settings.timeouts.ret == 1 else 0x04  # SAFE-OP


def test_a_step_that_runs_out_of_time_is_not_taken_for_a_silent_bus():
    """CI, under load: a slave refusing OP was reported as "the bus went silent" (bus_lost), since
    the probe asking whether the bus still answers ran with the waits the deadline had cut short."""
    steps = Steps(_Bus(), "ecm0", 10_000_000)
    saved = pysoem.settings.timeouts.ret

    def reached() -> bool:
        while not steps.expired:  # the deadline passes (and cuts SOEM's waits) while a read runs
            time.sleep(0.001)
        return False

    with pytest.raises(EcatError) as info, steps.step("OP", "every slave in OP", 0.05):
        steps.until(reached, lambda: "slave 1 in SAFEOP")
    assert info.value.reason == "state_timeout", str(info.value)
    assert "step OP: slave 1 in SAFEOP after" in str(info.value)
    assert pysoem.settings.timeouts.ret == saved  # SOEM's waits are put back


def test_a_bus_that_answers_nothing_is_silent_after_its_silence_time():
    class Dead:
        def read_state(self) -> int:
            return 0

    steps = Steps(Dead(), "ecm0", 10_000_000)
    t = time.monotonic()
    with pytest.raises(EcatError) as info, steps.step("scan", "slaves", 5.0):
        steps.until(lambda: False, lambda: "no slave")
    assert info.value.reason == "bus_lost" and "the bus went silent" in str(info.value)
    assert time.monotonic() - t >= steps.silence_s  # silent only once it answered nothing for that long
