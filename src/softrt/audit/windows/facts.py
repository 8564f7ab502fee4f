"""The facts every Windows check shares, each asked of the system once (audit layer).

Every fact comes from one command run through the platform's runner
(:mod:`softrt.platform.windows.wincmd`): this machine, or a directory of captured outputs. The commands
are the ones Microsoft's Soft Real-Time guide names or implies
(learn.microsoft.com/windows/iot/iot-enterprise/soft-real-time/soft-real-time-device), so what
softrt reads is what an engineer can type to see the same thing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import cached_property

from ...cpus import CpuSet
from ...errors import SoftRTError
from ...platform.windows.wincmd import NOT_FOUND_RC, POWERSHELL, TIMEOUT_RC, CmdResult, Runner, powershell
from ...platform.windows.winsettings import SERVICES
from ...schema.audit import LiveSample
from . import parse

KERNEL_KEY = r"HKLM\SYSTEM\CurrentControlSet\Control\Session Manager\kernel"
WU_POLICY_KEY = r"HKLM\SOFTWARE\Policies\Microsoft\Windows\WindowsUpdate\AU"
CSP_NAMESPACE = r"root\cimv2\mdm\dmmap"
CSP_CLASS = "MDM_WindowsIoT_SoftRealTimeProperties01"

#: More logical processors than any Windows supports (Windows Server 2022: 2,048) is not a count.
MAX_LOGICAL_PROCESSORS = 2048
CPU_SETS = "cpu_sets"  # GetSystemCpuSetInformation's buffer (platform.windows.wincpusets)
THROTTLING = "power_throttling"  # this process's PROCESS_POWER_THROTTLING_STATE
CPU_COUNT = powershell("(Get-CimInstance -ClassName Win32_ComputerSystem).NumberOfLogicalProcessors")
POWER = ["powercfg.exe", "/qh", "SCHEME_CURRENT", "SUB_PROCESSOR", "IDLEDISABLE"]
KERNEL = ["reg.exe", "query", KERNEL_KEY]
WU_POLICY = ["reg.exe", "query", WU_POLICY_KEY]
# ``ConvertTo-Json -InputObject @(…)`` prints a JSON list, ``[]`` when there is nothing: empty output
# is then never an answer, only a PowerShell that printed nothing.
CSP = powershell(
    f"ConvertTo-Json -InputObject @(Get-CimInstance -Namespace {CSP_NAMESPACE} -ClassName {CSP_CLASS} "
    "| Select-Object -Property SetRTCores)"
)
RSS = powershell(
    "ConvertTo-Json -InputObject @(Get-NetAdapterRss | Select-Object -Property Name,InterfaceDescription,"
    "Enabled,BaseProcessorGroup,BaseProcessorNumber,MaxProcessorGroup,MaxProcessorNumber,MaxProcessors)"
)
DEFENDER = powershell(
    "Get-MpPreference | Select-Object -Property DisableRealtimeMonitoring,ExclusionProcess,"
    "ExclusionPath | ConvertTo-Json"
)


def sc_qc(name: str) -> list[str]:
    """``sc.exe qc <name>``: a service's configuration (its start type)."""
    return ["sc.exe", "qc", name]


def sc_query(name: str) -> list[str]:
    """``sc.exe query <name>``: a service's state."""
    return ["sc.exe", "query", name]


class Service:
    """A service's start type and state (None when not installed)."""

    def __init__(self, name: str, qc: CmdResult, query: CmdResult) -> None:
        self.name = name
        self.qc, self.query = qc, query
        # sc.exe exits with the Win32 error it printed (1060: no such service): the exit status,
        # not the (localized) text, says what went wrong.
        self.error = None if qc.ok else qc.rc
        self.said = "" if qc.ok else _first_line(qc.err or qc.out)
        self.installed = self.error != parse.SERVICE_NOT_INSTALLED
        self.start = parse.start_type(qc.out) if qc.ok else None
        self.state = parse.state(query.out) if query.ok else None
        self.readable = self.start is not None and self.state is not None

    @property
    def value(self) -> str:
        """``auto/running`` (the tune journal's form)."""
        return f"{self.start}/{self.state}"


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def said(res: CmdResult) -> str:
    """What a command that gave nothing usable said, in one line: its exit status is checked first
    (a missing tool, a time-out), then empty output ("printed nothing"), then its first line."""
    if res.rc in (NOT_FOUND_RC, TIMEOUT_RC):
        return _first_line(res.err) or f"{res.argv[0]} could not run"
    text = _first_line(res.err) or _first_line(res.out)
    if res.rc != 0:
        return f"exit status {res.rc}" + (f": {text}" if text else "")
    return text or f"{res.argv[0]} printed nothing"


