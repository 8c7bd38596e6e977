"""The standard layout's two indexes, as the Python layers meet them.

"standard" is the standard layout's second index (file layout code 2);
"standard-v1" its first (code 0), which runs above its rate on small
filters and at tiny rates (docs/design/layouts.md). A filter made with the
first index keeps it for its whole life: every file, pickle and Redis meta
says which it is. Where a caller names a layout to attach to what exists
(a Redis filter, a chain's stages, a crawl's JOBDIR), "standard" takes a
filter of either index, and the handle then uses the one it was made with.
"""

from __future__ import annotations

__all__ = ["LAYOUTS", "layout_matches", "setting_layout"]

LAYOUTS = ("blocked", "standard", "standard-v1")


def layout_matches(stored: str, wanted: str) -> bool:
    """Does a filter made with layout `stored` answer a request for `wanted`?"""
    return stored == wanted or (wanted == "standard" and stored == "standard-v1")


def setting_layout(layout: str) -> str:
    """The name a setting takes for a filter of `layout` ("standard" for
    either index: Scrapy's BLOOMLINE_LAYOUT names the two it chooses
    between), for messages that say how to match a stored filter."""
    return "standard" if layout == "standard-v1" else layout
