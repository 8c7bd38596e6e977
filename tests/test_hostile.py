"""A hostile tester's suite, property-based (hypothesis), over every entry
point and every filter kind:

- keys added by any route are found by every route: never a false negative;
- any bytes given to any reader give a ValueError or a valid filter, never
  a crash, a hang or a huge allocation;
- every bad argument gives a clear error that names the parameter.

Seeded (derandomized) and bounded: the whole file runs in well under 3
minutes.
"""

from __future__ import annotations

import math
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bloomline
from bloomline import BloomFilter, CountingBloomFilter, ScalableBloomFilter, murmur3_128

pytestmark = pytest.mark.core  # run by CI's wheel and sanitizer (clang, flock) jobs (.ci/run)

SETTINGS = settings(max_examples=120, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

KINDS: dict[str, Callable[[], Any]] = {
    "bloom-blocked": lambda: BloomFilter(2000, 0.01, seed=3),
    "bloom-standard": lambda: BloomFilter(2000, 0.01, layout="standard", seed=3),
    "counting": lambda: CountingBloomFilter(2000, 0.01, counter_bits=8, seed=3),
    "scalable": lambda: ScalableBloomFilter(50, 0.01, seed=3),
}

# Keys that every route can carry: bytes without a newline, not ending in
# "\r" (a line route strips one), as bytes, str where they decode, ints.
line_safe = st.binary(max_size=30).filter(lambda b: b"\n" not in b and not b.endswith(b"\r"))
int_keys = st.integers(min_value=-(2**63), max_value=2**64 - 1)


def add_by(f: Any, route: str, keys: list[Any]) -> None:
    if route == "add":
        for k in keys:
            f.add(k)
    elif route == "add_many":
        f.add_many(keys)
    elif route == "update":
        f.update(iter(keys))
    elif route == "hash_many":
        f.add_many(bloomline.hash_many(keys, seed=3))
    elif route == "array":
        f.add_many(_array(keys))
    else:  # lines
        f.add_lines(b"\n".join(_as_bytes(keys)) + (b"\n" if keys else b""))


def found_by(f: Any, route: str, keys: list[Any]) -> list[bool]:
    if route == "in":
        return [k in f for k in keys]
    if route == "contains_many":
        return list(f.contains_many(keys))
    if route == "hash_many":
        return list(f.contains_many(bloomline.hash_many(keys, seed=3)))
    if route == "array":
        return list(f.contains_many(_array(keys)))
    return list(f.contains_lines(b"\n".join(_as_bytes(keys)) + (b"\n" if keys else b"")))


def _array(keys: list[Any]) -> np.ndarray:
    if keys and all(isinstance(k, int) for k in keys) and all(0 <= k < 2**64 for k in keys):
        return np.array(keys, dtype=np.uint64)
    if keys and all(isinstance(k, bytes) and not k.endswith(b"\0") for k in keys):
        return np.array(keys, dtype="S")
    arr = np.empty(len(keys), dtype=object)
    arr[:] = keys
    return arr


def _as_bytes(keys: list[Any]) -> list[bytes]:
    return [k.encode() if isinstance(k, str) else k for k in keys]


ADD_ROUTES = ["add", "add_many", "update", "hash_many", "array", "lines"]
FIND_ROUTES = ["in", "contains_many", "hash_many", "array", "lines"]


@pytest.mark.parametrize("kind", sorted(KINDS))
@SETTINGS
@given(data=st.data())
def test_added_by_any_route_found_by_every_route(kind: str, data: st.DataObject) -> None:
    add_route = data.draw(st.sampled_from(ADD_ROUTES))
    lines = add_route == "lines"
    if lines or data.draw(st.booleans()):
        keys: list[Any] = data.draw(st.lists(line_safe, max_size=60))
        if not lines and data.draw(st.booleans()):
            keys = [k.decode("utf-8", "replace").replace("\n", " ").rstrip("\r") for k in keys]
    else:
        keys = data.draw(st.lists(int_keys, max_size=60))
    f = KINDS[kind]()
    add_by(f, add_route, keys)
    for route in FIND_ROUTES:
        if route == "lines" and not all(isinstance(k, (bytes, str)) for k in keys):
            continue
        if route == "lines" and any("\n" in k or k.endswith("\r") for k in keys if isinstance(k, str)):
            continue
        assert all(found_by(f, route, keys)), (kind, add_route, route)
    again = bloomline.from_bytes(f.to_bytes())
    assert all(again.contains_many(keys))


# ---- any bytes to every reader --------------------------------------------------------


def _seeds() -> list[bytes]:
    out = []
    for make in KINDS.values():
        f = make()
        f.update(range(300))
        out.append(f.to_bytes())
    return out


SEEDS = _seeds()


def _resign(buf: bytearray) -> bytes:
    if len(buf) >= 136:
        buf[120:128] = struct.pack("<Q", murmur3_128(bytes(buf[:120])) & (2**64 - 1))
        buf[-8:] = struct.pack("<Q", murmur3_128(bytes(buf[128:-8])) & (2**64 - 1))
    return bytes(buf)


@st.composite
def hostile_bytes(draw: st.DrawFn) -> bytes:
    if draw(st.booleans()):
        return draw(st.binary(max_size=400))
    buf = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(buf) - 1))
        buf[i] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        cut = draw(st.integers(0, len(buf)))
        buf = buf[:cut]
    return _resign(buf) if draw(st.booleans()) else bytes(buf)