ELEVATED = "an elevated prompt (Run as administrator)"
SYSTEM = (
    "SYSTEM: softrt check --as-system from an elevated prompt (a one-off scheduled task runs the query as "
    "SYSTEM), or psexec.exe -s -i powershell.exe"
)


def needs(res: CmdResult, admin: bool | None = None) -> str:
    """What would read what *res* could not (softrt tune lists it, issue 34): the tool itself when it is
    missing or ran out of time, a working PowerShell when it printed nothing, elevation when it was refused
    or softrt is not elevated (*admin* False; None: not known, a capture), else the tool run by hand."""
    tool = "Windows PowerShell" if res.argv[:1] == (POWERSHELL,) else (res.argv[0] if res.argv else "the command")
    if res.rc == NOT_FOUND_RC:
        return f"{tool}, missing here (it ships with Windows: a stripped image, or System32 not on PATH)"
    if res.rc == TIMEOUT_RC:
        return f"{tool} answering within its time-out (a busy machine: run softrt check again)"
    if not res.out.strip() and not res.err.strip():
        return f"a working {tool} (it printed nothing: blocked by policy, or a stub as under Wine)"
    text = (res.out + res.err).lower()
    if "access is denied" in text or "access denied" in text or res.rc == 5 or admin is False:
        return f"{tool} from {ELEVATED}"
    return f"{tool} run by hand, to see why it failed ({' '.join(res.argv)[:120]})"


