"""Hostile scenario files: binary bytes, wrong types, deep nesting and unbounded CPU lists are one ConfigError
line naming the file (issue 12, defects 4 and 9), and so is a path that is no TOML file (issue 32); Hypothesis
fuzz of the TOML reader."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from softrt.errors import ConfigError, SoftRTError
from softrt.scenario.parse import load_scenario, parse_scenario

from ..fuzz import fuzz, reads

FUZZ = fuzz(100)


@pytest.mark.parametrize(
    "body,match",
    [
        ('name = "x"\nduration = [1]\n', "key duration: duration \\[1\\] is not a time"),
        ('name = "x"\nduration = nan\n', "key duration: .* out of range"),
        ('name = "x"\nduration = 1e400\n', "key duration: .* out of range"),
        ('name = "x"\nload = [1, 2]\n', "key load\\[0\\]: must be a table"),
        (
            'name = "x"\n[[load]]\nname = "cpu"\ncpus = "0-99999999999"\n',
            "line 4, key load\\[0\\].cpus: .*cannot exist",
        ),
        ('name = "x"\nprofile = ["rt"]\n', "key profile"),
        ('name = "x"\nwait = {a = 1}\n', "key wait"),
        ('name = "x"\ndevice = 5\n', "key device"),
        ('name = "x"\ndescription = [1]\n', "key description"),
        ('name = "x"\n[[load]]\nname = ["cpu"]\n', "key load\\[0\\].name"),
        ('name = "x"\na = ' + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
        ('name = "x"\nduration = ' + "9" * 5000 + "\n", "malformed TOML"),
    ],
    ids=[
        "duration-list",
        "duration-nan",
        "duration-inf",
        "load-ints",
        "cpus-huge",
        "profile-list",
        "wait-table",
        "device-int",
        "description-list",
        "load-name-list",
        "deep",
        "huge-int",
    ],
)
def test_hostile_scenarios_are_one_line(tmp_path, body, match):
    f = tmp_path / "s.toml"
    f.write_text(body)
    with pytest.raises(ConfigError, match=match) as info:
        load_scenario(str(f))
    assert "\n" not in str(info.value) and str(f) in str(info.value)


def test_binary_scenario_file(tmp_path):
    f = tmp_path / "s.toml"
    f.write_bytes(b'name = "x"\n\x00\xff\xfe binary\n')
    with pytest.raises(ConfigError, match="not UTF-8") as info:
        load_scenario(str(f))
    assert "\n" not in str(info.value)


def test_huge_scenario_file(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('name = "x"\n' + "# padding\n" * 40_000)
    with pytest.raises(ConfigError, match="larger than"):
        load_scenario(str(f))


_LINES = st.sampled_from(
    [
        'name = "x"',
        'name = "a\\u001b[2J"',
        'profile = "rt"',
        'profile = "none"',
        'wait = "spin"',
        "wait = 1",
        'duration = "10s"',
        "duration = 5",
        "duration = -1",
        "duration = [1]",
        "duration = nan",
        "duration = inf",
        'device = "virtual"',
        "device = 1",
        "loads_on_rt_cpus = true",
        "loads_on_rt_cpus = 1",
        "load = [1, 2]",
        "[[load]]",
        'name = "cpu"',
        'name = "disk"',
        'cpus = "0"',
        'cpus = "0-99999999999"',
        'cpus = "all"',
        'cpus = "1-0"',
        "cpus = 3",
        'description = "d"',
        "x = {a = [[[1]]]}",
        "[load]",
        "[other]",
    ]
)


@FUZZ
@given(lines=st.lists(_LINES, max_size=8) | st.text(max_size=60).map(lambda t: [t]))
def test_fuzz_parse_scenario(lines):
    """Any TOML-ish text: a Scenario or one ConfigError line (never another exception)."""
    scenario = reads(lambda: parse_scenario("\n".join(lines), source="fuzz.toml"))
    if not isinstance(scenario, SoftRTError):
        assert (scenario.name and scenario.description.isprintable()) or scenario.description == ""
        assert scenario.duration_ns is None or scenario.duration_ns > 0


@FUZZ
@given(raw=st.binary(max_size=200))
def test_fuzz_scenario_bytes(raw):
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "s.toml"
        f.write_bytes(raw)
        reads(lambda: load_scenario(str(f)))


def scenario_paths(tmp_path) -> dict[str, str]:
    """Paths that are no TOML file, and what the error line says of each."""
    (tmp_path / "dir.toml").mkdir()
    os.mkfifo(tmp_path / "fifo.toml")
    (tmp_path / "zero.toml").symlink_to("/dev/zero")
    (tmp_path / "gone.toml").symlink_to(tmp_path / "nothing")
    (tmp_path / "notes.txt").write_text('name = "x"\n')
    return {
        "dir.toml": "is a directory, not a file",
        "fifo.toml": "is a FIFO, not a file",
        "zero.toml": "is a character device, not a file",
        "gone.toml": "is a link to nothing, not a file",
        "notes.txt": "is not a .toml file",
        "missing.toml": "no scenario file",
    }


def test_a_scenario_path_that_is_no_toml_file_says_what_it_is(tmp_path):
    """Issue 32: a directory, a FIFO or a link to /dev/zero was an "unknown scenario"; now the line says
    what the path is, at once (stat, never an open: no hang on the FIFO, no read of /dev/zero)."""
    for name, says in scenario_paths(tmp_path).items():
        err = reads(lambda name=name: load_scenario(str(tmp_path / name)))
        assert isinstance(err, ConfigError) and says in str(err), (name, err)
        assert "use the path of a .toml file" not in str(err) or "built-in" in err.hint
