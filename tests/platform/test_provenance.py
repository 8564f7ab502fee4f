"""platform.provenance: DMI, microcode and a NIC's driver read from a captured root tree; the rig's label."""

import os

from softrt.platform import provenance
from softrt.platform.rig import rig_id


def _tree(root):
    dmi = root / "sys/class/dmi/id"
    dmi.mkdir(parents=True)
    for name, value in (
        ("bios_vendor", "American Megatrends Inc."),
        ("bios_version", "F.42"),
        ("bios_date", "03/14/2026"),
        ("product_name", "IPC-7\x1b[31m"),
        ("board_name", "Default string"),
        ("product_uuid", "4c4c4544-0031-3010-8051-b4c04f4a3232"),
    ):
        (dmi / name).write_text(value + "\n")
    (root / "proc").mkdir()
    (root / "proc/cpuinfo").write_text(
        "processor\t: 0\nmodel name\t: Test CPU\nmicrocode\t: 0xde\n\nprocessor\t: 1\nmicrocode\t: 0xde\n"
    )
    dev = root / "sys/devices/pci0000:00/0000:03:00.0"
    (dev / "driver").parent.mkdir(parents=True)
    (root / "sys/bus/pci/drivers/igb").mkdir(parents=True)
    os.symlink(root / "sys/bus/pci/drivers/igb", dev / "driver")
    (root / "sys/class/net/enp3s0").mkdir(parents=True)
    os.symlink(dev, root / "sys/class/net/enp3s0/device")


def test_collect_from_a_root_tree(tmp_path):
    _tree(tmp_path)
    got = provenance.collect(
        str(tmp_path), device="ethercat:enp3s0", environ={"SOFTRT_RIG_LABEL": " line 3 "}
    ).to_dict()
    assert got["rig_id"] == rig_id(tmp_path) and len(got["rig_id"]) == 16
    assert got["rig_label"] == "line 3"
    assert (got["bios_vendor"], got["bios_version"], got["bios_date"]) == (
        "American Megatrends Inc.",
        "F.42",
        "03/14/2026",
    )
    assert "\x1b" not in got["product_name"] and got["product_name"].startswith("IPC-7")
    assert got["microcode"] == "0xde"
    assert got["nics"] == [{"interface": "enp3s0", "driver": "igb"}]


def test_what_is_not_there_is_none(tmp_path):
    got = provenance.collect(str(tmp_path), device="virtual", environ={}).to_dict()
    assert got["rig_label"] is None and got["bios_version"] is None and got["microcode"] is None
    assert got["nics"] == []
    assert provenance.collect(str(tmp_path), device="ethercat:veth0", environ={}).to_dict()["nics"] == [
        {"interface": "veth0", "driver": None}
    ]  # a virtual interface has no device


def test_label_is_bounded_and_printable():
    label = provenance.rig_label({"SOFTRT_RIG_LABEL": "a\x07b" + "x" * 500})
    assert "\x07" not in label and len(label) == provenance.MAX_LABEL


def test_this_machines_nic_by_ethtool():
    """ETHTOOL_GDRVINFO names the driver sysfs links to (a card with a device: not lo or a veth)."""
    import pytest

    cards = sorted(p for p in os.listdir("/sys/class/net") if os.path.exists(f"/sys/class/net/{p}/device/driver"))
    if not cards:
        pytest.skip("no network card with a driver here")
    got = provenance.nic(cards[0]).to_dict()
    assert got["driver"] == os.path.basename(os.readlink(f"/sys/class/net/{cards[0]}/device/driver"))
    assert got.get("bus_info") is not None  # what only the ioctl tells
    assert provenance.nic("lo").to_dict() == {"interface": "lo", "driver": None}