READERS: dict[str, Callable[[bytes, Path], Any]] = {
    "from_bytes": lambda b, p: bloomline.from_bytes(b),
    "BloomFilter.from_bytes": lambda b, p: BloomFilter.from_bytes(b),
    "CountingBloomFilter.from_bytes": lambda b, p: CountingBloomFilter.from_bytes(b),
    "ScalableBloomFilter.from_bytes": lambda b, p: ScalableBloomFilter.from_bytes(b),
    "read_header": lambda b, p: bloomline.read_header(b),
    "load": lambda b, p: BloomFilter.load(p),
    "load mmap verify": lambda b, p: BloomFilter.load(p, mmap=True, verify=True),
    "open r+ verify": lambda b, p: CountingBloomFilter.open(p, "r+", verify=True),
    "from_buffer": lambda b, p: BloomFilter.from_buffer(b[:64] if len(b) >= 64 else b, 512, 3),
}


@pytest.mark.parametrize("reader", sorted(READERS))
@SETTINGS
@given(data=hostile_bytes())
def test_any_bytes_to_any_reader_give_valueerror_or_a_valid_filter(reader: str, data: bytes,
                                                                   tmp_path: Path) -> None:
    path = tmp_path / "f.blf"
    path.write_bytes(data)
    try:
        got = READERS[reader](data, path)
    except ValueError:
        return
    if isinstance(got, dict):
        return
    # a filter that loaded is whole: its own bytes load again to an equal filter
    assert bloomline.from_bytes(got.to_bytes()) == got
    if hasattr(got, "close"):
        got.close()


# ---- every bad argument names the parameter -------------------------------------------

BAD_NUMBERS = [-1, 0, 1.5, "x", None, 2**70, math.nan, math.inf, True]


def _constructors() -> dict[str, Callable[..., Any]]:
    return {
        "BloomFilter": BloomFilter,
        "CountingBloomFilter": CountingBloomFilter,
        "ScalableBloomFilter": ScalableBloomFilter,
    }


