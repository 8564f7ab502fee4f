"""Store and forward: a rig keeps every run itself, then hands it to the lab (store layer).

The rig's own SQLite history and its run folders are the record; the lab's index (a PostgreSQL
server, ``--db``/``SOFTRT_DB``) and archive (``--archive``/``SOFTRT_ARCHIVE``, store.archive)
get a copy. A run is forwarded as it ends; when the lab cannot be reached it stays on the rig,
and :func:`push` (``softrt push``, by hand or from cron) sends what the lab lacks later.

Nothing is lost or doubled whatever fails when: a run's row is one upsert keyed by its run id
(store.dialect), its archive copy one rename (store.archive), and the archive is written before the
row that points to it, so a row never names a folder that is not there. Running ``push`` again, or
two at once, sends each run once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError
from .archive import archive_root, archive_run
from .dbtarget import local_db_path, resolve
from .history import History, RunRecord, load_run_summary


@dataclass(frozen=True)
class Lab:
    """The lab a rig forwards its runs to, as the command line gave it (None: the environment)."""

    db: str | None = None
    archive: str | None = None

    def index(self) -> str | Path:
        """The index's target (a PostgreSQL URL, or a SQLite path); ConfigError for a bad one."""
        return resolve(self.db)

    def archive_dir(self) -> Path | None:
        return archive_root(self.archive)

    def forwards(self) -> bool:
        """Is there anything beyond the rig's own history: a lab server, or an archive?"""
        return isinstance(self.index(), str) or self.archive_dir() is not None

    def check(self) -> None:
        """Refuse a malformed URL or archive before a run starts (bad input, exit 2), without connecting."""
        target = self.index()
        if isinstance(target, str):
            History(target).check_url()
        self.archive_dir()

    def local(self) -> Path:
        """The rig's own history file: ``--db`` when it is a path, else $SOFTRT_DB's path or the default."""
        target = self.index()
        return target if isinstance(target, Path) else local_db_path()


def forward(run_dir: Path, lab: Lab, index: History | None = None) -> Path:
    """Archive *run_dir* (when the lab has an archive) and store its row in the lab's index; return
    the folder the row names. Raises LabUnreachable / ArchiveUnreachable (kept on the rig) or ConfigError."""
    run_dir = Path(run_dir).resolve()
    root = lab.archive_dir()
    dest = run_dir
    if root is not None:
        summary = load_run_summary(run_dir)
        # The rig the run was measured on, as its provenance recorded it (a run copied from another PC
        # and pushed from here is filed under its own rig); this machine's id for runs without one.
        recorded = getattr(getattr(summary, "provenance", None), "rig_id", None)
        dest = archive_run(
            run_dir,
            root,
            summary.run_id,
            summary.started_at,
            rig=recorded if isinstance(recorded, str) and recorded else None,
        )
    (index or History(lab.index())).add_run(dest)
    return dest


@dataclass
class PushResult:
    """What one ``softrt push`` did."""

    sent: list[str] = field(default_factory=list)
    already: int = 0  # runs the lab had as they are
    running: list[str] = field(default_factory=list)  # still going: sent by a later push
    gone: list[str] = field(default_factory=list)  # their folder is no longer on the rig


def push(lab: Lab, local: History | None = None, on_run: Callable[[str], None] | None = None) -> PushResult:
    """Send the lab every run of the rig's history (*local*, else $SOFTRT_DB's file or the default)
    that it lacks, or holds in an older state.

    A run the lab lacks is one its index has no row of, a row of another status (a run forwarded
    while it ran), or, with an archive, a row that does not name the archive's copy. *on_run* is
    called after each run sent. Raises at the first run that cannot be sent; what was sent stays.
    """
    local = local or History(local_db_path())
    index = History(lab.index())
    root = lab.archive_dir()
    if root is None and index.engine == local.engine and Path(index.path).resolve() == Path(local.path).resolve():
        raise ConfigError(
            "softrt push has no lab to send to",
            hint="give --db postgresql://user@host/dbname (or SOFTRT_DB) and/or --archive PATH (or SOFTRT_ARCHIVE)",
        )
    have = index.states()
    result = PushResult()
    for record in local.list_runs():
        if not _lacks(have.get(record.run_id), record, root):
            result.already += 1
            continue
        if _still_running(record):
            result.running.append(record.run_id)
            continue
        if not (record.path / "summary.json").is_file():
            result.gone.append(record.run_id)
            continue
        forward(record.path, lab, index)
        result.sent.append(record.run_id)
        if on_run is not None:
            on_run(record.run_id)
    return result


def _lacks(state: tuple[str | None, str] | None, record: RunRecord, root: Path | None) -> bool:
    if state is None:
        return True
    status, path = state
    if status != record.status:
        return True
    return root is not None and not Path(path).is_relative_to(root)


def _still_running(record: RunRecord) -> bool:
    if record.status != "running":
        return False
    from .running import run_state

    try:
        return run_state(record.summary).running
    except ConfigError:
        return False  # an unreadable stored summary: its folder decides (forward reads it)
