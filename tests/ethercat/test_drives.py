"""Drive descriptions (TOML): what they parse to, and one clear line for each kind of bad file."""

from __future__ import annotations

import pytest

from softrt.errors import ConfigError
from softrt.ethercat.description import CSP_RX_ENTRIES, CSP_TX_ENTRIES
from softrt.ethercat.drives import DriveConfig, entry_text, load_drives
from softrt.ethercat.mapping import drive_maps
from softrt.ethercat.preop import wanted_objects
from softrt.schema.config import RunConfig
from softrt.session.config import device_options

GOOD = """
[defaults]
assign = "auto"
rx = ["0x607A/32", "0x6040/16"]
tx = ["0x6064/32", "0x6041/16", "0x603F:00/16"]

[[drive]]
position = 1
axes = 2
assign = "always"

[[drive]]
vendor_id = 0x0EC0FFEE
product_code = 0x00010402
tx = ["0x6041/16", "0x6064/32", "pad/16"]
"""


def load(text: str | bytes):
    return load_drives(text if isinstance(text, bytes) else text.encode(), "drives.toml")


def device_options_of(path):
    return device_options(RunConfig(device="ethercat:eth1", ecat_drives=str(path)))


def test_a_description_gives_each_drive_its_plan(tmp_path):
    config = load(GOOD)
    plain = config.plan_for(0, 0x1234, 0x1)  # no [[drive]] matches: the defaults
    assert [entry_text(e) for e in plain.rx] == ["0x607A:00/32", "0x6040:00/16"]
    assert plain.assign == "auto" and plain.axes is None
    second = config.plan_for(1, 0x1234, 0x1)  # by position, with the defaults' PDOs
    assert (second.assign, second.axes, second.rx) == ("always", 2, plain.rx)
    by_identity = config.plan_for(5, 0x0EC0FFEE, 0x00010402)
    assert [entry_text(e) for e in by_identity.tx] == ["0x6041:00/16", "0x6064:00/32", "pad/16"]


def test_without_a_file_the_csp_defaults_apply():
    plan = DriveConfig().plan_for(0, 0, 0)
    assert (plan.rx, plan.tx, plan.assign) == (CSP_RX_ENTRIES, CSP_TX_ENTRIES, "auto")


def test_axis_n_uses_objects_plus_0x800_and_pdos_plus_0x10():
    wanted = wanted_objects(DriveConfig().defaults, axes=2)
    assert wanted[0x1C12] == [0x1600, 0x1610] and wanted[0x1C13] == [0x1A00, 0x1A10]
    assert wanted[0x1610][:2] == [0x6840_0010, 0x687A_0020] and wanted[0x1610][3] == 0x0000_0008  # padding stays
    # What the master then finds in that layout: two axes, axis 1 after axis 0's 8 / 14 bytes.
    from softrt.ethercat.mapping import pdos_from_mapping

    rx = pdos_from_mapping([(p, wanted[p]) for p in wanted[0x1C12]])
    tx = pdos_from_mapping([(p, wanted[p]) for p in wanted[0x1C13]])
    maps = drive_maps(rx, tx)
    assert [(m.controlword, m.target_position, m.statusword, m.position_actual) for m in maps] == [
        (0, 2, 0, 2),
        (8, 10, 14, 16),
    ]


@pytest.mark.parametrize(
    "text, says",
    [
        ("[defaults\n", "not valid TOML"),
        (b"\xff\xfe\x00garbage", "not UTF-8"),
        ("color = 1\n", "color: unknown key"),
        ("[defaults]\nspeed = 3\n", "unknown key speed"),
        ('[defaults]\nassign = "sometimes"\n', "assign: must be one of auto, always, never"),
        ('[defaults]\nrx = ["0x6040/16"]\n', "rx: lacks 0x607A/32"),
        ('[defaults]\ntx = ["0x6041/16", "0x6064/24"]\n', "an object has 8, 16 or 32 bits"),
        ('[defaults]\nrx = ["0x6040/16", "0x607A/32", "0x6840/16"]\n', "give axis 0's object"),
        ('[defaults]\nrx = ["0x6040/16", "0x607A/32", "0x6040/16"]\n', "maps an object twice"),
        ('[defaults]\nrx = "0x6040/16"\n', "must be a list"),
        ('[defaults]\nrx = ["rm -rf /"]\n', "is not of the form"),
        ("[[drive]]\naxes = 2\n", "says which drive it is for"),
        ("[[drive]]\nposition = -1\n", "position: must be a whole number"),
        ("[[drive]]\nposition = true\n", "position: must be a whole number"),
        ("[[drive]]\nposition = 1\naxes = 9\n", "axes: must be a whole number from 1 to 8"),
        ("[[drive]]\nposition = 1\n[[drive]]\nposition = 1\n", "position 1 is described twice"),
        ("drive = 3\n", "must be an array of tables"),
        ('[defaults]\nrx = ["\\u001b[31m"]\n', "is not of the form"),
        ("x = " + "[" * 2000 + "]" * 2000 + "\n", "not valid TOML"),
        ("[[drive]]\nposition = " + "9" * 5000 + "\n", "not valid TOML"),
    ],
)
def test_bad_descriptions_are_one_line_with_the_fix(text, says):
    with pytest.raises(ConfigError) as err:
        load(text)
    message = str(err.value)
    assert says in message and "drives.toml" in message, message
    assert "\n" not in message and "\x1b" not in message
    assert err.value.hint


def test_the_file_is_read_bounded_before_anything_starts(tmp_path):
    good = tmp_path / "drives.toml"
    good.write_text(GOOD)
    assert device_options_of(good).drives.plan_for(1, 0, 0).axes == 2
    huge = tmp_path / "huge.toml"
    huge.write_text("# x\n" * 20_000)
    for path, says in (
        (tmp_path / "nope.toml", "cannot read drive description"),
        (tmp_path, "not a regular file"),
        ("/dev/zero", "not a regular file"),
        (huge, "larger than 64 KiB"),
    ):
        with pytest.raises(ConfigError, match=says):
            device_options_of(path)
    with pytest.raises(ConfigError, match="--ecat-drives describes EtherCAT drives"):
        device_options(RunConfig(device="virtual", ecat_drives=str(good)))
