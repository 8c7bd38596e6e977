"""The sizing math, for scalars and NumPy arrays alike.

Every function takes the number of keys first, then the bits, then the
hashes (``n, num_bits, num_hashes``), accepts them by keyword, and
broadcasts arrays like a NumPy ufunc: ``false_positive_rate(n, m_array, 7)``
gives one rate per m. Scalars in, a Python number out. The numbers come from
the core (``sizing.hpp``), the same code that sizes every filter.

The formulas, and where they come from:

- **standard, textbook** (the default for ``layout="standard"``):
  ``(1 - e^(-k n / m))^k``. Bloom (1970); the form and table of Fan, Cao,
  Almeida and Broder, "Summary Cache" (IEEE/ACM ToN, 2000). It treats the
  bits as independent, and is a slight under-estimate for small m.
- **standard, exact occupancy** (``formula="exact"``): ``E[(X / m)^k]``
  where X is the number of distinct bits k n uniform draws hit, the exact
  rate for k independent uniform positions per key (Bose et al., "On the
  false-positive rate of Bloom filters", IPL 2008; Christensen, Roginsky and
  Jimeno, "A new analysis of the false-positive rate of a Bloom filter",
  IPL 2010). Computed as ``m^-k sum_r S(k, r) (m)_r P(r given bits set)``
  in 120-digit decimal arithmetic (S: Stirling numbers of the second kind).
- **blocked** (the only formula of ``layout="blocked"``): a Poisson
  mixture over 512-bit blocks. A block receives Poisson(n * 512 / m) keys,
  j keys set the distinct bits that j k uniform draws in 512 hit (their
  exact occupancy distribution), and a foreign key is found with
  probability ``E[(bits set / 512)^k]``; Putze, Sanders and Singler,
  "Cache-, Hash- and Space-Efficient Bloom Filters" (JEA, 2009) give the
  mixture, with the block's mean fill in place of its distribution.

For the blocked layout num_bits must be a whole number of 512-bit blocks:
another value is a ValueError that names the nearest valid ones (rounding
it silently would answer for a filter that cannot exist).
"""

from __future__ import annotations

import math
import warnings
from decimal import Decimal, localcontext
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple, Union, cast, overload

from . import _core
from ._numpy import np

if TYPE_CHECKING:
    import numpy.typing as npt

    from ._core import Layout

__all__ = ["Params", "ParamsArrays", "bits_per_key", "false_positive_rate", "optimal_num_hashes", "optimal_params"]

BLOCK_BITS: int = _core.BLOCK_BITS  # the blocked layout's block, as the core has it


class Params(NamedTuple):
    """Geometry that meets an error rate at a capacity (see optimal_params)."""

    num_bits: int
    """m: the filter's size in bits."""
    num_hashes: int
    """k: bits set and tested per key."""
    bits_per_key: float
    """num_bits / capacity."""
    expected_fp_rate: float
    """The false-positive rate at capacity, for this exact geometry and layout."""


class ParamsArrays(NamedTuple):
    """optimal_params over arrays: each field an array of the broadcast shape."""

    num_bits: npt.NDArray[np.int64]
    """m of each geometry, in bits."""
    num_hashes: npt.NDArray[np.int64]
    """k of each geometry."""
    bits_per_key: npt.NDArray[np.float64]
    """num_bits / capacity, elementwise."""
    expected_fp_rate: npt.NDArray[np.float64]
    """The false-positive rate at capacity of each geometry."""


def _is_scalar(*values: Any) -> bool:
    return all(np.ndim(v) == 0 for v in values)


def _check_blocks(num_bits: int, layout: str) -> None:
    if layout == "blocked" and num_bits % BLOCK_BITS:
        below = num_bits // BLOCK_BITS * BLOCK_BITS
        nearest = f"{below:,} and {below + BLOCK_BITS:,}" if below else f"{BLOCK_BITS}"
        raise ValueError(
            f"num_bits must be a whole number of 512-bit blocks for layout 'blocked', got {num_bits:,}; "
            f"the nearest valid values are {nearest} (or pass layout='standard')"
        )


