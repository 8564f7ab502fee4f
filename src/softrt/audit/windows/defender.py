"""The Windows Defender check: real-time protection and the loop's exclusions (audit layer).

Split from :mod:`.checks` (issue 29: no module over 500 lines), which lists :func:`check_defender` in its
``CHECKS`` (group 2 of the Soft Real-Time guide: the services it stops, and Windows Defender). Sources:
Microsoft, "Configure exclusions for files opened by processes" and "Add-MpPreference".
"""

from __future__ import annotations

import ntpath

from ..model import Finding, Found, Severity, declare
from . import parse
from .facts import ELEVATED, WinFacts, needs, said


def _texts(value: object) -> list[str]:
    """A JSON list of strings; ConvertTo-Json may print a lone one bare (not one exclusion per letter)."""
    if isinstance(value, str):
        return [value]
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _hidden(values: list[str]) -> bool:
    """Get-MpPreference without Administrator prints ``N/A: Must be and administrator to view
    exclusions`` in place of the exclusions: that is not one, it is unreadable."""
    return any(v.strip().upper().startswith("N/A") for v in values)


def covers(interpreter: str, procs: list[str], paths: list[str]) -> bool:
    """Does a Defender exclusion cover the loop's interpreter? A process exclusion names its image (full
    path, or a file name for any path); a path exclusion covers the folders below it (Microsoft,
    "Configure exclusions for files opened by processes", "Configure and validate exclusions based on
    file name, extension, and folder location"). Case-insensitive, as Windows paths are."""
    exe = ntpath.normcase(ntpath.normpath(interpreter))
    for p in procs:
        p = ntpath.normcase(ntpath.normpath(p.strip()))
        if p == exe or ("\\" not in p and p == ntpath.basename(exe)):
            return True
    folders = (ntpath.normcase(ntpath.normpath(p.strip())).rstrip("\\") + "\\" for p in paths if p.strip())
    return any(exe.startswith(folder) for folder in folders)


@declare("services.defender", "Windows Defender real-time protection", Severity.MEDIUM)
def check_defender(w: WinFacts, found: Found) -> Finding:
    """Windows Defender real-time protection and its exclusions."""
    res = w.defender
    if not res.ok or not res.out.strip():
        return found.unreadable(
            f"Get-MpPreference failed (Defender absent or another antivirus): {said(res)}",
            Severity.MEDIUM,
            reader=needs(res, w.admin),
        )
    try:
        prefs = (parse.json_list(res.out) or [{}])[0]
    except ValueError:
        return found.unreadable("Get-MpPreference did not print JSON", Severity.MEDIUM, reader=needs(res, w.admin))
    off = prefs.get("DisableRealtimeMonitoring") is True
    procs, paths = _texts(prefs.get("ExclusionProcess")), _texts(prefs.get("ExclusionPath"))
    evidence = (
        f"DisableRealtimeMonitoring: {prefs.get('DisableRealtimeMonitoring')}",
        f"ExclusionProcess: {', '.join(procs) or 'none'}",
        f"ExclusionPath: {', '.join(paths) or 'none'}",
        f"the loop's interpreter: {w.interpreter or 'unknown (a capture)'}",
    )
    if off:
        return found.ok("real-time protection is off (the machine relies on other protection)", evidence)
    fix = f'Add-MpPreference -ExclusionProcess "{w.interpreter or "<full path of the loop program, e.g. python.exe>"}"'
    if _hidden(procs) or _hidden(paths):
        return found.unreadable(
            "real-time protection is on; its exclusions can be read by Administrators only (run softrt check elevated)",
            Severity.MEDIUM,
            *evidence,
            reader=f"Get-MpPreference from {ELEVATED}",
        )
    why = "MsMpEng.exe scans on access and was seen on the real-time cores in the seed's WPA trace"
    if not procs and not paths:
        return found.warn(
            "real-time protection scans everything the loop's process opens; no exclusion", evidence, why=why, fix=fix
        )
    if w.interpreter and not covers(w.interpreter, procs, paths):
        return found.warn(f"no exclusion covers the loop's interpreter {w.interpreter}", evidence, why=why, fix=fix)
    whose = (
        "the loop's interpreter is excluded"
        if w.interpreter
        else f"{len(procs)} process and {len(paths)} path exclusion(s); whether they cover the loop's interpreter is "
        "checked on the machine itself"
    )
    return found.ok(
        f"real-time protection on; {whose}",
        evidence,
        why="MsMpEng.exe itself may still run on the RT cores (see the live sample)",
    )
