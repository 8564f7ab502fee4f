"""The architecture in the README, enforced: layers import downward only, and only the platform
layer branches on the operating system."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "softrt"

# Rank of each top-level module or package; a module may import only from its rank or below.
RANK = {
    "errors": 0, "cpus": 0, "units": 0,
    "platform": 1,
    "ipc": 2, "analysis": 2,
    "board": 3, "motion": 3, "load": 3, "audit": 3, "store": 3, "loop": 3, "ethercat": 3, "ecatsim": 3, "report": 3,
    "trace": 3, "metrics": 3,
    "session": 4, "scenario": 4,
    "cli": 5, "__init__": 5, "__main__": 6,
}


def _part(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py")


def _imported_parts(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    package = path.relative_to(SRC).parent.parts
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
            target = list(base) + (node.module.split(".") if node.module else [])
            if target:
                found.add(target[0])
            else:  # "from . import x" at the top of the package
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("softrt."):
            found.add(node.module.split(".")[1])
    return {p for p in found if p in RANK}


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
            assert "sys.platform" not in text and "os.name ==" not in text, path


def test_the_master_never_imports_the_simulator():
    """Each side of the wire in its own package: they meet only on the wire (and in the tests)."""
    for path in MODULES:
        if _part(path) == "ethercat":
            assert "ecatsim" not in _imported_parts(path), path
