import pytest

from softrt.errors import ConfigError
from softrt.scenario import BUILTIN_NAMES, load_scenario, parse_scenario


@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_builtins_parse(name):
    s = load_scenario(name)
    assert s.name == name and s.source == "built-in"


def test_builtins_mean_what_the_seed_did():
    assert load_scenario("untuned").profile == "none" and not load_scenario("untuned").loads
    assert load_scenario("tuned").tuned and not load_scenario("tuned").loads
    loaded = load_scenario("tuned+load")
    assert {load.name for load in loaded.loads} >= {"disk", "gpu", "video"}
    assert all(load.cpus == "housekeeping" for load in loaded.loads) and not loaded.loads_on_rt_cpus
    on_rt = load_scenario("tuned+load-on-rt-cpus")
    assert on_rt.loads_on_rt_cpus and all(load.cpus == "all" for load in on_rt.loads)


def test_user_file(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text('name = "mine"\nprofile = "rt"\nwait = "sleep"\nduration = "3s"\n[[load]]\nname = "cpu"\ncpus = "0"\n')
    s = load_scenario(str(f))
    assert s.wait == "sleep" and s.duration_ns == 3_000_000_000 and s.loads[0].cpus == "0"


@pytest.mark.parametrize(
    "text,needle",
    [
        ('name = "x"\nprofile = "fast"\n', "line 2, key profile: unknown profile 'fast'"),
        ('name = "x"\nwiat = "spin"\n', "line 2, key wiat: unknown key"),
        (
            'name = "x"\n\n[[load]]\nname = "disk"\n[[load]]\nname = "gpu2"\n',
            "line 6, key load[1].name: unknown load 'gpu2'",
        ),
        ('name = "x"\n[[load]]\nname = "disk"\ncpus = "rt"\n', "line 4, key load[0].cpus: invalid placement"),
        ('name = "x"\nduration = "soon"\n', "line 2, key duration"),
        ('name = "x"\nduration = "0s"\n', "key duration: must be positive"),
        ('name = "x" "y"\n', "malformed TOML"),
        ('profile = "rt"\n', "key name"),
        ('name = "x"\nloads_on_rt_cpus = "yes"\n', "line 2, key loads_on_rt_cpus"),
        ('name = "x"\n\ntrace = "off"\n', "line 3, key trace: must be true or false"),
        ('name = "x"\nsamples = "some"\n', "line 2, key samples: unknown value 'some'"),
        ('name = "x"\ntrace_mode = "thin"\n', "line 2, key trace_mode: unknown value 'thin'"),
        ('name = "x"\ndc_lock = true\n', "line 2, key dc_lock: needs an EtherCAT device"),
        ('name = "x"\ndevice = "ethercat:eth1"\ndc_lock = 1\n', "line 3, key dc_lock: must be true or false"),
        ('name = "x"\ndevice = "ethercat:eth1"\ndc_shift = "-soon"\n', "line 3, key dc_shift"),
        ('name = "x"\necat_drives = "d.toml"\n', "line 2, key ecat_drives: describes EtherCAT drives"),
        ('name = "x"\ndevice = "ethercat:eth1"\necat_drives = 3\n', "line 3, key ecat_drives: must be the path"),
    ],
)
def test_mistakes_name_file_line_and_key(tmp_path, text, needle):
    with pytest.raises(ConfigError) as info:
        parse_scenario(text, source="my.toml")
    assert "scenario my.toml" in str(info.value) and needle in str(info.value)


def test_a_scenario_may_set_the_trace_and_compare_passes_it_on():
    from softrt.scenario.compare import plan
    from softrt.schema.config import RunConfig

    quiet = parse_scenario('name = "quiet"\ntrace = false\n')
    default = parse_scenario('name = "default"\n')
    split = parse_scenario('name = "split"\nwait = "sleep"\ntrace_mode = "full"\n')
    assert quiet.trace is False and default.trace is None and default.trace_mode is None
    base = RunConfig(trace=True, late_threshold_ns=50_000, keep_late=7, trace_mode="lean")
    configs = {p.scenario.name: p.config for p in plan([quiet, default, split], base)}
    assert configs["quiet"].trace is False and configs["default"].trace is True
    assert configs["default"].late_threshold_ns == 50_000 and configs["default"].keep_late == 7
    assert configs["split"].trace_mode == "full" and configs["default"].trace_mode == "lean"


def test_a_scenario_may_set_what_samples_are_kept():
    from softrt.scenario.compare import plan
    from softrt.schema.config import RunConfig

    late = parse_scenario('name = "late"\nsamples = "late"\n')
    default = parse_scenario('name = "default"\n')
    configs = {p.scenario.name: p.config for p in plan([late, default], RunConfig(samples="all"))}
    assert configs["late"].samples == "late" and configs["default"].samples == "all"


def test_a_scenario_names_its_drive_description_beside_it(tmp_path):
    from softrt.scenario.compare import plan
    from softrt.schema.config import RunConfig

    (tmp_path / "drives.toml").write_text('[defaults]\nassign = "never"\n')
    f = tmp_path / "bus.toml"
    f.write_text('name = "bus"\ndevice = "ethercat:eth1"\necat_drives = "drives.toml"\n')
    scenario = load_scenario(str(f))
    assert scenario.ecat_drives == str(tmp_path / "drives.toml")
    (planned,) = plan([scenario], RunConfig())
    assert planned.config.ecat_drives == str(tmp_path / "drives.toml")
    (tmp_path / "drives.toml").write_text('[defaults]\nassign = "sometimes"\n')
    with pytest.raises(ConfigError, match="assign: must be one of auto, always, never"):
        plan([scenario], RunConfig())


def test_unknown_scenario_name():
    with pytest.raises(ConfigError, match="unknown scenario 'tunned'"):
        load_scenario("tunned")


def test_a_scenario_may_phase_lock_an_ethercat_bus():
    from softrt.scenario.compare import plan
    from softrt.schema.config import RunConfig

    locked = parse_scenario('name = "locked"\ndevice = "ethercat:eth1"\ndc_lock = true\ndc_shift = "-200us"\n')
    free = parse_scenario('name = "free"\ndevice = "ethercat:eth1"\ndc_shift = "50"\n')
    assert (locked.dc_lock, locked.dc_shift_ns, free.dc_lock, free.dc_shift_ns) == (True, -200_000, False, 50_000)
    configs = {p.scenario.name: p.config for p in plan([locked, free], RunConfig(period_ns=1_000_000))}
    assert configs["locked"].dc_lock and configs["locked"].dc_shift_ns == -200_000
    assert not configs["free"].dc_lock
