"""The arguments of the false-positive experiments (analysis.py), checked:
grids are lists, counts whole numbers never truncated, numbers finite, and
no filter of an experiment past MAX_KEYS keys."""

from __future__ import annotations

import decimal
import math
import numbers
from collections.abc import Iterable
from typing import Any, Optional


def grid(name: str, values: Iterable[Any]) -> list[Any]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):  # (a str's letters would be the grid)
        raise TypeError(f"{name} must be a list of values, got the {type(values).__name__} {values!r} "
                        f"(pass [{values!r}])")
    out = list(values)
    if not out:
        raise ValueError(f"{name} is empty: give at least one value")
    return out


def is_number(value: Any) -> bool:
    """A real number (int, float, NumPy's, Fraction, Decimal), not a bool."""
    return not isinstance(value, bool) and isinstance(value, (numbers.Real, decimal.Decimal))


def whole(name: str, value: Any, low: int) -> int:
    """A count the caller gave: a whole number (1e5 is taken) of at least
    low, never truncated (2.7 trials is an error, not 2)."""
    if not is_number(value):
        raise TypeError(f"{name} must be a whole number, got {type(value).__name__}")
    if not math.isfinite(value) or value != int(value) or value < low:
        raise ValueError(f"{name} must be a whole number >= {low}, got {value!r}")
    return int(value)


def finite(name: str, value: Any, low: float, above: bool) -> float:
    """A grid's number: finite, and at least low (above: more than low)."""
    if not (is_number(value) and math.isfinite(value) and (value > low if above else value >= low)):
        raise ValueError(f"{name} must be finite numbers {'>' if above else '>='} {low:g}, got {value!r}")
    return float(value)


def check_counts(probes: int, trials: int) -> None:
    whole("probes", probes, 1)
    whole("trials", trials, 1)


def seed_of(seed: Any) -> Optional[int]:
    """NumPy's seed: a whole number >= 0, or None for fresh entropy (not repeatable)."""
    return None if seed is None else whole("seed", seed, 0)


# Keys one filter of an experiment takes at most: past it a fill runs for hours
# (a fill of 1e9 at capacity 100 asked for 1e11 adds) and says nothing more.
MAX_KEYS = 2**31
