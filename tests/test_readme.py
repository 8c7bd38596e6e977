"""The README's Python tour runs as written, and its set-up commands are there."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_blocks_run() -> None:
    text = README.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks
    ran = 0
    for block in blocks:
        # Blocks that need a server or a Scrapy project say so on their first line.
        if block.startswith(("# (needs a running Redis)", "# settings.py")):
            continue
        exec(compile(block, str(README), "exec"), {})
        ran += 1
    assert ran >= 3


def test_readme_has_the_two_setup_commands() -> None:
    text = README.read_text()
    assert "pip install . && bloomline demo" in text
    assert "pip install '.[test]' && pytest" in text
