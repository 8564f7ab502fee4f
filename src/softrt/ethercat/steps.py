"""Bring-up steps with deadlines: a dead bus ends bring-up in seconds, naming the step (ethercat layer).

Each step of :mod:`.bringup` (scan, PRE-OP, SII, PRE-OP configuration, mapping, SAFE-OP, process
image, DC, OP, drive enable) runs inside :meth:`Steps.step` with a deadline tied to the bus timeout
and the slave count, and within one budget for the whole bring-up (:data:`BUDGET_S`, below the
supervisor's 60 s wait for an armed worker). Three things keep a step from hanging:

* **silence**: when an operation fails (an exception, an SII word that reads as zeros, a state
  that is not reached), one AL status read (SOEM's ``ecx_readstate``: a BRD, then an FPRD per
  slave) asks whether any slave still answers; lowest state 0 means none did. A bus silent for
  :attr:`Steps.silence_s` ends the step at once: "the bus went silent".
* **the deadline**: a step's own loops check it; SOEM's C loops cannot be interrupted, so when the
  deadline passes while one runs without the GIL (``config_init``, SDO transfers), a timer sets
  SOEM's timeouts (pysoem ``settings.timeouts``, which its macros read on every wait) to 1 µs: its
  remaining waits end at once and the call returns; the saved timeouts are put back after the step.
* **what was expected**: every failure is one :class:`.errors.EcatError` that says the step, the
  slave and what was expected, never an exception with an empty message (pysoem's ``WkcError()``).
"""

from __future__ import annotations

import contextlib
import threading
import time

from .errors import EcatError

#: The whole bring-up's budget: every step's deadline ends by then (the supervisor waits 60 s).
BUDGET_S = 50.0
#: A silent bus is declared after at least this many unanswered probes (and silence_s).
SILENT_PROBES = 2

_TIMEOUTS = ("ret", "safe", "eeprom", "tx_mailbox", "rx_mailbox", "state")


