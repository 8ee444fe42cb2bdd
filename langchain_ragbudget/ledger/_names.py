r"""Ids, sources and titles as one visible, unambiguous line (`display_name`).

Every line the package writes holding a value from data (citation header, warning,
table, CLI message) shows it through `display_name`. Two different values never
render the same, and no value can add a line or hide part of itself:

- control, format (bidi, zero-width...), separator, surrogate, private-use and
  unassigned code points, spaces other than U+0020 and a few letters that draw
  nothing show as Python-style escapes (`\u202e`, `\t`), so a right-to-left override
  cannot turn `report\u202efdp.exe` into "reportexe.pdf";
- a leading or trailing space shows as `\x20`;
- a value not in NFC (macOS file names often are NFD) keeps its letters and ends
  with ` [not NFC]`, more readable than escaped combining marks;
- a value longer than `limit` loses its middle to `…[sha:<10 hex>]…`, a hash of the
  whole value, so long URLs differing only in the middle never share a header.

The mapping is injective: a literal backslash is doubled where it would read as an
escape, and a literal `[sha:` or trailing ` [not NFC]` has its `[` escaped. Letters
are never escaped: homoglyphs are left to the reader (RELIABILITY.md), as telling
them apart would make every non-Latin name unreadable.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from functools import lru_cache

NOT_NFC = " [not NFC]"
HASH_HEX = 10  # 40 bits: two values sharing start, end and hash by chance: ~1e-12
SHORTENED = "…[sha:"
MIN_LIMIT = 40  # the marker (18), the NFC mark (10), and a few characters of each end

# Escaped although their category is printable: they draw nothing, or look like a space.
_INVISIBLE = frozenset(
    "\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180e\u180f\u2800\u3164\uffa0"
)
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
# What follows a backslash in an escape this module writes (or a doubled backslash).
_ESCAPE_AFTER = re.compile(r"\\|[tnr]|x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8}")


def _escape_char(char: str) -> str:
    if char in _SHORT:
        return _SHORT[char]
    point = ord(char)
    if point < 0x100:
        return f"\\x{point:02x}"
    return f"\\u{point:04x}" if point < 0x10000 else f"\\U{point:08x}"


def _needs_escape(char: str, also: str = "") -> bool:
    if char == " ":
        return False
    return (
        char in _INVISIBLE
        or char in also
        or unicodedata.category(char) in _ESCAPED_CATEGORIES
    )


def _pieces(value: str, also: str = "") -> list[str]:
    r"""Each character as shown, itself or its escape (those in `also` too).

    Built from the end, so a literal backslash is doubled when what follows it
    would read as an escape (`\u202e` written out).
    """
    if _plain(value) and not any(char in value for char in also):
        return list(value)
    out: list[str] = []
    after = ""
    last = len(value) - 1
    for i in range(last, -1, -1):
        char = value[i]
        edge = char == " " and (i == 0 or i == last)
        if edge or _needs_escape(char, also):
            piece = _escape_char(char)
        elif char == "\\" and _ESCAPE_AFTER.match(after):
            piece = "\\\\"
        elif char == "[" and value.startswith(SHORTENED[1:], i):
            piece = _escape_char(char)
        else:
            piece = char
        out.append(piece)
        after = piece + after[:12]
    out.reverse()
    return out


def _plain(value: str) -> bool:
    return (
        value.isascii()
        and value.isprintable()
        and "\\" not in value
        and "[sha:" not in value
        and value[:1] != " "
        and value[-1:] != " "
    )


def _hash(value: str) -> str:
    data = value.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:HASH_HEX]


@lru_cache(maxsize=100_000)
def display_name(value: str, limit: int | None = 160, also: str = "") -> str:
    """`value` as one visible line that no other value renders as (rules above).

    `limit` is the most characters shown, marker included; None: never shortened.
    `also`: characters escaped as well, the separators of the line it goes in,
    so a value cannot pose as the line's own structure.

    Raises:
        ValueError: `limit` is below `MIN_LIMIT`, too short for the marker.
    """
    if limit is not None and limit < MIN_LIMIT:
        raise ValueError(f"display_name: limit must be at least {MIN_LIMIT}: {limit}")
    value = value if isinstance(value, str) else str(value)
    pieces = _pieces(value, also)
    suffix = ""
    if not unicodedata.is_normalized("NFC", value):
        suffix = NOT_NFC
    elif value.endswith(NOT_NFC):
        # a literal trailing " [not NFC]" in a normal-form value: not the marker
        pieces[len(value) - len(NOT_NFC) + 1] = _escape_char("[")
    shown = "".join(pieces)
    if limit is None or len(shown) + len(suffix) <= limit:
        return shown + suffix
    return _middle_cut(pieces, _hash(value), limit - len(suffix)) + suffix


def _middle_cut(pieces: list[str], digest: str, room: int) -> str:
    """The first and last pieces that fit around `…[sha:digest]…` in `room`."""
    marker = f"{SHORTENED}{digest}]…"
    budget = room - len(marker)
    head_room = (budget + 1) // 2
    head: list[str] = []
    used = 0
    for piece in pieces:
        if used + len(piece) > head_room:
            break
        head.append(piece)
        used += len(piece)
    tail: list[str] = []
    left = budget - used
    for piece in reversed(pieces[len(head) :]):
        if len(piece) > left:
            break
        tail.append(piece)
        left -= len(piece)
    return "".join(head) + marker + "".join(reversed(tail))
