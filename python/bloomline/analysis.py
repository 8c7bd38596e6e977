"""False-positive experiments, for notebooks.

``fp_experiment`` fills real filters to chosen levels (also past capacity)
and measures their false-positive rate on fresh absent keys;
``bits_per_key_experiment`` does the same for explicit geometries (m/n and
k). Each row builds ``trials`` independent filters (different seeds and
keys), so that its 95% interval covers both sources of spread: from filter
to filter (which bits the keys happened to set) and from probe to probe.
Beside the measurement, each row gives two predictions:

- ``theory``: the a-priori rate of the layout's formula (bloomline.sizing);
  over many filters the measured rates average to it.
- ``predicted``: the rate the filters' actual bits give (standard: the
  fraction of bits set, to the power k; blocked: the mean over blocks of the
  block's fraction, to the power k). Measured rates scatter around it by
  probe noise alone.

The plot helpers draw results with matplotlib (an optional extra:
``pip install matplotlib``, or ``pip install '.[plot]'`` from a checkout);
each takes ``ax=`` and returns the Axes.

>>> r = fp_experiment(capacities=[10_000], error_rates=[0.01], fills=[0.5, 1.0], probes=20_000, trials=2)
>>> r.measured.shape == r.theory.shape == (2,)
True
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Optional

import numpy as np
import numpy.typing as npt

from ._core import BloomFilter, CapacityWarning
from ._experiment_args import MAX_KEYS, check_counts, finite, grid, seed_of, whole
from ._optional import install_hint
from .sizing import BLOCK_BITS, false_positive_rate, optimal_params

if TYPE_CHECKING:
    from ._core import Layout

__all__ = [
    "FPResult",
    "bits_per_key_experiment",
    "fp_experiment",
    "fp_rate_from_bits",
    "plot_fp_vs_bits_per_key",
    "plot_fp_vs_fill",
    "plot_measured_vs_theory",
    "plot_residuals",
]

_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint16)
# 97.5% quantiles of Student's t, by degrees of freedom (1..30); beyond, 1.96.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)

# (field, heading, format) of the table views; units in the headings.
_COLUMNS = (
    ("layout", "layout", "{}"),
    ("capacity", "capacity (keys)", "{:,}"),
    ("error_rate", "target rate", "{:.3g}"),
    ("fill", "fill (keys / capacity)", "{:.2f}"),
    ("keys", "keys added", "{:,}"),
    ("num_bits", "m (bits)", "{:,}"),
    ("bits_per_key", "bits / key", "{:.2f}"),
    ("num_hashes", "k", "{}"),
    ("trials", "filters", "{}"),
    ("probes", "probes / filter", "{:,}"),
    ("measured", "measured rate", "{:.3e}"),
    ("ci_low", "95% low", "{:.3e}"),
    ("ci_high", "95% high", "{:.3e}"),
    ("predicted", "from actual bits", "{:.3e}"),
    ("theory", "theory", "{:.3e}"),
)


@dataclass(frozen=True)
class FPResult:
    """One row per geometry measured; every field is a NumPy array of equal
    length.

    capacity (keys the filter was sized for; for explicit geometries, the
    keys added), error_rate (the target; NaN for explicit geometries),
    layout, fill (keys added / capacity), keys (added to each filter),
    num_bits (m), num_hashes (k), bits_per_key (m / keys), trials (filters
    built), probes (fresh absent keys per filter), hits (false positives,
    all filters together), measured (hits / (trials * probes)), ci_low and
    ci_high (the 95% interval: a Student t interval over the filters'
    rates, joined with a Wilson interval over all probes so that rows with
    few or no hits stay honest), predicted (the rate of the filters' actual
    bits, averaged), theory (the layout's formula at that fill).
    """

    capacity: npt.NDArray[np.int64]
    error_rate: npt.NDArray[np.float64]
    layout: npt.NDArray[np.str_]
    fill: npt.NDArray[np.float64]
    keys: npt.NDArray[np.int64]
    num_bits: npt.NDArray[np.int64]
    num_hashes: npt.NDArray[np.int64]
    bits_per_key: npt.NDArray[np.float64]
    trials: npt.NDArray[np.int64]
    probes: npt.NDArray[np.int64]
    hits: npt.NDArray[np.int64]
    measured: npt.NDArray[np.float64]
    ci_low: npt.NDArray[np.float64]
    ci_high: npt.NDArray[np.float64]
    predicted: npt.NDArray[np.float64]
    theory: npt.NDArray[np.float64]

    def __len__(self) -> int:
        return len(self.measured)

    def as_dict(self) -> dict[str, npt.NDArray[Any]]:
        """The fields by name, each a NumPy array (a DataFrame's columns, say)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def theory_inside(self) -> npt.NDArray[np.bool_]:
        """Where theory lies inside the row's 95% interval."""
        inside: npt.NDArray[np.bool_] = (self.ci_low <= self.theory) & (self.theory <= self.ci_high)
        return inside

    def where(self, **conditions: Any) -> FPResult:
        """The rows whose fields match: ``res.where(layout="blocked", num_hashes=[6, 7])``.
        A value that is a list, tuple, set or array matches any of its
        members; a callable is given the column and returns a mask."""
        mask = np.ones(len(self), dtype=bool)
        names = {f.name for f in fields(self)}
        for name, want in conditions.items():
            if name not in names:
                raise ValueError(f"FPResult has no field {name!r}; fields: {', '.join(sorted(names))}")
            column = getattr(self, name)
            if callable(want):
                mask &= np.asarray(want(column), dtype=bool)
            elif isinstance(want, (list, tuple, set, frozenset, np.ndarray)):
                mask &= np.isin(column, list(want))
            else:
                mask &= column == want
        return FPResult(**{name: column[mask] for name, column in self.as_dict().items()})

    @classmethod
    def concat(cls, results: Iterable[FPResult]) -> FPResult:
        """The rows of several results, in order (for tables measured cell by cell)."""
        parts = list(results)
        if not parts:
            return _result([])
        return cls(**{f.name: np.concatenate([getattr(r, f.name) for r in parts]) for f in fields(cls)})

    def to_pandas(self) -> Any:
        """A pandas DataFrame, one row per geometry, its columns this
        result's fields with their dtypes (layout as str). ``FPResult.from_pandas``
        reads it back."""
        try:
            import pandas as pd  # type: ignore[import-untyped, unused-ignore]
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(f"to_pandas() needs pandas: {install_hint('pandas')}") from exc
        data = self.as_dict()
        data["layout"] = data["layout"].astype(object)
        return pd.DataFrame(data)

    @classmethod
    def from_pandas(cls, frame: Any) -> FPResult:
        """An FPResult from a DataFrame with this class's columns (a filtered
        ``to_pandas()``, say); dtypes are restored."""
        missing = [f.name for f in fields(cls) if f.name not in frame.columns]
        if missing:
            raise ValueError(f"the DataFrame lacks the columns {', '.join(missing)}")
        return cls(**{name: np.asarray(frame[name].to_numpy(), dtype=t) for name, t in _TYPES.items()})

    def _shown_columns(self) -> list[tuple[str, str, str]]:
        cols = list(_COLUMNS)
        if np.isnan(self.error_rate).all():  # explicit geometries: no target, fill is 1
            cols = [c for c in cols if c[0] not in ("error_rate", "fill", "capacity")]
        return cols

    def __repr__(self) -> str:
        cols = self._shown_columns()
        cells = [[fmt.format(_item(getattr(self, name)[i])) for name, _, fmt in cols] for i in range(len(self))]
        widths = [max([len(head)] + [len(row[j]) for row in cells]) for j, (_, head, _) in enumerate(cols)]
        lines = [f"FPResult({len(self)} rows; theory inside the 95% interval in "
                 f"{int(self.theory_inside.sum())} of {len(self)})"]
        lines.append("  " + "  ".join(head.rjust(w) for (_, head, _), w in zip(cols, widths)))
        for row in cells:
            lines.append("  " + "  ".join(c.rjust(w) for c, w in zip(row, widths)))
        return "\n".join(lines)

    def _repr_html_(self, max_rows: int = 200) -> str:
        import html

        cols = self._shown_columns()
        head = "".join(f"<th>{html.escape(h)}</th>" for _, h, _ in cols) + "<th>theory inside</th>"
        body = []
        inside = self.theory_inside
        for i in range(min(len(self), max_rows)):
            cells = "".join(f"<td>{html.escape(fmt.format(_item(getattr(self, n)[i])))}</td>" for n, _, fmt in cols)
            body.append(f"<tr>{cells}<td>{'yes' if inside[i] else '<b>no</b>'}</td></tr>")
        more = f"<p>... and {len(self) - max_rows:,} more rows</p>" if len(self) > max_rows else ""
        return (f"<div class='bloomline-fpresult'><p>FPResult: {len(self):,} rows; theory inside the 95% interval "
                f"in {int(inside.sum()):,}</p><table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}"
                f"</tbody></table>{more}</div>")


def _item(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


# ---- measuring ------------------------------------------------------------------


def _wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    p = hits / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def _interval(hits: Sequence[int], probes: int) -> tuple[float, float]:
    """95% interval of the mean rate over filters: Student's t over the
    filters' rates (their spread holds the filter-to-filter and the probe
    variance), joined with Wilson over all probes (which stays honest when
    there are few hits, where t collapses)."""
    total = len(hits) * probes
    lo, hi = _wilson(int(sum(hits)), total)
    if len(hits) >= 2:
        rates = np.asarray(hits, dtype=np.float64) / probes
        df = len(hits) - 1
        t = _T975[df - 1] if df <= len(_T975) else 1.96
        half = t * float(rates.std(ddof=1)) / math.sqrt(len(hits))
        lo, hi = min(lo, float(rates.mean()) - half), max(hi, float(rates.mean()) + half)
    return max(0.0, lo), min(1.0, hi)


def fp_rate_from_bits(bf: BloomFilter) -> float:
    """The false-positive rate of this filter's actual bits: the probability
    that a fresh key, hashed uniformly, finds all its k bits set (standard:
    ``(bits set / m)^k``; blocked: the mean over blocks of ``(bits set in
    the block / 512)^k``, the block chosen uniformly and the k offsets drawn
    with replacement, as the blocked index does). Unlike the a-priori
    formula, it knows which bits these keys happened to set."""
    k = bf.num_hashes
    if bf.layout != "blocked":  # (either index of the standard layout)
        return float((bf.bits_set / bf.num_bits) ** k)
    per_block = _POPCOUNT[np.asarray(bf)].reshape(-1, BLOCK_BITS // 8).sum(axis=1, dtype=np.float64)
    return float(np.mean((per_block / BLOCK_BITS) ** k))


def _measure(bf: BloomFilter, n_keys: int, probes: int, rng: np.random.Generator) -> tuple[int, float]:
    """Add n_keys random keys, probe with fresh ones (a disjoint range):
    (false positives, the rate the filter's bits predict)."""
    step = 5_000_000
    with warnings.catch_warnings():
        # Filling past capacity is the experiment (fills > 1), not a mistake.
        warnings.simplefilter("ignore", CapacityWarning)
        for start in range(0, n_keys, step):
            bf.add_many(rng.integers(0, 2**62, size=min(step, n_keys - start), dtype=np.uint64))
    hits = 0
    for start in range(0, probes, step):
        absent = rng.integers(0, 2**62, size=min(step, probes - start), dtype=np.uint64) | np.uint64(2**62)
        hits += int(np.count_nonzero(bf.contains_many(absent)))
    return hits, fp_rate_from_bits(bf)


def _row(make: Any, n_keys: int, probes: int, trials: int, rng: np.random.Generator) -> dict[str, Any]:
    hits: list[int] = []
    predicted: list[float] = []
    bf: Optional[BloomFilter] = None
    for _ in range(trials):
        bf = make(int(rng.integers(0, 2**63)))
        h, p = _measure(bf, n_keys, probes, rng)
        hits.append(h)
        predicted.append(p)
    assert bf is not None
    lo, hi = _interval(hits, probes)
    return dict(num_bits=bf.num_bits, num_hashes=bf.num_hashes, trials=trials, probes=probes, hits=sum(hits),
                measured=sum(hits) / (trials * probes), ci_low=lo, ci_high=hi,
                predicted=float(np.mean(predicted)),
                theory=false_positive_rate(n_keys, bf.num_bits, bf.num_hashes, bf.layout))


# The dtype of each FPResult field (str: NumPy's, sized to the longest value).
_TYPES: dict[str, Any] = {
    "capacity": np.int64, "error_rate": np.float64, "layout": np.str_, "fill": np.float64, "keys": np.int64,
    "num_bits": np.int64, "num_hashes": np.int64, "bits_per_key": np.float64, "trials": np.int64,
    "probes": np.int64, "hits": np.int64, "measured": np.float64, "ci_low": np.float64, "ci_high": np.float64,
    "predicted": np.float64, "theory": np.float64,
}


def _result(rows: list[dict[str, Any]]) -> FPResult:
    return FPResult(**{name: np.array([r[name] for r in rows], dtype=t) for name, t in _TYPES.items()})




def fp_experiment(
    capacities: Iterable[int] = (100_000,),
    error_rates: Iterable[float] = (0.01,),
    layouts: Iterable[Layout] = ("blocked", "standard"),
    fills: Iterable[float] = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0),
    *,
    probes: int = 200_000,
    trials: int = 5,
    seed: Optional[int] = 0,
) -> FPResult:
    """Measured false-positive rate against theory, for every combination.

    For each capacity, error rate and layout, ``trials`` filters are sized as
    ``BloomFilter(capacity, error_rate, layout=...)``, each filled to each
    ``fill`` (keys = fill * capacity; fills above 1 show what happens past
    capacity) with its own keys and seed, then probed with ``probes`` fresh
    keys. ``seed`` makes it repeatable.
    """
    check_counts(probes, trials)
    capacities, error_rates = grid("capacities", capacities), grid("error_rates", error_rates)
    layouts, fills = grid("layouts", layouts), sorted(grid("fills", fills))
    for fill in fills:
        finite("fills", fill, 0, above=False)
    for given in capacities:  # (every row's size checked before the first row runs)
        optimal_params(given, 0.5)
        for fill in fills:
            if round(fill * int(given)) > MAX_KEYS:
                raise ValueError(f"fills: a fill of {fill!r} at capacity {int(given):,} is "
                                 f"{round(fill * int(given)):,} keys a filter, past the {MAX_KEYS:,} an experiment "
                                 "takes")
    rng = np.random.default_rng(seed_of(seed))
    rows: list[dict[str, Any]] = []
    for given in capacities:
        # (checked as the filters check it: 1e5 is taken, 1.5 refused, never truncated)
        optimal_params(given, 0.5)
        capacity = int(given)
        for error_rate in error_rates:
            for layout in layouts:
                for fill in fills:
                    n = int(round(fill * capacity))
                    row = _row(lambda s: BloomFilter(capacity, float(error_rate), layout=layout, seed=s),
                               n, int(probes), int(trials), rng)
                    row.update(capacity=capacity, error_rate=error_rate, layout=layout, fill=fill, keys=n,
                               bits_per_key=row["num_bits"] / max(n, 1))
                    rows.append(row)
    return _result(rows)


def bits_per_key_experiment(
    bits_per_key: Iterable[float] = (4, 6, 8, 10, 12, 16, 20),
    num_hashes: Iterable[int] = (1, 2, 4, 6, 8, 10),
    layouts: Sequence[Layout] = ("standard",),
    *,
    keys: int = 100_000,
    probes: int = 200_000,
    trials: int = 5,
    seed: Optional[int] = 0,
) -> FPResult:
    """Measured vs theory for explicit geometries: for each layout, bits
    per key and k, ``trials`` filters of m bits each hold ``keys`` keys.

    m is ``round(bits_per_key * keys)`` for the standard layout (exact), and
    that rounded up to whole 512-bit blocks for the blocked layout; each row
    reports its actual m and m / keys.
    """
    check_counts(probes, trials)
    if whole("keys", keys, 1) > MAX_KEYS:
        raise ValueError(f"keys must be at most {MAX_KEYS:,} (keys a filter of an experiment), got {keys!r}")
    layouts, bpks, ks = grid("layouts", layouts), grid("bits_per_key", bits_per_key), grid("num_hashes", num_hashes)
    for bpk in bpks:
        finite("bits_per_key", bpk, 0, above=True)
    for k in ks:
        whole("num_hashes", k, 1)
    rng = np.random.default_rng(seed_of(seed))
    rows: list[dict[str, Any]] = []
    for layout in layouts:
        for bpk in bpks:
            m = max(1, int(round(bpk * keys)))
            if layout == "blocked":
                m = -(-m // BLOCK_BITS) * BLOCK_BITS
            for k in ks:
                row = _row(lambda s: BloomFilter.from_params(m, int(k), layout=layout, seed=s),
                           int(keys), int(probes), int(trials), rng)
                row.update(capacity=keys, error_rate=float("nan"), layout=layout, fill=1.0, keys=keys,
                           bits_per_key=m / keys)
                rows.append(row)
    return _result(rows)


# ---- plots ------------------------------------------------------------------------


def _axes(ax: Any) -> Any:
    if ax is not None:
        return ax
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(f"plots need matplotlib: {install_hint('matplotlib')}") from exc
    return plt.subplots(figsize=(7, 4.5))[1]


def _colours(count: int) -> list[Any]:
    import matplotlib

    cmap = matplotlib.colormaps["tab10" if count <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(count)]


_LAYOUT_STYLE = {"blocked": ("o", "-"), "standard": ("s", "--"), "standard-v1": ("^", ":")}


def _measured(ax: Any, x: Any, y: Any, lo: Any, hi: Any, hits: Any, colour: Any, marker: str) -> Any:
    """Points with 95% intervals; rows with no hits are drawn as their upper
    bound (a downward triangle at ci_high), never as a point at zero."""
    zero = hits == 0
    handle = None
    if (~zero).any():
        handle = ax.errorbar(x[~zero], y[~zero], yerr=[y[~zero] - lo[~zero], hi[~zero] - y[~zero]], fmt=marker,
                             color=colour, ms=4, capsize=2, lw=1)
    if zero.any():
        ax.plot(x[zero], hi[zero], "v", color=colour, ms=6, mfc="none")
    return handle


def _finish(ax: Any, title: str, xlabel: str, ylabel: str, series_count: int, theory_lines: bool = True,
            log: bool = True) -> None:
    from matplotlib.lines import Line2D

    if log:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize="medium")
    handles, labels = ax.get_legend_handles_labels()
    extra = [Line2D([], [], color="grey", marker="v", ls="none", mfc="none"),
             Line2D([], [], color="grey", marker="o", ls="none"), Line2D([], [], color="grey", ls="-")]
    extra_labels = ["no hits: 95% upper bound", "points: measured, 95% interval", "lines: theory"]
    if not theory_lines:
        extra, extra_labels = extra[:2], extra_labels[:2]
    if series_count > 8:  # beside the plot, where it hides no point
        ax.legend(handles + extra, labels + extra_labels, fontsize="x-small", ncol=2 if series_count > 24 else 1,
                  loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    else:
        ax.legend(handles + extra, labels + extra_labels, fontsize="x-small", loc="best")


def _probes_text(result: FPResult) -> str:
    trials, probes = np.unique(result.trials), np.unique(result.probes)
    if len(trials) == 1 and len(probes) == 1:
        return f"{int(trials[0])} filters x {int(probes[0]):,} probes per point"
    return "probes per point vary"


def _groups(result: FPResult, by: Sequence[str]) -> list[tuple[tuple[Any, ...], npt.NDArray[np.bool_]]]:
    """The distinct values of the ``by`` fields, sorted, each with its rows."""
    columns = [getattr(result, name) for name in by]
    out = []
    for values in sorted({tuple(_item(c[i]) for c in columns) for i in range(len(result))}):
        sel = np.ones(len(result), dtype=bool)
        for column, value in zip(columns, values):
            sel &= column == value
        if sel.any():  # (a NaN never equals itself: such a group selects nothing)
            out.append((values, sel))
    return out


def _draw_series(ax: Any, result: FPResult, sel: npt.NDArray[np.bool_], x: str, name: str, colour: Any) -> None:
    """One series against field ``x``: theory as a line, measured as points
    with intervals, each with its legend entry; the layout picks the style."""
    order = np.argsort(getattr(result, x)[sel], kind="stable")
    pick = {field: column[sel][order] for field, column in result.as_dict().items()}
    marker, style = _LAYOUT_STYLE.get(str(pick["layout"][0]), ("o", "-"))
    ax.plot(pick[x], pick["theory"], style, color=colour, lw=1, label=f"{name}: theory")
    handle = _measured(ax, pick[x], pick["measured"], pick["ci_low"], pick["ci_high"], pick["hits"], colour, marker)
    if handle is not None:
        handle.set_label(f"{name}: measured")


def plot_fp_vs_fill(result: FPResult, ax: Any = None) -> Any:
    """False-positive rate against fill (keys / capacity): one series per
    (layout, capacity, target), each its own colour, measured (points with
    95% intervals) and theory (a line). Returns the Axes."""
    ax = _axes(ax)
    groups = _groups(result, ("layout", "capacity", "error_rate"))
    for colour, ((layout, capacity, rate), sel) in zip(_colours(len(groups)), groups):
        _draw_series(ax, result, sel, "fill", f"{layout}, {capacity:,} keys, target {rate:g}", colour)
        ax.axhline(rate, color=colour, lw=0.5, ls=":")
    ax.axvline(1.0, color="grey", lw=0.5)
    layouts = ", ".join(sorted({g[0][0] for g in groups}))
    sizes = ", ".join(f"{c:,}" for c in sorted({g[0][1] for g in groups}))
    _finish(ax, f"FP rate vs fill: {layouts}\ncapacity {sizes} keys; {_probes_text(result)}",
            "fill (keys added / capacity)", "false-positive rate", 2 * len(groups))
    return ax


def _series_name(fields_: Sequence[str], values: Sequence[Any], several_keys: bool) -> str:
    parts = []
    for name, value in zip(fields_, values):
        if name == "layout":
            parts.append(str(value))
        elif name == "num_hashes":
            parts.append(f"k={value}")
        elif name == "keys":
            if several_keys:
                parts.append(f"{value:,} keys")
        else:
            parts.append(f"{name}={value}")
    return ", ".join(parts)


def plot_fp_vs_bits_per_key(result: FPResult, ax: Any = None,
                            by: Sequence[str] = ("layout", "keys", "num_hashes")) -> Any:
    """False-positive rate against bits per key: one series per distinct
    value of the ``by`` fields (by default each (layout, keys, k)), each its
    own colour (circles and solid lines: blocked; squares and dashed lines:
    standard), measured and theory alike in the legend. With
    ``by=("layout",)`` a sweep whose k changes with the bits per key draws
    one line per layout. Returns the Axes."""
    ax = _axes(ax)
    groups = _groups(result, by)
    several_keys = len(np.unique(result.keys)) > 1
    for colour, (values, sel) in zip(_colours(len(groups)), groups):
        _draw_series(ax, result, sel, "bits_per_key", _series_name(by, values, several_keys), colour)
    layouts = ", ".join(sorted({str(l) for l in result.layout}))
    sizes = ", ".join(f"{int(n):,}" for n in np.unique(result.keys))
    k_text = "" if "num_hashes" in by else "; k as in each row"
    _finish(ax, f"FP rate vs bits per key: {layouts}\n{sizes} keys{k_text}; {_probes_text(result)}",
            "bits per key (m / n)", "false-positive rate", 2 * len(groups))
    return ax


def plot_measured_vs_theory(result: FPResult, ax: Any = None) -> Any:
    """Measured against theory, one colour per layout: points on the
    diagonal agree. Returns the Axes."""
    ax = _axes(ax)
    layouts = sorted({str(l) for l in result.layout})
    for colour, layout in zip(_colours(len(layouts)), layouts):
        sel = result.layout == layout
        handle = _measured(ax, result.theory[sel], result.measured[sel], result.ci_low[sel], result.ci_high[sel],
                           result.hits[sel], colour, _LAYOUT_STYLE.get(layout, ("o", "-"))[0])
        if handle is not None:
            handle.set_label(f"{layout}: measured")
    positive = result.theory[result.theory > 0]
    lo = float(positive.min()) if len(positive) else 1e-6
    hi = float(max(result.theory.max(), result.measured.max(), lo * 10))
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="measured = theory")
    ax.set_xscale("log")
    _finish(ax, f"Measured vs theory: {', '.join(layouts)}\n{_probes_text(result)}", "theory",
            "measured false-positive rate", len(layouts), theory_lines=False)
    return ax


def plot_residuals(result: FPResult, ax: Any = None, x: str = "bits_per_key") -> Any:
    """Measured / theory with its 95% interval, against ``x`` (a field:
    bits_per_key, fill, theory, ...), one colour per layout; 1 is perfect
    agreement. Rows with no hits show their upper bound. Returns the Axes."""
    ax = _axes(ax)
    xs = getattr(result, x)
    layouts = sorted({str(l) for l in result.layout})
    for i, (colour, layout) in enumerate(zip(_colours(len(layouts)), layouts)):
        sel = (result.layout == layout) & (result.theory > 0)
        theory = result.theory[sel]
        # layouts side by side at each x, so that their bars do not hide each other
        shift = xs[sel] * (1 + 0.01 * (i - (len(layouts) - 1) / 2))
        handle = _measured(ax, shift, result.measured[sel] / theory, result.ci_low[sel] / theory,
                           result.ci_high[sel] / theory, result.hits[sel], colour,
                           _LAYOUT_STYLE.get(layout, ("o", "-"))[0])
        if handle is not None:
            handle.set_label(f"{layout}: measured / theory")
    ax.axhline(1.0, color="k", lw=0.8, ls="--", label="agreement")
    if x == "theory":
        ax.set_xscale("log")
    _finish(ax, f"Residuals (measured / theory): {', '.join(layouts)}\n{_probes_text(result)}",
            x.replace("_", " "), "measured / theory", len(layouts), theory_lines=False, log=False)
    return ax
