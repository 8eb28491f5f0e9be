"""One text form for the JSON values Kineto records as arguments (Input Dims, Input type, Concrete Inputs,
Process Group Ranks), whatever the layout the file was written in.

Newer Kineto versions (and tools that re-save traces with an indent) pretty-print these values across many
lines; older ones write ``[[4, 2798, 2798], [], [4, 2798, 2798]]``. The event table holds the latter form
for both, so that equal shapes are equal strings, and tables and CSV cells stay one line.
"""

from __future__ import annotations

import re

# a JSON string (escapes kept as written); split on it, a text alternates between what lies between
# strings and the strings themselves
_STRING = re.compile(r'("(?:[^"\\]|\\.)*"?)')
# a text laid out in one line already: outside strings, no blank but one space after each ',' and ':' (\s is
# what str.split() splits on: every Unicode blank); strings closed and kept whole, as _STRING cuts them, but
# never across a NUL (what one_line_each joins texts with). Possessive runs (Python 3.11): 2.6 against 4.3 us;
# Python 3.10 takes a character a step (the alternatives begin with different characters: no backtracking)
try:
    _IN_ONE_LINE = re.compile(r'(?:[^\s",:]++|[,:] |"(?:[^"\\\x00]++|\\[^\n\x00])*+")*+')
except re.error:  # pragma: no cover - Python 3.10
    _IN_ONE_LINE = re.compile(r'(?:[^\s",:]|[,:] |"(?:[^"\\\x00]|\\[^\n\x00])*")*')


def one_line(text: str) -> str:
    """Return the JSON text in one line, laid out as Python's ``json.dumps`` lays it out (", " between
    items, ": " after keys, no other whitespace): numbers and strings are kept exactly as written. Text
    that is not JSON keeps a single space where it had whitespace between two words."""
    return text if _in_one_line(text) else _relaid(text)


def one_line_each(texts: list[str]) -> list[str]:
    """Return :func:`one_line` of each text. Texts are judged in runs of 32 joined by NUL (which no match
    of a text's layout spans): where a run's joined text is in one line, each of its texts is, and only the
    texts of other runs are judged one by one (0.8 against 1.5 us a text over a DLRM trace's shapes)."""
    out: list[str] = []
    for k in range(0, len(texts), 32):
        run = texts[k : k + 32]
        out += run if _in_one_line("\x00".join(run)) else map(one_line, run)
    return out


def _relaid(text: str) -> str:
    """:func:`one_line`'s result, made word by word."""
    out: list[str] = []
    for k, part in enumerate(_STRING.split(text)):
        if k % 2:  # a string, as written
            out.append(part)
            continue
        last = ""
        for word in part.split():
            if last[-1:].isalnum() and word[:1].isalnum():
                out.append(" ")  # two words that whitespace kept apart stay apart
            out.append(word.replace(",", ", ").replace(":", ": "))
            last = word
    return "".join(out)


def _in_one_line(text: str) -> bool:
    """Whether :func:`one_line` would return `text` unchanged because it is laid out so already (see
    _IN_ONE_LINE). Most texts Kineto writes are (95% of those in ../shared/data's traces), and matching them
    in C takes less than half the time that laying them out word by word does (2.6 against 5.7 us)."""
    return _IN_ONE_LINE.fullmatch(text) is not None
