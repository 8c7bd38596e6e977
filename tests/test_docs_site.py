"""The documentation site (docs/): it builds strictly from the checkout,
its API reference holds every public name, and its pages render in a
headless Chromium.

The site is built once per session, strictly: warnings are errors and
every cross-reference must resolve (-W -n). This is CI's docs check (in its
README job), so under CI a missing docs tool fails, never skips. The public names
are found here by introspection of the live modules, independently of the
extension that writes the reference, so a name it leaves out fails.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import os
import re
import shutil
import struct
import subprocess
import sys
import textwrap
import zlib
from html import unescape
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow  # a whole Sphinx build, and a browser: left out of the fast subset

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
MODULES = ("bloomline", "bloomline.redis", "bloomline.scrapy", "bloomline.analysis")


def _needs(module: str) -> None:
    # CI installs the docs tools with '.[test]': there, their absence is a failure.
    if importlib.util.find_spec(module) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{module} is not installed: pip install '.[test]' (or '.[docs]') installs it")
        pytest.skip(f"{module} is not installed (pip install '.[docs]')")


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    _needs("sphinx")
    _needs("myst_parser")
    _needs("furo")
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-E", "-q", "-b", "html",
         "-d", str(out / "doctrees"), str(DOCS), str(out / "html")],
        capture_output=True, text=True, timeout=900, cwd=ROOT,
    )
    return out / "html", proc


@pytest.fixture(scope="session")
def built(site: tuple[Path, subprocess.CompletedProcess[str]]) -> Path:
    html, proc = site
    if proc.returncode != 0:
        pytest.fail(f"the docs build failed (exit {proc.returncode}):\n{proc.stderr[-6000:]}")
    return html


def test_site_builds_with_warnings_as_errors(site: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    html, proc = site
    assert proc.returncode == 0, proc.stderr[-6000:]
    assert "WARNING" not in proc.stderr and "ERROR" not in proc.stderr, proc.stderr[-6000:]
    for page in ("index.html", "quickstart.html", "reference/bloomline.html", "reference/cli.html",
                 "reference/redis-module.html"):
        assert (html / page).stat().st_size > 0, page


# ---- every public name is in the reference ----

def _public_names() -> list[str]:
    """Each public name of the public modules (their __all__, else no leading underscore) and each public
    member of their classes that bloomline defines (members inherited from Python or Scrapy are theirs)."""
    out = []
    for modname in MODULES:
        module = importlib.import_module(modname)
        names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
        for name in names:
            out.append(f"{modname}.{name}")
            obj = getattr(module, name)
            if not inspect.isclass(obj):
                continue
            for member in dir(obj):
                owner = next((b for b in obj.__mro__ if member in vars(b)), None)
                if not member.startswith("_") and owner is not None and owner.__module__.startswith("bloomline"):
                    out.append(f"{modname}.{name}.{member}")
    return out


def _inventory(html: Path) -> dict[str, str]:
    """objects.inv (Sphinx's inventory, format 2): the Python objects documented, by name."""
    data = (html / "objects.inv").read_bytes()
    header, _, body = data.partition(b"zlib.\n")
    assert header.startswith(b"# Sphinx inventory version 2"), header[:60]
    found = {}
    for line in zlib.decompress(body).decode().splitlines():
        m = re.match(r"(\S+)\s+(py:\w+)\s+-?\d+\s+(\S+)", line)
        if m:
            uri = m.group(3)
            found[m.group(1)] = uri[:-1] + m.group(1) if uri.endswith("$") else uri
    return found


def _description(html: Path, uri: str) -> str:
    """The text of the first paragraph of an entry's description (its one-line summary at least)."""
    page, _, anchor = uri.partition("#")
    text = (html / page).read_text(encoding="utf-8")
    start = text.find(f'id="{anchor}"')
    assert start >= 0, uri
    dd = text.find("<dd>", start)
    para = re.search(r"<p>(.*?)</p>", text[dd:dd + 20000], flags=re.S)
    return unescape(re.sub(r"<[^>]+>", "", para.group(1))).strip() if para else ""


def test_every_public_name_is_in_the_reference_with_a_description(built: Path) -> None:
    names = _public_names()
    assert len(names) > 200  # the modules imported, their classes' members with them
    inventory = _inventory(built)
    missing = [n for n in names if n not in inventory]
    assert not missing, f"public names missing from the built reference: {missing}"
    undescribed = [n for n in names if not _description(built, inventory[n])]
    assert not undescribed, f"public names with no description in the reference: {undescribed}"


def test_reference_shows_the_types_the_stubs_give(built: Path) -> None:
    text = _text((built / "reference/bloomline.html").read_text(encoding="utf-8"))
    # pybind11's own signature says "capacity: object"; the stub says int.
    assert "BloomFilter(capacity: int, error_rate: float = 0.01" in text
    assert "capacity: object" not in text
    assert "add_many(keys: Keys, *, threads: int = 1, nulls: Nulls = 'raise')" in text
    cli = _text((built / "reference/cli.html").read_text(encoding="utf-8"))
    from bloomline.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if a.choices and isinstance(a.choices, dict)).choices  # noqa: SLF001
    for name in commands:
        assert f"bloomline {name}" in cli, name
    assert "--error-rate" in cli


