"""A run's provenance flattened for the lab's comparisons (schema layer): a :class:`RigFacts` with every
field of :data:`softrt.schema.provenance.FIELDS` from a :class:`~softrt.schema.summary.RunSummary`,
None when unknown (store.fleet, store.regressions). Apart from schema/provenance.py, which schema/summary.py
imports, so that neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass

from .provenance import Provenance
from .summary import RunSummary
from .text import printable


@dataclass(frozen=True)
class RigFacts:
    """The flat provenance of a run: a field per :data:`FIELDS` name, in that order, None when unknown.

    ``tuning`` is what the run found or set: the controls applied for the run, what ``softrt tune
    --apply`` had changed, and the check's verdict with the checks it asked to fix first
    (``--check``); ``nic`` the EtherCAT card's driver and firmware.
    """

    rig_id: str | None
    rig_label: str | None
    hostname: str | None
    product_name: str | None
    board_name: str | None
    cpu_model: str | None
    microcode: str | None
    bios_vendor: str | None
    bios_version: str | None
    bios_date: str | None
    kernel: str | None
    kernel_build: str | None
    preemption: str | None
    cmdline: str | None
    tuning: str | None
    nic: str | None
    softrt: str | None

    def of(self, name: str) -> str | None:
        """The field :data:`FIELDS` (or CAUSES) names *name*."""
        value: str | None = getattr(self, name)
        return value


#: The fields the summary's provenance block holds under the same name.
_PROVENANCE = (
    "rig_id",
    "rig_label",
    "bios_vendor",
    "bios_version",
    "bios_date",
    "product_name",
    "board_name",
    "microcode",
)


def rig_facts(summary: RunSummary) -> RigFacts:
    """The flat provenance of a run (schema.summary.RunSummary), its text printable: the provenance
    block, the host facts every run has had, the tuning and the check."""
    host = summary.host if isinstance(summary.host, dict) else {}
    prov = summary.provenance

    def hosted(name: str) -> str | None:
        value = host.get(name)
        return None if value is None or isinstance(value, (dict, list)) else printable(str(value))

    return RigFacts(
        **{name: None if prov is None else getattr(prov, name) for name in _PROVENANCE},
        hostname=hosted("hostname"),
        cpu_model=hosted("cpu_model"),
        kernel=hosted("kernel"),
        kernel_build=hosted("kernel_version"),
        preemption=hosted("preemption"),
        cmdline=hosted("cmdline"),
        softrt=hosted("softrt"),
        tuning=_tuning(summary),
        nic=_nic(prov),
    )


def _nic(prov: Provenance | None) -> str | None:
    if prov is None:
        return None
    shown = (f"{n.interface}: {n.driver or '?'} {n.version or ''} fw {n.firmware or '?'}" for n in prov.nics)
    return "; ".join(line.replace("  ", " ") for line in shown) or None


def _tuning(summary: RunSummary) -> str | None:
    applied = sorted({t.what for t in summary.tuning.applied if t.what})
    parts = [f"applied: {', '.join(applied)}"] if applied else []
    if summary.check is not None and summary.check.verdict:
        fix = sorted(str(f) for f in summary.check.fix_first)
        parts.append(f"check: {summary.check.verdict}" + (f" (fix first: {', '.join(fix)})" if fix else ""))
    prov = summary.provenance
    if prov is not None and prov.tune_applied:
        parts.append(f"tune --apply: {', '.join(prov.tune_applied)}")
    return "; ".join(parts) or None