def _as_int(value: Any, name: str) -> int:
    if isinstance(value, (bool, np.bool_)) or float(value) != int(value):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    return int(value)


@lru_cache(maxsize=None)
def _stirling2_row(k: int) -> tuple[int, ...]:
    """S(k, r) for r = 0..k (exact integers)."""
    row = [1]  # S(0, 0)
    for i in range(1, k + 1):
        new = [0] * (i + 1)
        for r in range(1, i + 1):
            new[r] = r * (row[r] if r < len(row) else 0) + row[r - 1]
        row = new
    return tuple(row)


def _exact_standard(n: int, m: int, k: int) -> float:
    """E[(X/m)^k], X the occupancy of m bits after k n uniform draws."""
    draws = k * n
    stirling = _stirling2_row(k)
    with localcontext() as ctx:
        ctx.prec = 120
        big_m = Decimal(m)
        # empty[i]: the probability that i given bits all stay 0
        empty = [((big_m - i) / big_m) ** draws if i <= m else Decimal(0) for i in range(k + 1)]
        total = Decimal(0)
        falling = Decimal(1)  # (m)_r = m (m - 1) ... (m - r + 1)
        for r in range(1, k + 1):
            falling *= m - r + 1
            if falling == 0:
                break
            # the probability that r given bits are all set, by inclusion-exclusion
            all_set = sum((-1) ** i * math.comb(r, i) * empty[i] for i in range(r + 1))
            total += stirling[r] * falling * all_set
        return float(total / big_m**k)


def _fp_one(n: Any, num_bits: Any, num_hashes: Any, layout: str, formula: str) -> float:
    m = _as_int(num_bits, "num_bits")
    k = _as_int(num_hashes, "num_hashes")
    if formula not in ("auto", "textbook", "exact"):
        raise ValueError(f"formula must be 'auto', 'textbook' or 'exact', got {formula!r}")
    if layout == "blocked" and formula != "auto":
        raise ValueError(f"formula={formula!r} is for layout 'standard'; the blocked layout has one formula "
                         "(the Poisson mixture over 512-bit blocks)")
    _check_blocks(m, layout)
    if formula == "exact":
        rate = _core.false_positive_rate(n, m, k, "standard")  # the core checks every argument first
        return _exact_standard(_as_int(n, "n"), m, k) if rate > 0 else 0.0
    return _core.false_positive_rate(n, m, k, cast("Layout", layout))


@overload
def false_positive_rate(n: float, num_bits: int, num_hashes: int, layout: Layout = ..., *,
                        formula: str = ...) -> float: ...
@overload
def false_positive_rate(n: Any, num_bits: Any, num_hashes: Any, layout: Any = ..., *,
                        formula: str = ...) -> Any: ...  # arrays: an array of the broadcast shape
def false_positive_rate(n: Any, num_bits: Any, num_hashes: Any, layout: Any = "blocked", *,
                        formula: str = "auto") -> Any:
    """The false-positive rate of a filter of ``num_bits`` bits and
    ``num_hashes`` hashes holding ``n`` keys.

    formula: ``"auto"`` (the layout's own: the textbook ``(1 - e^(-kn/m))^k``
    for standard, the Poisson mixture over 512-bit blocks for blocked),
    ``"textbook"`` or ``"exact"`` (the exact occupancy formula; standard
    only). The module's docstring gives each formula and its source.
    Arrays broadcast; a blocked num_bits must be a multiple of 512.

    >>> round(false_positive_rate(1000, 20_000, 10, "standard"), 9)
    8.8921e-05
    """
    if _is_scalar(n, num_bits, num_hashes, layout):
        return _fp_one(n, num_bits, num_hashes, str(layout), formula)
    out: npt.NDArray[np.float64] = np.vectorize(
        lambda a, b, c, d: _fp_one(a, b, c, str(d), formula), otypes=[np.float64])(n, num_bits, num_hashes, layout)
    return out


