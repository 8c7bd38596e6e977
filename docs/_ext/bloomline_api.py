"""The API reference, generated from the code each time the site is built.

The live modules say which names are public (their ``__all__``) and which
members each public class has; the type stubs (``_core.pyi`` for the
compiled core) and the Python sources say every signature and type as they
are written there, so the reference reads ``capacity: int`` where pybind11's
own docstrings say ``capacity: object``. Docstrings come from the live
objects (pybind11's signature lines cut off), else from the stub or source.
A public name with no docstring anywhere is a build warning, which the
strict build (``-W``) turns into an error.

Why not autodoc: it takes signatures and property types from the live
objects, which for the compiled core are pybind11's untyped ones, and
overriding them goes through autodoc internals that changed in Sphinx 9.
Why not a static reader of the stubs alone: the docstrings of the core live
in its C++ bindings, which only the live objects carry.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import make_refnode, nested_parse_with_titles

logger = logging.getLogger(__name__)

# The public modules; tests/test_docs_site.py checks each name of theirs is in the built reference.
MODULES = ("bloomline", "bloomline.redis", "bloomline.scrapy", "bloomline.analysis")
CORE = "bloomline._core"
# Special methods shown beside the public ones (when documented): the operators a user writes.
SPECIAL = ("__contains__", "__len__", "__iter__", "__or__", "__and__", "__sub__", "__le__", "__eq__")
# Names in signatures that belong to other projects (no inventory fetched: the build needs no network).
EXTERNAL = re.compile(
    r"^(np|npt|numpy|pd|pandas|pl|polars|pa|pyarrow|redis|scrapy|twisted|matplotlib|plt|os|io|collections|"
    r"typing_extensions|types|argparse|logging|datetime|pathlib|concurrent|threading|collections\.abc)\."
    r"|^(Buffer|Self|Figure|Axes|Crawler|Spider|Request|Response|Settings|Redis|RedisCluster|Logger|"
    r"StatsCollector|Deferred|Path|PathLike|TracebackType|Iterator|Iterable|Sequence|Mapping|Callable|"
    r"AsyncIterator|AsyncIterable|Generator|Hashable|ArrayLike|NDArray|DTypeLike)$"
)
# A pybind11 signature line at the top of a docstring: "add(key) -> bool".
_SIGNATURE_LINE = re.compile(r"^[A-Za-z_][\w.]*\(.*\)(\s*->\s*.+)?$")


def is_public_class_member(cls: type, name: str) -> bool:
    """Members the reference must show: defined by a bloomline class (not inherited from Python or Scrapy)."""
    for base in cls.__mro__:
        if name in vars(base):
            return (base.__module__ or "").split(".")[0] == "bloomline"
    return False


def public_names(modname: str) -> list[str]:
    """A module's public names: its __all__, else its names without a leading underscore."""
    module = importlib.import_module(modname)
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
    return list(names)


def public_members(cls: type) -> list[str]:
    """A class's public members (no leading underscore), bloomline's own or inherited from bloomline."""
    return sorted(n for n in dir(cls) if not n.startswith("_") and is_public_class_member(cls, n))


def expected_objects() -> list[str]:
    """Every dotted name the built reference must hold, from the live modules."""
    out = []
    for modname in MODULES:
        module = importlib.import_module(modname)
        for name in public_names(modname):
            out.append(f"{modname}.{name}")
            obj = getattr(module, name)
            if inspect.isclass(obj):
                out.extend(f"{modname}.{name}.{m}" for m in public_members(obj))
    return out


# ---- the stubs and sources, read as written ----

