"""The one error type a user sees: a problem with an input, named with its file."""

from __future__ import annotations


class TraceError(Exception):
    """A problem with an input file; ``str()`` is the one line the CLI prints (exit code 2)."""

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")
