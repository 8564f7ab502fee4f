"""softrt's command line (top layer): the only place that prints or exits.

Each sub-command lives in its own module and exposes one click command named ``command``, named
as its module is (``import_`` is ``import``, ``ecat_sim`` is ``ecat-sim``); ``_COMMAND_MODULES`` lists
them. A command's module is imported only when that command runs (or ``--help`` lists them all), so
``softrt history`` or ``softrt ecat-sim`` starts without loading the run's session layer.
"""

from __future__ import annotations

import importlib
import sys

import click

from ..errors import ConfigError, SoftRTError

_COMMAND_MODULES = (
    "run",
    "compare",
    "watch",
    "check",
    "tune",
    "history",
    "show",
    "report",
    "import_",
    "push",
    "tail",
    "fleet",
    "diff",
    "query",
    "ecat_sim",
)

EXIT_OK = 0
EXIT_FAIL = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it


def _command_name(module: str) -> str:
    return module.rstrip("_").replace("_", "-")


class _LazyGroup(click.Group):
    """A group that imports a sub-command's module on first use (click docs, "Lazily Loading Subcommands")."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_command_name(m) for m in _COMMAND_MODULES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = next((m for m in _COMMAND_MODULES if _command_name(m) == cmd_name), None)
        return None if module is None else importlib.import_module(f"{__name__}.{module}").command


#: ``softrt --debug``: an error also prints its traceback (what a bug report needs); see :func:`main`.
_debug = False


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="softrt")
@click.option(
    "--color",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    show_default=True,
    help="Colours: auto is on a terminal only (NO_COLOR set: never; FORCE_COLOR set: always).",
)
@click.option(
    "--debug", is_flag=True, help="On an error, also print where it came from (a traceback, for a bug report)."
)
@click.pass_context
def cli(ctx: click.Context, color: str, debug: bool) -> None:
    """Can this PC run my 250 µs control loop, and if not, why not?"""
    from .output import set_color

    global _debug
    _debug = debug
    set_color(color)
    if ctx.invoked_subcommand in ("run", "compare", "watch"):
        return  # they recover themselves and list what they restored in the run's results
    # A softrt run that was killed may have left a system setting changed: put it back first.
    from ..session.changes import SET_ASIDE, recover

    for change in recover():
        if change.restored:
            _echo(f"softrt: restored {change.path} to {change.before} (left changed by a run that was killed)")
        elif change.why == SET_ASIDE:
            _echo(f"softrt: warning: {change.note}")
        else:
            _echo(f"softrt: warning: could not restore {change.path}: {change.note}")
    from ..trace import sweep_orphans

    for what in sweep_orphans():
        _echo(f"softrt: removed the {what} left by a softrt that was killed")
    from ..ipc.ring import remove_stale

    for name in remove_stale():  # (run and compare do it when they create their ring)
        _echo(f"softrt: removed the shared-memory ring {name} left by a softrt that was killed")
    from ..store import arming

    for path in arming.sweep():  # (run and compare do it before they make their run directory)
        _echo(f"softrt: removed the run directory {path} left by a softrt that was killed before its run started")


def _echo(line: str) -> None:
    """One line to stderr, with nothing a terminal acts on (an error may quote a path or a file's text)."""
    from .render import one_line  # (rich: loaded only when there is something to say)

    click.echo(one_line(line), err=True)


def fail(message: str, status: int = EXIT_BAD_INPUT, err: BaseException | None = None) -> None:
    """Print one error line to stderr and exit with *status* (no traceback; with ``--debug``, *err*'s
    traceback and its cause's first)."""
    if _debug and err is not None:
        import traceback

        traceback.print_exception(err, file=sys.stderr)
    _echo(f"softrt: error: {message}")
    sys.exit(status)


def main(argv: list[str] | None = None) -> None:
    """Run the softrt command line; map softrt errors to one line and an exit status."""
    global _debug
    from .output import install

    _debug = False  # (main may be called more than once in one process: the tests)

    install()  # a burst of Ctrl-C must not cut the printed summary short
    try:
        status = cli.main(args=argv, prog_name="softrt", standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt):
        fail("interrupted", EXIT_INTERRUPTED)
    except click.ClickException as err:
        # Usage errors: click's own one-line message, exit status 2.
        fail(
            err.format_message(),
            EXIT_BAD_INPUT if isinstance(err, click.UsageError) or err.exit_code == 2 else err.exit_code,
        )
    except ConfigError as err:
        fail(str(err), EXIT_BAD_INPUT, err)
    except SoftRTError as err:
        fail(str(err), EXIT_FAIL, err)
    except MemoryError:  # every reader is bounded (store.validate, platform.kfiles): a last resort, never a traceback
        fail("out of memory (the machine, or a limit such as ulimit -v, left softrt too little)", EXIT_FAIL)
    sys.exit(status if isinstance(status, int) else EXIT_OK)
