"""platform.rig: the rig id from DMI, else machine-id."""

from pathlib import Path

from softrt.platform.rig import rig_id


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text + "\n")
    return root


def test_dmi_wins_and_is_stable_across_a_reinstall(tmp_path):
    dmi = {
        "sys/class/dmi/id/product_uuid": "4C4C4544-0042-3510-8052-B4C04F384D32",
        "sys/class/dmi/id/board_serial": "/7B5R8M2/CN1296/",
    }
    a = rig_id(_tree(tmp_path / "a", {**dmi, "etc/machine-id": "1" * 32}))
    b = rig_id(_tree(tmp_path / "b", {**dmi, "etc/machine-id": "2" * 32}))  # re-imaged: new machine-id
    assert a == b and len(a) == 16 and int(a, 16) >= 0
    assert "4C4C4544" not in a and a != rig_id(_tree(tmp_path / "c", {"etc/machine-id": "1" * 32}))


def test_placeholders_fall_back_to_the_machine_id(tmp_path):
    root = _tree(
        tmp_path,
        {
            "sys/class/dmi/id/product_uuid": "03000200-0400-0500-0006-000700080009",
            "sys/class/dmi/id/board_serial": "Default string",
            "etc/machine-id": "ab" * 16,
        },
    )
    assert rig_id(root) == rig_id(_tree(tmp_path / "m", {"etc/machine-id": "ab" * 16})) != ""
    assert "ab" * 16 not in rig_id(root)


def test_nothing_readable_is_no_id(tmp_path):
    assert rig_id(tmp_path) == ""