class WinFacts:
    """One Windows audit: the runner, the real-time CPUs and the facts, read lazily and kept.

    On this machine the logical processors come from the platform (GetProcessAffinityMask's system
    mask) and the loop's interpreter is this one; in a capture directory, from the captured
    ``NumberOfLogicalProcessors`` (and the interpreter is unknown).
    """

    def __init__(
        self,
        runner: Runner,
        rt_cpus: CpuSet,
        root: str,
        online: CpuSet | None = None,
        allowed: CpuSet | None = None,
        interpreter: str | None = None,
        counters: Callable[[list[str], float], dict[str, float]] | None = None,
        raw: Callable[[str], bytes] | None = None,
    ) -> None:
        self.runner = runner
        self.rt_cpus = rt_cpus
        self.root = root
        self._online = online
        self.allowed = allowed
        self.interpreter = interpreter
        self.counters = counters  # this machine's performance counters (the platform's), else typeperf
        self.sample: LiveSample | None = None
        self.admin: bool | None = None  # elevated (this machine); None: a capture, not known
        self.system_runner: Runner | None = None  # check --as-system: runs the SYSTEM-only query (the CSP)
        self.raw = raw or self._captured  # a Win32 buffer by name (CPU_SETS, THROTTLING): the platform's, or captured

    def _captured(self, name: str) -> bytes:
        """A buffer captured as hex text in ``<root>/<name>.hex`` (OSError or ValueError when absent or not hex)."""
        with open(os.path.join(self.root, f"{name}.hex"), encoding="ascii") as f:
            return bytes.fromhex(f.read())

    def buffer(self, name: str) -> tuple[bytes | None, str]:
        """A raw Win32 buffer and where it came from; (None, why) when it could not be read."""
        try:
            return self.raw(name), name
        except (OSError, ValueError, SoftRTError) as err:
            return None, f"{name}: {err}"

    def run(self, argv: list[str], timeout_s: float = 30.0) -> CmdResult:
        """Run one command through the runner."""
        return self.runner(argv, timeout_s)

    @cached_property
    def cpus(self) -> tuple[CpuSet | None, str]:
        """The logical processors and where they were read; (None, why) when they could not be."""
        if self._online:
            return self._online, f"GetProcessAffinityMask: system CPUs {self._online}"
        res = self.run(CPU_COUNT)
        text = res.out.strip()
        if res.ok and text.isdigit() and 0 < int(text) <= MAX_LOGICAL_PROCESSORS:
            return CpuSet(range(int(text))), f"Win32_ComputerSystem.NumberOfLogicalProcessors: {text}"
        return None, f"NumberOfLogicalProcessors: {said(res) if not res.ok or not text else repr(text[:40])}"

    @property
    def cpu_count(self) -> int | None:
        """How many logical processors (None when unknown)."""
        return len(self.cpus[0]) if self.cpus[0] else None

    @property
    def online(self) -> CpuSet:
        """Every logical processor; just the RT CPUs when they could not be read."""
        return self.cpus[0] or self.rt_cpus

    @property
    def existing_rt(self) -> CpuSet:
        """The RT CPUs this machine has."""
        return self.rt_cpus & self.online

    @property
    def housekeeping(self) -> CpuSet:
        """Every other logical processor."""
        return self.online - self.rt_cpus

    @cached_property
    def power(self) -> tuple[CmdResult, parse.PowerSetting | None]:
        """``powercfg /qh`` of IDLEDISABLE on the active scheme, and its parse."""
        res = self.run(POWER)
        return res, parse.powercfg_setting(res.out) if res.ok else None

    @cached_property
    def services(self) -> Mapping[str, Service]:
        """SysMain, DPS, Audiosrv and wuauserv, by name (read once, shared by the checks: read-only)."""
        return {name: Service(name, self.run(sc_qc(name)), self.run(sc_query(name))) for name in SERVICES}

    @cached_property
    def kernel(self) -> CmdResult:
        """``reg query`` of Session Manager\\kernel."""
        return self.run(KERNEL)

    @cached_property
    def kernel_values(self) -> Mapping[str, tuple[str, str]] | None:
        """Values under Session Manager\\kernel (ReservedCpuSets, ThreadDpcEnable), None if unreadable."""
        return parse.reg_values(self.kernel.out) if self.kernel.ok else None

    @cached_property
    def reserved(self) -> CpuSet | None:
        """The CPUs ReservedCpuSets reserves (empty when the value is absent), None if unreadable."""
        if self.kernel_values is None:
            return None
        kind, data = self.kernel_values.get("ReservedCpuSets", ("", ""))
        if kind != "REG_BINARY" or not data:
            return CpuSet()
        try:
            return parse.reserved_cpus(data)
        except ValueError:
            return None

    @cached_property
    def csp(self) -> CmdResult:
        """The WindowsIoT CSP's SoftRealTimeProperties through the MDM bridge WMI provider (as SYSTEM with
        ``check --as-system``: the bridge answers only to SYSTEM)."""
        if self.system_runner is not None:
            return self.system_runner(CSP, 60.0)
        return self.run(CSP)

    @cached_property
    def wu_policy(self) -> CmdResult:
        """``reg query`` of the Windows Update automatic-update policy key."""
        return self.run(WU_POLICY)

    @cached_property
    def rss(self) -> CmdResult:
        """``Get-NetAdapterRss`` as JSON."""
        return self.run(RSS)

    @cached_property
    def defender(self) -> CmdResult:
        """``Get-MpPreference`` (real-time monitoring and exclusions) as JSON."""
        return self.run(DEFENDER)

    def describe_cpus(self, cpus: CpuSet) -> str:
        """``CPU 1`` or ``CPUs 2-3``."""
        return f"CPU {cpus}" if len(cpus) == 1 else f"CPUs {cpus}"


def top_cores(count: int, rt_cores: int) -> CpuSet:
    """The cores SetRTCores=N reserves if N counts them: the N highest-numbered ones (core 0 stays with the system)."""
    return CpuSet(range(count - rt_cores, count)) if 0 < rt_cores < count else CpuSet()


def from_core(count: int, first: int) -> CpuSet:
    """The cores SetRTCores=N reserves if N numbers the first of them, the seed's reading ("every core numbered at
    or above the given number": they set 10 on 14 cores and describe 10-13 as the RT cores)."""
    return CpuSet(range(first, count)) if 0 < first < count else CpuSet()


def rt_core_readings(count: int, value: int) -> dict[str, CpuSet]:
    """Both readings of SetRTCores=N, named. Microsoft's CSP page ("WindowsIoT CSP", SoftRealTimeProperties)
    does not settle which; the ReservedCpuSets mask the CSP writes is the truth, these only explain it. On the
    seed's 14 cores, 10 gives 4-13 as a count and 10-13 as a first core."""
    return {f"the {value} highest": top_cores(count, value), f"core {value} and above": from_core(count, value)}
