"""examples/fp_rate.ipynb runs top to bottom in a fresh kernel and its key
numbers agree with theory and the published values."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "fp_rate.ipynb"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # jupyter's own path migration notices
def test_notebook_runs_and_reproduces_the_numbers(tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    os.environ.setdefault("JUPYTER_PLATFORM_DIRS", "1")
    os.environ.pop("MPLBACKEND", None)  # the kernel draws inline
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    cell = next(c for c in nb.cells if "key-numbers" in c.metadata.get("tags", []))
    text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
    numbers = json.loads(text)
    assert numbers["published_theory"] == pytest.approx(8.89e-5, rel=2e-3)
    assert numbers["published_measured"] == pytest.approx(8.89e-5, rel=0.10)
    assert numbers["standard_k7_10bpk"] == pytest.approx(0.00819, rel=0.05)
    assert numbers["blocked_k6_10bpk"] == pytest.approx(0.00966, rel=0.05)
    assert numbers["blocked_at_capacity"] == pytest.approx(0.01, rel=0.10)
    assert numbers["blocked_at_3x"] > 0.2  # past capacity the rate climbs fast
    html = "".join(o.get("data", {}).get("text/html", "") for c in nb.cells for o in c.get("outputs", []))
    assert "bloomline-filter" in html  # the rich display rendered
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) >= 2
