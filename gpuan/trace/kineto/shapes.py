"""One text form for the JSON values Kineto records as arguments (Input Dims, Input type, Concrete Inputs,
Process Group Ranks), whatever the layout the file was written in.

Newer Kineto versions (and tools that re-save traces with an indent) pretty-print these values across many
lines; older ones write ``[[4, 2798, 2798], [], [4, 2798, 2798]]``. The event table holds the latter form
for both, so that equal shapes are equal strings, and tables and CSV cells stay one line.
"""

from __future__ import annotations

import re

import numpy as np

from gpuan.trace.table import used_codes

# a JSON string (escapes kept as written), a run of whitespace, or a run of anything else
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"?|\s+|[^"\s]+')


def one_line(text: str) -> str:
    """Return the JSON text in one line, laid out as Python's ``json.dumps`` lays it out (", " between
    items, ": " after keys, no other whitespace): numbers and strings are kept exactly as written. Text
    that is not JSON keeps a single space where it had whitespace between two words."""
    out: list[str] = []
    gap = False
    for m in _TOKENS.finditer(text):
        tok = m.group()
        if tok.isspace():
            gap = True
            continue
        if tok[0] != '"':
            tok = tok.replace(",", ", ").replace(":", ": ")
            if gap and out and out[-1][-1:].isalnum() and tok[:1].isalnum():
                out.append(" ")
        out.append(tok)
        gap = False
    return "".join(out)


def one_line_codes(codes: np.ndarray, strings: list[str]) -> tuple[np.ndarray, list[str]]:
    """Return (codes, strings) for a column of string codes (-1: null) whose strings are JSON texts, with
    each text in :func:`one_line` form (texts that differ only in layout get one code)."""
    index: dict[str, int] = {}
    remap = np.full(len(strings) + 1, -1, np.int64)  # the last slot maps null (-1) to null
    for i in used_codes(codes, len(strings)).tolist():
        remap[i] = index.setdefault(one_line(strings[i]), len(index))
    return remap[codes], list(index)