class _Source:
    """One module's definitions by qualified name: their AST nodes and docstrings."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.nodes: dict[str, list[ast.AST]] = {}
        self.docs: dict[str, str] = {}
        self.order: dict[str, int] = {}
        self._walk(ast.parse(path.read_text(encoding="utf-8")).body, "")

    def _walk(self, body: list[ast.stmt], prefix: str) -> None:
        for i, node in enumerate(body):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qual = prefix + node.name
                self.nodes.setdefault(qual, []).append(node)
                self.order.setdefault(qual, node.lineno)
                doc = ast.get_docstring(node)
                if doc and qual not in self.docs:
                    self.docs[qual] = doc
                if isinstance(node, ast.ClassDef):
                    self._walk(node.body, qual + ".")
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        qual = prefix + target.id
                        self.nodes.setdefault(qual, []).append(node)
                        self.order.setdefault(qual, node.lineno)
                        # An attribute's docstring: the string right after it (PEP 257).
                        nxt = body[i + 1] if i + 1 < len(body) else None
                        if (isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                                and isinstance(nxt.value.value, str)):
                            self.docs[qual] = inspect.cleandoc(nxt.value.value)


_sources: dict[str, _Source | None] = {}


def source_of(modname: str) -> _Source | None:
    """The stub of a module where it has one (the compiled core's), else its source."""
    if modname not in _sources:
        module = sys.modules.get(modname) or importlib.import_module(modname)
        path = None
        file = getattr(module, "__file__", None)
        if file:
            stub = Path(file).parent / (modname.rsplit(".", 1)[-1] + ".pyi")
            if not stub.exists() and "." in modname:  # an editable install keeps the compiled module elsewhere
                package = importlib.import_module(modname.rsplit(".", 1)[0])
                stub = Path(package.__file__ or "").parent / stub.name
            path = stub if stub.exists() else (Path(file) if file.endswith(".py") else None)
        _sources[modname] = _Source(path) if path else None
    return _sources[modname]


def definition(obj: Any) -> tuple[_Source | None, str]:
    """Where a class or function is written: its module's source (or stub) and its qualified name.

    pybind11 names the core's classes after the package (``bloomline``) and
    its functions after an internal record, so the core's stub is the
    fallback, looked up by plain name."""
    modname = getattr(obj, "__module__", None) or ""
    qual = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", "")
    if not modname.startswith("bloomline"):
        return None, qual
    for candidate, name in ((modname, qual), (CORE, qual), (CORE, getattr(obj, "__name__", qual))):
        src = source_of(candidate)
        if src is not None and name in src.nodes:
            return src, name
    return source_of(modname), qual


def owner_of(cls: type, name: str) -> type:
    for base in cls.__mro__:
        if name in vars(base):
            return base
    return cls


def _format_args(node: ast.FunctionDef | ast.AsyncFunctionDef, drop_first: bool) -> str:
    args = ast.arguments(posonlyargs=list(node.args.posonlyargs), args=list(node.args.args),
                         vararg=node.args.vararg, kwonlyargs=node.args.kwonlyargs, kw_defaults=node.args.kw_defaults,
                         kwarg=node.args.kwarg, defaults=node.args.defaults)
    if drop_first:
        if args.posonlyargs:
            args.posonlyargs.pop(0)
        elif args.args:
            args.args.pop(0)
    text = ast.unparse(args)
    if text.strip() == "/":
        text = ""
    text = re.sub(r"^/, ", "", text)
    ret = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
    return f"({text}){ret}"


def _decorators(node: ast.AST) -> set[str]:
    return {ast.unparse(d).rsplit(".", 1)[-1] for d in getattr(node, "decorator_list", [])}


def signatures(src: _Source | None, qual: str, drop_first: bool) -> list[str]:
    """The signatures of a function as written (each overload's, if it has them)."""
    found = [n for n in (src.nodes.get(qual, []) if src else [])
             if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    overloads = [n for n in found if "overload" in _decorators(n)]
    impl = [n for n in found if "overload" not in _decorators(n)]
    if overloads and impl:
        overloads = [_with_defaults(n, impl[-1]) for n in overloads]
    chosen = overloads or found[-1:]
    return [_format_args(n, drop_first) for n in chosen]


def _defaults(node: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr]:
    a = node.args
    positional = a.posonlyargs + a.args
    out = {arg.arg: d for arg, d in zip(positional[len(positional) - len(a.defaults):], a.defaults)}
    out.update({arg.arg: d for arg, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
    return out


def _with_defaults(overload: Any, impl: Any) -> Any:
    """An overload whose defaults are ``...`` (as overloads write them) given the implementation's."""
    real = _defaults(impl)
    node = ast.parse(ast.unparse(overload)).body[0]  # a copy
    a = node.args
    positional = a.posonlyargs + a.args
    first = len(positional) - len(a.defaults)
    a.defaults = [real.get(positional[first + i].arg, d) if _is_ellipsis(d) else d for i, d in enumerate(a.defaults)]
    a.kw_defaults = [real.get(arg.arg, d) if d is not None and _is_ellipsis(d) else d
                     for arg, d in zip(a.kwonlyargs, a.kw_defaults)]
    return node


def _is_ellipsis(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is Ellipsis


def class_signature(cls: type) -> str:
    init_owner = owner_of(cls, "__init__")
    src, qual = definition(init_owner)
    sigs = signatures(src, f"{qual}.__init__", drop_first=True) if src else []
    if sigs:
        return sigs[0].split(" -> ")[0]
    # A NamedTuple or dataclass: its fields, as written.
    src, qual = definition(cls)
    fields = getattr(cls, "_fields", None) or list(getattr(cls, "__dataclass_fields__", {}))
    if src and fields:
        parts = []
        for field in fields:
            node = next((n for n in src.nodes.get(f"{qual}.{field}", []) if isinstance(n, ast.AnnAssign)), None)
            parts.append(f"{field}: {ast.unparse(node.annotation)}" if node else field)
        return f"({', '.join(parts)})"
    return ""


def _annotation(src: _Source | None, qual: str) -> str | None:
    for n in src.nodes.get(qual, []) if src else []:
        if isinstance(n, ast.AnnAssign):
            return ast.unparse(n.annotation)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.returns is not None:
            return ast.unparse(n.returns)
    return None


def runtime_doc(raw: Any) -> str:
    """A live object's own docstring, without pybind11's signature lines (never a type's inherited one)."""
    if isinstance(raw, (staticmethod, classmethod)):
        raw = raw.__func__
    if inspect.isclass(raw):
        doc = vars(raw).get("__doc__")
    elif isinstance(raw, property) or callable(raw):
        doc = getattr(raw, "__doc__", None)
        if isinstance(raw, property) and not doc and raw.fget is not None:
            doc = raw.fget.__doc__
    else:
        doc = None  # a value: its type's docstring is not its own
    if not doc:
        return ""
    lines = inspect.cleandoc(doc).splitlines()
    while lines and (_SIGNATURE_LINE.match(lines[0].strip()) or not lines[0].strip()):
        lines.pop(0)
    if lines and lines[0].strip() == "Overloaded function.":
        return ""
    return "\n".join(lines).strip()


def rst_safe(text: str) -> str:
    """A docstring as reST: the core's are plain text, where ``|A or B|`` and ``2**32`` would be markup.

    ``*``, ``|`` and backslashes (``lines end in \\n``) are escaped outside
    ````literals```` and doctest lines; no docstring here means them as markup."""
    out = []
    for line in text.splitlines():
        if line.lstrip().startswith((">>>", "...")):
            out.append(line)
            continue
        parts = re.split(r"(``.+?``)", line)
        out.append("".join(p if p.startswith("``") else re.sub(r"([\\*|])", r"\\\1", p) for p in parts))
    return "\n".join(out)


class _Writer:
    """Writes the reST of one module's reference."""

    def __init__(self, directive: SphinxDirective) -> None:
        self.lines: list[str] = []
        self.directive = directive

    def doc(self, raw: Any, src: _Source | None, qual: str, name: str, indent: str, required: bool = True) -> bool:
        text = runtime_doc(raw) or (src.docs.get(qual, "") if src else "")
        if not text:
            if required:
                logger.warning("bloomline reference: %s has no docstring (in the code or its stub)", name,
                               location=self.directive.get_location())
            return False
        self.lines.append("")
        self.lines.extend(indent + line if line else "" for line in rst_safe(text).splitlines())
        self.lines.append("")
        return True

    def emit(self, directive: str, signature: str, options: dict[str, str], indent: str) -> None:
        sig_lines = signature.splitlines() or [""]
        self.lines.append(f"{indent}.. py:{directive}:: {sig_lines[0]}")
        self.lines.extend(f"{indent}   {s}" for s in sig_lines[1:])
        self.lines.extend(f"{indent}   :{k}:{(' ' + v) if v else ''}" for k, v in options.items())

    def function(self, name: str, obj: Any, indent: str, directive: str = "function",
                 where: tuple[_Source | None, str] | None = None, raw: Any = None) -> None:
        raw = obj if raw is None else raw
        func = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
        # A method is looked up under its class (pybind11's methods carry no usable __qualname__).
        src, qual = where if where is not None else definition(func)
        drop = directive == "method" and not isinstance(raw, staticmethod)
        sigs = signatures(src, qual, drop_first=drop)
        if not sigs:
            # A Python function written elsewhere may fall back to its own signature; the compiled core's
            # (pybind11's "capacity: object") never: its stub must have the function.
            try:
                if not inspect.isfunction(inspect.unwrap(func)):
                    raise TypeError("compiled")
                sigs = [str(inspect.signature(obj))]
            except (TypeError, ValueError):
                logger.warning("bloomline reference: %s has no signature in its stub or source", name,
                               location=self.directive.get_location())
                sigs = ["(...)"]
        options = {}
        if isinstance(raw, staticmethod):
            options["staticmethod"] = ""
        elif isinstance(raw, classmethod):
            options["classmethod"] = ""
        if inspect.iscoroutinefunction(func):
            options["async"] = ""
        self.emit(directive, "\n".join(name.rsplit(".", 1)[-1] + s for s in sigs), options, indent)
        self.doc(raw, src, qual, name, indent + "   ", required=not name.rsplit(".", 1)[-1].startswith("__"))

    def data(self, name: str, value: Any, src: _Source | None, qual: str, indent: str, directive: str,
             show_str: bool) -> None:
        options = {}
        ann = _annotation(src, qual)
        if ann:
            options["type"] = ann
        if isinstance(value, (bool, int, float)) or (show_str and isinstance(value, str)):
            options["value"] = repr(value)
        self.emit(directive, name.rsplit(".", 1)[-1], options, indent)
        self.doc(None, src, qual, name, indent + "   ")

    def klass(self, fullname: str, cls: type, members: bool = True) -> None:
        directive = "exception" if issubclass(cls, BaseException) else "class"
        src, qual = definition(cls)
        self.emit(directive, fullname.rsplit(".", 1)[-1] + class_signature(cls), {}, "")
        self.doc(cls, src, qual, fullname, "   ")
        names = [n for n in dir(cls) if members and is_public_class_member(cls, n)
                 and (not n.startswith("_") or n in SPECIAL)]
        for member in sorted(names, key=lambda n: self._order(cls, n)):
            owner = owner_of(cls, member)
            osrc, oqual = definition(owner)
            raw = vars(owner)[member]
            mname = f"{fullname}.{member}"
            if isinstance(raw, property):
                options = {}
                ann = _annotation(osrc, f"{oqual}.{member}")
                if ann:
                    options["type"] = ann
                self.emit("property", member, options, "   ")
                self.doc(raw, osrc, f"{oqual}.{member}", mname, "      ")
            elif callable(raw) or isinstance(raw, (staticmethod, classmethod)):
                if member.startswith("__") and not runtime_doc(raw) and not (osrc and osrc.docs.get(f"{oqual}.{member}")):
                    continue  # an operator shown only when documented
                self.function(mname, getattr(cls, member), "   ", "method", where=(osrc, f"{oqual}.{member}"), raw=raw)
            else:
                self.data(mname, raw, osrc, f"{oqual}.{member}", "   ", "attribute", show_str=True)
            self.lines.append("")

    @staticmethod
    def _order(cls: type, member: str) -> tuple[int, int, str]:
        owner = owner_of(cls, member)
        src, qual = definition(owner)
        depth = cls.__mro__.index(owner)
        line = src.order.get(f"{qual}.{member}", 10**9) if src else 10**9
        return (depth, line, member)


class ModuleReference(SphinxDirective):
    """``.. bloomline-module:: bloomline.redis``: a module's public names, each with its members."""

    required_arguments = 1
    has_content = False
    # :names: the names to show (default: the public ones); :no-members: classes without their members.
    option_spec = {"names": directives.unchanged, "no-members": directives.flag}

    def run(self) -> list[nodes.Node]:
        modname = self.arguments[0]
        module = importlib.import_module(modname)
        writer = _Writer(self)
        # A module shown in parts (the supporting types) has one entry; the later parts only select it.
        first = modname not in self.env.get_domain("py").modules
        writer.lines += [f".. py:{'module' if first else 'currentmodule'}:: {modname}", ""]
        names = self.options["names"].split() if "names" in self.options else public_names(modname)
        for name in names:
            obj = getattr(module, name)
            fullname = f"{modname}.{name}"
            if inspect.isclass(obj):
                writer.klass(fullname, obj, members="no-members" not in self.options)
            elif inspect.isroutine(obj):  # (a typing alias such as Callable[...] is callable too: a value here)
                writer.function(fullname, obj, "")
            else:
                # A value: documented where it is written (the core's in its stub).
                home = CORE if modname == "bloomline" and name in vars(importlib.import_module(CORE)) else None
                src = source_of(home) if home else self._home_source(module, name)
                writer.data(fullname, obj, src, name, "", "data", show_str=False)
            writer.lines.append("")
        return self._parse(writer.lines)

    @staticmethod
    def _home_source(module: Any, name: str) -> _Source | None:
        # The module that assigns the name: the package's own, or one of its submodules.
        src = source_of(module.__name__)
        if src and name in src.nodes and any(isinstance(n, (ast.Assign, ast.AnnAssign)) for n in src.nodes[name]):
            return src
        for sub in sorted(sys.modules):
            if sub.startswith(module.__name__ + ".") or (sub.startswith("bloomline.") and sub != module.__name__):
                s = source_of(sub) if sub.startswith("bloomline") else None
                if s and any(isinstance(n, (ast.Assign, ast.AnnAssign)) for n in s.nodes.get(name, [])):
                    return s
        return None

    def _parse(self, lines: list[str]) -> list[nodes.Node]:
        container = nodes.container()
        nested_parse_with_titles(self.state, StringList(lines, source=f"<{self.name} {self.arguments[0]}>"),
                                 container)
        return container.children


class TypeAliases(SphinxDirective):
    """``.. bloomline-types::``: the type aliases and protocols the stub of the core defines for signatures."""

    def run(self) -> list[nodes.Node]:
        src = source_of(CORE)
        assert src is not None
        writer = _Writer(self)
        writer.lines += [f".. py:module:: {CORE}", ""]
        tree = ast.parse(src.path.read_text())
        for node in tree.body:
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                    and ast.unparse(node.annotation) == "TypeAlias" and node.value is not None):
                name = node.target.id
                writer.emit("data", name, {"value": ast.unparse(node.value)}, "")
                writer.doc(None, src, name, f"{CORE}.{name}", "   ")
            elif isinstance(node, ast.ClassDef) and any(ast.unparse(b) == "Protocol" for b in node.bases):
                writer.emit("class", node.name, {}, "")
                writer.doc(None, src, node.name, f"{CORE}.{node.name}", "   ")
                for item in node.body:
                    if isinstance(item, ast.FunctionDef):
                        writer.emit("method", item.name + _format_args(item, True), {}, "   ")
                        writer.lines.append("")
            writer.lines.append("")
        container = nodes.container()
        nested_parse_with_titles(self.state, StringList(writer.lines, source="<bloomline-types>"), container)
        return container.children


def resolve_missing(app: Any, env: Any, node: Any, contnode: nodes.Node) -> nodes.Node | None:
    """Names in signatures as the stubs write them (Key, Layout, BloomFilter...) point to their entries;
    other projects' names stay plain text; anything else is left for nitpicky mode to report."""
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    objects = env.get_domain("py").objects
    last = target.rsplit(".", 1)[-1]
    candidates = [f"{m}.{t}" for m in (*MODULES, CORE) for t in (target, last)]
    # else a name documented once anywhere (the supporting types: bloomline.windowed.Clock...)
    candidates += sorted(n for n in objects if n.startswith("bloomline.") and n.rsplit(".", 1)[-1] == last
                         and objects[n].objtype in ("class", "data", "exception"))[:1]
    for candidate in candidates:
        if candidate in objects:
            entry = objects[candidate]
            return make_refnode(app.builder, node["refdoc"], entry.docname, entry.node_id, contnode, candidate)
    if EXTERNAL.search(target):
        return contnode
    return None


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("bloomline-module", ModuleReference)
    app.add_directive("bloomline-types", TypeAliases)
    app.connect("missing-reference", resolve_missing)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
