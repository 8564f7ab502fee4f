"""The fix for each kind of culprit, as data (analysis layer; pure).

A culprit of the attribution (``why_late.culprits``: a kind, a name, a detail) maps to what takes
it off the RT CPU, named by the ids of ``softrt check``'s own checks (``<module>.<check>``, e.g.
``cores.tasks``; ``softrt check`` prints each one's evidence and exact fix, and ``softrt tune``
applies the run-time ones). tests/analysis/test_remedy.py holds every id here to audit's checks.

* a thread: move it off the RT CPU, or give it a lower priority than the loop's;
* an IRQ: its affinity; a softirq or a kworker: the housekeeping masks (workqueues, RCU callbacks);
* the local timer: ``nohz_full=`` (a reboot);
* the fair server (Linux ≥ 6.12: SCHED_OTHER tasks get up to 50 ms/s even beside a SCHED_FIFO loop,
  Documentation/scheduler/sched-deadline.rst) and RT throttling
  (Documentation/scheduler/sched-rt-group.rst): their own checks;
* no guest activity: the hypervisor or the firmware (an SMI) took the CPU; no guest setting helps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..schema.why_late import Culprit

#: ``softrt tune`` applies the run-time fixes of these checks.
TUNE = "softrt tune --apply"
#: IRQ handler names of network queues (the driver names them after the interface or its queues).
_NIC_IRQ = re.compile(r"^(eth|en|wl|ib|mlx|i40e|ice|ixgbe|igb|igc|e1000|bnxt|virtio\d+-(input|output))")


@dataclass(frozen=True)
class Remedy:
    """What to do about one kind of culprit, and the checks that find and fix it."""

    fix: str  # a sentence: what to do and how
    short: str  # a few words, for a table column
    checks: tuple[str, ...] = ()
    reboot: bool = False  # a kernel parameter: only a reboot applies it

    @property
    def column(self) -> str:
        """The table's "fix" cell: the few words and the first check id."""
        return f"{self.short} ({self.checks[0]})" if self.checks else self.short


THREAD = Remedy(
    f"move it off the RT CPU ({TUNE} moves every movable task) or give it a lower priority than the loop's",
    "move it, or lower its priority",
    ("cores.tasks",),
)
HOUSEKEEPING = Remedy(
    f"keep kernel work off the RT CPU with the housekeeping masks: unbound workqueues ({TUNE}) and rcu_nocbs= (reboot)",
    "housekeeping masks",
    ("cores.workqueue", "cores.rcu_nocbs"),
)
IRQ = Remedy(f"move the interrupt off the RT CPU: its smp_affinity ({TUNE})", "its IRQ affinity", ("irq.devices",))
NIC_IRQ = Remedy(
    f"move the network card's queue interrupts off the RT CPU: their smp_affinity ({TUNE})",
    "its IRQ affinity",
    ("irq.nic",),
)
LOCAL_TIMER = Remedy(
    "stop the scheduler tick on the RT CPU: kernel parameter nohz_full= (reboot; the loop must be the CPU's only task)",
    "nohz_full=, a reboot",
    ("cores.nohz_full",),
    reboot=True,
)
FAIR_SERVER = Remedy(
    f"move every movable task off the RT CPU ({TUNE}); the fair server's runtime 0 there where debugfs allows",
    "move tasks off; runtime 0",
    ("kernel.fair_server", "cores.tasks"),
)
RT_THROTTLING = Remedy(
    f"RT throttling parked the loop: turn it off ({TUNE})", "RT throttling off", ("kernel.rt_throttling",)
)
IDLE = Remedy(f"keep the RT CPU out of deep idle states ({TUNE})", "no deep idle states", ("idle.states",))
#: The lean trace's wake-up (analysis.attribution_account.LEAN_WAKE, LEAN_WAKE_PAST): the timer interrupt,
#: the exit from idle and the switch in one cause, whose fix depends on which of them it was.
LEAN_WAKE = Remedy(
    "trace again with --trace-mode full to split it: the timer interrupt (nohz_full=, a reboot), the exit "
    f"from idle ({TUNE}) or a task that held the CPU",
    "split it: --trace-mode full",
    ("cores.nohz_full", "idle.states"),
)
LOOP = Remedy("the loop's own work ran past the edge: make the step shorter, or the period longer", "a shorter step")
OUTSIDE = Remedy(
    "the hypervisor or firmware took the CPU{steal}: bare metal, or a dedicated vCPU", "bare metal or a dedicated vCPU"
)

#: The mechanism that let a task run while the loop was parked (a culprit's ``via``, analysis.attribution)
#: and its fix, whichever task ran: when RT throttling's state was unknown, the fair server (Linux 6.12+
#: has it; a kernel with RT throttling in force names it).
_BY_VIA = {"fair_server": FAIR_SERVER, "rt_throttling": RT_THROTTLING, "rt_throttling_or_fair_server": FAIR_SERVER}


def remedy_for(culprit: Culprit) -> Remedy | None:
    """The remedy for *culprit* (schema.why_late.Culprit: its ``kind``, ``via`` and name; None: no fix is
    known for it).

    The mechanism comes first: time taken through the fair server or RT throttling (``via``) is fixed
    by their checks whichever task ran. The kernel's own culprits are told apart by their names
    (analysis.attribution's, and summaries written before ``via``: "fair server: SCHED_OTHER tasks ran
    ...").
    """
    kind, name = culprit.kind, culprit.name or ""
    if culprit.via in _BY_VIA:
        return _BY_VIA[culprit.via]
    if kind == "thread":
        return HOUSEKEEPING if name.startswith(("kworker", "ksoftirqd", "rcu")) else THREAD
    if kind == "softirq":
        return HOUSEKEEPING
    if kind == "irq":
        return NIC_IRQ if _NIC_IRQ.match(name) else IRQ
    if kind == "outside":
        return OUTSIDE
    if kind == "loop":
        return LOOP
    if kind == "kernel":
        return _kernel(f"{name} {culprit.detail or ''}".lower())
    return None


def _kernel(text: str) -> Remedy | None:
    """The kernel's own culprits, by their name and detail (analysis.attribution's ``_PARKED``,
    ``_THROTTLING``, ...)."""
    if "fair server" in text:
        return FAIR_SERVER
    if "rt throttling" in text:
        return RT_THROTTLING
    if "lean trace" in text:  # before "idle": the lean wake-up is the timer, the idle exit and the switch
        return LEAN_WAKE
    if "local timer" in text:
        return LOCAL_TIMER
    if "idle" in text:
        return IDLE
    if "lower-priority rt task" in text:
        return THREAD
    return None


def every_remedy() -> tuple[Remedy, ...]:
    """Every remedy this module can give (the tests hold their check ids to audit's checks)."""
    return (THREAD, HOUSEKEEPING, IRQ, NIC_IRQ, LOCAL_TIMER, FAIR_SERVER, RT_THROTTLING, IDLE, LEAN_WAKE, LOOP, OUTSIDE)
