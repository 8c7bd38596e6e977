"""Sphinx configuration of bloomline's documentation site.

Build it from the repository root (pip install '.[docs]' first):

    sphinx-build -W --keep-going -n -b html docs build/docs

The pages are Markdown (MyST); the API, CLI and Redis-module references are
generated from the code by the extensions in docs/_ext/, which also point links
to the repository's files outside docs/ at the repository online.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

import bloomline  # noqa: E402  (the installed package, or the checkout's through its .pth)

project = "bloomline"
author = "bloomline developers"
copyright = "bloomline developers"  # noqa: A001  (Sphinx's name)
release = bloomline.__version__
version = release

extensions = [
    "myst_parser",
    "bloomline_api",
    "bloomline_cli",
    "bloomline_links",
]
source_suffix = {".md": "markdown"}
root_doc = "index"
# Not pages: build outputs, notebook checkpoints, the extensions.
exclude_patterns = ["_build", "**/.ipynb_checkpoints", "_ext"]

myst_heading_anchors = 3  # links such as FORMAT.md#positions resolve to headings
myst_enable_extensions = ["deflist"]
# Every cross-reference must resolve; other projects' names are plain text (bloomline_api.EXTERNAL).
nitpicky = True

html_theme = "furo"
html_title = f"bloomline {release}"
html_show_sourcelink = False
pygments_style = "sphinx"
# Options such as --error-rate keep their two hyphens (no en dashes); quotes stay straight.
smartquotes = False
