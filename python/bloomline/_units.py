"""Numbers as people read them: sizes in IEC units, counts of things."""

from __future__ import annotations

import math

__all__ = ["about", "count", "format_bytes", "noun"]


def format_bytes(n: float) -> str:
    """'512 B', '1.5 KiB', '46.3 MiB', ... up to TiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} TiB"


def noun(n: float, word: str, plural: str | None = None) -> str:
    """The word for n of it: singular for exactly one ('1 stage', '3 stages')."""
    return word if n == 1 else (plural or word + "s")


def count(n: float, word: str, plural: str | None = None) -> str:
    """'1 stage', '3 stages', '1,200 keys': the number and its word."""
    return f"{n:,} {noun(n, word, plural)}"


def about(n: float, word: str, plural: str | None = None) -> str:
    """An estimate of a count: 'about 1,200 keys'; inf (a filter with every
    bit set) as 'more keys than can be told'."""
    if not math.isfinite(n):
        return f"more {noun(2, word, plural)} than can be told"
    return f"about {count(round(n), word, plural)}"
