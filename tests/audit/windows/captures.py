"""Captured Windows command outputs, copied so a test can break one (the Windows counterpart of trees.py).

``fixtures/good`` is a well-tuned Windows 10 IoT Enterprise IPC of the seed's shape (14 logical
processors, SetRTCores=4: CPUs 10-13 reserved, every step of Microsoft's guide done);
``fixtures/bad`` the same machine untuned, as the seed's i5-14500 with HT off (CPU sets in cpu_sets.hex: cpusets.py). Their outputs follow each tool's documented format
(see softrt.audit.windows.parse); they were not captured on a real machine.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

from softrt.platform.windows.wincmd import INDEX, key

FIXTURES = Path(__file__).resolve().parent / "fixtures"


class Captures:
    """A writable copy of a capture directory."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def copy(cls, name: str, dest: Path) -> Captures:
        shutil.copytree(FIXTURES / name, dest)
        return cls(dest)

    def __str__(self) -> str:
        return str(self.root)

    def _index(self) -> dict:
        return json.loads((self.root / INDEX).read_text())

    def _entry(self, argv: Sequence[str]) -> dict:
        return self._index()[key(argv)]

    def read(self, argv: Sequence[str]) -> str:
        """What the command printed."""
        entry = self._entry(argv)
        return (self.root / entry["out"]).read_text(encoding="utf-8") if entry.get("out") else ""

    def set(self, argv: Sequence[str], out: str, rc: int = 0, err: str = "") -> Captures:
        """Make *argv* print *out* and exit with *rc*."""
        index = self._index()
        name = index.get(key(argv), {}).get("out") or f"out{len(index)}.txt"
        (self.root / name).write_text(out, encoding="utf-8")
        index[key(argv)] = {"out": name, "rc": rc, **({"err": err} if err else {})}
        (self.root / INDEX).write_text(json.dumps(index, indent=2))
        return self

    def fail(self, argv: Sequence[str], err: str, rc: int = 1) -> Captures:
        """Make *argv* fail with *err* on stderr."""
        return self.set(argv, "", rc, err)

    def replace(self, argv: Sequence[str], old: str, new: str) -> Captures:
        """Edit what *argv* printed (the text must be there)."""
        text = self.read(argv)
        assert old in text, f"{old!r} not in the output of {key(argv)}"
        return self.set(argv, text.replace(old, new))

    def edit_json(self, argv: Sequence[str], change) -> Captures:
        """Load the JSON *argv* printed, let *change* edit it, store it."""
        data = json.loads(self.read(argv))
        data = change(data) or data
        return self.set(argv, json.dumps(data, indent=4) + "\n")
