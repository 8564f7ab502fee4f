"""schema.provenance: the block read and written back, an older summary without it, the flat view."""

import json
from dataclasses import fields
from pathlib import Path

import pytest

from softrt.errors import ConfigError
from softrt.schema.provenance import FIELDS
from softrt.schema.rigfacts import RigFacts, rig_facts
from softrt.schema.summary import RunSummary

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "summaries"
BLOCK = {
    "rig_id": "0123456789abcdef",
    "rig_label": "line 3",
    "bios_vendor": "ACME",
    "bios_version": "F.42",
    "bios_date": "03/14/2026",
    "microcode": "0xde",
    "nics": [{"interface": "enp3s0", "driver": "igb", "version": "5.4.0-k", "firmware": "3.25, 0x800005d0"}],
}


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("older-*.json")), ids=lambda p: p.name)
def test_older_summaries_read_without_provenance(path):
    summary = RunSummary.read(json.loads(path.read_text()))
    assert summary.provenance is None
    flat = rig_facts(summary)
    assert flat.rig_id is None and flat.microcode is None
    assert flat.kernel == summary.host.get("kernel")  # the host facts every run has had


def test_round_trip_and_flat_view():
    doc = json.loads(sorted(FIXTURES.glob("older-*.json"))[-1].read_text())
    doc["provenance"] = BLOCK
    doc["check"] = {"ready": False, "verdict": "not ready", "counts": {}, "fix_first": ["kernel.isolcpus"]}
    summary = RunSummary.read(doc)
    assert summary.to_dict()["provenance"] == BLOCK
    flat = rig_facts(summary)
    assert flat.rig_label == "line 3" and flat.nic == "enp3s0: igb 5.4.0-k fw 3.25, 0x800005d0"
    assert "check: not ready (fix first: kernel.isolcpus)" in (flat.tuning or "")


def test_the_flat_view_has_every_field_in_order():
    """RigFacts' fields are FIELDS, in order: what fleet, diff and --regressions name by FIELDS and CAUSES."""
    assert tuple(f.name for f in fields(RigFacts)) == FIELDS


def test_a_wrong_type_is_one_error():
    doc = json.loads(sorted(FIXTURES.glob("older-*.json"))[-1].read_text())
    doc["provenance"] = {"rig_id": 7}
    with pytest.raises(ConfigError, match="rig_id"):
        RunSummary.read(doc)
