"""What the README and the user docs promise about themselves: the set-up
commands, a short README that leads to one guide per audience, guides that
say whom they are for and what to install, links that resolve, and the
shared-file example under every start method. (Every example runs in
tests/test_docs_examples.py.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
GUIDES = {name: ROOT / "docs" / "guides" / f"{name}.md" for name in ("crawl", "scrapy", "redis", "jupyter", "pipelines")}
USER_DOCS = [README, ROOT / "docs" / "quickstart.md", ROOT / "docs" / "CONTRIBUTING.md", *GUIDES.values()]
# Pages other parts of the docs provide (the design notes, the reference, the changelog): their names are fixed.
DESIGN_NOTES = {f"{n}.md" for n in ("keys", "sizing", "layouts", "format", "sharing", "redis", "scrapy", "cli", "windows",
                                    "threads", "api")}
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_readme_has_the_two_setup_commands() -> None:
    text = README.read_text()
    assert "pip install . && bloomline demo" in text
    assert "pip install '.[test]' && pytest" in text


def test_readme_is_short_and_its_first_example_comes_early() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) < 250, len(lines)
    first_python = next(i for i, line in enumerate(lines) if line.startswith("```python"))
    assert first_python < 80, first_python
    # CI and release detail lives in docs/CONTRIBUTING.md, not on the front page.
    text = README.read_text()
    for word in ("auditwheel", "qemu", "cibuildwheel", "ASan", ".ci/run"):
        assert word not in text, word


def test_readme_has_contents_and_a_taste_and_a_link_for_each_audience() -> None:
    text = README.read_text()
    contents = text.split("## Contents", 1)[1].split("\n## ", 1)[0]
    headings = re.findall(r"^#{2,3} (.+)$", text, flags=re.M)
    for anchor in re.findall(r"\]\(#([^)]+)\)", contents):
        assert anchor in {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in headings}, anchor
    for name in GUIDES:
        assert f"(docs/guides/{name}.md)" in text, name
    # Each audience's taste names the extra its code needs.
    sections = dict(re.findall(r"^### (.+?)\n(.*?)(?=^##)", text, flags=re.M | re.S))
    assert "'.[scrapy]'" in sections["Scrapy"]
    assert "'.[redis]'" in sections["A fleet on Redis"]
    assert "'.[plot]'" in sections["Jupyter"]


@pytest.mark.parametrize("name", sorted(GUIDES))
def test_each_guide_says_whom_it_is_for_what_to_install_and_where_the_details_are(name: str) -> None:
    text = GUIDES[name].read_text()
    head = "\n".join(text.splitlines()[:25])
    assert text.startswith("# ") and "\n\nFor people who " in head, name
    extra = {"crawl": "pip install .", "scrapy": "'.[scrapy]'", "redis": "'.[redis]'", "jupyter": "'.[plot]'",
             "pipelines": "pip install ."}[name]
    assert "**Install:**" in head and extra in head, name
    assert "(../reference/index.md)" in head and "(../design/" in head, name


@pytest.mark.parametrize("path", USER_DOCS, ids=[p.name for p in USER_DOCS])
def test_links_resolve_and_name_no_retired_file_or_issue(path: Path) -> None:
    text = path.read_text()
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        file = (path.parent / target.split("#", 1)[0]).resolve()
        where = file.relative_to(ROOT).as_posix()
        if where.startswith("docs/design/"):
            assert file.name in DESIGN_NOTES, target
        elif where.startswith("docs/reference/"):
            assert where == "docs/reference/index.md", target
        elif where != "docs/CHANGELOG.md":
            assert file.exists(), f"{path.name}: {target}"
    # (files the repository lacks and issue numbers: tests/test_no_dangling.py, over every file)


def _multiprocessing_example() -> str:
    guide = GUIDES["crawl"].read_text()
    blocks = re.findall(r"```python\n(.*?)```", guide, flags=re.S)
    found = [b for b in blocks if "multiprocessing.Pool" in b]
    assert len(found) == 1
    return found[0]


@pytest.mark.parametrize("method", ["spawn", "forkserver", "fork"])
def test_shared_file_example_under_each_start_method(method: str, tmp_path: Path) -> None:
    """The crawl guide's shared-file example, run as a script with the start
    method forced: spawn (macOS, Windows) and forkserver (Linux from 3.14)
    import the script afresh in each worker, so whatever a worker needs must
    be passed to it. Its printed lines are what its comments say."""
    block = _multiprocessing_example()
    guard = 'if __name__ == "__main__":\n'
    assert block.count(guard) == 1
    script = tmp_path / "example.py"
    script.write_text(block.replace(guard, guard + f"    multiprocessing.set_start_method({method!r})\n"))
    temp = tmp_path / "temp"  # where the example's TemporaryDirectory goes
    temp.mkdir()
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                       env={**os.environ, "TMPDIR": str(temp)})
    assert r.returncode == 0, r.stderr
    printed = r.stdout.splitlines()
    said = [line.split("# ", 1)[1] for line in block.splitlines() if line.lstrip().startswith("print(")]
    assert len(printed) == len(said) == 2, (printed, said)
    # The first comment: "3: ..." (a, b and c; b new to one worker). Two
    # workers adding b at the same instant may both be told it is new (at
    # least once between processes, docs/design/sharing.md): then 4.
    assert said[0].startswith("3") and printed[0] in ("3", "4"), (printed, said)
    assert printed[1] == said[1]
    assert not list(temp.iterdir())  # the file went with its temporary directory
