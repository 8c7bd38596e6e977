"""Every example in README.md, docs/quickstart.md and docs/guides/*.md runs
as written: each ```python block, each ```console block of `bloomline`
commands, and each Scrapy settings block (a real crawl with those settings).

A block that needs something beyond the package says so on its first line,
in words a reader understands too:

- ``# needs: redis`` (a Redis server), ``# needs: redis with the bloomline
  module`` or ``# needs: redis with RedisBloom``: the block runs against a
  fresh server of the suite (tests/conftest.py), its ``localhost:6379``
  pointed at it;
- ``# needs: duckdb``: DuckDB is a test extra, not a user's; skipped
  without it, but in CI (``CI`` set), where its absence fails;
- ``# settings.py``: a Scrapy project's settings; the block is written out as
  the settings module of a real crawl of tests/scrapy_site.py's site, which
  must end well with every page fetched once.

A top-level ``print(...)  # comment`` line states what it prints: the
comment starts with the printed text. Console blocks: each ``$ `` line runs
in bash in a fresh directory, and the lines after it are its output, where
``...`` stands for any text.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", ROOT / "docs" / "quickstart.md", *sorted((ROOT / "docs" / "guides").glob("*.md"))]
if not (ROOT / "README.md").exists():  # tests/ copied without the source tree (CI's wheel job): no docs to run
    pytest.skip("the README and the guides are not beside these tests", allow_module_level=True)
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
PRINT = re.compile(r"^print\(.*\)\s+# (.*)$")


@dataclass
class Block:
    path: Path
    line: int
    lang: str
    text: str

    @property
    def first(self) -> str:
        return self.text.split("\n", 1)[0]

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(*langs: str) -> list[Block]:
    found = []
    for path in DOCS:
        text = path.read_text()
        for m in FENCE.finditer(text):
            if m.group(1) in langs:
                found.append(Block(path, text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2)))
    return found


def test_the_docs_are_there_and_have_examples() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in DOCS}
    for name in ("docs/quickstart.md", "docs/guides/crawl.md", "docs/guides/scrapy.md", "docs/guides/redis.md",
                 "docs/guides/jupyter.md", "docs/guides/pipelines.md"):
        assert name in names
    per_file = {p: 0 for p in DOCS}
    for b in blocks("python", "console"):
        per_file[b.path] += 1
    assert all(per_file.values()), per_file


def test_shell_lines_that_run_bloomline_are_console_blocks() -> None:
    """A `bloomline` command shown in a ```bash or ```sh block would escape
    the tests below: those blocks are for installing, not for examples."""
    for b in blocks("bash", "sh", "shell"):
        for line in b.text.splitlines():
            assert not line.lstrip().startswith("bloomline "), (b.id, line)


def _server_for(request: pytest.FixtureRequest, first_line: str) -> Any:
    if "needs: redis" not in first_line:
        return None
    if "RedisBloom" in first_line:
        from conftest import RedisServer, module_args

        server = RedisServer(request.getfixturevalue("tmp_path_factory").mktemp("redis"), *module_args("bf"))
        request.addfinalizer(server.stop)
        return server
    if "bloomline module" in first_line:
        return request.getfixturevalue("module_server")
    return request.getfixturevalue("redis_server")


def _pointed(b: Block, server: Any) -> str:
    if server is None:
        return b.text
    assert "localhost:6379" in b.text, f"{b.id}: a block that needs Redis names redis://localhost:6379"
    return b.text.replace("localhost:6379", f"127.0.0.1:{server.port}")


PYTHON = [b for b in blocks("python") if not b.first.startswith("# settings.py")]


@pytest.mark.parametrize("block", PYTHON, ids=[b.id for b in PYTHON])
def test_python_example_runs(block: Block, request: pytest.FixtureRequest, tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    if "needs: duckdb" in block.first:
        try:
            import duckdb  # noqa: F401 - a test extra; readers install it themselves
        except ImportError:
            if os.environ.get("CI"):
                pytest.fail("duckdb is not installed (it is a test extra)")
            pytest.skip("duckdb is not installed (pip install duckdb)")
    if "needs: redis" in block.first:
        pytest.importorskip("redis")
    code = _pointed(block, _server_for(request, block.first))
    monkeypatch.chdir(tmp_path)  # files an example writes land here
    if 'if __name__ == "__main__":' in code:
        # Worker processes import the script afresh (spawn): run it as one.
        script = tmp_path / "example.py"
        script.write_text(code)
        r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        return
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), warnings.catch_warnings():
            warnings.simplefilter("error")
            exec(compile(code, block.id, "exec"), {"__name__": "__docs__"})
    finally:
        if "matplotlib" in sys.modules:
            import matplotlib.pyplot as plt

            plt.close("all")
    said = [m.group(1) for m in map(PRINT.match, code.splitlines()) if m]
    if said:
        printed = out.getvalue().splitlines()
        assert len(printed) == len(said), (printed, said)
        for p, s in zip(printed, said):
            assert s.startswith(p), f"{block.id}: printed {p!r}, the comment says {s!r}"


def _matches(expected: str, got: str) -> bool:
    pattern = ".*".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, got) is not None


CONSOLE = blocks("console")


@pytest.mark.parametrize("block", CONSOLE, ids=[b.id for b in CONSOLE])
def test_console_example_runs(block: Block, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Each command runs in bash (the venv's `bloomline` on PATH) and prints
    what the block shows after it; commands share a directory, in order."""
    if "needs: redis" in block.first:
        pytest.importorskip("redis")
    text = _pointed(block, _server_for(request, block.first))
    steps: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif line.startswith("#") and not steps:
            continue  # the marker line
        else:
            assert steps, f"{block.id}: output before any command"
            steps[-1][1].append(line)
    assert steps, block.id
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for command, expected in steps:
        r = subprocess.run(["bash", "-o", "pipefail", "-c", command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=300, cwd=tmp_path, env=env)
        assert r.returncode == 0, (block.id, command, r.stdout)
        got = r.stdout.splitlines()
        assert len(got) == len(expected), (block.id, command, got, expected)
        for e, g in zip(expected, got):
            assert _matches(e, g), f"{block.id}: `{command}` printed {g!r}, the block shows {e!r}"


SETTINGS = [b for b in blocks("python") if b.first.startswith("# settings.py")]


@pytest.mark.slow
@pytest.mark.parametrize("block", SETTINGS, ids=[b.id for b in SETTINGS])
def test_scrapy_settings_example_crawls_a_site(block: Block, request: pytest.FixtureRequest, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The block is the settings module of a Scrapy project; a site of 300
    pages is crawled with it, every page once."""
    pytest.importorskip("scrapy")
    if "needs: redis" in block.first:
        pytest.importorskip("redis")
    from scrapy.settings import Settings
    from scrapy_site import Site, crawl, twelve_links

    text = _pointed(block, _server_for(request, block.first))
    # A project: scrapy.cfg naming the settings module, which Scrapy finds from the crawl's directory.
    (tmp_path / "docs_settings.py").write_text(text)
    (tmp_path / "scrapy.cfg").write_text("[settings]\ndefault = docs_settings\n")
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    names: dict[str, Any] = {}
    exec(compile(text, block.id, "exec"), names)
    settings = Settings({k: v for k, v in names.items() if k.isupper()})
    dupefilter = settings.get("DUPEFILTER_CLASS")
    assert dupefilter and dupefilter.startswith("bloomline.scrapy."), block.id
    extra = [f"JOBDIR={tmp_path / 'job'}"] if "JOBDIR" not in names and "Journal" in text else []
    site = Site(pages=300, links_of=twelve_links(300))
    try:
        r = crawl(tmp_path, site, *extra, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        pages = site.pages()
        assert len(pages) == 300 and max(pages.values()) == 1, (len(pages), max(pages.values()))
        assert dupefilter.rsplit(".", 1)[1] in r.stderr  # the crawl used it (it logs under its name)
        assert "Traceback" not in r.stderr
    finally:
        site.stop()
