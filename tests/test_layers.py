"""The architecture in the README, enforced: layers import downward only, and only the platform
layer branches on the operating system."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "softrt"

# Rank of each top-level module or package; a module may import only from its rank or below.
RANK = {
    "errors": 0,
    "cpus": 0,
    "units": 0,
    "lazy": 0,
    "schema": 1,  # typed documents (the summary, RunConfig): below every producer and reader
    "platform": 2,
    "ipc": 3,
    "analysis": 3,
    "board": 4,
    "motion": 4,
    "load": 4,
    "audit": 4,
    "store": 4,
    "loop": 4,
    "ethercat": 4,
    "ecatsim": 4,
    "report": 4,
    "trace": 4,
    "metrics": 4,
    "session": 5,
    "scenario": 5,
    "cli": 6,
    "__init__": 6,
    "__main__": 7,
}


def _part(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py")


def _imported_parts(path: Path, text: str | None = None) -> set[str]:
    """The top-level softrt modules *path* (or *text*, as if at *path*) imports, in any spelling."""
    return {m.split(".")[0] for m in _imported_modules(path, text)} & RANK.keys()


MODULES = sorted(p for p in SRC.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_imports_go_downward(path):
    mine = _part(path)
    for other in _imported_parts(path):
        assert RANK[other] <= RANK[mine], f"{path.relative_to(SRC)} ({mine}) imports {other}, a higher layer"


def test_nothing_imports_the_cli():
    for path in MODULES:
        if _part(path) not in ("cli", "__main__"):
            assert "cli" not in _imported_parts(path), path


def test_only_the_platform_layer_branches_on_the_os():
    for path in MODULES:
        if _part(path) != "platform":
            text = path.read_text()
            assert not any(s in text for s in ("sys.platform", "os.name ==", "os.name !=", "platform.system()")), path


def test_the_master_never_imports_the_simulator():
    """Each side of the wire in its own package: they meet only on the wire (and in the tests)."""
    for path in MODULES:
        if _part(path) == "ethercat":
            assert "ecatsim" not in _imported_parts(path), path


def _imported_modules(path: Path, text: str | None = None) -> set[str]:
    """Every softrt module *path* (or *text*, as if at *path*) imports, as dotted names under softrt."""
    return set(_imports_of(path) if text is None else _imports_in(path, text))


@functools.cache
def _imports_of(path: Path) -> frozenset[str]:
    """The imports of the file *path*, parsed once for all the checks that walk every module."""
    return _imports_in(path, path.read_text())


def _imports_in(path: Path, text: str) -> frozenset[str]:
    tree = ast.parse(text)
    package = path.relative_to(SRC).parent.parts
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[: len(package) - (node.level - 1)] if node.level > 1 else package)
            elif node.module == "softrt" or (node.module or "").startswith("softrt."):
                base = []
            else:
                continue
            module = (node.module or "").removeprefix("softrt").removeprefix(".") if not node.level else node.module
            target = base + (module.split(".") if module else [])
            found.add(".".join(target))
            found.update(".".join([*target, alias.name]) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name.removeprefix("softrt.") for a in node.names if a.name.startswith("softrt."))
    return frozenset(found)


#: The platform layer's backends, reached only through ``get_platform()``; a module whose name starts with
#: ``_`` (the Win32 bindings) is private to the platform layer too.
PLATFORM_BACKENDS = ("platform.linux.backend", "platform.windows.backend")


def _private(module: str) -> bool:
    parts = module.split(".")
    return module.startswith(PLATFORM_BACKENDS) or (parts[0] == "platform" and any(p.startswith("_") for p in parts))


def test_the_platform_backends_are_reached_only_through_the_platform_object():
    """Everything OS-specific goes through ``get_platform()`` or a public platform module (kfiles,
    journal, linux.writable, linux.mounts, windows.wincmd): never a backend or a private module from outside the layer."""
    for path in MODULES:
        if _part(path) == "platform":
            continue
        bad = sorted(m for m in _imported_modules(path) if _private(m))
        assert not bad, f"{path.relative_to(SRC)} imports {bad}"


def test_no_scheduler_calls_outside_the_platform_layer():
    """Affinity and priorities of any pid go through the platform object (Linux and Windows differ)."""
    for path in MODULES:
        if _part(path) != "platform":
            text = path.read_text()
            assert "os.sched_" not in text, path


def test_the_layer_checks_see_what_they_forbid():
    """The import scan finds a backend import in each spelling (else the checks above prove nothing)."""
    probe = SRC / "session" / "run.py"
    assert "platform" in _imported_modules(probe)
    text = (
        "from ..platform.linux.backend import RT_RUNTIME\nfrom softrt.platform.windows import backend\n"
        "import softrt.platform._x\nfrom ..platform.windows import _win32\nfrom ..platform.linux import kfacts\n"
    )
    found = _imported_modules(probe, text)
    assert {"platform.linux.backend", "platform.windows.backend", "platform._x", "platform.windows._win32"} <= found
    assert {m for m in found if _private(m)} == found - {"platform.linux", "platform.linux.kfacts", "platform.windows"}


def test_the_layer_rank_check_sees_every_import_spelling():
    """A lower layer importing the CLI is found however it is written (else the rank test proves nothing)."""
    probe = SRC / "store" / "summary.py"
    for text in (
        "from ..cli import render",
        "from softrt.cli.render import x",
        "from softrt import cli",
        "import softrt.cli.render",
        "def f():\n    from ..cli import render\n",
    ):
        assert "cli" in _imported_parts(probe, text), text
    assert _imported_parts(probe, "from . import model\nfrom ..errors import ConfigError") == {"store", "errors"}


def test_only_the_platform_layer_asks_which_os_this_is():
    """``IS_WINDOWS``/``IS_LINUX`` are the platform's own: others branch on ``get_platform().caps``."""
    for path in MODULES:
        if _part(path) != "platform":
            text = path.read_text()
            assert "IS_WINDOWS" not in text and "IS_LINUX" not in text, path
