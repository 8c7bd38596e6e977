"""What a new user meets first: honest help(), Python's own error for a
misspelled keyword, capacities written 1e6, bool() of an empty filter, set
names (union, intersection, issubset), and install hints naming the extra
when an optional dependency is missing."""

from __future__ import annotations

import inspect
import math
import os
import pickle
import pydoc
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest

import bloomline
from bloomline import BloomFilter, CountingBloomFilter, ScalableBloomFilter, WindowedBloomFilter

CORE = (BloomFilter, CountingBloomFilter)


def _instances() -> list[tuple[type, Any]]:
    return [(BloomFilter, BloomFilter(1000)), (CountingBloomFilter, CountingBloomFilter(1000)),
            (ScalableBloomFilter, ScalableBloomFilter(1000)),
            (WindowedBloomFilter, WindowedBloomFilter(1000, 0.01, window=60)), (bloomline.DedupQueue, bloomline.DedupQueue())]


def _public_methods(cls: type) -> list[str]:
    names = []
    for name in sorted(dir(cls)):
        if name.startswith("_") or isinstance(inspect.getattr_static(cls, name), property):
            continue
        if callable(getattr(cls, name)):
            names.append(name)
    return names


# ---- help() and keywords ----------------------------------------------------------------


@pytest.mark.parametrize("cls", CORE)
def test_help_shows_real_types_not_object(cls: type) -> None:
    text = pydoc.render_doc(cls)
    assert "capacity: int, error_rate: float = 0.01" in text
    assert "init(self: object, *args, **kwargs)" not in text  # the wrapper's own signature is not shown
    for name in _public_methods(cls):
        first = (getattr(cls, name).__doc__ or "").splitlines()[0]
        assert ": object" not in first, f"{cls.__name__}.{name}: {first}"
        assert "Overloaded function" not in (getattr(cls, name).__doc__ or "")
    doc = cls.add_many.__doc__ or ""
    assert "keys: Keys" in doc and "threads: int = 1" in doc and "nulls: typing.Literal['raise', 'skip']" in doc


@pytest.mark.parametrize("cls", CORE)
def test_a_misspelled_constructor_keyword_is_named(cls: type) -> None:
    with pytest.raises(TypeError) as e:
        cls(1000, eror_rate=0.01)
    message = str(e.value)
    assert f"{cls.__name__}() got an unexpected keyword argument 'eror_rate'" in message
    assert "did you mean 'error_rate'?" in message and "capacity, error_rate, *, " in message
    assert "incompatible" not in message
    with pytest.raises(TypeError, match=r"takes 2 positional arguments but 3 were given"):
        cls(1000, 0.01, "blocked")
    with pytest.raises(TypeError, match=r"missing required argument 'capacity'"):
        cls(error_rate=0.01)


@pytest.mark.parametrize(("cls", "obj"), _instances(), ids=lambda v: getattr(v, "__name__", ""))
def test_every_public_method_names_an_unknown_keyword(cls: type, obj: Any) -> None:
    for name in _public_methods(cls):
        static = isinstance(inspect.getattr_static(cls, name), (staticmethod, classmethod))
        with pytest.raises(TypeError) as e:
            getattr(cls if static else obj, name)(bogus_kw=1)
        message = str(e.value)
        if name == "add" and cls in CORE:  # a METH_O fast path: Python's own message for it
            assert "takes no keyword arguments" in message
        else:
            assert "unexpected keyword argument 'bogus_kw'" in message, f"{cls.__name__}.{name}: {message}"
        assert "incompatible function arguments" not in message


def test_a_wrong_type_still_says_which_method() -> None:
    with pytest.raises(TypeError, match=r"BloomFilter.union\(\) got arguments of the wrong type \(list\)"):
        BloomFilter(1000).union([1, 2])
    assert (BloomFilter(1000) == None) is False  # noqa: E711 - operators still answer NotImplemented
    with pytest.raises(TypeError, match="unsupported operand"):
        BloomFilter(1000) | 5  # type: ignore[operator]


# ---- capacity written as a float ----------------------------------------------------------


