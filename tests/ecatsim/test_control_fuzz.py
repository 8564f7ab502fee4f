"""The simulator's control requests and --ecat-drives TOML, from anyone: a request that breaks a
rule is answered ``ok: false`` with one line and changes nothing; a drive description is one
ConfigError line; neither ever raises anything else (issue 22: a ``dc_drift`` of 1e308 or a deeply
nested request killed the simulator). Hypothesis fuzz plus the probes that found the defects."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.fuzz import FUZZ, JSON_VALUES, one_line

from softrt.ecatsim.control import COMMANDS, MUTE_EVENTS
from softrt.ecatsim.sim import Simulator
from softrt.errors import ConfigError
from softrt.ethercat.description import builtin
from softrt.ethercat.drives import load_drives

FIELDS = ("frames", "every", "delay_us", "slave", "axis", "code", "state", "ppm", "kind", "at", "cmd", "x")


def _sim() -> Simulator:
    """Two two-axis drives and an I/O block (slaves 0, 1 and 2)."""
    return Simulator([builtin("csp-drive", 2), builtin("csp-drive", 2), builtin("io-16di", 1)])


SHARED = _sim()  # the fuzz examples share one (a request that is taken may change it: that is allowed)


def _answer(sim: Simulator, raw: bytes) -> dict:
    before = json.dumps(sim.stats().to_dict(), sort_keys=True)
    answer = sim.control(raw).to_dict()
    assert isinstance(answer.get("ok"), bool)
    json.dumps(answer, allow_nan=False)  # what goes back on the socket is strict JSON
    if not answer["ok"]:
        assert isinstance(answer["error"], str) and "\n" not in answer["error"]
        assert json.dumps(sim.stats().to_dict(), sort_keys=True) == before  # nothing changed
    return answer


@pytest.mark.parametrize(
    "raw, says",
    [
        (b'{"cmd": "dc_drift", "ppm": 1e308}', "ppm must be a number from -1000 to 1000"),
        (b'{"cmd": "dc_drift", "ppm": 1e999}', "not a finite number"),
        (b'{"cmd": "dc_drift", "ppm": NaN}', "not valid JSON"),
        (b"[" * 1000 + b"]" * 1000, "nested too deeply"),
        (b"[" * 3000 + b"]" * 3000, "at most 4096"),
        (b'{"cmd": "drop", "frames": 99999999999999999999}', "frames is out of range"),
        (b'{"cmd": "drive_fault", "slave": 2}', "that slave is not a drive"),
        (b'{"cmd": "drive_fault", "slave": 7}', "slave must be an integer from 0 to 2"),
        (b'{"cmd": "drive_fault", "axis": 5}', "that drive has 2 axis(es)"),
        (b'{"cmd": "al_error", "state": "NOPE"}', "state must be one of"),
        (b'{"cmd": "mute"}', "mute needs at"),
        (b'{"cmd": "bad_frame", "every": 1, "kind": "melt"}', "kind must be one of"),
        (b'{"cmd": "stats", "slave": 0}', "stats takes no field 'slave'"),
        (b'"stats"', "a request is a JSON object"),
        (b"\xff\xfe", "not valid JSON"),
    ],
    ids=[
        "drift-1e308",
        "drift-inf",
        "drift-nan",
        "deep",
        "long",
        "huge-int",
        "not-a-drive",
        "no-such-slave",
        "no-such-axis",
        "bad-state",
        "mute-without-at",
        "bad-kind",
        "stats-field",
        "string",
        "binary",
    ],
)
def test_hostile_requests_are_refused_in_one_line(raw, says):
    answer = _answer(_sim(), raw)
    assert not answer["ok"] and says in answer["error"], answer


def test_good_requests_still_work():
    sim = _sim()
    assert _answer(sim, b'{"cmd": "dc_drift", "slave": 1, "ppm": -999.5}')["ok"]
    assert sim.escs[1].dc.clock.drift_ppb == -999_500
    assert _answer(sim, b'{"cmd": "bad_frame", "every": 3, "kind": "short"}')["injected"]["bad_frame"] == 0
    assert sim.faults.every["bad_frame"] == 3 and sim.faults.corrupt == "short"
    assert _answer(sim, b'{"cmd": "mute", "at": "op"}')["mute_at"] == "op"


_REQUESTS = st.fixed_dictionaries({"cmd": st.sampled_from(COMMANDS) | JSON_VALUES}) | st.dictionaries(
    st.sampled_from(FIELDS),
    JSON_VALUES
    | st.sampled_from(["OP", "SAFEOP", *MUTE_EVENTS, "command"])
    | st.integers(-3, 3)
    | st.floats(-2000, 2000),
    max_size=5,
)


@FUZZ
@given(request=_REQUESTS)
def test_any_json_request_is_answered(request):
    raw = json.dumps(request, allow_nan=True).encode()  # NaN and Infinity too: not JSON, refused
    _answer(SHARED, raw)


@FUZZ
@given(raw=st.binary(max_size=64))
def test_any_bytes_are_answered(raw):
    _answer(SHARED, raw)


_TOML_LINES = st.sampled_from(
    [
        "[defaults]",
        "[[drive]]",
        "[other]",
        'assign = "auto"',
        'assign = "always"',
        'assign = "never"',
        "assign = 1",
        'rx = ["0x6040/16", "0x607A/32", "0x6060/8", "pad/8"]',
        'tx = ["0x6041/16", "0x6064/32"]',
        'rx = ["0x6040/16"]',
        'rx = ["0xZZZZ/16"]',
        "rx = [1, 2]",
        'rx = "0x6040/16"',
        'tx = ["0x6041:99999999999/16"]',
        'tx = ["pad/0"]',
        "position = 1",
        "position = -1",
        "position = 99999999999999999999999",
        "position = 1.5",
        "position = nan",
        "vendor_id = 0x0EC0FFEE",
        "product_code = -5",
        "axes = 2",
        "axes = 0",
        "axes = 10000",
        "axes = inf",
        'x = "\\u001b[2J"',
        "a = " + "[" * 300 + "]" * 300,
        "b = {c = {d = {e = 1}}}",
        "= broken",
        '"\\ud800" = 1',
    ]
)


@FUZZ
@given(lines=st.lists(_TOML_LINES, max_size=8))
def test_any_drive_description_is_accepted_or_one_line(lines):
    try:
        load_drives("\n".join(lines).encode(), "drives.toml")
    except ConfigError as err:
        one_line(err)
        assert "drives.toml" in str(err)


@FUZZ
@given(raw=st.binary(max_size=200))
def test_any_bytes_as_a_drive_description(raw):
    try:
        load_drives(raw, "drives.toml")
    except ConfigError as err:
        one_line(err)


def test_control_path_never_removes_a_file_that_is_not_a_socket(tmp_path):
    """``--control FILE`` over an existing regular file is bad input (exit 2, one line), and the
    file stays as it was (it was unlinked to make room for the socket)."""
    import os
    import subprocess
    import sys

    if os.geteuid() != 0:
        pytest.skip("needs a raw socket (root)")
    victim = tmp_path / "notes.txt"
    victim.write_text("keep me")
    proc = subprocess.run(
        [sys.executable, "-m", "softrt", "ecat-sim", "--iface", "lo", "--control", str(victim)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SOFTRT_STATE_DIR": str(tmp_path / "state")},
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"softrt: error: --control {victim} exists and is not a socket; it "
        "was left alone (give a path that does not exist "
        "(e.g. /tmp/ecat-sim.sock))"
    )
    assert victim.read_text() == "keep me"
