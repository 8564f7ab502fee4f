"""``softrt push``: send the lab the runs it lacks, from this rig's history (CLI layer; store.lab)."""

from __future__ import annotations

import click
from rich.text import Text

from ..schema.text import printable
from ..store.lab import Lab, push
from .history import ARCHIVE_OPTION, DB_OPTION
from .render import console, emit


@click.command(
    "push",
    epilog="""\b
Examples:
  softrt push --db postgresql://rig7@lab-db/softrt --archive /mnt/lab/softrt
  */15 * * * * softrt push       (cron, with SOFTRT_DB and SOFTRT_ARCHIVE set; the password in ~/.pgpass)""",
)
@DB_OPTION
@ARCHIVE_OPTION
@click.option(
    "--from",
    "local_db",
    metavar="PATH",
    default=None,
    help="This rig's history to send from [default: $SOFTRT_HOME/history.sqlite, else "
    "~/.local/share/softrt/history.sqlite].",
)
@click.option("--quiet", "-q", is_flag=True, help="Print nothing when nothing was sent (for cron).")
def command(db, archive, local_db, quiet):
    """Send the lab's database and archive every run of this rig they lack (index rows and run folders).

    Safe to run again at any time, and from cron: a run already there is not sent twice, and a push cut
    short (the network lost, the server stopped) is finished by the next one. Exit status 1 when the lab
    cannot be reached, 2 for bad input.
    """
    from ..store.history import History

    lab = Lab(db, archive)
    lab.check()
    local = History(local_db) if local_db is not None else None
    out = console()
    # Each run is said as it is sent: a push cut short has told what the lab got.
    result = push(lab, local, on_run=lambda run_id: emit(out, Text(f"sent {printable(run_id)}"), soft_wrap=True))
    notes = []
    if result.running:
        notes.append(f"{len(result.running)} still running (a later push sends them)")
    if result.gone:
        notes.append(
            f"{len(result.gone)} whose folder is gone from this rig (not sent): "
            + ", ".join(printable(r) for r in result.gone[:3])
            + (", …" if len(result.gone) > 3 else "")
        )
    if result.sent or notes or not quiet:
        where = History(lab.index()).path
        emit(
            console(stderr=True),
            Text(
                f"{len(result.sent)} run(s) sent to {printable(where)}, {result.already} "
                f"already there" + "".join(f"; {n}" for n in notes),
                style="dim",
            ),
            soft_wrap=True,
        )
    return 0