def _makers() -> list[Any]:
    return [
        lambda c: BloomFilter(c, 0.01).capacity,
        lambda c: CountingBloomFilter(c, 0.01).capacity,
        lambda c: ScalableBloomFilter(c, 0.01).initial_capacity,
        lambda c: WindowedBloomFilter(c, 0.01, window=60).capacity,
        lambda c: BloomFilter.from_buffer(bytes(64), 512, 3, capacity=c, error_rate=0.01).capacity,
        lambda c: bloomline.optimal_params(c, 0.01) and int(c),
    ]


@pytest.mark.parametrize("make", _makers())
def test_an_integral_float_is_a_capacity(make: Any) -> None:
    got = make(1e4)
    assert got == 10_000 and type(got) is int
    assert make(2.5e4) == 25_000


@pytest.mark.parametrize("make", _makers())
@pytest.mark.parametrize("bad", [1.5, math.nan, math.inf])
def test_a_fractional_or_non_finite_capacity_is_refused_by_name(make: Any, bad: float) -> None:
    with pytest.raises(ValueError, match=r"capacity must be a whole number .* got " + repr(bad)):
        make(bad)


@pytest.mark.parametrize("make", _makers())
def test_a_bool_capacity_is_refused(make: Any) -> None:
    with pytest.raises(TypeError, match=r"capacity must be an int, got bool"):
        make(True)


# ---- bool() -------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [lambda: BloomFilter(1000), lambda: CountingBloomFilter(1000),
                                  lambda: ScalableBloomFilter(1000), lambda: WindowedBloomFilter(1000, 0.01, window=60)])
def test_bool_is_false_exactly_while_empty(make: Any) -> None:
    f = make()
    assert not f
    f.add("key")
    assert f
    f.clear()
    assert not f
    assert "empty" in (type(f).__bool__.__doc__ or "") or "no key was added" in (type(f).__bool__.__doc__ or "")


def test_a_counting_filter_whose_keys_were_all_removed_is_false() -> None:
    f = CountingBloomFilter(1000)
    f.add("a")
    f.remove("a")
    assert not f


# ---- set names -------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", CORE)
def test_union_and_intersection_are_the_operators(cls: Any) -> None:
    a, b = cls(1000), cls(1000)
    a.add_many(["x", "y"])
    b.add_many(["y", "z"])
    assert a.union(b) == a | b and a.intersection(b) == a & b
    assert a.union(b) is not a and "x" in a.union(b) and "z" in a.union(b)
    other = cls(2000)
    for name in ("union", "intersection", "issubset"):
        with pytest.raises(ValueError, match=r"differ in num_(bits|counters)"):
            getattr(a, name)(other)


@pytest.mark.parametrize("cls", CORE)
def test_issubset(cls: Any) -> None:
    small, big = cls(1000), cls(1000)
    small.add_many(["a", "b"])
    big.add_many(["a", "b", "c"])
    assert small.issubset(big) and not big.issubset(small) and small.issubset(small)
    assert cls(1000).issubset(small)
    assert "not a true subset" in (cls.issubset.__doc__ or "").lower()


def test_counting_union_sums_and_intersection_takes_the_smaller() -> None:
    a, b = CountingBloomFilter(1000, counter_bits=8), CountingBloomFilter(1000, counter_bits=8)
    a.add("k")
    b.add("k")
    b.add("k")
    assert a.union(b).count("k") == 3 and a.intersection(b).count("k") == 1
    assert a.issubset(b) and not b.issubset(a)  # b counts "k" twice


def test_scalable_union_only() -> None:
    a, b = ScalableBloomFilter(100), ScalableBloomFilter(100)
    a.add_many(range(500))
    b.add_many(range(400, 900))
    u = a.union(b)
    assert u == a | b and u.contains_many(range(900)).all()
    with pytest.raises(ValueError, match="differ in initial_capacity"):
        a.union(ScalableBloomFilter(200))
    with pytest.raises(TypeError, match="union\\(\\) takes a ScalableBloomFilter, got BloomFilter"):
        a.union(BloomFilter(100))  # type: ignore[arg-type]
    # no stage-by-stage intersection or containment: a key's stage differs between chains
    assert not hasattr(a, "intersection") and not hasattr(a, "issubset")
    assert not hasattr(WindowedBloomFilter(10, 0.01, window=1), "union")


# ---- install hints ------------------------------------------------------------------------------

HIDE = textwrap.dedent("""
    import sys
    class _Hide:
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in {hidden!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
    sys.meta_path.insert(0, _Hide())
""")


