"""Nothing in the repository points at something a clone lacks.

A reader of any tracked file must be able to follow what it refers to: no
issue numbers of this project (a clone has no tracker; say the thing
itself), no files that are not in the tree (DESIGN.md, NOTES.md, STYLE.md,
DECISIONS.md, ../shared, or a repository path that was moved), and no
relative Markdown link in the docs or the README to a page that is not
there. The example notebooks speak of the maths and the data only: no
self-check cells printing JSON for the tests, no talk of how they were made.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Issue numbers of other projects may be cited when the project is named
# right before them ("pybloom-live's issue #24").
OTHER_PROJECTS = ("pybloom-live", "RedisBloom", "scrapy-redis", "Scrapy", "redis-py", "pybind11", "NumPy",
                  "pandas", "pyarrow", "Redis", "CPython", "GCC", "LLVM", "rbloom", "abloom", "fastbloom")

ISSUE = re.compile(r"\b[Ii]ssues?\s*#?\d+")
HASH_NUMBER = re.compile(r"(?<![\w&#/])#\d{1,4}\b(?![;\w])")  # "#26"; not "#999;" (a colour) or "&#39"
NAMED_FILE = re.compile(r"(?:\.\./shared\b[\w./-]*|[\w./-]*\b(?:DESIGN|NOTES|STYLE|DECISIONS)\.md)")
REPO_PATH = re.compile(r"(?<![\w./-])((?:docs|tests|benchmarks|examples|cpp|python|\.ci)/[\w./-]*\w)")
MD_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")

# Paths a tracked file may name that are made when the code runs, not kept
# in the tree (outputs of a benchmark, a build, the docs site).
GENERATED = re.compile(r"^(docs/reference/|docs/_build|benchmarks/.*\.json$|build/|python/bloomline/_core|"
                       r"python/bloomline/redis_module\.so$)")
BINARY_SUFFIXES = {".blf", ".png", ".so", ".journal", ".pickle", ".pkl", ".bin", ".gz", ".whl"}


def tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / p for p in out.decode().split("\0") if p]


def text_of(path: Path) -> str | None:
    if path.suffix in BINARY_SUFFIXES or not path.is_file():
        return None
    data = path.read_bytes()
    if b"\0" in data:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if path.suffix == ".ipynb":  # the sources a reader sees, not the stored outputs (HTML, colours)
        nb = json.loads(text)
        return "\n".join("".join(c["source"]) for c in nb["cells"])
    return text


def other_project_near(text: str, start: int, end: int, after: int = 0) -> bool:
    near = text[max(0, start - 60):start] + " " + text[end:end + after]
    return any(name in near for name in OTHER_PROJECTS)


def exists_for(path: Path, name: str) -> bool:
    """A file named in `path`: relative to its directory, or to the root."""
    name = name.rstrip(".")
    return (path.parent / name).exists() or (ROOT / name).exists()


def dangling(path: Path, text: str) -> list[tuple[int, str]]:
    """(offset, what) for each pointer in `text` (the contents of `path`) that leads nowhere."""
    found = []
    for pattern in (ISSUE, HASH_NUMBER):
        for m in pattern.finditer(text):
            if not other_project_near(text, m.start(), m.end()):
                found.append((m.start(), f"issue number {m.group(0)!r}"))
    for m in NAMED_FILE.finditer(text):
        if m.group(0).startswith("../shared") or not exists_for(path, m.group(0)):
            found.append((m.start(), f"missing file {m.group(0)!r}"))
    for m in REPO_PATH.finditer(text):
        name = m.group(1)
        if "*" in name or GENERATED.match(name) or not Path(name).suffix or NAMED_FILE.fullmatch(name):
            continue  # a directory, a glob, or something a run makes
        # another project's file ("tests/test_dupefilters.py of Scrapy's sdist")
        if not (ROOT / name).exists() and not other_project_near(text, m.start(), m.end(), after=40):
            found.append((m.start(), f"missing path {name!r}"))
    return found


def test_no_tracked_file_names_an_issue_number_or_a_missing_file() -> None:
    here = Path(__file__).resolve()
    problems = []
    for path in tracked():
        text = text_of(path)
        if text is None or path == here:
            continue
        for offset, what in dangling(path, text):
            problems.append(f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, offset) + 1}: {what}")
    assert not problems, "\n".join(problems)


def markdown_pages() -> list[Path]:
    return [p for p in tracked() if p.suffix == ".md" and (p.name == "README.md" and p.parent == ROOT
                                                             or ROOT / "docs" in p.parents)]


def test_relative_markdown_links_in_the_docs_lead_to_files_that_exist() -> None:
    problems = []
    for page in markdown_pages():
        text = page.read_text(encoding="utf-8")
        text = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks are not links
        for m in MD_LINK.finditer(text):
            target = m.group(1).split("#")[0]
            if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # an anchor on the same page, or a URL
            resolved = (page.parent / target).resolve()
            if resolved.exists():
                continue
            # The API reference is generated by the docs build (docs/reference/).
            if ROOT / "docs" / "reference" in resolved.parents:
                continue
            problems.append(f"{page.relative_to(ROOT)}: [{target}] does not exist")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", ["fp_rate.ipynb", "published_tables.ipynb"])
def test_notebooks_hold_the_maths_and_the_data_only(name: str) -> None:
    nb = json.loads((ROOT / "examples" / name).read_text(encoding="utf-8"))
    sources = ["".join(c["source"]) for c in nb["cells"]]
    for source in sources:
        assert "json.dumps" not in source, "a self-check cell: it belongs in tests/test_notebook.py"
        for phrase in ("search tools", "this project", "test suite", "checked by the test"):
            assert phrase not in source, f"{name}: {phrase!r} is about the project, not the maths"
    last_code = [c for c in nb["cells"] if c["cell_type"] == "code"][-1]
    assert not last_code["metadata"].get("tags"), "the last cell is a tagged check cell"


def test_the_pattern_finds_what_it_names() -> None:
    # The checks above pass only if these can fail.
    page = ROOT / "docs" / "FORMAT.md"
    assert dangling(page, "see issue 26") and dangling(page, "fixed in #7.")
    assert dangling(page, "docs/STYLE.md has it") and dangling(page, "../shared/DESIGN.md")
    assert dangling(page, "tests/test_nothing_here.py")
    assert not dangling(page, "border:1px solid #999;") and not dangling(page, "#include <x>")
    assert not dangling(page, "pybloom-live's issue #24") and not dangling(page, "docs/FORMAT.md")
    assert not dangling(ROOT / "benchmarks" / "README.md", "NOTES.md (appended)")
