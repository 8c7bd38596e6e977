"""bloomline.analysis: experiments agree with theory within honest
intervals, are repeatable, select and export their rows, and plot one
series per geometry."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bloomline.analysis import (
    FPResult,
    bits_per_key_experiment,
    fp_experiment,
    fp_rate_from_bits,
    plot_fp_vs_bits_per_key,
    plot_fp_vs_fill,
    plot_measured_vs_theory,
    plot_residuals,
)


@pytest.mark.slow
def test_a_126_row_sweep_has_theory_inside_its_intervals() -> None:
    # 9 bits/key x 7 k x 2 layouts; 5 filters per row. Intervals that
    # covered probe noise only missed theory in 17% of such rows.
    r = bits_per_key_experiment(bits_per_key=(4, 6, 8, 10, 12, 14, 16, 18, 20), num_hashes=(1, 2, 3, 4, 6, 8, 10),
                                layouts=("blocked", "standard"), keys=20_000, probes=200_000, trials=5, seed=1)
    assert len(r) == 126 and set(r.trials) == {5}
    assert r.theory_inside.mean() >= 0.93, repr(r.where(num_hashes=lambda k: ~np.isin(k, [])))
    # the rate of each row's actual bits sits much closer to what was
    # measured than the a-priori theory can: its error is probe noise only
    assert np.median(np.abs(r.measured / r.predicted - 1)) < np.median(np.abs(r.measured / r.theory - 1))


def test_standard_rows_have_exact_m_and_blocked_rows_whole_blocks() -> None:
    r = bits_per_key_experiment(bits_per_key=[20, 7.3], num_hashes=[3], layouts=("standard", "blocked"), keys=1000,
                                probes=1000, trials=2)
    standard = r.where(layout="standard")
    assert standard.num_bits.tolist() == [20_000, 7_300] and standard.bits_per_key.tolist() == [20.0, 7.3]
    blocked = r.where(layout="blocked")
    assert blocked.num_bits.tolist() == [20_480, 7_680]  # rounded up to 512-bit blocks, and reported


def test_intervals_join_filter_spread_and_probe_noise() -> None:
    r = bits_per_key_experiment(bits_per_key=[8], num_hashes=[4], keys=5000, probes=50_000, trials=6, seed=3)
    one = bits_per_key_experiment(bits_per_key=[8], num_hashes=[4], keys=5000, probes=300_000, trials=1, seed=3)
    # the same number of probes; six filters show the spread between filters
    assert r.ci_high[0] - r.ci_low[0] > one.ci_high[0] - one.ci_low[0]
    assert r.ci_low[0] <= r.measured[0] <= r.ci_high[0]
    # no hits at all: an upper bound above zero, never a zero-width interval
    z = bits_per_key_experiment(bits_per_key=[40], num_hashes=[20], keys=1000, probes=1000, trials=3)
    assert z.hits[0] == 0 and z.ci_low[0] == 0 and z.ci_high[0] > 1e-4


def test_fp_experiment_measures_what_theory_predicts() -> None:
    r = fp_experiment(capacities=[50_000], error_rates=[0.01], fills=[0.5, 1.0, 2.0], probes=400_000, trials=5, seed=5)
    assert len(r) == 6  # 2 layouts x 3 fills
    assert r.theory_inside.sum() >= 5
    assert np.all(np.abs(r.measured[r.fill == 1.0] - 0.01) <= 0.001)
    assert np.all(r.measured[r.fill == 2.0] > 0.05)  # past capacity


def test_repeatable_with_a_seed() -> None:
    a = fp_experiment(capacities=[10_000], fills=[1.0], probes=50_000, trials=2, seed=9)
    b = fp_experiment(capacities=[10_000], fills=[1.0], probes=50_000, trials=2, seed=9)
    assert a.measured.tolist() == b.measured.tolist() and a.ci_high.tolist() == b.ci_high.tolist()


def test_published_point_measured() -> None:
    r = bits_per_key_experiment(bits_per_key=[10], num_hashes=[7], keys=50_000, probes=400_000, trials=5, seed=1)
    assert r.measured[0] == pytest.approx(0.00819, rel=0.05)
    assert np.isnan(r.error_rate[0]) and r.num_hashes[0] == 7 and r.num_bits[0] == 500_000


def test_where_selects_rows() -> None:
    r = bits_per_key_experiment(bits_per_key=[6, 10], num_hashes=[2, 3, 4], layouts=("blocked", "standard"),
                                keys=1000, probes=1000, trials=1)
    assert len(r.where(layout="blocked")) == 6
    assert len(r.where(layout="blocked", num_hashes=[2, 4])) == 4
    assert len(r.where(bits_per_key=lambda b: b > 8)) == 6
    sub = r.where(layout="standard", num_hashes=3)
    assert isinstance(sub, FPResult) and sub.layout.tolist() == ["standard"] * 2 and sub.num_hashes.dtype == np.int64
    with pytest.raises(ValueError, match="FPResult has no field 'colour'"):
        r.where(colour="red")
    joined = FPResult.concat([r.where(layout="standard"), r.where(layout="blocked")])
    assert len(joined) == 12 and joined.layout.tolist() == ["standard"] * 6 + ["blocked"] * 6
    assert len(FPResult.concat([])) == 0


def test_tables_show_units_and_no_target_for_sweeps() -> None:
    sweep = bits_per_key_experiment(bits_per_key=[8], num_hashes=[3], keys=1000, probes=1000, trials=2)
    text = repr(sweep)
    assert "bits / key" in text and "m (bits)" in text and "probes / filter" in text
    assert "target" not in text and "nan" not in text
    html = sweep._repr_html_()
    assert "<table>" in html and "95% low" in html and "nan" not in html and "from actual bits" in html
    sized = fp_experiment(capacities=[1000], fills=[1.0], probes=1000, trials=2)
    assert "target rate" in repr(sized) and "target rate" in sized._repr_html_()


def test_pandas_round_trip_keeps_types() -> None:
    pd = pytest.importorskip("pandas")
    r = fp_experiment(capacities=[1000], fills=[0.5, 1.0], probes=1000, trials=2)
    df = r.to_pandas()
    assert isinstance(df, pd.DataFrame) and list(df["layout"]) == ["blocked"] * 2 + ["standard"] * 2
    assert df["num_bits"].dtype == np.int64 and df["measured"].dtype == np.float64
    back = FPResult.from_pandas(df[df["layout"] == "blocked"])
    assert len(back) == 2 and back.layout.dtype.kind == "U" and back.trials.dtype == np.int64
    assert back.layout.tolist() == ["blocked", "blocked"]  # whole strings, not cut to the dtype of an empty column
    assert back.measured.tolist() == r.where(layout="blocked").measured.tolist()


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="probes must be a whole number >= 1, got 0"):
        fp_experiment(probes=0)
    with pytest.raises(ValueError, match="probes must be a whole number >= 1, got 0"):
        bits_per_key_experiment(probes=0)
    with pytest.raises(ValueError, match="trials must be a whole number >= 1, got 0"):
        bits_per_key_experiment(trials=0)
    with pytest.raises(ValueError, match="fills must be finite numbers >= 0, got -1"):
        fp_experiment(fills=[-1], probes=10)
    with pytest.raises(ValueError, match="capacities is empty"):
        fp_experiment(capacities=[], probes=10)
    with pytest.raises(ValueError, match="num_hashes is empty"):
        bits_per_key_experiment(num_hashes=[], probes=10)
    with pytest.raises(ValueError, match="bits_per_key must be finite numbers > 0, got 0"):
        bits_per_key_experiment(bits_per_key=[0], probes=10)


def test_arguments_are_never_truncated_and_an_endless_fill_is_refused() -> None:
    # probes=1.9 ran 1 probe, trials=2.7 two trials, num_hashes=[2.5] k=2;
    # NaN and inf were bare conversion errors; a fill of 1e9 at capacity 100
    # started 1e11 adds; a layouts string was read letter by letter.
    for call, name, value in ((lambda: fp_experiment(probes=1.9), "probes", "1.9"),
                              (lambda: fp_experiment(probes=10, trials=2.7), "trials", "2.7"),
                              (lambda: fp_experiment(probes=float("nan")), "probes", "nan"),
                              (lambda: bits_per_key_experiment(probes=10, num_hashes=[2.5]), "num_hashes", "2.5"),
                              (lambda: fp_experiment(probes=10, seed=-1), "seed", "-1")):
        with pytest.raises(ValueError, match=rf"^{name} must be a whole number >= \d, got {value}$"):
            call()
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="fills must be finite numbers >= 0"):
            fp_experiment(fills=[bad], probes=10)
        with pytest.raises(ValueError, match="bits_per_key must be finite numbers > 0"):
            bits_per_key_experiment(bits_per_key=[bad], probes=10)
    with pytest.raises(ValueError, match=r"a fill of 1000000000.0 at capacity 100 is 100,000,000,000 keys a filter"):
        fp_experiment(capacities=[100], fills=[1e9], probes=10)
    with pytest.raises(TypeError, match=r"layouts must be a list of values, got the str 'blocked' \(pass \['blocked'\]\)"):
        fp_experiment(layouts="blocked", probes=10)  # type: ignore[arg-type]
    assert len(fp_experiment(capacities=[1000], fills=[1.0], probes=1e3, trials=2.0)) >= 1  # (1e3 is whole)
    with pytest.raises(TypeError, match=r"capacities must be a list of values, got the int 1000"):
        fp_experiment(capacities=1000, probes=10)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"keys must be at most 2,147,483,648"):
        bits_per_key_experiment(keys=2**40, probes=10)


def _series_labels(ax: object) -> list[str]:
    handles, labels = ax.get_legend_handles_labels()  # type: ignore[attr-defined]
    return labels


def test_plots_one_series_per_geometry(tmp_path: Path) -> None:
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = bits_per_key_experiment(bits_per_key=[6, 10, 40], num_hashes=[3, 20], layouts=("blocked", "standard"),
                                keys=2000, probes=20_000, trials=2)
    ax = plot_fp_vs_bits_per_key(s)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    for layout in ("blocked", "standard"):
        for k in (3, 20):
            assert f"{layout}, k={k}: theory" in labels
            assert f"{layout}, k={k}: measured" in labels
    colours = {tuple(line.get_color()) if not isinstance(line.get_color(), str) else line.get_color()
               for line in ax.lines if line.get_label().endswith(": theory")}
    assert len(colours) == 4  # one colour per series
    assert "no hits: 95% upper bound" in labels  # 40 bits/key, k=20 has none
    assert "blocked, standard" in ax.get_title() and "2,000 keys" in ax.get_title()
    assert "2 filters x 20,000 probes" in ax.get_title()
    ax.figure.savefig(tmp_path / "bpk.png")
    plt.close(ax.figure)

    r = fp_experiment(capacities=[2000, 4000], fills=[0.5, 1.0, 2.0], probes=20_000, trials=2)
    ax = plot_fp_vs_fill(r)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    for layout in ("blocked", "standard"):
        for cap in ("2,000", "4,000"):
            assert f"{layout}, {cap} keys, target 0.01: measured" in labels
    plt.close(ax.figure)

    fig, axes = plt.subplots(1, 2)
    assert plot_measured_vs_theory(r, ax=axes[0]) is axes[0]
    assert plot_residuals(s, ax=axes[1]) is axes[1]
    assert axes[1].get_ylabel() == "measured / theory"
    assert "blocked: measured / theory" in _series_labels(axes[1])
    plt.close(fig)


def test_fp_rate_from_bits_reads_the_filters_own_bits() -> None:
    from bloomline import BloomFilter

    std = BloomFilter.from_params(10_000, 3, layout="standard")
    std.add_many(np.arange(1000))
    assert fp_rate_from_bits(std) == pytest.approx((std.bits_set / 10_000) ** 3, rel=1e-12)
    blk = BloomFilter.from_params(1024, 2, layout="blocked")
    assert fp_rate_from_bits(blk) == 0.0
    bits = np.asarray(blk)
    blk.add_many(np.arange(40))
    first, second = int(np.unpackbits(bits[:64]).sum()), int(np.unpackbits(bits[64:]).sum())
    assert fp_rate_from_bits(blk) == pytest.approx(((first / 512) ** 2 + (second / 512) ** 2) / 2, rel=1e-12)
