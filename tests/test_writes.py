"""Every file softrt writes goes through a writer that is known to be safe (issue 32): a file the
user names through :mod:`softrt.platform.outfile`, a run's own files through the run directory's
writer, and the few others listed here with the reason each is safe.

The scan is of the syntax tree of every module in ``src/``: a call that opens a file for writing
(``open`` with a write mode, ``Path.open``/``write_text``/``write_bytes``, ``os.open`` with a write
flag, a rename, a temporary file, a Parquet writer, ``savefig`` to a name, ``sqlite3.connect``)
anywhere but in an allowed (module, call) pair fails the test with its line.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "softrt"

#: (module, call) -> why it is safe. A module's calls of that kind are allowed, no other.
ALLOWED = {
    ("platform/outfile.py", "mkstemp"): "the writer itself: random O_EXCL | O_NOFOLLOW temporaries",
    ("platform/outfile.py", "os.open"): "the writer itself: a device or FIFO in place, O_NOFOLLOW unless judged",
    ("platform/outfile.py", "os.replace"): "the writer itself: rename only over a regular file or nothing",
    ("store/rundir.py", "os.open"): "the run directory's writer: samples and reserve O_EXCL in a directory it made",
    ("store/rundir.py", "mkstemp"): "the run directory's writer: JSON and probe temporaries, O_EXCL | O_NOFOLLOW",
    ("store/rundir.py", "os.replace"): "the run directory's writer: a JSON temporary renamed onto its name",
    ("store/rundir.py", "ParquetWriter"): "the run directory's writer: samples.parquet through its O_EXCL sink",
    ("store/late.py", "ParquetWriter"): "the run directory's writer: aggregates.parquet in the run's new directory",
    ("store/importers.py", "write_bytes"): "source.json in the RunDir the import just created (a random name)",
    ("store/importers.py", "os.rename"): "the import's finished run directory moved to its id, never over a file",
    ("store/engine_sqlite.py", "sqlite3.connect"): "the history database, in a directory owned.secure_dir accepts",
    ("store/tailkeep.py", "mkstemp"): "the run directory's tail.npz temporary: random O_EXCL | O_NOFOLLOW",
    ("store/tailkeep.py", "os.replace"): "the run directory's tail.npz: a mkstemp temporary renamed onto its name",
    ("store/archive.py", "open"): "a run's copy in the lab archive: 'xb' (O_EXCL) in a random-named temporary tree",
    ("store/archive.py", "os.rename"): "the archive's temporary tree renamed to its final name, never over a run",
    ("platform/journal.py", "os.open"): "restore and tune-state journals: O_EXCL | O_NOFOLLOW in a secure_dir",
    ("platform/journal.py", "os.rename"): "a journal set aside into failed/ of its own secure_dir",
    ("platform/kfiles.py", "os.open"): "kernel files on writable.py's allow-list, walked O_NOFOLLOW",
    ("platform/linux/backend.py", "os.open"): "/dev/cpu_dma_latency and /dev/shm rings (O_EXCL, 0600): fixed names",
    ("platform/windows/backend.py", "os.open"): "the machine lock file under the Windows state directory",
    ("platform/procs.py", "open"): "a child's log, a path softrt made in its own state or run directory",
    ("load/_worker.py", "os.open"): "the disk load's scratch file in the directory it was given (its own tmpdir)",
    ("session/run.py", "touch"): "RunDir.touch: os.utime of the run's own samples file (a killed run is timed by it)",
    (
        "platform/windows/winsystem.py",
        "write_text",
    ): "a task's XML in the private folder mkdtemp just made (Windows, as SYSTEM)",
    ("store/query.py", "os.symlink"): "a DuckDB extension's link in the private folder TemporaryDirectory just made",
    ("store/query.py", "shutil.copy"): "the same extension copied where links are not allowed (a private folder)",
    ("cli/output.py", "os.open"): "/dev/null for fd 1 and 2 once the terminal is gone",
}

_WRITE_MODES = set("wax+")
_ALWAYS = {
    "write_text": "write_text",
    "write_bytes": "write_bytes",
    "replace": "os.replace",
    "rename": "os.rename",
    "mkstemp": "mkstemp",
    "mkdtemp": None,
    "NamedTemporaryFile": "mkstemp",
    "ParquetWriter": "ParquetWriter",
    "write_table": "write_table",
    "connect": "sqlite3.connect",
    "copy": "shutil.copy",
    "copyfile": "shutil.copy",
    "copy2": "shutil.copy",
    "move": "os.rename",
    "savefig": "savefig",
    "symlink": "os.symlink",
    "link": "os.link",
    "touch": "touch",
    "mkfifo": "os.mkfifo",
}


def _name(func: ast.expr) -> tuple[str, str]:
    """(the object's dotted name or "", the attribute or function name)."""
    if isinstance(func, ast.Attribute):
        owner = func.value
        return (owner.id if isinstance(owner, ast.Name) else ast.unparse(owner)), func.attr
    if isinstance(func, ast.Name):
        return "", func.id
    return "", ""


def _mode_writes(call: ast.Call, index: int) -> bool:
    mode = (
        call.args[index] if len(call.args) > index else next((k.value for k in call.keywords if k.arg == "mode"), None)
    )
    if mode is None:
        return False
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return bool(_WRITE_MODES & set(mode.value))
    return True  # a mode softrt computes: counted as a write


#: Names an os.open's flags may use and still only read; any other (O_WRONLY, a variable) counts as a write.
_READ_ONLY = {
    "os",
    "getattr",
    "O_RDONLY",
    "O_NONBLOCK",
    "O_CLOEXEC",
    "O_NOFOLLOW",
    "O_PATH",
    "O_DIRECTORY",
    "O_PRIVATE_BINARY",
    "O_BINARY",
    "O_NOINHERIT",
    "_NONBLOCK",
    "_CLOEXEC",
    "_NOFOLLOW",
    "_NOFOLLOW_CLOEXEC",
}


def _flags_write(call: ast.Call) -> bool:
    flags = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "flags"), None)
    if flags is None:
        return True
    names = {n.attr for n in ast.walk(flags) if isinstance(n, ast.Attribute)}
    names |= {n.id for n in ast.walk(flags) if isinstance(n, ast.Name)}
    return not names <= _READ_ONLY


