"""bloomline.analysis: experiments agree with theory, are repeatable, and
export to pandas; plot helpers draw."""

from __future__ import annotations

import numpy as np
import pytest

from bloomline.analysis import (
    bits_per_key_experiment,
    fp_experiment,
    plot_fp_vs_bits_per_key,
    plot_fp_vs_fill,
    plot_measured_vs_theory,
)


def test_fp_experiment_measures_what_theory_predicts() -> None:
    r = fp_experiment(capacities=[50_000], error_rates=[0.01], fills=[0.5, 1.0, 2.0], probes=2_000_000, seed=5)
    assert len(r) == 6  # 2 layouts x 3 fills
    for i in range(len(r)):
        # 2M probes: at 1% the 95% interval is about +-1.4% of the rate
        assert r.ci_low[i] <= r.theory[i] * 1.03 and r.theory[i] * 0.97 <= r.ci_high[i], (r.layout[i], r.fill[i])
    at_capacity = r.measured[r.fill == 1.0]
    assert np.all(np.abs(at_capacity - 0.01) <= 0.001)
    assert np.all(r.measured[r.fill == 2.0] > 0.05)  # past capacity


def test_repeatable_with_a_seed() -> None:
    a = fp_experiment(capacities=[10_000], fills=[1.0], probes=200_000, seed=9)
    b = fp_experiment(capacities=[10_000], fills=[1.0], probes=200_000, seed=9)
    assert a.measured.tolist() == b.measured.tolist()


def test_bits_per_key_experiment() -> None:
    r = bits_per_key_experiment(bits_per_key=[10], num_hashes=[7], keys=50_000, probes=2_000_000, seed=1)
    assert r.measured[0] == pytest.approx(0.00819, rel=0.05)
    assert np.isnan(r.error_rate[0]) and r.num_hashes[0] == 7


def test_to_pandas_and_repr() -> None:
    r = fp_experiment(capacities=[1000], fills=[1.0], probes=10_000)
    assert "FPResult(2 rows)" in repr(r)
    pd = pytest.importorskip("pandas")
    df = r.to_pandas()
    assert isinstance(df, pd.DataFrame) and list(df["layout"]) == ["blocked", "standard"]


def test_plots_draw(tmp_path: object) -> None:
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = fp_experiment(capacities=[2000], fills=[0.5, 1.0, 2.0], probes=20_000)
    s = bits_per_key_experiment(bits_per_key=[6, 10], num_hashes=[3, 5], keys=2000, probes=20_000)
    for fn, res in ((plot_fp_vs_fill, r), (plot_measured_vs_theory, r), (plot_fp_vs_bits_per_key, s)):
        ax = fn(res)
        assert ax.get_yscale() == "log" and len(ax.lines) + len(ax.collections) > 0
        plt.close(ax.figure)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="probes must be >= 1, got 0"):
        fp_experiment(probes=0)
    with pytest.raises(ValueError, match="fills must be >= 0, got -1"):
        fp_experiment(fills=[-1], probes=10)
