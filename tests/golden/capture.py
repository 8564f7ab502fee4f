"""(Re)write the golden outputs of tests/golden/expected/ from the softrt on PYTHONPATH (tests/golden; issue 29).

    PYTHONPATH=src python tests/golden/capture.py [CASE-PREFIX ...]

When to run it: ONLY when an output change is intended (a bug fix, a new figure that a reviewer asked
for), never to make tests/golden pass after a refactor. Run it, then read ``git diff tests/golden/expected``
line by line: every changed line must be the change you meant, and the commit says why. A refactor
(issue 29: producers speak the schema, platform tiers, module splits) must leave every file here as it is.

The outputs were first captured from main at b356c87 (before issue 29's refactor). The cases and the
normalisation are in ``cases.py``; the inputs in ``inputs/`` (``make_inputs.py`` made them, once, with
real-time runs: this script runs none, it only reads them). With CASE-PREFIX arguments, only the cases
whose name starts with one of them are rewritten (the others keep their files). A case whose name is
gone from cases.py has its file removed.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: ``tests`` importable

from tests.golden.cases import (
    ALIASES,
    CASES,
    EXPECTED,
    STATUS,
    expected_path,
    read_status,
    status_of,
    stored_cases,
)
from tests.golden.world import build_world


def main(prefixes: list[str]) -> int:
    status = read_status()
    wanted = [n for n in CASES if not prefixes or n.startswith(tuple(prefixes))]
    failed = 0
    with tempfile.TemporaryDirectory(prefix="softrt-golden-") as tmp:
        world = build_world(Path(tmp) / "w")
        # Cases with a file of their own first; then the aliases, which must print that same file.
        for name in sorted(wanted, key=lambda n: n in ALIASES):
            result = CASES[name](world)
            target = expected_path(name)
            if name in ALIASES:  # an input (never rewritten here) or another case's output: check it
                if not target.is_file() or target.read_bytes().decode("utf-8") != result.out:
                    print(f"error: {name} does not print {ALIASES[name]} (cases.ALIASES)", file=sys.stderr)
                    failed += 1
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(result.out, encoding="utf-8", newline="")
            status[name] = status_of(result)
            if result.status != 0:
                print(f"note: {name} exited {result.status}: {result.err.strip()}", file=sys.stderr)
    if not prefixes:  # a full capture: drop what no case makes any more
        for name in stored_cases():
            if name not in CASES or name in ALIASES:
                (EXPECTED / name).unlink()
        status = {k: v for k, v in status.items() if k in CASES}
    lines = [f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in sorted(status.items())]
    STATUS.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")
    print(f"wrote {len(wanted)} case(s) under {EXPECTED}; review: git diff {EXPECTED}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
