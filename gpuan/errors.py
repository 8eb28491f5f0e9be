"""The two error types a user sees, each printed by the CLI as one line with exit code 2:
:class:`TraceError` for a bad input file, named with its path; :class:`UsageError` for a bad option,
option value or environment variable."""

from __future__ import annotations


class TraceError(Exception):
    """A problem with an input file; ``str()`` is the one line the CLI prints (exit code 2)."""

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        # one line whatever the problem quotes (a corrupt file's names may hold line breaks)
        self.problem = " ".join(problem.splitlines())
        super().__init__(f"{self.path}: {self.problem}")


class UsageError(Exception):
    """A bad option, option value or environment variable (not a file); ``str()`` is the one line the CLI
    prints (exit code 2), and it names the option."""

    def __init__(self, problem: str) -> None:
        super().__init__(" ".join(problem.splitlines()))
