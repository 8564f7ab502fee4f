"""Character devices for tests that write to one (issue 32): root gets a private node of the same
device (mknod(2), e.g. ``/dev/full``'s 1:7) in the test's directory, so that a writer that regresses
to renaming over its output replaces that node, never the machine's ``/dev/full`` (which an older
softrt did, as root). Other users get the real one, which they cannot replace (/dev is root's)."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def device(tmp_path: Path, real: str) -> Path:
    """A character device node that is *real* (``/dev/null``, ``/dev/full``), safe to write to."""
    if os.geteuid() != 0:
        return Path(real)
    node = tmp_path / f"dev-{Path(real).name}"
    if not node.exists():
        os.mknod(node, 0o666 | stat.S_IFCHR, os.stat(real).st_rdev)
    return node
