"""What systemd will start, read from its unit directories under a root (audit layer, read-only).

A unit is enabled when a ``*.wants/`` directory links to it and masked when its name in
/etc/systemd/system links to /dev/null (systemctl(1), "enable", "mask"). /run/systemd/system
exists only while systemd is the running init (sd_booted(3)); without it, enabled timers never fire.
"""

from __future__ import annotations

import datetime as _dt
import os

from ...platform.kfiles import kpath

UNIT_DIRS = ("/etc/systemd/system", "/run/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system")


def running(root: str) -> bool:
    """True when systemd is the running init (sd_booted(3): /run/systemd/system exists)."""
    return kpath(root, "/run/systemd/system").is_dir()


def masked(root: str, unit: str) -> bool:
    """True when *unit* is masked (linked to /dev/null in /etc or /run)."""
    for base in ("/etc/systemd/system", "/run/systemd/system"):
        try:
            if os.readlink(kpath(root, f"{base}/{unit}")) == "/dev/null":
                return True
        except OSError:
            continue
    return False


def enabled_units(root: str) -> set[str]:
    """Return every unit some ``*.wants/`` or ``*.requires/`` directory pulls in, minus masked ones."""
    units: set[str] = set()
    for base in UNIT_DIRS:
        try:
            entries = os.listdir(kpath(root, base))
        except OSError:
            continue
        for entry in entries:
            if entry.endswith((".wants", ".requires")):
                try:
                    units.update(os.listdir(kpath(root, f"{base}/{entry}")))
                except OSError:
                    continue
    return {u for u in units if not masked(root, u)}


def last_trigger(root: str, timer: str) -> str | None:
    """Return when a persistent timer last fired (its stamp file's mtime), as ISO text."""
    try:
        mtime = kpath(root, f"/var/lib/systemd/timers/stamp-{timer}").stat().st_mtime
    except OSError:
        return None
    return _dt.datetime.fromtimestamp(mtime).isoformat(timespec="minutes")