def _without(modules: set[str], code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", HIDE.format(hidden=modules) + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("hidden", "code", "shown"), [
    ("redis", "import bloomline.redis", "bloomline.redis needs redis-py: pip install 'bloomline[redis]'"),
    ("scrapy", "import bloomline.scrapy", "bloomline.scrapy needs Scrapy: pip install 'bloomline[scrapy]'"),
    ("matplotlib", "from bloomline import analysis as a\n"
                   "a.plot_fp_vs_fill(a.fp_experiment(capacities=[100], fills=[1], probes=100, trials=1))",
     "plots need matplotlib: pip install 'bloomline[plot]'"),
    ("redis", "from bloomline.scrapy._settings import _redis_client\nfrom scrapy.settings import Settings\n"
              "_redis_client(Settings())", "RedisBloomDupeFilter needs redis-py: pip install 'bloomline[redis]'"),
])
def test_a_missing_optional_dependency_names_its_extra(hidden: str, code: str, shown: str) -> None:
    r = _without({hidden}, code)
    assert r.returncode == 1 and shown in r.stderr, r.stderr[-2000:]
    assert "REDIS_PARAMS" not in r.stderr


def test_the_cli_names_the_extra_without_redis() -> None:
    r = _without({"redis"}, """
        sys.argv = ["bloomline", "dedup", "--redis", "redis://127.0.0.1:1/0", "--key", "k"]
        from bloomline.cli import main
        sys.exit(main())
    """)
    assert r.returncode == 1
    assert r.stderr == "bloomline: error: bloomline.redis needs redis-py: pip install 'bloomline[redis]'\n"


# ---- Redis that is not there ------------------------------------------------------------------


def test_a_refused_first_connection_fails_fast_naming_the_url() -> None:
    from conftest import free_port

    from bloomline.redis import RedisBloomFilter

    url = f"redis://127.0.0.1:{free_port()}/0"
    start = time.monotonic()
    with pytest.raises(Exception, match=r"cannot connect to Redis at " + url) as e:
        RedisBloomFilter(url, "k")  # attach: reads the meta through the retrying sender
    assert time.monotonic() - start < 1.5
    import redis
    assert isinstance(e.value, redis.ConnectionError)  # the class callers catch, unchanged


def test_redis_filters_take_a_float_capacity_and_are_false_while_empty(redis_server: Any) -> None:
    from bloomline.redis import RedisBloomFilter, RedisWindowedFilter

    f = RedisBloomFilter(redis_server.url, "first-use", 1e4, 0.01)
    assert f.capacity == 10_000 and type(f.capacity) is int
    assert RedisBloomFilter(redis_server.url, "first-use", 1e4).capacity == 10_000  # attaching compares it
    assert not f
    f.add("a")
    assert f
    f.clear()
    assert not f
    with pytest.raises(ValueError, match="capacity must be a whole number"):
        RedisBloomFilter(redis_server.url, "other", 1.5)
    w = RedisWindowedFilter(redis_server.url, "first-use-w", 1e3, 0.01, window=60)
    assert w.capacity == 1000 and not w
    w.add("a")
    assert w
    w.clear()
    assert not w


def test_converted_arguments_still_reach_the_method(tmp_path: Any) -> None:
    """The overload that names a bad keyword matches any call in pybind11's
    first, non-converting pass: a method must not need that pass's
    conversions (an int for a bool) to be reached."""
    import numpy as np

    path = tmp_path / "f.blf"
    f = BloomFilter(1000)
    f.add("a")
    f.save(path)
    for flag in (1, np.True_):
        g = BloomFilter.load(path, mmap=flag)
        assert "a" in g and g.read_only
        g.close()
    with BloomFilter.open(path, "r", verify=1) as h:
        assert "a" in h
    with pytest.raises(TypeError, match="mode must be 'r' or 'r\\+', got int"):
        BloomFilter.open(path, 1)  # type: ignore[arg-type]


# ---- the Python kinds load at their first use ------------------------------------------------

PYTHON_KINDS = ("bloomline.scalable", "bloomline.windowed", "bloomline.frontier")


