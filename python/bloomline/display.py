"""Rich display for Jupyter: every filter's ``_repr_html_``.

A small table (kind, layout, size, keys against capacity, fill, expected
false-positive rate against the target) with a fill bar whose colour turns
from green to amber to red as the filter passes its capacity.
"""

from __future__ import annotations

import html
import math
from typing import Any


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def _fill_of(f: Any) -> float:
    if hasattr(f, "bits_set") and hasattr(f, "num_bits"):
        return float(f.bits_set) / float(f.num_bits)
    if hasattr(f, "nonzero_counters"):
        return float(f.nonzero_counters) / float(f.num_counters)
    stages = getattr(f, "stages", None)
    if stages:
        total = sum(s.num_bits for s in stages)
        return float(sum(s.bits_set for s in stages)) / float(total)
    return float("nan")


def filter_html(f: Any) -> str:
    """HTML for a filter: what it is, how full, what it costs in false positives."""
    kind = type(f).__name__
    approx = float(f.approx_count)
    capacity = getattr(f, "capacity", None)
    target = getattr(f, "error_rate", None)
    fill = _fill_of(f)
    load = approx / capacity if capacity else float("nan")
    colour = "#2e7d32" if not load > 0.9 else ("#f9a825" if load <= 1.0 else "#c62828")
    bar = 0.0 if math.isnan(fill) else max(0.0, min(1.0, fill))
    size = f"{f.num_bits:,} bits" if hasattr(f, "num_bits") else (
        f"{f.num_counters:,} counters x {f.counter_bits} bits" if hasattr(f, "num_counters") else
        f"{getattr(f, 'num_stages', '?')} stages")
    rows = [
        ("kind", kind),
        ("layout", getattr(f, "layout", "?")),
        ("size", f"{size} ({_fmt_bytes(getattr(f, 'nbytes', getattr(f, 'num_bits', 0) / 8))})"),
        ("hashes (k)", str(getattr(f, "num_hashes", "-"))),
        ("keys (approx.)", f"{approx:,.0f}" + (f" of capacity {capacity:,} ({load:.0%})" if capacity else "")),
        ("fill", "-" if math.isnan(fill) else f"{fill:.1%}"),
        ("expected FP now", f"{f.expected_fp_rate:.3g}" + (f" (target {target:g} at capacity)" if target else "")),
    ]
    body = "".join(
        f"<tr><th style='text-align:left;padding-right:1em'>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
        for k, v in rows
    )
    return (
        f"<div class='bloomline-filter'><table>{body}</table>"
        f"<div style='width:240px;height:10px;border:1px solid #999;margin-top:4px' title='fill {bar:.1%}'>"
        f"<div style='width:{bar * 100:.1f}%;height:100%;background:{colour}'></div></div></div>"
    )