class Steps:
    """The bring-up of one master *m* on *iface* (see the module docstring)."""

    def __init__(self, m, iface: str, bus_timeout_ns: int, clock=time.monotonic) -> None:
        self.m, self.iface = m, iface
        self.clock = clock
        #: A bus that answers nothing for this long is dead (at least 0.5 s: a scheduling hiccup
        #: of a busy host is not a dead bus).
        self.silence_s = max(0.5, 20 * bus_timeout_ns / 1e9)
        self.end = clock() + BUDGET_S
        self.name = ""
        self.expect = ""
        self.slave: str | None = None
        #: What the step saw last (e.g. every slave's state), for the error's ``seen``.
        self.seen: dict = {}
        self.deadline = self.end
        self.seconds = 0.0
        self._silent_since: float | None = None
        self._silent_probes = 0
        self._lock = threading.Lock()
        self._saved: dict[str, int] | None = None
        self.expired = False
        self._failing = False

    # --- a step -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def step(self, name: str, expect: str, seconds: float):
        """Run the block as step *name* (expecting *expect*), ending by *seconds* from now."""
        self.name, self.expect, self.slave, self.seen = name, expect, None, {}
        now = self.clock()
        self.deadline = min(now + seconds, self.end)
        self.seconds = self.deadline - now
        self._silent_since, self._silent_probes, self.expired, self._failing = None, 0, False, False
        timer = threading.Timer(max(0.0, self.deadline - self.clock()), self._collapse)
        timer.daemon = True
        timer.start()
        try:
            yield self
            if self.expired:  # a SOEM call was cut short: its result cannot be trusted
                raise self.failed(f"did not finish in {self.seconds:.1f} s", "state_timeout")
        except EcatError:
            raise
        except Exception as err:
            raise self.failed(_text(err)) from err
        finally:
            timer.cancel()
            self._restore()

    def at(self, where: str | None) -> None:
        """The slave the step is working on now (``slave 1 'NAME'``), for the message."""
        self.slave = where

    def check(self) -> None:
        """Raise if the step is past its deadline (for the step's own loops)."""
        if self.clock() > self.deadline:
            raise self.failed(f"did not finish in {self.seconds:.1f} s", "state_timeout")

    def failed(self, what: str, reason: str = "config") -> EcatError:
        """The step's error: it says whether the bus still answers, and what was expected.

        Whether it answers is asked with the step's own timeouts: at the deadline SOEM's waits are
        cut to 1 µs (:meth:`_collapse`), and probes that wait 1 µs find any bus silent (a step that
        ran out of time was reported as a lost bus, seen under load)."""
        with self._lock:
            self._failing = True  # a deadline passing from here on cuts nothing short
        self._restore()
        silent = self.settle()
        where = f" ({self.slave})" if self.slave else ""
        if silent:
            return EcatError(
                "bus_lost",
                self.iface,
                f"bring-up, step {self.name}{where}: the bus went silent "
                f"(no slave answers) while expecting {self.expect}",
                hint="check the cable/link and the slaves' power",
            )
        return EcatError(
            reason, self.iface, f"bring-up, step {self.name}{where}: {what} (expected {self.expect})", seen=self.seen
        )

    def settle(self) -> bool:
        """Probe until the bus answers (False) or has been silent for ``silence_s`` (True)."""
        while not self.silent():
            if self._silent_since is None:
                return False
            time.sleep(0.01)
        return True

    def confirm(self, what: str) -> None:
        """Raise the step's error (*what*) if the bus went silent; for the end of a step whose
        operations report failure only as missing values (SDO reads)."""
        if self.settle():
            raise self.failed(what)

    def failure(self, what: str) -> None:
        """An operation of the step failed (*what*): raise now if the bus went silent, else
        return so the step may try again until its deadline (:meth:`check`)."""
        if self.silent():
            raise self.failed(what)
        self.check()

    # --- is anyone there? -----------------------------------------------------------------------
    def silent(self) -> bool:
        """Probe the bus once (AL status of every slave); True once it has answered nothing for
        ``silence_s`` (and :data:`SILENT_PROBES` probes)."""
        try:
            lowest = self.m.read_state()
        except Exception:  # noqa: BLE001 - a closed socket is silence too
            lowest = 0
        now = self.clock()
        if lowest:
            self._silent_since, self._silent_probes = None, 0
            return False
        if self._silent_since is None:
            self._silent_since = now
        self._silent_probes += 1
        return self._silent_probes >= SILENT_PROBES and now - self._silent_since >= self.silence_s

    def until(self, done, what, poll_s: float = 0.001) -> None:
        """Repeat ``done()`` until it returns True; fail when the bus goes silent or at the
        deadline, saying ``what()`` (what was seen last)."""
        while not done():
            if self.silent():
                raise self.failed(what())
            if self.clock() > self.deadline:
                raise self.failed(f"{what()} after {self.seconds:.1f} s", "state_timeout")
            time.sleep(poll_s)

    # --- cutting SOEM's waits short at the deadline -------------------------------------------------
    def _collapse(self) -> None:
        import pysoem

        with self._lock:
            if self._failing:  # the step's error is being told: its probes keep their timeouts
                return
            t = pysoem.settings.timeouts
            if self._saved is None:
                self._saved = {k: getattr(t, k) for k in _TIMEOUTS}
            for k in _TIMEOUTS:
                setattr(t, k, 1)
            self.expired = True

    def _restore(self) -> None:
        import pysoem

        with self._lock:
            if self._saved is not None:
                t = pysoem.settings.timeouts
                for k, v in self._saved.items():
                    setattr(t, k, v)
                self._saved = None


def read_register(steps: Steps, slave, reg: int, size: int) -> bytes:
    """Read *size* bytes of a slave's register *reg* (FPRD), again while the bus answers others
    (one frame lost on a busy host is not a failure) until the step's deadline."""
    import pysoem

    while True:
        try:
            return slave._fprd(reg, size, max(pysoem.settings.timeouts.ret, 1))
        except pysoem.WkcError:
            steps.failure(f"register 0x{reg:04X} did not answer")


def _text(err: Exception) -> str:
    """An exception as a phrase, never empty (pysoem's ``WkcError()`` has no message)."""
    text = str(err).strip()
    if not text:
        wkc = getattr(err, "wkc", None)
        text = "no answer" + (f" (working counter {wkc})" if wkc is not None else "")
    return f"{type(err).__name__}: {text}"