def _fresh(code: str, timeout: float = 120) -> str:
    """What a fresh interpreter prints running code."""
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_import_bloomline_leaves_the_python_kinds_unloaded_and_the_cpp_kinds_whole() -> None:
    """import bloomline loads no module of the scalable chain, the windowed
    filter or the frontier; the C++ kinds still pickle (through restore) and
    display, from_bytes reads every kind, loading its module then."""
    out = _fresh(f"""
        import pickle, sys
        import bloomline
        loaded = lambda: sorted(m for m in {PYTHON_KINDS!r} if m in sys.modules)
        print(loaded())
        f = bloomline.BloomFilter(1000)
        f.add("a")
        g = pickle.loads(pickle.dumps(f))
        print(type(g).__name__, "a" in g, "b" in g, "<table>" in f._repr_html_(), loaded())
        c = bloomline.from_bytes(bloomline.CountingBloomFilter(100).to_bytes())
        print(type(c).__name__, loaded())
        s = bloomline.ScalableBloomFilter(100)
        s.add("x")
        print(loaded(), type(bloomline.from_bytes(s.to_bytes())).__name__)
    """)
    assert out.splitlines() == [
        "[]",
        "BloomFilter True False True []",
        "CountingBloomFilter []",
        "['bloomline.scalable'] ScalableBloomFilter",
    ]


@pytest.mark.parametrize("kind", ["ScalableBloomFilter", "WindowedBloomFilter"])
def test_a_pickle_or_file_of_a_python_kind_loads_its_module(tmp_path: Any, kind: str) -> None:
    """Neither a pickle nor bloomline.from_bytes needs the kind's module
    imported first: reading one loads it, and the filter is whole."""
    f = getattr(bloomline, kind)(1000, 0.01, **({"window": 3600} if kind == "WindowedBloomFilter" else {}))
    f.add_many([f"k{i}" for i in range(500)])
    (tmp_path / "f.pickle").write_bytes(pickle.dumps(f))
    (tmp_path / "f.blf").write_bytes(f.to_bytes())
    out = _fresh(f"""
        import pickle, sys
        g = pickle.loads(open({str(tmp_path / "f.pickle")!r}, "rb").read())
        print(type(g).__module__, type(g).__name__, all(f"k{{i}}" in g for i in range(500)))
        import bloomline
        h = bloomline.from_bytes(open({str(tmp_path / "f.blf")!r}, "rb").read())
        print(type(h) is type(g), h.to_bytes() == g.to_bytes())
    """)
    assert out.splitlines() == [f"{type(f).__module__} {kind} True", "True True"]


def test_every_exported_name_is_there_however_it_is_asked_for() -> None:
    """A star import, dir(), attribute lookups and `from bloomline import`
    give every name of __all__, and the kinds' modules as attributes; a
    name that is not there raises AttributeError naming it."""
    out = _fresh("""
        import bloomline
        names = {}
        exec("from bloomline import *", names)
        print(sorted(set(bloomline.__all__) - set(names)), sorted(set(bloomline.__all__) - set(dir(bloomline))))
        print(bloomline.scalable.ScalableBloomFilter is bloomline.ScalableBloomFilter,
              bloomline.windowed.__name__, "frontier" in dir(bloomline))
        from bloomline import DedupQueue
        print(DedupQueue is bloomline.frontier.DedupQueue)
        try:
            bloomline.ScalableBloomFiltre
        except AttributeError as e:
            print(e)
    """)
    assert out.splitlines() == ["[] []", "True bloomline.windowed True", "True",
                                "module 'bloomline' has no attribute 'ScalableBloomFiltre'"]


def test_threads_that_first_ask_for_a_kind_together_get_the_one_class() -> None:
    """Sixteen threads looking up the windowed and the scalable kind at once,
    as attributes and by `from bloomline import`, in a fresh process: one
    class each, no error."""
    out = _fresh("""
        import threading
        import bloomline
        start = threading.Barrier(16)
        seen, errors = [], []
        def ask(i):
            start.wait()
            try:
                if i % 3 == 0:
                    seen.append(("W", bloomline.WindowedBloomFilter))
                elif i % 3 == 1:
                    seen.append(("S", bloomline.ScalableBloomFilter))
                else:
                    from bloomline import WindowedBloomFilter
                    seen.append(("W", WindowedBloomFilter))
            except Exception as e:
                errors.append(repr(e))
        threads = [threading.Thread(target=ask, args=(i,)) for i in range(16)]
        for t in threads: t.start()
        for t in threads: t.join()
        print(errors, len(seen), len({c for _, c in seen}), sorted({(k, c.__name__) for k, c in seen}))
    """)
    assert out.splitlines() == ["[] 16 2 [('S', 'ScalableBloomFilter'), ('W', 'WindowedBloomFilter')]"]


