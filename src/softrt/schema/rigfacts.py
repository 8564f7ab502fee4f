"""A run's provenance flattened for the lab's comparisons (schema layer): every field of
:data:`softrt.schema.provenance.FIELDS` from a :class:`~softrt.schema.summary.RunSummary`, None when
unknown (store.fleet, store.regressions). Apart from schema/provenance.py, which schema/summary.py
imports, so that neither imports the other."""

from __future__ import annotations

from .provenance import FIELDS
from .summary import RunSummary


def provenance_fields(summary: RunSummary) -> dict[str, str | None]:
    """The flat provenance of a run (schema.summary.RunSummary): every :data:`FIELDS` key, None when unknown.

    ``tuning`` is what the run found or set: the controls applied for the run, what ``softrt tune
    --apply`` had changed, and the check's verdict with the checks it asked to fix first
    (``--check``); ``nic`` the EtherCAT card's driver
    and firmware.
    """
    host = summary.host if isinstance(summary.host, dict) else {}
    prov = summary.provenance

    def hosted(name: str) -> str | None:
        value = host.get(name)
        return None if value is None or isinstance(value, (dict, list)) else str(value)

    out: dict[str, str | None] = {
        "hostname": hosted("hostname"),
        "cpu_model": hosted("cpu_model"),
        "kernel": hosted("kernel"),
        "kernel_build": hosted("kernel_version"),
        "preemption": hosted("preemption"),
        "cmdline": hosted("cmdline"),
        "softrt": hosted("softrt"),
        "tuning": _tuning(summary),
    }
    for name in (
        "rig_id",
        "rig_label",
        "bios_vendor",
        "bios_version",
        "bios_date",
        "product_name",
        "board_name",
        "microcode",
    ):
        out[name] = getattr(prov, name) if prov is not None else None
    out["nic"] = (
        (
            "; ".join(
                f"{n.interface}: {n.driver or '?'} {n.version or ''} fw {n.firmware or '?'}".replace("  ", " ")
                for n in prov.nics
            )
            or None
        )
        if prov is not None
        else None
    )
    return {name: out.get(name) for name in FIELDS}


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
