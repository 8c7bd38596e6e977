"""Links from a page to the repository's files outside docs/ (``../README.md``,
``../../benchmarks/run.py``) point to those files in the repository online.

They are not pages of the site, so MyST cannot resolve them. A link whose
target exists in the checkout is rewritten to the repository's URL (the
``Source`` URL of pyproject.toml); one whose target does not exist is left
as written, for the strict build to report as a dangling link.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

REPO_URL = "https://github.com/bloomline/bloomline"  # pyproject.toml, [project.urls] Source
BRANCH = "main"
_LINK = re.compile(r"(\]\()([^)\s]+)(\))")
_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)


def rewrite(text: str, page_dir: Path, docs: Path, root: Path) -> str:
    def one(m: re.Match[str]) -> str:
        target = m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
            return m.group(0)
        path, _, anchor = target.partition("#")
        resolved = (page_dir / path).resolve()
        if resolved == docs or docs in resolved.parents or not resolved.exists():
            return m.group(0)
        try:
            rel = resolved.relative_to(root)
        except ValueError:
            return m.group(0)
        kind = "tree" if resolved.is_dir() else "blob"
        url = f"{REPO_URL}/{kind}/{BRANCH}/{rel.as_posix()}" + (f"#{anchor}" if anchor else "")
        return f"{m.group(1)}{url}{m.group(3)}"

    # Code blocks are left alone: a[i](x) there is code, not a link.
    out, last = [], 0
    for fence in _FENCE.finditer(text):
        out.append(_LINK.sub(one, text[last:fence.start()]))
        out.append(fence.group(0))
        last = fence.end()
    out.append(_LINK.sub(one, text[last:]))
    return "".join(out)


def on_source_read(app: Any, docname: str, source: list[str]) -> None:
    docs = Path(app.srcdir).resolve()
    page_dir = (docs / docname).parent
    source[0] = rewrite(source[0], page_dir, docs, docs.parent)


def setup(app: Any) -> dict[str, Any]:
    app.connect("source-read", on_source_read)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