def writes_in(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, kind) of every call in *tree* that may open a file for writing."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        owner, name = _name(node.func)
        kind = None
        if name == "open" and owner == "os":
            kind = "os.open" if _flags_write(node) else None
        elif name == "open" and owner in ("", "io", "builtins"):
            kind = "open" if _mode_writes(node, 1) else None
        elif name == "open":  # Path(...).open("w"); another object's open(x) (a master's) is not a file's
            mode = node.args[0] if node.args else None
            kind = (
                "open"
                if (isinstance(mode, ast.Constant) and isinstance(mode.value, str) and _WRITE_MODES & set(mode.value))
                or any(k.arg == "mode" for k in node.keywords)
                else None
            )
        elif name == "write_table" and owner not in ("pq", "parquet", "pyarrow.parquet"):
            kind = None  # a ParquetWriter's next row group: its file was opened (and scanned) already
        elif name == "fdopen" and owner == "os":
            kind = None  # wraps a descriptor already opened (and scanned) above
        elif name in ("replace", "rename") and owner != "os":
            # Path.replace(target) / Path.rename(target); str.replace(old, new) has two arguments
            kind = "os.rename" if len(node.args) == 1 and not node.keywords else None
        elif name == "savefig":
            target = node.args[0] if node.args else None
            kind = None if isinstance(target, ast.Name) and target.id in ("buf", "buffer") else "savefig"
        elif name == "connect" and owner != "sqlite3":
            kind = None  # a socket
        elif name in ("copy", "move") and owner not in ("shutil",):
            kind = None  # dict.copy(), list.copy()
        elif name in ("link", "symlink") and owner != "os":
            kind = None
        elif name in _ALWAYS:
            kind = _ALWAYS[name]
        if kind is not None:
            found.append((node.lineno, kind))
    return found


@functools.cache
def _writes() -> dict[str, list[tuple[int, str]]]:
    """module -> its writes, parsed once for both tests."""
    return {p.relative_to(SRC).as_posix(): writes_in(ast.parse(p.read_text())) for p in sorted(SRC.rglob("*.py"))}


def test_nothing_writes_a_file_but_through_a_known_writer():
    bad = [
        f"{module}:{line}: {kind}"
        for module, found in _writes().items()
        for line, kind in found
        if (module, kind) not in ALLOWED
    ]
    assert not bad, (
        "files opened for writing outside softrt.platform.outfile (write_file) and the run "
        "directory's writer:\n" + "\n".join(bad)
    )


def test_every_allowance_is_still_used():
    """An allowance whose call is gone is removed, so the list stays the list of writers."""
    used = {(module, kind) for module, found in _writes().items() for _line, kind in found}
    assert not set(ALLOWED) - used, sorted(set(ALLOWED) - used)


def test_the_scan_sees_every_spelling_of_a_write():
    """Each way of writing a file is found (else the test above proves nothing)."""
    text = """
open(p, "w"); open(p, mode="ab"); open(p, m); Path(p).open("w"); p.write_text("x"); p.write_bytes(b"")
os.open(p, os.O_WRONLY | os.O_CREAT); os.replace(a, b); os.rename(a, b); p.rename(q); tempfile.mkstemp()
pq.ParquetWriter(p, s); pq.write_table(t, p); fig.savefig("x.png"); sqlite3.connect(p); shutil.copy(a, b)
p.touch(); os.mkfifo(p)
"""
    kinds = [kind for _line, kind in writes_in(ast.parse(text))]
    assert (
        kinds.count("open") == 4 and kinds.count("os.rename") == 2 and "write_text" in kinds and "write_bytes" in kinds
    )
    assert {
        "os.open",
        "os.replace",
        "os.rename",
        "mkstemp",
        "ParquetWriter",
        "write_table",
        "savefig",
        "sqlite3.connect",
        "shutil.copy",
        "touch",
        "os.mkfifo",
    } <= set(kinds)
    quiet = (
        'open(p); open(p, "rb"); os.open(p, os.O_RDONLY | os.O_NONBLOCK); s.replace("a", "b"); d.copy()\n'
        'fig.savefig(buf, format="svg")'
    )
    assert writes_in(ast.parse(quiet)) == []
