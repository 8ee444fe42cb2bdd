"""A "did you mean" for a mistyped name: a key, a surface, a sub-command.

difflib only, so the command line's parser can use it without loading anything.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`; did you mean 'x'?` for the closest of `choices`, or "" when none is close.

    difflib's default cutoff finds one-letter slips and swapped letters
    (`max_token`, `serach`) without offering unrelated names.
    """
    names = [c for c in choices if isinstance(c, str)]
    close = difflib.get_close_matches(word, names, n=1)
    if not close:
        close = [c for c in names if c.casefold() == word.casefold()]
    return f"; did you mean {close[0]!r}?" if close else ""
