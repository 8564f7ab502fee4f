"""mypy on the package, failing only on errors that are not in scripts/mypy-baseline.txt (issue 29).

    python scripts/mypy_baseline.py            # exit 1 when mypy reports an error the baseline lacks
    python scripts/mypy_baseline.py --update   # record today's errors as the baseline (after a fix)

The strict modules ([tool.mypy] in pyproject.toml) are checked the same way; the summary line counts what the
baseline still holds for them, which issue 29 wants at 0. An error is keyed by its file, code and message, not its
line, so an edit above it does not make it new ("on line N" inside a message is blanked for the same reason), and
the keys are compared as a set: mypy reports one error per line, so `ruff format` splitting a line in two would
otherwise count an old error twice. The price: one more instance of an error already listed, in the same file,
passes. A baseline kept as the third-party mypy-baseline tool keeps one, in one small file (no new dependency).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "scripts" / "mypy-baseline.txt"
# path:line: error: message  [code]   (mypy's default one-line output, without --pretty)
ERROR = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+)(?::\d+)?: error: (?P<message>.*?)(?:  \[(?P<code>[a-z-]+)\])?$")
STRICT = (
    "src/softrt/schema/",
    "src/softrt/analysis/",
    "src/softrt/units.py",
    "src/softrt/cpus.py",
    "src/softrt/errors.py",
)


def key(path: str, message: str, code: str | None) -> str:
    """One baseline line: where, which check, what (line numbers blanked)."""
    message = re.sub(r"line \d+", "line N", message)
    return f"{path}: [{code or 'misc'}] {message}"


def run_mypy() -> dict[str, list[str]]:
    """Today's errors: each key with mypy's full lines for it (to show where a new one is)."""
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-pretty", "--no-error-summary"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode not in (0, 1):  # 2: mypy itself failed (a bad configuration, a crash)
        sys.exit(f"mypy failed (exit {proc.returncode}): {(proc.stderr or proc.stdout).strip()}")
    where: dict[str, list[str]] = {}
    for line in proc.stdout.splitlines():
        m = ERROR.match(line)
        if m:
            where.setdefault(key(m["path"], m["message"], m["code"]), []).append(line)
    return where


def main(argv: list[str]) -> int:
    where = run_mypy()
    found = set(where)
    errors = sum(map(len, where.values()))
    if argv[1:] == ["--update"]:
        BASELINE.write_text("".join(f"{k}\n" for k in sorted(found)))
        print(f"mypy: {errors} errors, {len(found)} distinct, recorded in {BASELINE.relative_to(ROOT)}")
        return 0
    baseline = set(BASELINE.read_text().splitlines()) if BASELINE.exists() else set()
    new, gone = found - baseline, baseline - found
    in_strict = sum(k.startswith(STRICT) for k in baseline)
    for k in sorted(new):
        print(*where[k], sep="\n")
    print(
        f"mypy: {errors} errors, {len(new)} new, {len(gone)} fixed since the baseline ({len(baseline)} distinct,"
        f" of them {in_strict} in the strict modules)"
        + ("; record the fixes: python scripts/mypy_baseline.py --update" if gone and not new else "")
    )
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