def _text(html: str) -> str:
    text = unescape(re.sub(r"<[^>]+>", "", html))
    return re.sub(r"\s+", " ", text).replace("¶", "")


# ---- the pages render in a headless Chromium ----

def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("CI"):
        pytest.fail("chromium is missing: .ci/run installs Debian's chromium package")
    pytest.skip("no chromium on PATH (Debian: apt-get install chromium)")


def _browse(tmp_path: Path, page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
    return subprocess.run(
        [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
         "--no-first-run",
         f"--user-data-dir={tmp_path / 'profile'}", *args, page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )


def _dom(tmp_path: Path, page: Path) -> str:
    proc = _browse(tmp_path, page, "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "<html" in proc.stdout, proc.stdout[:500]
    return proc.stdout


def _h1(dom: str) -> str:
    m = re.search(r"<h1[^>]*>(.*?)</h1>", dom, flags=re.S)
    assert m, "the page has no h1"
    return _text(m.group(1)).strip()


def test_home_page_renders(built: Path, tmp_path: Path) -> None:
    dom = _dom(tmp_path, built / "index.html")
    assert _h1(dom) == "bloomline"
    assert 'href="quickstart.html"' in dom
    assert 'href="reference/bloomline.html"' in dom
    shot = tmp_path / "home.png"
    proc = _browse(tmp_path, built / "index.html", f"--screenshot={shot}", "--window-size=1280,900")
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == (1280, 900)  # IHDR: width, height
    assert len(data) > 10_000  # a page, not a blank image
    # The reviewers' copy (docs/screenshot-home.png): BLOOMLINE_UPDATE_SCREENSHOT=1 takes it again.
    committed = DOCS / "screenshot-home.png"
    if os.environ.get("BLOOMLINE_UPDATE_SCREENSHOT"):
        shutil.copyfile(shot, committed)
    assert committed.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", committed.read_bytes()[16:24]) == (1280, 900)


def test_quickstart_page_renders(built: Path, tmp_path: Path) -> None:
    dom = _dom(tmp_path, built / "quickstart.html")
    heading = next(line for line in (DOCS / "quickstart.md").read_text().splitlines() if line.startswith("# "))
    assert _h1(dom) == heading[2:].replace("`", "").strip()
    assert "<pre" in dom  # its code blocks


def test_api_page_renders(built: Path, tmp_path: Path) -> None:
    dom = _dom(tmp_path, built / "reference/bloomline.html")
    for anchor in ("bloomline.BloomFilter", "bloomline.BloomFilter.add_many", "bloomline.ScalableBloomFilter",
                   "bloomline.optimal_params"):
        assert f'id="{anchor}"' in dom, anchor
    assert "capacity: int" in _text(dom)


# ---- the Redis module page's examples run as written ----

def test_redis_module_page_examples_give_the_replies_they_show(module_server: Any) -> None:
    """Each ``r.execute_command(...)  # reply`` line of docs/reference/redis-module.md, run in order against a
    redis-server with the module, gives the reply (or the error) its comment shows."""
    redis = pytest.importorskip("redis")
    text = (DOCS / "reference/redis-module.md").read_text()
    blocks = [textwrap.dedent(b) for b in re.findall(r"```python\n(.*?)```", text, flags=re.S)]
    assert len(blocks) >= 2
    checked = 0
    namespace: dict[str, Any] = {}
    for block in blocks:
        for line in block.splitlines():
            m = re.match(r"(r\.execute_command\(.*\))\s+#\s+(.*)$", line)
            if m is None:
                exec(line.replace("redis.Redis()", f"redis.Redis(port={module_server.port})"), namespace)
                continue
            call, shown = m.groups()
            if shown.startswith("error: "):
                with pytest.raises(redis.ResponseError) as caught:
                    eval(call, namespace)
                assert str(caught.value) == shown[len("error: "):], line
            else:
                assert eval(call, namespace) == ast.literal_eval(shown.split(":")[0]), line
            checked += 1
    assert checked >= 5