@pytest.mark.parametrize("cls", sorted(_constructors()))
@pytest.mark.parametrize("param", ["capacity", "error_rate", "layout", "seed"])
@pytest.mark.parametrize("value", BAD_NUMBERS + ["blocky"], ids=repr)
def test_bad_constructor_arguments_name_the_parameter(cls: str, param: str, value: Any) -> None:
    make = _constructors()[cls]
    kwargs: dict[str, Any] = {"layout": "blocked", "seed": 0}
    args: list[Any] = [100, 0.01]
    name = param
    if param == "capacity":
        args[0] = value
        name = "initial_capacity" if cls == "ScalableBloomFilter" else "capacity"
    elif param == "error_rate":
        args[1] = value
    else:
        kwargs[param] = value
    if (param, value) == ("seed", 0):  # the one valid value in the list
        make(*args, **kwargs)
        return
    with pytest.raises((ValueError, TypeError, OverflowError)) as info:
        make(*args, **kwargs)
    assert name in str(info.value), (cls, param, value, str(info.value))


@pytest.mark.parametrize(("call", "name"), [
    (lambda: BloomFilter.from_params(0, 3), "num_bits"),
    (lambda: BloomFilter.from_params(1000, 3), "num_bits"),
    (lambda: BloomFilter.from_params(512, 65), "num_hashes"),
    (lambda: CountingBloomFilter.from_params(0, 3), "num_counters"),
    (lambda: CountingBloomFilter.from_params(1000, 3), "num_counters"),
    (lambda: CountingBloomFilter(100, counter_bits=3), "counter_bits"),
    (lambda: BloomFilter(100).add_many([1], threads=-1), "threads"),
    (lambda: BloomFilter(100).add_many([1], threads=1.5), "threads"),  # type: ignore[arg-type]
    (lambda: BloomFilter(100).add_many("abc"), "keys"),
    (lambda: BloomFilter(100).add_many([{1.5}]), "keys[0]"),
    (lambda: ScalableBloomFilter(100).add_many([None]), "keys[0]"),
    (lambda: BloomFilter(100).add(float("nan")), "key"),
    (lambda: BloomFilter(100).add_lines("text"), "data"),
    (lambda: bloomline.select_lines(b"a\nb\n", [True]), "mask"),
    (lambda: bloomline.false_positive_rate(-1, 512, 3), "n"),
    (lambda: bloomline.optimal_num_hashes(n=10, num_bits=1000), "num_bits"),
    (lambda: bloomline.optimal_params(0, 0.01), "capacity"),
    (lambda: bloomline._core.redis_batch([1], 4096, 3, shard_bits=1000, form="set"), "shard_bits"),
    (lambda: bloomline._core.redis_batch([1], 4096, 3, shard_bits=1000), "shard_bits"),
    (lambda: bloomline._core.redis_batch([1], 4096, 3, form="all"), "form"),
    (lambda: bloomline._core.redis_items([1], chunk=0), "chunk"),
    (lambda: bloomline.hash_many([1], seed=-1), "seed"),
    (lambda: BloomFilter.open("x.blf", "w"), "mode"),
    (lambda: ScalableBloomFilter(10, growth=3), "growth"),
    (lambda: ScalableBloomFilter(10, tightening=1.5), "tightening"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_bad_arguments_everywhere_name_the_parameter(call: Callable[[], Any], name: str) -> None:
    with pytest.raises((ValueError, TypeError, OverflowError)) as info:
        call()
    assert name in str(info.value)


def test_every_kind_behaves_alike_on_the_same_bad_input() -> None:
    """The same bad batch gives the same error type and message from every kind."""
    for bad, exc in (("abc", TypeError), ([{1.5}], TypeError), ([float("nan")], ValueError),
                     (np.zeros(2, dtype=complex), TypeError)):
        messages = set()
        for make in KINDS.values():
            with pytest.raises(exc) as info:
                make().add_many(bad)
            messages.add(str(info.value))
        assert len(messages) == 1, messages


def test_update_of_a_generator_adds_as_it_goes() -> None:
    """update(generator) adds a chunk at a time in bounded memory: keys from
    the first chunk are in the filter while the generator still runs."""
    for make in (lambda: BloomFilter(500_000), lambda: CountingBloomFilter(500_000)):
        f = make()
        seen_early = []

        def keys() -> Any:
            for i in range(300_000):
                if i == 200_000:
                    seen_early.append(5 in f)
                yield i

        f.update(keys())
        assert seen_early == [True] and f.contains_many(range(300_000)).all()


@pytest.mark.parametrize("cls", [BloomFilter, CountingBloomFilter])
def test_an_object_whose_init_never_ran_is_refused(cls: type) -> None:
    bare = cls.__new__(cls)
    for call in (lambda: bare.to_bytes(), lambda: bare.add("x"), lambda: "x" in bare, lambda: bare.add_many([1]),
                 lambda: repr(bare), lambda: bare.num_hashes, lambda: cls(10) == bare, lambda: bare.close()):
        with pytest.raises(TypeError, match=r"the filter is not initialised \(call __init__ first\)"):
            call()


def test_a_key_nested_past_the_stack_is_a_recursionerror_even_under_a_raised_recursion_limit() -> None:
    """Each level of a tuple or frozenset key is a C++ frame: a program
    that raised Python's recursion limit for its own deep code had a deep
    enough key overflow the C stack (SIGSEGV at 15,000 levels). Past 256
    levels every route raises RecursionError, naming the key; 256 are taken."""
    code = """
import sys
sys.setrecursionlimit(10**6)
import bloomline
deep = 1
for _ in range(30_000):
    deep = (deep,)
f = bloomline.BloomFilter(100, 0.01)
for name, call in (("add", f.add), ("add_many", lambda k: f.add_many([k])),
                   ("hash_many", lambda k: bloomline.hash_many([k])), ("frozenset", lambda k: f.add(frozenset([k])))):
    try:
        call(deep)
    except RecursionError as e:
        print(name, "refused:", e)
ok = 1
for _ in range(255):
    ok = (ok,)
print("255 levels new:", f.add(ok), "found:", ok in f, "count:", f.insert_count)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert lines == ["add refused: key nests tuples or frozensets more than 256 deep",
                     "add_many refused: keys[0] nests tuples or frozensets more than 256 deep",
                     "hash_many refused: keys[0] nests tuples or frozensets more than 256 deep",
                     "frozenset refused: key nests tuples or frozensets more than 256 deep",
                     "255 levels new: True found: True count: 1"], r.stdout


def test_a_lone_surrogate_is_named_by_every_route() -> None:
    """A str with no UTF-8 form is a ValueError naming the key and its
    place, as the NumPy U path names its own (Python's UnicodeEncodeError
    said neither)."""
    f = BloomFilter(1000, 0.01)
    keys = ["fine"] * 999 + ["bad\ud800"]
    for call, name in ((lambda: f.add("bad\ud800"), "key"), (lambda: "bad\ud800" in f, "key"),
                       (lambda: f.add(("a", "bad\ud800")), "key\\[1\\]"),
                       (lambda: f.add_many(keys), "keys\\[999\\]"), (lambda: f.contains_many(keys), "keys\\[999\\]"),
                       (lambda: f.add_many(np.array(keys)), "keys\\[999\\]")):
        with pytest.raises(ValueError, match=name + " is not encodable as UTF-8 \\(code point 0xd800\\)"):
            call()
    assert f.insert_count == 0


def test_hashes_of_hash_many_in_another_layout_are_refused() -> None:
    """An astype to another byte order keeps the fields' names and the
    seed's metadata: read raw, the 16 bytes were other hashes (every added
    key answered absent). Refused, naming the dtype."""
    f = BloomFilter(1000, 0.01)
    hashed = bloomline.hash_many([f"k{i}" for i in range(100)])
    assert f.add_many(hashed).all() and f.contains_many(hashed).all()
    swapped = hashed.astype(hashed.dtype.newbyteorder(">" if hashed.dtype["h1"].byteorder in "=<" else "<"))
    for call in (f.contains_many, f.add_many):
        with pytest.raises(ValueError, match="keys holds hashes of hash_many in another layout"):
            call(swapped)
    assert f.insert_count == 100


def test_an_insert_count_past_any_filters_count_is_refused() -> None:
    """A file's insert_count of 2**64 - 1 (header re-signed) loaded, and the
    next add wrapped it to 0. A count above 2**56 is damage: refused by
    every reader, and by from_buffer; adds hold a count at 2**56 (one past
    it saved a file that did not load)."""
    f = BloomFilter(1000, 0.01)
    f.add("a")
    for count, ok in ((2**64 - 1, False), (2**56 + 1, False), (2**56, True)):
        buf = bytearray(f.to_bytes())
        buf[56:64] = struct.pack("<Q", count)
        data = _resign(buf)
        if ok:
            g = BloomFilter.from_bytes(data)
            with pytest.warns(bloomline.CapacityWarning):  # (it reads as far past its capacity)
                assert g.add("b")
            assert g.insert_count == 2**56  # held there, never past what a reader takes, never wrapped
            assert BloomFilter.from_bytes(g.to_bytes()).insert_count == 2**56
            continue
        with pytest.raises(ValueError, match=f"insert_count {count} is past any filter's count"):
            BloomFilter.from_bytes(data)
    with pytest.raises(ValueError, match="insert_count"):
        BloomFilter.from_buffer(bytes(f.nbytes), f.num_bits, f.num_hashes, insert_count=2**56 + 1)


def test_a_key_whose_conversion_raises_is_converted_once_and_its_error_goes_out_as_raised() -> None:
    # A batch's failing key was converted again to name it: its code ran
    # twice, a second try that passed added the key the first refused, and
    # the caller saw the second error, not the first.
    calls: list[int] = []

    class Flaky:
        def __index__(self) -> int:
            calls.append(1)
            if len(calls) == 1:
                raise ConnectionError("transient failure on the first call")
            return 42

    f = BloomFilter(1000, 0.01)
    with pytest.raises(ConnectionError, match="transient failure on the first call"):
        f.add_many(["a", Flaky()])
    assert len(calls) == 1 and 42 not in f and "a" not in f
    with pytest.raises(TypeError, match=r"^keys\[1\] must be str, bytes-like, int, float, tuple or frozenset, "
                                        r"got list$"):
        f.add_many(["a", [1]])  # (the key rules' own errors are named by place)
    with pytest.raises(TypeError, match=r"^keys\[1\]\[0\] must be str, .* got list$"):
        f.add_many(["a", ([1],)])

    class Own:  # a key's own error is its own, even when it reads like one of the rules'
        def __index__(self) -> int:
            raise ValueError("key of mine is bad")

    with pytest.raises(ValueError, match=r"^key of mine is bad$"):
        f.add_many(["a", Own()])


def test_timedelta_bool_views_and_wide_buffers_as_lines() -> None:
    f = BloomFilter(1000, 0.01)
    # A timedelta64 is an np.integer but no key, as a datetime64 is none.
    with pytest.raises(TypeError, match=r"keys\[2\] must be str, .* got numpy.timedelta64"):
        f.add_many(["a", "b", np.timedelta64(5, "s")])
    # A bool is the key 1 or 0, whatever byte holds it.
    view = np.array([2, 1, 0, 255], np.uint8).view(bool)
    f.add_many([True, False])
    assert f.contains_many(view).tolist() == [True, True, True, True]
    g = BloomFilter(1000, 0.01)
    g.add_many(view)
    assert g == f
    # Lines are bytes: a U array's UTF-32 bytes split as lines were junk keys.
    with pytest.raises(TypeError, match=r"data must be a block of bytes \(text lines\), got a numpy.ndarray of "
                                        r"\d+-byte items"):
        f.add_lines(np.array(["https://a.example/\nhttps://b.example/"]))
    with pytest.raises(TypeError, match="data must be one contiguous block of bytes"):
        f.add_lines(memoryview(b"a\nb\nc\n")[::2])
    assert f.add_lines(np.frombuffer(b"x\ny\n", dtype=np.uint8)).tolist() == [True, True]

