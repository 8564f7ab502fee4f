"""A Windows machine for the tune tests: the captured outputs, changed by the commands tune runs.

It answers every query from the captures (softrt.platform.windows.wincmd.CapturedRunner) and carries out
the four kinds of change ``softrt tune`` makes by editing those outputs as Windows would change
them, so apply and revert can read back what they did. Every command is recorded in order.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from softrt.audit.windows import facts as F
from softrt.platform.windows.wincmd import CapturedRunner, CmdResult, key

from .captures import Captures

START_LINES = {
    "auto": "2   AUTO_START",
    "delayed-auto": "2   AUTO_START  (DELAYED)",
    "demand": "3   DEMAND_START",
    "disabled": "4   DISABLED",
}


class FakeWindows:
    """A runner over a Captures copy that applies sc, powercfg and Set-NetAdapterRss changes to it."""

    def __init__(self, caps: Captures, refuse: str | None = None, pending: bool = False) -> None:
        self.caps = caps
        self.calls: list[str] = []
        self.refuse = refuse  # a command line prefix that fails (access denied)
        # As sc.exe does: start/stop return at START_PENDING/STOP_PENDING; the first query after
        # still says so, the next one the final state.
        self.pending = pending
        self._settling: dict[str, str] = {}

    def changes(self) -> list[str]:
        """Every command that changed something, in order."""
        return [
            c
            for c in self.calls
            if re.match(r"(sc\.exe (config|stop|start)|powercfg\.exe /set|.*Set-NetAdapterRss)", c)
        ]

    def __call__(self, argv: Sequence[str], timeout_s: float = 30.0) -> CmdResult:
        line = key(argv)
        self.calls.append(line)
        if self.refuse and line.startswith(self.refuse):
            return CmdResult(tuple(argv), 5, "", "[SC] OpenService FAILED 5:\n\nAccess is denied.")
        a = list(argv)
        if a[:2] == ["sc.exe", "config"]:
            text = self.caps.read(F.sc_qc(a[2]))
            self.caps.set(F.sc_qc(a[2]), re.sub(r"(START_TYPE\s+: ).*", lambda m: m[1] + START_LINES[a[4]], text))
            return CmdResult(tuple(argv), 0, "[SC] ChangeServiceConfig SUCCESS\n")
        if a[:2] in (["sc.exe", "stop"], ["sc.exe", "start"]):
            state = "1  STOPPED" if a[1] == "stop" else "4  RUNNING"
            if self.pending:
                self._settling[a[2]] = state
                state = "3  STOP_PENDING" if a[1] == "stop" else "2  START_PENDING"
            self._set_state(a[2], state)
            return CmdResult(tuple(argv), 0, "")
        if a[:2] == ["sc.exe", "query"] and a[2] in self._settling:
            res = CapturedRunner(self.caps.root)(argv, timeout_s)  # still pending this once
            self._set_state(a[2], self._settling.pop(a[2]))
            return res
        if a[:2] == ["powercfg.exe", "/setacvalueindex"]:
            text = self.caps.read(F.POWER)
            self.caps.set(
                F.POWER,
                re.sub(r"(Current AC Power Setting Index: )0x[0-9a-f]+", lambda m: m[1] + f"0x{int(a[5]):08x}", text),
            )
            return CmdResult(tuple(argv), 0, "")
        if a[:2] == ["powercfg.exe", "/setactive"]:
            return CmdResult(tuple(argv), 0, "")
        m = re.fullmatch(r"Set-NetAdapterRss -Name '(.+)' -BaseProcessorNumber (\d+) -MaxProcessorNumber (\d+)", a[-1])
        if a[0] == "powershell.exe" and m:

            def change(data):
                for adapter in data:
                    if adapter["Name"] == m[1]:
                        adapter.update(BaseProcessorNumber=int(m[2]), MaxProcessorNumber=int(m[3]))

            self.caps.edit_json(F.RSS, change)
            return CmdResult(tuple(argv), 0, "")
        return CapturedRunner(self.caps.root)(argv, timeout_s)

    def _set_state(self, service: str, state: str) -> None:
        text = self.caps.read(F.sc_query(service))
        self.caps.set(F.sc_query(service), re.sub(r"(STATE\s+: ).*", lambda m: m[1] + state, text))
