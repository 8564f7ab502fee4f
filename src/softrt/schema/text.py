"""Text read from files, made safe to show and to use as a name (schema layer: pure values).

:func:`printable` drops control characters (terminal escape sequences in a nodename must not reach
the terminal); :func:`safe_name` maps a name onto ``[A-Za-z0-9._-]`` before it becomes part of a
path (a nodename with ``/`` must not become a directory). The bounded readers that use these live
in store.validate.
"""

from __future__ import annotations

import re
import unicodedata

#: The longest name softrt accepts in a run id or a directory name (NAME_MAX is 255).
MAX_NAME = 64

_SAFE_RE = re.compile(r"[^A-Za-z0-9._-]+")


def printable(text: object) -> str:
    """Return ``str(text)`` without control characters: tab, CR and LF become spaces, the rest ``?``.

    Unicode category C* (Cc controls incl. ESC and the C1 CSI, Cf format characters such as the
    bidirectional overrides of CVE-2021-42574, Cs/Co/Cn) are what a terminal may act on.
    """
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else " " if c in "\t\r\n" else "?" for c in text)


def safe_name(text: object, fallback: str = "unknown", max_len: int = MAX_NAME) -> str:
    """Return *text* reduced to ``[A-Za-z0-9._-]`` (runs of others become ``_``), safe in a path.

    No leading dot (no hidden file, no ``..``), at most *max_len* characters, *fallback* when
    nothing is left. ``safe_name("evil/../x") == "evil_.._x"``.
    """
    name = _SAFE_RE.sub("_", unicodedata.normalize("NFKC", str(text)))[:max_len].lstrip(".")
    return name or fallback


def is_safe_name(text: object) -> bool:
    """True when *text* is a string that :func:`safe_name` leaves as it is."""
    return isinstance(text, str) and bool(text) and safe_name(text, fallback="") == text


# -- JSON ---------------------------------------------------------------------------------------------
def show_value(value: object) -> str:
    """*value* for an error message: printable, at most 60 characters (a huge number by its digits)."""
    text = (
        repr(value) if not isinstance(value, int) or abs(value) < 10**30 else f"a {len(str(abs(value)))}-digit number"
    )
    return printable(text)[:60]


def printable_strings(doc: object) -> object:
    """A copy of *doc* with every string (keys too) passed through :func:`printable` (depth is
    bounded by :func:`check_values`, so recursion is safe)."""
    if isinstance(doc, str):
        return printable(doc)
    if isinstance(doc, dict):
        return {printable(k): printable_strings(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [printable_strings(v) for v in doc]
    return doc
