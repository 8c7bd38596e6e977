"""Rich display for Jupyter: every filter's ``_repr_html_``.

A small table (kind, layout, memory, keys against capacity, fill, expected
false-positive rate against the target) with a fill bar whose colour turns
from green to amber to red as the filter passes its capacity. It relies on
the Filter protocol (_protocol.py) alone.
"""

from __future__ import annotations

import math

from ._core import BloomFilter, CountingBloomFilter
from ._lazy import import_module
from ._protocol import Filter
from ._units import format_bytes


def _rows_html(rows: list[tuple[str, object]]) -> str:
    """A filter's facts as table rows, each escaped."""
    html = import_module("html")
    return "".join(
        f"<tr><th style='text-align:left;padding-right:1em'>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
        for k, v in rows
    )


def filter_html(f: Filter) -> str:
    """HTML for a filter: what it is, how full, what it costs in false positives."""
    html = import_module("html")  # (at first use: its entity table is no part of import bloomline)
    if getattr(f, "closed", False):  # (a closed mapped filter's facts went with its memory)
        return f"<div class='bloomline-filter'>{html.escape(type(f).__name__)} (closed)</div>"

    approx = float(f.approx_count)
    capacity, target = f.capacity, f.error_rate
    fill = float(f.fill_ratio)
    load = approx / capacity if capacity else float("nan")
    colour = "#2e7d32" if not load > 0.9 else ("#f9a825" if load <= 1.0 else "#c62828")
    bar = max(0.0, min(1.0, fill))
    keys = f"{approx:,.0f}" if math.isfinite(approx) else "inf (full)"
    rows: list[tuple[str, object]] = [
        ("kind", type(f).__name__),
        ("layout", f.layout),
        ("memory", format_bytes(f.nbytes)),
        ("keys (approx.)", keys + (f" of capacity {capacity:,} ({load:.0%})" if capacity else "")),
        ("fill", f"{fill:.1%}"),
        ("expected FP now", f"{f.expected_fp_rate:.3g}" + (f" (target {target:g} at capacity)" if target else "")),
    ]
    body = _rows_html(rows)
    return (
        f"<div class='bloomline-filter'><table>{body}</table>"
        f"<div style='width:240px;height:10px;border:1px solid #999;margin-top:4px' title='fill {bar:.1%}'>"
        f"<div style='width:{bar * 100:.1f}%;height:100%;background:{colour}'></div></div></div>"
    )


def remote_filter_html(f: object, facts: list[tuple[str, object]]) -> str:
    """HTML for a filter kept in Redis: its own facts, known here. Its counts
    are not read: each is a round trip, and a display that waited on a server
    down (every retry: some 40 s a count) or stopped would hold the notebook."""
    rows = [("kind", type(f).__name__), *facts,
            ("counts", "not read by a display: approx_count, fill_ratio and expected_fp_rate ask the server")]
    body = _rows_html(rows)
    return f"<div class='bloomline-filter'><table>{body}</table></div>"


# The C++ kinds get their _repr_html_ here, from above them (the bindings
# import nothing of the package); the Python kinds define it as a method.
for _kind in (BloomFilter, CountingBloomFilter):
    setattr(_kind, "_repr_html_", filter_html)