def test_from_bytes_type_hints_resolve_before_and_after_the_python_kinds_load() -> None:
    """typing.get_type_hints of bloomline.from_bytes (what runtime checkers
    and doc tools read) works before the Python kinds load, and names all
    four kinds once they have."""
    out = _fresh("""
        import typing
        import bloomline
        before = typing.get_type_hints(bloomline.from_bytes)["return"]
        print(sorted(getattr(a, "__name__", str(a)) for a in typing.get_args(before)))
        bloomline.ScalableBloomFilter, bloomline.WindowedBloomFilter
        after = typing.get_type_hints(bloomline.from_bytes)["return"]
        print(typing.get_args(after) == (bloomline.BloomFilter, bloomline.CountingBloomFilter,
                                         bloomline.ScalableBloomFilter, bloomline.WindowedBloomFilter))
    """)
    assert out.splitlines() == ["['Any', 'BloomFilter', 'CountingBloomFilter']", "True"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.parametrize("first_use", [
    "bloomline.WindowedBloomFilter, bloomline.ScalableBloomFilter",
    "bloomline._numpy.np.zeros(1)",  # NumPy, as the package's Python code imports it
])
def test_a_forked_child_loads_what_a_thread_of_its_parent_was_loading(tmp_path: Any, first_use: str) -> None:
    """A child forked after import bloomline, while a thread of the parent
    makes a first use that imports (the Python kinds, or NumPy), reads a
    pickle of each Python kind whole and makes an array, where it used to
    wait forever for an import lock held by the parent's thread (the fork
    now waits for the import); the parent, after its thread, does the same."""
    pickles = {}
    for kind, extra in (("ScalableBloomFilter", {}), ("WindowedBloomFilter", {"window": 3600})):
        f = getattr(bloomline, kind)(1000, 0.01, **extra)
        f.add_many([f"k{i}" for i in range(300)])
        (tmp_path / kind).write_bytes(pickle.dumps(f))
        pickles[kind] = str(tmp_path / kind)
    out = _fresh(f"""
        import os, pickle, sys, threading, time
        import bloomline
        def check():
            return all(all(f"k{{i}}" in pickle.loads(open(p, "rb").read()) for i in range(300))
                       for p in {sorted(pickles.values())!r}) and bool(bloomline.BloomFilter(100).add_many(["b"])[0])
        loader = threading.Thread(target=lambda: ({first_use}))
        loader.start()
        time.sleep(0.005)  # (into the import)
        pid = os.fork()
        if pid == 0:
            os._exit(0 if check() else 3)
        loader.join()
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), check())
    """, timeout=60)
    assert out.splitlines() == ["0 True"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_fork_never_deadlocks_with_a_thread_that_holds_another_lock_at_its_first_use() -> None:
    """logging.config.dictConfig holds logging's lock while it builds a
    filter that makes a first use of a Python kind; a fork meanwhile (whose
    before-fork hooks take logging's lock too) ends, and so does the thread:
    the fork's wait for first-use imports holds no lock."""
    out = _fresh("""
        import logging, logging.config, os, threading, time
        import bloomline

        class DedupFilter(logging.Filter):
            def __init__(self):
                super().__init__()
                time.sleep(0.3)  # (the fork starts meanwhile, and waits for logging's lock)
                self.seen = bloomline.ScalableBloomFilter(1000, 0.01)

        def configure():
            logging.config.dictConfig({"version": 1, "filters": {"dedup": {"()": DedupFilter}},
                                       "handlers": {"h": {"class": "logging.StreamHandler", "filters": ["dedup"]}},
                                       "root": {"handlers": ["h"], "level": "INFO"}})
        t = threading.Thread(target=configure)
        t.start()
        time.sleep(0.1)
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        t.join()
        print(os.waitstatus_to_exitcode(status), type(logging.getLogger().handlers[0].filters[0].seen).__name__)
    """, timeout=60)
    assert out.splitlines() == ["0 ScalableBloomFilter"]
