"""The example notebooks run top to bottom in a fresh kernel (nbclient),
and the numbers and tables they print agree with theory and the published
values."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow  # a Jupyter kernel per notebook: left out of the fast subset

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_notebook(name: str, tmp_path: Path) -> Any:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    os.environ.setdefault("JUPYTER_PLATFORM_DIRS", "1")
    os.environ.pop("MPLBACKEND", None)  # the kernel draws inline
    nb = nbformat.read(EXAMPLES / name, as_version=4)
    for cell in nb.cells:  # run from scratch, not from the stored outputs
        if cell.cell_type == "code":
            cell.outputs = []
    nbclient.NotebookClient(nb, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    return nb


def printed_json(nb: Any, tag: str) -> dict[str, Any]:
    cell = next(c for c in nb.cells if tag in c.metadata.get("tags", []))
    text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
    data: dict[str, Any] = json.loads(text)
    return data


def images(nb: Any) -> int:
    return len([o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})])


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # jupyter's own path migration notices
def test_fp_rate_notebook_reproduces_the_numbers(tmp_path: Path) -> None:
    nb = run_notebook("fp_rate.ipynb", tmp_path)
    numbers = printed_json(nb, "key-numbers")
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
    nb = run_notebook("published_tables.ipynb", tmp_path)
    checks = printed_json(nb, "checks")
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
