"""(3) Updates and maintenance jobs that start on their own (audit layer).

The seed stopped Windows Update ("the Windows Update agent does not respect CPU core isolation",
Microsoft's soft real-time guide). On Linux the agents are apt's daily timers and
unattended-upgrades, dnf-automatic, PackageKit, snapd's refresh, fwupd; maintenance timers
(man-db, fstrim, e2scrub, locate databases) load disks and CPUs at times nobody chose.
"""

from __future__ import annotations

from ...model import Finding, Found, Severity, declare
from .. import systemd
from ..context import Context

#: Process names (comm, at most 15 characters) of update agents at work.
UPDATE_PROCESSES = (
    "unattended-upgr",
    "apt",
    "apt-get",
    "apt.systemd.dai",
    "dpkg",
    "packagekitd",
    "dnf",
    "dnf-automatic",
    "yum",
    "yum-cron",
    "zypper",
    "snapd",
    "fwupd",
    "gnome-software",
    "update-notifier",
)
#: systemd units that fetch or install updates by themselves.
UPDATE_UNITS = (
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "unattended-upgrades.service",
    "dnf-automatic.timer",
    "dnf-automatic-install.timer",
    "dnf-automatic-download.timer",
    "dnf-makecache.timer",
    "packagekit-offline-update.service",
    "snapd.service",
    "fwupd-refresh.timer",
    "yum-cron.service",
)
#: Maintenance timers: not updates, but jobs that run at times nobody chose.
MAINTENANCE_UNITS = (
    "man-db.timer",
    "fstrim.timer",
    "e2scrub_all.timer",
    "logrotate.timer",
    "dpkg-db-backup.timer",
    "plocate-updatedb.timer",
    "mlocate.timer",
    "updatedb.timer",
    "systemd-tmpfiles-clean.timer",
    "sysstat-collect.timer",
    "sysstat-summary.timer",
    "btrfs-scrub.timer",
    "mdcheck_start.timer",
)
APT_PERIODIC = "/etc/apt/apt.conf.d/20auto-upgrades"


def stoppable_timers(ctx: Context) -> list[str]:
    """Update timers that ``softrt tune`` stops until the next boot (only under a running systemd)."""
    if not ctx.systemd_running:
        return []
    return [u for u in UPDATE_UNITS if u.endswith(".timer") and u in ctx.enabled_units]


def _units_finding(
    ctx: Context, found: Found, units: list[str], running: list[str], why: str, extra: tuple[str, ...] = ()
) -> Finding:
    evidence = [
        f"systemd: {'running' if ctx.systemd_running else 'not running (no /run/systemd/system)'}",
        f"enabled units: {', '.join(units) or 'none'}",
        *extra,
    ]
    for unit in units:
        stamp = systemd.last_trigger(ctx.root, unit) if unit.endswith(".timer") else None
        if stamp:
            evidence.append(f"{unit} last fired {stamp}")
    if running:
        evidence.append(f"running now: {', '.join(running)}")
    active = units if ctx.systemd_running else []
    if active or running:
        fix = (
            f"systemctl disable --now {' '.join(active)}"
            if active
            else "let the running job finish, then disable what starts it"
        )
        if "snapd.service" in active:
            fix += "; snap refresh --hold"
        return found.warn(
            f"{len(active)} enabled unit(s){', ' + str(len(running)) + ' running now' if running else ''}",
            tuple(evidence),
            why=why,
            fix=fix,
            tunable=found.id == "updates.agents" and any(u.endswith(".timer") for u in active),
        )
    if units:
        return found.ok(
            f"{len(units)} unit(s) enabled, but systemd is not running here, so none can fire", tuple(evidence)
        )
    return found.ok("none enabled or running", tuple(evidence))


@declare("updates.agents", "Automatic updates", Severity.MEDIUM)
def check_agents(ctx: Context, found: Found) -> Finding:
    """Automatic update agents (apt timers, unattended-upgrades, dnf-automatic, snapd, …)."""
    units = [u for u in UPDATE_UNITS if u in ctx.enabled_units]
    running = [
        f"{name} ({','.join(map(str, pids))})"
        for name, pids in sorted(ctx.process_names.items())
        if name in UPDATE_PROCESSES
    ]
    periodic = ctx.text(APT_PERIODIC)
    extra = (f"{APT_PERIODIC}: {' '.join(periodic.split())}",) if periodic else ()
    return _units_finding(
        ctx,
        found,
        units,
        running,
        "an update runs dpkg/rpm, compilers (DKMS, initramfs) and service restarts at a random time; "
        "Microsoft's guide disables Windows Update for the same reason",
        extra,
    )


@declare("updates.maintenance", "Maintenance timers", Severity.LOW)
def check_maintenance(ctx: Context, found: Found) -> Finding:
    """Maintenance timers (man-db, fstrim, e2scrub, locate, …)."""
    units = [u for u in MAINTENANCE_UNITS if u in ctx.enabled_units]
    return _units_finding(
        ctx,
        found,
        units,
        [],
        "they load the disks and the housekeeping CPUs at times nobody chose; plan them in a maintenance window",
    )


CHECKS = (check_agents, check_maintenance)
