"""The ``gpuan`` command line: one subcommand per module in this package."""

from __future__ import annotations

import argparse
import gc
import signal
import sys

from gpuan import __version__
from gpuan.cli.arguments import engine_choice
from gpuan.cli.pipes import tolerant_output
from gpuan.errors import TraceError, UsageError
from gpuan.outputs.files import all_or_none

EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, as gpuan's other errors are (exit code 2)."""

    def error(self, message: str):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    from gpuan.cli import compare, convert, cycles, demo, fleet, info, precompile, replay, server, sol, streams, tensors

    p = _Parser(prog="gpuan", description="GPU-accelerated analytics for GPU performance traces.")
    p.add_argument("--version", action="version", version=f"gpuan {__version__}")
    p.add_argument("--device", type=engine_choice, default=None, metavar="{auto,cpu,gpu}", help=_DEVICE_HELP)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (info, convert, cycles, compare, streams, sol, tensors, replay, fleet, demo, precompile, server):
        module.add_parser(sub)
    for command in sub.choices.values():
        # the engine option after the command too (gpuan sol --device gpu T); a subcommand's own --device
        # would conflict here, loudly; SUPPRESS keeps a value given before the command
        command.add_argument(
            "--device", type=engine_choice, default=argparse.SUPPRESS, metavar="{auto,cpu,gpu}", help=_DEVICE_HELP
        )
    return p


_DEVICE_HELP = "the engine: where analyses run (default: $GPUAN_DEVICE, else a GPU if there is one)"


def main(argv: list[str] | None = None) -> int:
    """Run the gpuan command line; returns the exit code (2 for bad input)."""
    # files first: a closed stdout or stderr (``2>&1 | head``) silences the report and the messages, never
    # the files asked for nor the exit code
    with tolerant_output():
        args = _parser().parse_args(argv)  # --help and usage errors print too
        previous = _exit_on_sigterm()
        try:
            from gpuan.engine import select  # after parsing: numpy and pyarrow are not needed to say --help
            from gpuan.jit_cache import lighter_numba_start

            lighter_numba_start()  # a third of a second of every command that loads numba code
            if getattr(args, "picks_engine", True):  # not the server: it must not reach a GPU before it forks
                select(args.device)
            with all_or_none():
                return args.run(args) or 0
        except (TraceError, UsageError) as e:
            print(f"gpuan: error: {e}", file=sys.stderr)
            return EXIT_BAD_INPUT
        except KeyboardInterrupt:
            return 130
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)


def _exit_on_sigterm():
    """Make SIGTERM (a batch system's kill, ``timeout``) unwind like Ctrl-C, so that temporary files are
    removed and no output is left half-written; return the handler it replaced (None off the main
    thread, where Python cannot set one)."""

    def stop(signum, frame):
        raise SystemExit(128 + signum)

    try:
        return signal.signal(signal.SIGTERM, stop)
    except ValueError:
        return None


def run() -> None:
    """Console-script entry point: the command runs in this environment's server where one is running
    (``gpuan server start``), else here; with ``GPUAN_SERVER=auto``, a command that ran here then starts
    one in the background for the commands after it."""
    from gpuan.server.client import delegate, starts_server

    # A command allocates millions of objects importing numpy, pyarrow, pandas and numba, few of them garbage;
    # collecting the youngest generation every 700 allocations took 128-165 ms of a 0.9-1.5 s command on
    # Python 3.11 (about 250 collections, two of them full ones over everything imported so far). Every
    # 100,000: one, 25-47 ms. A convert under a memory ceiling collects as often as by default
    # (gpuan.trace.memory.prompt_collection).
    gc.set_threshold(100_000, 10, 10)
    argv = sys.argv[1:]
    code = delegate(argv)
    if code is None:
        code = main()
        # not after Ctrl-C (130); SIGTERM, usage errors and crashes leave main by an exception, starting none
        if code != 130 and starts_server(argv):
            from gpuan.cli.server import start_behind

            try:
                start_behind()
            except KeyboardInterrupt:
                code = 130
    sys.exit(code)
