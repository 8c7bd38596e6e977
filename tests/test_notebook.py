"""The example notebooks run top to bottom in a fresh kernel (nbclient),
and the numbers and tables they print agree with theory and the published
values. The notebooks themselves hold only the maths and the data: the
checks are this file's, run in the notebook's kernel after its last cell."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow  # a Jupyter kernel per notebook: left out of the fast subset

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


# What each test reads from the notebook's kernel once it has run: the
# notebook's own results, named (evaluated in the kernel, after the last cell).
FP_RATE_NUMBERS = """{
    'published_measured': float(published.measured[0]),
    'published_theory': float(published.theory[0]),
    'standard_k7_10bpk': float(layouts.measured[np.flatnonzero((layouts.layout == 'standard') & (layouts.num_hashes == 7))[0]]),
    'blocked_k6_10bpk': float(layouts.measured[np.flatnonzero((layouts.layout == 'blocked') & (layouts.num_hashes == 6))[0]]),
    'blocked_at_capacity': float(past.measured[(past.fill == 1.0) & (past.layout == 'blocked')][0]),
    'blocked_at_3x': float(past.measured[(past.fill == 3.0) & (past.layout == 'blocked')][0]),
    'rows': sum(len(t) for t in (published, layouts, past, sweep)),
    'theory_inside': sum(int(t.theory_inside.sum()) for t in (published, layouts, past, sweep)),
}"""

PUBLISHED_TABLES_CHECKS = """{
    'fan_cells': len(cells), 'fan_published_inside': fan_inside,
    'fan_theory_inside': int(fan.theory_inside.sum()), 'fan_disagree': len(disagree),
    'blocked_rows': len(blocked) + len(point),
    'blocked_theory_inside': int(blocked.theory_inside.sum() + point.theory_inside.sum()),
    'blocked_point_measured': float(point.measured[0]),
    'floor_gb': floor / 1e9, 'standard_gb': std.num_bits / 8e9,
}"""


def run_notebook(name: str, tmp_path: Path, checks: str) -> tuple[Any, dict[str, Any]]:
    """Run the notebook as a user would, then, in the same kernel, one more cell
    that only this test adds: `checks`, an expression over the notebook's own
    variables. The notebook a user opens has no such cell; the test reads the
    values it computed as JSON from that cell's output."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    os.environ.setdefault("JUPYTER_PLATFORM_DIRS", "1")
    os.environ.pop("MPLBACKEND", None)  # the kernel draws inline
    nb = nbformat.read(EXAMPLES / name, as_version=4)
    for cell in nb.cells:  # run from scratch, not from the stored outputs
        if cell.cell_type == "code":
            cell.outputs = []
    shipped = len(nb.cells)
    nb.cells.append(nbformat.v4.new_code_cell(f"import json as _json\nprint(_json.dumps({checks}))"))
    nbclient.NotebookClient(nb, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    probe = nb.cells.pop()
    assert len(nb.cells) == shipped
    text = "".join(o.get("text", "") for o in probe.outputs if o.output_type == "stream")
    values: dict[str, Any] = json.loads(text)
    return nb, values


def images(nb: Any) -> int:
    return len([o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})])


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # jupyter's own path migration notices
def test_fp_rate_notebook_reproduces_the_numbers(tmp_path: Path) -> None:
    nb, numbers = run_notebook("fp_rate.ipynb", tmp_path, FP_RATE_NUMBERS)
    assert numbers["published_theory"] == pytest.approx(8.89e-5, rel=2e-3)
    assert numbers["published_measured"] == pytest.approx(8.89e-5, rel=0.10)
    assert numbers["standard_k7_10bpk"] == pytest.approx(0.00819, rel=0.05)
    assert numbers["blocked_k6_10bpk"] == pytest.approx(0.00966, rel=0.05)
    assert numbers["blocked_at_capacity"] == pytest.approx(0.01, rel=0.10)
    assert numbers["blocked_at_3x"] > 0.2  # past capacity the rate climbs fast
    assert numbers["theory_inside"] >= 0.95 * numbers["rows"]  # each printed table: theory inside its interval
    html = "".join(o.get("data", {}).get("text/html", "") for c in nb.cells for o in c.get("outputs", []))
    assert "bloomline-filter" in html and "bloomline-fpresult" in html  # the rich displays rendered
    assert images(nb) >= 3


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_published_tables_notebook_measures_both_tables(tmp_path: Path) -> None:
    nb, checks = run_notebook("published_tables.ipynb", tmp_path, PUBLISHED_TABLES_CHECKS)
    # every printed row: the published value (and theory) inside the measured 95% interval
    assert checks["fan_cells"] == 90
    assert checks["fan_published_inside"] >= 0.95 * checks["fan_cells"]
    assert checks["fan_theory_inside"] >= 0.95 * checks["fan_cells"]
    assert checks["fan_disagree"] == 0  # the published cells are the textbook formula, rounded
    assert checks["blocked_theory_inside"] >= 0.95 * checks["blocked_rows"]
    assert checks["blocked_point_measured"] == pytest.approx(0.009665, rel=0.01)
    assert checks["floor_gb"] == pytest.approx(1.66, abs=0.01)
    assert checks["standard_gb"] == pytest.approx(2.40, abs=0.01)
    assert images(nb) >= 2