def _hashes_one(n: Any, num_bits: Any, layout: str) -> int:
    m = _as_int(num_bits, "num_bits")
    _check_blocks(m, layout)
    return int(_core.optimal_num_hashes(m, n, cast("Layout", layout)))


_MISSING: Any = object()


def optimal_num_hashes(*args: Any, n: Any = _MISSING, num_bits: Any = _MISSING, layout: Any = "blocked") -> Any:
    """The number of hashes that gives the lowest false-positive rate for
    ``n`` keys in ``num_bits`` bits, by the layout's formula (standard: the
    integer next to ``(m / n) ln 2`` that is better; blocked: the best k of
    the Poisson mixture). Arrays broadcast.

    Call it with keywords: ``optimal_num_hashes(n=1000, num_bits=10_000)``.
    The positional form ``optimal_num_hashes(num_bits, n)`` of bloomline
    0.1 still works and gives a DeprecationWarning: its order was the
    reverse of every other sizing call's.
    """
    if args:
        if len(args) not in (2, 3) or n is not _MISSING or num_bits is not _MISSING:
            raise TypeError("optimal_num_hashes takes n= and num_bits= (and layout=) as keywords")
        warnings.warn(
            "optimal_num_hashes(num_bits, n) with positional arguments is deprecated: the sizing API takes n "
            "first everywhere now; call optimal_num_hashes(n=..., num_bits=...)",
            DeprecationWarning,
            stacklevel=2,
        )
        num_bits, n = args[0], args[1]
        if len(args) == 3:
            layout = args[2]
    if n is _MISSING or num_bits is _MISSING:
        raise TypeError("optimal_num_hashes needs n= and num_bits=")
    if _is_scalar(n, num_bits, layout):
        return _hashes_one(n, num_bits, str(layout))
    out: npt.NDArray[np.int64] = np.vectorize(lambda a, b, c: _hashes_one(a, b, str(c)), otypes=[np.int64])(
        n, num_bits, layout)
    return out


@overload
def optimal_params(capacity: int, error_rate: float, layout: Layout = ...) -> Params: ...
@overload
def optimal_params(capacity: Any, error_rate: Any, layout: Any = ...) -> Any: ...  # arrays: a ParamsArrays
def optimal_params(capacity: Any, error_rate: Any, layout: Any = "blocked") -> Union[Params, ParamsArrays]:
    """The smallest num_bits (and the best num_hashes for it) whose
    false-positive rate at ``capacity`` keys, by ``layout``'s own formula
    (see false_positive_rate), is at most ``error_rate``. Standard: about
    ``-n ln p / (ln 2)^2`` bits and ``(m / n) ln 2`` hashes; blocked: the
    smallest whole number of blocks that meets p by the Poisson mixture.
    Arrays broadcast: the result's fields are then arrays.

    >>> optimal_params(1_000_000, 0.01, layout="standard").num_hashes
    7
    """
    if _is_scalar(capacity, error_rate, layout):
        return Params(*_core.optimal_params(capacity, error_rate, cast("Layout", str(layout))))
    parts = np.vectorize(lambda a, b, c: _core.optimal_params(a, b, cast("Layout", str(c))),
                         otypes=[np.int64, np.int64, np.float64, np.float64])(capacity, error_rate, layout)
    return ParamsArrays(*parts)


def bits_per_key(error_rate: Any, layout: Any = "blocked", *, capacity: Any = 10**9) -> Any:
    """Bits per key a filter needs to meet ``error_rate``: optimal_params's
    ``num_bits / capacity``, at a large capacity by default, where rounding
    to whole bits and blocks no longer shows. Standard at 1% / 0.1% / 0.01%:
    9.59 / 14.38 / 19.17 (``-log2(p) / ln 2``, with the best integer k).
    The information-theoretic floor is ``log2(1 / p)``. Arrays broadcast.
    """
    params = optimal_params(capacity, error_rate, layout)
    return params.bits_per_key
