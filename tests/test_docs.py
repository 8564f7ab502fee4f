"""The README and docs/ point only inside the repository (issue 32: the README's opening sent the reader
to ``../shared/seed/brief.md``, which no clone has), and every file they link exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")  # a Markdown link's target, without its anchor
OUTSIDE = re.compile(r"`(\.\./[^`]+\.(?:md|txt))`")  # a document in backquotes outside the repository


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_links_stay_in_the_repository_and_exist():
    for page in _pages():
        text = page.read_text(encoding="utf-8")
        assert not OUTSIDE.findall(text), (page.name, OUTSIDE.findall(text))
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path = (page.parent / target).resolve()
            assert path.is_relative_to(ROOT) and path.exists(), (page.name, target)


def test_the_field_report_holds_the_figures_softrt_uses():
    text = (ROOT / "docs" / "field-report.md").read_text(encoding="utf-8")
    for fact in (
        "250 µs",
        "273.2 µs",
        "14,608.6 µs",
        "249.9 µs",
        "MsMpEng.exe",
        "untuned",
        "tuned+load",
        "tuned+load-on-rt-cpus",
        "update-permitted",
        "Timer int. period",
        "Timer int. process",
    ):
        assert fact in text, fact
    assert "docs/field-report.md" in (ROOT / "README.md").read_text(encoding="utf-8").split("\n## ", 1)[0]
