"""The one error type a user sees: a problem with an input, named with its file."""

from __future__ import annotations


class TraceError(Exception):
    """A problem with an input file; ``str()`` is the one line the CLI prints (exit code 2)."""

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        # one line whatever the problem quotes (a corrupt file's names may hold line breaks)
        self.problem = " ".join(problem.splitlines())
        super().__init__(f"{self.path}: {self.problem}")
