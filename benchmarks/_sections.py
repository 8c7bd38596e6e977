"""Write one named section of benchmarks/RESULTS.md, keeping the rest."""

from __future__ import annotations

import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def write_section(name: str, body: str) -> None:
    section = f"<!-- {name}:begin -->\n{body.rstrip()}\n<!-- {name}:end -->"
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    pattern = rf"<!-- {name}:begin -->.*?<!-- {name}:end -->"
    if re.search(pattern, text, flags=re.S):
        text = re.sub(pattern, lambda _m: section, text, flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    RESULTS.write_text(text)
