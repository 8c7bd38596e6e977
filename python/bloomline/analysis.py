"""False-positive experiments, for notebooks.

``fp_experiment`` fills real filters to chosen levels (also past capacity)
and measures their false-positive rate on fresh absent keys, beside the rate
the sizing math predicts; everything runs through batch calls and a seeded
generator, so it is fast and repeatable. ``bits_per_key_experiment`` does the
same for explicit geometries (m/n and k). The plot helpers draw the results
with matplotlib (an optional extra: ``pip install 'bloomline[plot]'``).

>>> r = fp_experiment(capacities=[10_000], error_rates=[0.01], fills=[0.5, 1.0], probes=100_000)
>>> r.measured.shape == r.theory.shape == (2,)
True
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ._core import BloomFilter, false_positive_rate

if TYPE_CHECKING:
    from ._core import Layout

__all__ = [
    "FPResult",
    "bits_per_key_experiment",
    "fp_experiment",
    "plot_fp_vs_bits_per_key",
    "plot_fp_vs_fill",
    "plot_measured_vs_theory",
]


@dataclass(frozen=True)
class FPResult:
    """One row per filter measured; every field is a NumPy array of equal length.

    capacity, error_rate (target; NaN for explicit geometries), layout,
    fill (keys added / capacity), keys, num_bits, num_hashes, bits_per_key
    (num_bits / keys added), measured (false-positive rate on ``probes``
    fresh absent keys), theory (the layout's formula at that fill), probes,
    and ci_low/ci_high (a 95% Wilson interval around measured).
    """

    capacity: npt.NDArray[np.int64]
    error_rate: npt.NDArray[np.float64]
    layout: npt.NDArray[np.str_]
    fill: npt.NDArray[np.float64]
    keys: npt.NDArray[np.int64]
    num_bits: npt.NDArray[np.int64]
    num_hashes: npt.NDArray[np.int64]
    bits_per_key: npt.NDArray[np.float64]
    measured: npt.NDArray[np.float64]
    theory: npt.NDArray[np.float64]
    probes: npt.NDArray[np.int64]
    ci_low: npt.NDArray[np.float64]
    ci_high: npt.NDArray[np.float64]

    def __len__(self) -> int:
        return len(self.measured)

    def as_dict(self) -> dict[str, npt.NDArray[Any]]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def to_pandas(self) -> Any:
        """A pandas DataFrame of the rows (needs pandas)."""
        try:
            import pandas as pd  # type: ignore[import-untyped, unused-ignore]
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("to_pandas() needs pandas: pip install pandas") from exc
        return pd.DataFrame(self.as_dict())

    def __repr__(self) -> str:
        lines = [f"FPResult({len(self)} rows)"]
        lines.append(f"  {'layout':9} {'capacity':>10} {'target':>8} {'fill':>5} {'bits/key':>8} {'k':>3} "
                     f"{'measured':>10} {'theory':>10}")
        for i in range(len(self)):
            lines.append(
                f"  {self.layout[i]:9} {self.capacity[i]:>10,} {self.error_rate[i]:>8.3g} {self.fill[i]:>5.2f} "
                f"{self.bits_per_key[i]:>8.2f} {self.num_hashes[i]:>3} {self.measured[i]:>10.3e} {self.theory[i]:>10.3e}"
            )
        return "\n".join(lines)


def _wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (float("nan"), float("nan"))
    p = hits / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def _measure(bf: BloomFilter, n_keys: int, probes: int, rng: np.random.Generator) -> tuple[int, int]:
    """Add n_keys random keys, probe with fresh ones (a disjoint range)."""
    present = rng.integers(0, 2**62, size=n_keys, dtype=np.uint64)
    for chunk in np.array_split(present, max(1, n_keys // 5_000_000)):
        bf.add_many(chunk)
    hits = 0
    done = 0
    while done < probes:
        m = min(5_000_000, probes - done)
        absent = rng.integers(0, 2**62, size=m, dtype=np.uint64) | np.uint64(2**62)
        hits += int(np.count_nonzero(bf.contains_many(absent)))
        done += m
    return hits, probes


def _result(rows: list[dict[str, Any]]) -> FPResult:
    def col(name: str, dtype: Any) -> npt.NDArray[Any]:
        return np.array([r[name] for r in rows], dtype=dtype)

    return FPResult(
        capacity=col("capacity", np.int64), error_rate=col("error_rate", np.float64), layout=col("layout", np.str_),
        fill=col("fill", np.float64), keys=col("keys", np.int64), num_bits=col("num_bits", np.int64),
        num_hashes=col("num_hashes", np.int64), bits_per_key=col("bits_per_key", np.float64),
        measured=col("measured", np.float64), theory=col("theory", np.float64), probes=col("probes", np.int64),
        ci_low=col("ci_low", np.float64), ci_high=col("ci_high", np.float64),
    )


def fp_experiment(
    capacities: Iterable[int] = (100_000,),
    error_rates: Iterable[float] = (0.01,),
    layouts: Iterable[Layout] = ("blocked", "standard"),
    fills: Iterable[float] = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0),
    *,
    probes: int = 1_000_000,
    seed: int = 0,
) -> FPResult:
    """Measured false-positive rate against theory, for every combination.

    For each capacity, error rate and layout, a filter is sized as
    ``BloomFilter(capacity, error_rate, layout=...)`` and filled to each
    ``fill`` (keys = fill * capacity; fills above 1 show what happens past
    capacity), then probed with ``probes`` fresh keys. ``seed`` makes it
    repeatable.
    """
    if probes < 1:
        raise ValueError(f"probes must be >= 1, got {probes}")
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    for capacity in capacities:
        for error_rate in error_rates:
            for layout in layouts:
                for fill in sorted(fills):
                    if fill < 0:
                        raise ValueError(f"fills must be >= 0, got {fill}")
                    bf = BloomFilter(int(capacity), float(error_rate), layout=layout)
                    n = int(round(fill * capacity))
                    hits, total = _measure(bf, n, probes, rng)
                    lo, hi = _wilson(hits, total)
                    rows.append(dict(
                        capacity=capacity, error_rate=error_rate, layout=layout, fill=fill, keys=n,
                        num_bits=bf.num_bits, num_hashes=bf.num_hashes, bits_per_key=bf.num_bits / max(n, 1),
                        measured=hits / total,
                        theory=false_positive_rate(n, bf.num_bits, bf.num_hashes, layout),
                        probes=total, ci_low=lo, ci_high=hi,
                    ))
    return _result(rows)


def bits_per_key_experiment(
    bits_per_key: Iterable[float] = (4, 6, 8, 10, 12, 16, 20),
    num_hashes: Iterable[int] = (1, 2, 4, 6, 8, 10),
    layouts: Sequence[Layout] = ("standard",),
    *,
    keys: int = 100_000,
    probes: int = 1_000_000,
    seed: int = 0,
) -> FPResult:
    """Measured vs theory for explicit geometries: m = bits_per_key * keys
    (rounded up to whole 512-bit blocks), each k, each layout."""
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    for layout in layouts:
        for bpk in bits_per_key:
            m = int(np.ceil(bpk * keys / 512)) * 512
            for k in num_hashes:
                bf = BloomFilter.from_params(m, int(k), layout=layout)
                hits, total = _measure(bf, keys, probes, rng)
                lo, hi = _wilson(hits, total)
                rows.append(dict(
                    capacity=keys, error_rate=float("nan"), layout=layout, fill=1.0, keys=keys, num_bits=m,
                    num_hashes=k, bits_per_key=m / keys, measured=hits / total,
                    theory=false_positive_rate(keys, m, int(k), layout), probes=total, ci_low=lo, ci_high=hi,
                ))
    return _result(rows)


# ---- plots ------------------------------------------------------------------------


def _axes(ax: Any) -> Any:
    if ax is not None:
        return ax
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("plots need matplotlib: pip install 'bloomline[plot]'") from exc
    return plt.subplots(figsize=(6, 4))[1]


def plot_fp_vs_fill(result: FPResult, ax: Any = None) -> Any:
    """False-positive rate against fill (keys / capacity), measured (points
    with 95% intervals) and theory (lines), one colour per layout/target."""
    ax = _axes(ax)
    for layout in np.unique(result.layout):
        for rate in np.unique(result.error_rate):
            sel = (result.layout == layout) & (result.error_rate == rate)
            if not sel.any():
                continue
            order = np.argsort(result.fill[sel])
            x, y, t = result.fill[sel][order], result.measured[sel][order], result.theory[sel][order]
            lo, hi = result.ci_low[sel][order], result.ci_high[sel][order]
            line = ax.plot(x, t, "-", label=f"{layout}, target {rate:g}: theory")[0]
            ax.errorbar(x, y, yerr=[y - lo, hi - y], fmt="o", color=line.get_color(), label=f"{layout}, target {rate:g}: measured")
            ax.axhline(rate, color=line.get_color(), lw=0.5, ls=":")
    ax.axvline(1.0, color="grey", lw=0.5)
    ax.set_yscale("log")
    ax.set_xlabel("fill (keys added / capacity)")
    ax.set_ylabel("false-positive rate")
    ax.legend(fontsize="small")
    return ax


def plot_fp_vs_bits_per_key(result: FPResult, ax: Any = None) -> Any:
    """False-positive rate against bits per key, one line per k."""
    ax = _axes(ax)
    for k in np.unique(result.num_hashes):
        sel = result.num_hashes == k
        order = np.argsort(result.bits_per_key[sel])
        line = ax.plot(result.bits_per_key[sel][order], result.theory[sel][order], "-", label=f"k={k} theory")[0]
        ax.plot(result.bits_per_key[sel][order], result.measured[sel][order], "o", color=line.get_color())
    ax.set_yscale("log")
    ax.set_xlabel("bits per key (m / n)")
    ax.set_ylabel("false-positive rate")
    ax.legend(fontsize="small", ncol=2)
    return ax


def plot_measured_vs_theory(result: FPResult, ax: Any = None) -> Any:
    """Measured against predicted rate: points on the diagonal agree."""
    ax = _axes(ax)
    for layout in np.unique(result.layout):
        sel = result.layout == layout
        ax.errorbar(result.theory[sel], result.measured[sel],
                    yerr=[result.measured[sel] - result.ci_low[sel], result.ci_high[sel] - result.measured[sel]],
                    fmt="o", label=layout)
    positive = result.theory[result.theory > 0]
    lo = float(positive.min()) if len(positive) else 1e-6
    hi = float(max(result.theory.max(), result.measured.max(), lo * 10))
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="measured = theory")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("theory")
    ax.set_ylabel("measured")
    ax.legend(fontsize="small")
    return ax
