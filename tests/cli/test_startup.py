"""Start-up: a command imports what it uses, and a spawned worker what the loop uses.

Every ``softrt`` process, every spawned real-time worker and every simulator pays for its imports
before its first line (about 0.5 s of CPU for the run's session layer), and the tests start
hundreds of them.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

from softrt.cli import _COMMAND_MODULES, _command_name, cli

HEAVY = ("pyarrow", "rich", "matplotlib", "prometheus_client", "softrt.session.run", "softrt.store")


def _loaded_after(code: str) -> set[str]:
    """The modules among HEAVY that a fresh interpreter has loaded after running *code*."""
    probe = f"{code}\nimport sys\nprint('loaded:', *(m for m in {HEAVY!r} if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return set(proc.stdout.splitlines()[-1].split()[1:])


def test_every_command_is_found_by_its_module_name(run_cli):
    for module in _COMMAND_MODULES:
        assert importlib.import_module(f"softrt.cli.{module}").command.name == _command_name(module)
    code, out, _ = run_cli("--help")
    assert code == 0
    assert all(f"  {_command_name(m)} " in out for m in _COMMAND_MODULES)
    assert cli.get_command(None, "nosuch") is None


def test_the_worker_and_the_simulator_start_without_the_session_layer():
    # What a spawned worker imports: multiprocessing unpickles its target, softrt.loop.worker.worker_main.
    assert _loaded_after("import softrt.loop.worker") == set()
    # softrt ecat-sim, started dozens of times by the EtherCAT tests: its control requests are read
    # by the store's bounded reader (so the store and pyarrow, loaded before it answers a frame).
    assert _loaded_after(
        "from softrt.cli import main\ntry:\n    main(['ecat-sim', '--help'])\nexcept SystemExit:\n    pass"
    ) <= {"softrt.store", "pyarrow"}
    # The public API still reaches the session layer, on first use.
    assert _loaded_after("import softrt\nsoftrt.RunConfig, softrt.run") >= {"softrt.session.run"}
