"""The house rules, read from the source (docs/ARCHITECTURE.md): the C++ core's
files include only their floor and those below, and the blocked layout has one
home; bloomline.redis's modules import in one direction, never inside a
function, and no module but a backend's own and the registry knows a backend
by name."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REDIS = Path(__file__).resolve().parent.parent / "python" / "bloomline" / "redis"
# Lowest first: each module imports only those before it.
ORDER = ["_errors", "_names", "_wire", "_backend", "_durable", "_plain", "_module", "_bf", "_registry", "_meta",
         "_handle", "_filter", "_stages", "_window_travel", "_window_meta", "_windowed", "_travel", "__init__"]
KNOWS_BACKENDS = {"_bf", "_registry"}  # the bf backend itself, and the map of names to backends


def tree(name: str) -> ast.Module:
    return ast.parse((REDIS / f"{name}.py").read_text(), filename=f"{name}.py")


def runtime_imports(module: ast.Module) -> list[ast.ImportFrom]:
    """The package-relative imports a module makes when it runs (not those
    under `if TYPE_CHECKING:`, which only the type checker reads)."""
    out = []
    for node in module.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            continue
        out += [n for n in ast.walk(node) if isinstance(n, ast.ImportFrom) and n.level == 1]
    return out


def test_every_module_of_the_package_is_in_the_order() -> None:
    assert sorted(p.stem for p in REDIS.glob("*.py")) == sorted(ORDER)


@pytest.mark.parametrize("name", ORDER)
def test_modules_import_only_those_below_them(name: str) -> None:
    below = set(ORDER[: ORDER.index(name)])
    for node in runtime_imports(tree(name)):
        if node.module is not None:
            assert node.module in below, f"{name} imports .{node.module} at line {node.lineno}"
        else:  # from . import x
            assert all(a.name in below for a in node.names), f"{name} imports from . at line {node.lineno}"


@pytest.mark.parametrize("name", ORDER)
def test_no_import_inside_a_function(name: str) -> None:
    for func in ast.walk(tree(name)):
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inner = [n for n in ast.walk(func) if isinstance(n, (ast.Import, ast.ImportFrom))]
            assert not inner, f"{name}.{func.name} imports at line {inner[0].lineno}"


@pytest.mark.parametrize("name", sorted(set(ORDER) - KNOWS_BACKENDS))
def test_no_module_but_the_backends_compares_with_a_backend_name(name: str) -> None:
    """No `x == "bf"` (or "module", "plain") outside a backend's own module
    and the registry: what differs between backends is a method of theirs."""
    for node in ast.walk(tree(name)):
        if isinstance(node, ast.Compare):
            names = [c.value for c in [node.left, *node.comparators]
                     if isinstance(c, ast.Constant) and c.value in ("bf", "module", "plain")]
            assert not names, f"{name} compares with backend name {names[0]!r} at line {node.lineno}"


# ---- the C++ core: its floors, read from docs/ARCHITECTURE.md ---------------

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "cpp"


def core_floors() -> dict[str, int]:
    """Each core file's floor (1..5), from the "where" column of
    ARCHITECTURE.md's layer table: `cpp/include/bloomline/{a,b}.hpp` and
    `cpp/src/{a,b}.cpp` name the headers and sources of a layer."""
    floors: dict[str, int] = {}
    for line in (ROOT / "docs" / "ARCHITECTURE.md").read_text().splitlines():
        m = re.match(r"\| (\d) \|", line)
        if not m or int(m.group(1)) > 5:
            continue
        for d, names, ext in re.findall(r"`cpp/(include/bloomline|src)/\{?([\w,]+)\}?\.(hpp|cpp)`", line):
            for name in names.split(","):
                floors[f"{d}/{name}.{ext}"] = int(m.group(1))
    return floors


def core_files() -> list[str]:
    return sorted(str(p.relative_to(CORE)) for p in [*CORE.glob("include/bloomline/*.hpp"), *CORE.glob("src/*.cpp")])


def test_every_core_file_has_its_floor_in_the_architecture() -> None:
    floors = core_floors()
    assert [f for f in core_files() if f not in floors] == []
    assert [f for f in floors if not (CORE / f).exists()] == []


@pytest.mark.parametrize("name", core_files())
def test_core_files_include_only_their_floor_and_those_below(name: str) -> None:
    floors = core_floors()
    own = floors[name]
    for inc in re.findall(r'#include "bloomline/(\w+\.hpp)"', (CORE / name).read_text()):
        assert floors[f"include/bloomline/{inc}"] <= own, f"{name} (floor {own}) includes {inc}"


def test_one_home_for_each_layouts_index() -> None:
    """A key's positions are computed in its layout's class only: the
    blocked offsets (the top 9 bits of the remix powers) and block choice in
    BlockedLayout's files, the standard slots in StandardLayout's; the
    remix powers are defined once, in common.hpp. Every other file asks the
    layouts (or index.hpp's for_each_slot)."""
    homes = {"include/bloomline/layout_blocked.hpp", "src/layout_blocked.cpp", "include/bloomline/layout_standard.hpp"}
    for name in core_files() + [str(p.relative_to(CORE)) for p in CORE.glob("bindings/*")]:
        if name in homes:
            continue
        text = (CORE / name).read_text()
        for pattern in (">> 55", "mul_hi(h.h1", "mul_hi(h1", "kRemixPowers.p[", "kRemix)"):
            assert pattern not in text, f"{name} computes a layout's index itself ({pattern!r})"
    common = (CORE / "include/bloomline/common.hpp").read_text()
    assert "struct RemixPowers" in common and "kRemixPowers{}" in common


def test_one_batch_reader() -> None:
    """A batch of keys is walked in one place, keys_py.hpp's read_batch (and
    hash_next, update's generator chunks, by the same element rule): the
    NumPy arrays are prepared, the Arrow columns read, the list items and
    iterators taken only there; the visitors (hash, key bytes) do the rest."""
    bindings = CORE / "bindings"
    text = (bindings / "keys_py.hpp").read_text()
    reader = text[text.index("auto read_batch("):]
    reader = reader[: reader.index("\n}\n")]
    for call in ("prepare_array(", "read_arrow(", "read_objects("):
        assert call in reader
    # No other file of the bindings walks a batch itself.
    for p in sorted(bindings.glob("*")):
        if p.name in ("keys_py.hpp", "keys_py.cpp"):
            continue
        body = p.read_text()
        for call in ("PyIter_Next(", "PySequence_Fast_ITEMS(", "prepare_array(", "read_arrow(", "for_each_element("):
            assert call not in body, f"{p.name} walks a batch itself ({call})"
    # In keys_py.cpp, a batch's iterator is advanced only by hash_next (the
    # other PyIter_Next reads the elements of one tuple or frozenset key).
    cpp = (bindings / "keys_py.cpp").read_text()
    composite = cpp[cpp.index("std::string composite_key(PyObject* key, const char* what) {"):]
    composite = composite[: composite.index("\n}\n")]
    assert cpp.count("PyIter_Next(") - composite.count("PyIter_Next(") == 1 and "for_each_element(" not in cpp


def test_files_and_classes_a_reader_can_hold_in_their_head() -> None:
    """No module of the package over 600 lines, no class over 400."""
    package = ROOT / "python" / "bloomline"
    for path in sorted(package.rglob("*.py")):
        text = path.read_text()
        name = str(path.relative_to(package))
        assert text.count("\n") <= 600, f"{name} has {text.count(chr(10))} lines"
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                assert size <= 400, f"{name}: class {node.name} has {size} lines"
