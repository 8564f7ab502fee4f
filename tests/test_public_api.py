"""The public API (``softrt.__all__``) is what the README documents, and every name of it imports.

As httpx's tests/test_exported_members.py holds ``httpx.__all__`` to the package's public members, this holds
``softrt.__all__`` to the README's "Your own cyclic code" section, the one place a user learns the Python API,
so neither can grow a name the other lacks.
"""

from __future__ import annotations
import __future__

import re
import subprocess
import sys
import types
from pathlib import Path

import softrt

README = Path(__file__).resolve().parent.parent / "README.md"


def documented() -> set[str]:
    """The names the README's Python API section gives: ``softrt.name`` in its text and code, and each
    class or error it names in backquotes (``RunResult``, ``ConfigError``)."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Your own cyclic code\n", 1)[1].split("\n## ", 1)[0]
    qualified = re.findall(r"\bsoftrt\.([A-Za-z]\w*)", section)
    prose = re.sub(r"```.*?```", "", section, flags=re.DOTALL)  # a fenced block's ``` would pair up wrongly
    classes = [span for span in re.findall(r"`([^`]+)`", prose) if re.fullmatch(r"[A-Z][a-z]+[A-Z]\w*", span)]
    return set(qualified) | set(classes)


def test_all_is_what_the_readme_documents():
    assert sorted(softrt.__all__) == sorted(documented())


def test_all_is_sorted_and_every_name_imports():
    assert softrt.__all__ == sorted(softrt.__all__)
    namespace: dict[str, object] = {}
    exec("from softrt import *", namespace)  # the lazy names (run, RunConfig, RunResult) too
    assert [name for name in softrt.__all__ if namespace.get(name) is None] == []
    assert issubclass(softrt.ConfigError, softrt.SoftRTError) and issubclass(softrt.InvalidCpu, softrt.ConfigError)


def test_no_public_member_is_left_out_of_all():
    # httpx's check: every public member of the package is in __all__. A submodule shows up as an attribute
    # once imported (softrt.cpus) and `from __future__ import annotations` binds a name: neither is API.
    public = {
        name
        for name, value in vars(softrt).items()
        if not name.startswith("_") and not isinstance(value, (types.ModuleType, type(__future__.annotations)))
    }
    assert public <= set(softrt.__all__), public - set(softrt.__all__)


def test_import_softrt_loads_neither_numpy_nor_the_session_layer():
    # Every command, spawned worker and load process imports the package first (src/softrt/lazy.py).
    probe = "import sys, softrt; print(*sorted(m for m in sys.modules if m.split('.')[0] in {'numpy', 'pyarrow'}"
    probe += " or m.startswith(('softrt.session', 'softrt.schema', 'softrt.store'))))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == []
