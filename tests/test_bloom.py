"""BloomFilter: set-like API, no false negatives, false-positive rate at
capacity, set algebra, pickle, bytes and the buffer protocol."""

from __future__ import annotations

import copy
import io
import math
import os
import pickle
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bloomline
from bloomline import BloomFilter, CountingBloomFilter, murmur3_128, optimal_params

pytestmark = pytest.mark.core  # run by CI's wheel and sanitizer (clang, flock) jobs (.ci/run)


def test_add_reports_new_keys_and_in_finds_them(layout: str) -> None:
    bf = BloomFilter(1000, 0.01, layout=layout)
    assert "https://a.example/" not in bf
    assert bf.add("https://a.example/") is True
    assert bf.add("https://a.example/") is False
    assert "https://a.example/" in bf
    assert bf.add(b"\x00") is True and bf.add(0) is True


key_strategy = st.one_of(
    st.text(max_size=40), st.binary(max_size=40), st.integers(min_value=-(2**63), max_value=2**64 - 1)
)


def test_single_adds_count_exactly_as_a_batch_does(layout: str) -> None:
    # A single add sets bits blind after a new key and looks first after a
    # known one: keys alternating new and known go through both forms, and
    # the answers, bits and counts must be the batch add's.
    keys = [f"https://example.org/{i}" for i in range(3000)]
    stream = [k for i, k in enumerate(keys) for k in ([k, k] if i % 3 == 0 else [k])]
    one = BloomFilter(10_000, 0.001, layout=layout)
    answers = [one.add(k) for k in stream]
    batch = BloomFilter(10_000, 0.001, layout=layout)
    assert answers == batch.add_many(stream).tolist()
    assert answers.count(True) == 3000
    assert one == batch
    assert (one.insert_count, one.approx_count) == (batch.insert_count, batch.approx_count)


@pytest.mark.filterwarnings("ignore::bloomline.CapacityWarning")  # filters of capacity 1 take up to 300 keys here
@settings(max_examples=200, deadline=None)
@given(keys=st.lists(key_strategy, max_size=300), layout=st.sampled_from(["blocked", "standard"]),
       capacity=st.integers(1, 500), seed=st.integers(0, 2**64 - 1))
def test_no_false_negatives(keys: list[object], layout: str, capacity: int, seed: int) -> None:
    bf = BloomFilter(capacity, 0.01, layout=layout, seed=seed)
    half = len(keys) // 2
    for k in keys[:half]:
        bf.add(k)
    bf.add_many(keys[half:])
    assert all(k in bf for k in keys)
    assert bf.contains_many(keys).all()


@pytest.mark.parametrize("error_rate", [0.01, 0.001])
def test_false_positive_rate_at_capacity(layout: str, error_rate: float, rng: np.random.Generator) -> None:
    capacity = 1_000_000
    bf = BloomFilter(capacity, error_rate, layout=layout)
    present = rng.permutation(2 * capacity)[:capacity].astype(np.uint64)
    bf.add_many(present)
    # 4M keys never added (offset past every present key)
    absent = np.arange(4_000_000, dtype=np.uint64) + np.uint64(2**40)
    measured = bf.contains_many(absent).mean()
    # within 10% of the target: at 0.1% that is 4,000 +- 400 hits, > 6 sigma
    assert abs(measured - error_rate) <= 0.10 * error_rate, measured
    assert bf.contains_many(present).all()
    # the fill-based estimates agree with what was done
    assert bf.approx_count == pytest.approx(capacity, rel=0.02)
    assert bf.expected_fp_rate == pytest.approx(error_rate, rel=0.10)


def test_add_many_marks_first_occurrences(layout: str) -> None:
    bf = BloomFilter(1000, 0.001, layout=layout)
    bf.add("seen")
    out = bf.add_many(["a", "b", "a", "seen", "c", "b", "a"])
    assert out.dtype == np.bool_
    assert out.tolist() == [True, True, False, False, True, False, False]
    arr = np.array([10, 11, 10, 12, 11], dtype=np.int64)
    assert bf.add_many(arr).tolist() == [True, True, False, True, False]


def test_update_takes_several_iterables(layout: str) -> None:
    bf = BloomFilter(1000, 0.001, layout=layout)
    assert bf.update(["a", "b"], ("c",), np.array([1, 2]), (x for x in ["d"])) is None
    assert bf.contains_many(["a", "b", "c", 1, 2, "d"]).all()


def test_from_params(layout: str) -> None:
    bf = BloomFilter.from_params(4096, 3, layout=layout, seed=9)
    assert (bf.num_bits, bf.num_hashes, bf.layout, bf.seed) == (4096, 3, layout, 9)
    assert bf.capacity is None and bf.error_rate is None
    bf.add("x")
    assert "x" in bf
    assert "capacity" not in repr(bf)


def test_standard_layout_takes_any_num_bits() -> None:
    bf = BloomFilter.from_params(1001, 4, layout="standard")
    bf.update(range(100))
    assert all(i in bf for i in range(100))
    assert bf.nbytes == 128  # whole 64-byte blocks


@pytest.mark.parametrize(
    ("args", "kwargs", "exc", "message"),
    [
        ((0,), {}, ValueError, r"capacity must be in \[1, 2\*\*48\], got 0"),
        ((-1,), {}, ValueError, r"capacity must be in \[1, 2\*\*48\], got -1"),
        ((1e6 + 0.5,), {}, ValueError, r"capacity must be a whole number .* got 1000000.5"),
        (("10",), {}, TypeError, r"capacity must be an int, got str"),
        ((100, 0.0), {}, ValueError, r"error_rate must be in \(0, 1\), got 0"),
        ((100, 1.0), {}, ValueError, r"error_rate must be in \(0, 1\), got 1"),
        ((100, 1.5), {}, ValueError, r"error_rate must be in \(0, 1\), got 1.5"),
        ((100, -0.1), {}, ValueError, r"error_rate must be in \(0, 1\), got -0.1"),
        ((100, "0.1"), {}, TypeError, r"error_rate must be a number, got str"),
        ((100,), {"layout": "wide"}, ValueError, r"layout must be 'blocked' or 'standard', got 'wide'"),
        ((100,), {"seed": -1}, ValueError, r"seed must be in \[0, 2\*\*64\), got -1"),
        ((100,), {"seed": 2**64}, ValueError, r"seed must be in \[0, 2\*\*64\), got 18446744073709551616"),
    ],
)
def test_constructor_errors(args: tuple[object, ...], kwargs: dict[str, object], exc: type, message: str) -> None:
    with pytest.raises(exc, match=message):
        BloomFilter(*args, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((1024, 0), {}, r"num_hashes must be in \[1, 64\], got 0"),
        ((1024, 65), {}, r"num_hashes must be in \[1, 64\], got 65"),
        ((0, 3), {}, r"num_bits must be in \[1, 2\*\*48\], got 0"),
        ((1000, 3), {"layout": "blocked"}, "num_bits must be a multiple of 512 for layout 'blocked', got 1000"),
    ],
)
def test_from_params_errors(args: tuple[int, int], kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BloomFilter.from_params(*args, **kwargs)  # type: ignore[arg-type]


refused_by_the_kernel = pytest.mark.skipif(
    not Path("/proc/sys/vm/overcommit_memory").exists()
    or Path("/proc/sys/vm/overcommit_memory").read_text().strip() == "1",
    reason="a kernel that always overcommits maps any size (lazily) rather than refuse it")


@refused_by_the_kernel
def test_memory_the_machine_cannot_give_is_a_memory_error_naming_the_bytes() -> None:
    """2**48 bits is inside num_bits' range but 32 TiB: refused by the
    kernel, and the error says how much was asked for (not a bare
    "std::bad_alloc"); the process goes on."""
    with pytest.raises(MemoryError, match=r"could not allocate 35184372088832 bytes \(32768\.0 GiB\)"):
        BloomFilter.from_params(2**48, 3)
    with pytest.raises(MemoryError, match=r"could not allocate 140737488355328 bytes"):
        CountingBloomFilter.from_params(2**48, 3)  # (four bits a counter)
    assert BloomFilter.from_params(1024, 3).add("x")


class _EndlessZeros(io.RawIOBase):
    """A stream of the given header, then zeros for ever (it counts them)."""

    def __init__(self, head: bytes) -> None:
        self.head, self.served = head, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = len(buffer)
        if self.head:
            n = min(n, len(self.head))
            buffer[:n], self.head = self.head[:n], self.head[n:]
            return n
        buffer[:n] = bytes(n)
        self.served += n
        if self.served > 1 << 30:
            raise RuntimeError("the load read past a GiB of payload")
        return n


@refused_by_the_kernel
def test_a_stream_whose_checked_header_asks_for_32_tib_is_refused_before_its_payload_is_read() -> None:
    # The header is well formed and signed: 2**48 bits, 32 TiB of payload.
    # The load sees it cannot hold them before reading any (it grew a buffer
    # read by read until std::bad_alloc, many GiB later).
    header = bytearray(BloomFilter.from_params(512, 3).to_bytes()[:128])
    struct.pack_into("<Q", header, 24, 2**48)  # num_bits
    struct.pack_into("<Q", header, 72, 2**45)  # payload bytes
    header[120:128] = struct.pack("<Q", murmur3_128(bytes(header[:120])) & (2**64 - 1))
    stream = _EndlessZeros(bytes(header))
    with pytest.raises(MemoryError, match=r"could not allocate 35184372088968 bytes \(32768\.0 GiB\)"):
        BloomFilter.load(io.BufferedReader(stream))
    assert stream.served <= 1 << 20


def test_from_buffer_refuses_an_error_rate_without_its_capacity() -> None:
    # It was dropped without a word: the filter's error_rate was None.
    with pytest.raises(TypeError, match=r"error_rate needs capacity .* got error_rate=0.01 and capacity=None"):
        BloomFilter.from_buffer(bytes(64), 512, 3, error_rate=0.01)
    f = BloomFilter.from_buffer(bytes(64), 512, 3, capacity=40, error_rate=0.01)
    assert (f.capacity, f.error_rate) == (40, 0.01)


def test_from_buffer_names_a_capacity_without_its_error_rate_and_a_strided_payload() -> None:
    with pytest.raises(TypeError, match=r"capacity needs error_rate .* got capacity=40 and error_rate=None"):
        BloomFilter.from_buffer(bytes(64), 512, 3, capacity=40)
    strided = np.zeros(128, dtype=np.uint8)[::2]
    with pytest.raises(TypeError, match=r"payload must be one contiguous block of bytes, got a non-contiguous "
                                        r"numpy.ndarray"):
        BloomFilter.from_buffer(strided, 512, 3)
    assert BloomFilter.from_buffer(np.ascontiguousarray(strided), 512, 3).bits_set == 0


def test_keyword_only_options() -> None:
    with pytest.raises(TypeError):
        BloomFilter(100, 0.01, "standard")  # type: ignore[misc]


def make(layout: str, keys: list[int], **kw: object) -> BloomFilter:
    bf = BloomFilter(5000, 0.01, layout=layout, **kw)  # type: ignore[arg-type]
    bf.update(keys)
    return bf


def test_union_and_intersection(layout: str) -> None:
    a, b = make(layout, list(range(0, 1000))), make(layout, list(range(500, 1500)))
    u = a | b
    assert all(i in u for i in range(1500))
    assert u == make(layout, list(range(1500)))
    i = a & b
    assert all(k in i for k in range(500, 1000))
    assert (i.contains_many(np.arange(1500, 100_000))).mean() < 0.01
    # operands unchanged
    assert a == make(layout, list(range(1000)))
    assert a.approx_union_count(b) == pytest.approx(1500, rel=0.05)
    assert a.approx_intersection_count(b) == pytest.approx(500, rel=0.1)


@pytest.mark.parametrize("kind", [BloomFilter, CountingBloomFilter])
def test_an_intersection_counts_the_keys_both_hold_not_its_fill(kind: Any, layout: str) -> None:
    # The AND of two full filters keeps bits that different keys set in each:
    # its fill says thousands of keys where none are shared. insert_count
    # (what the capacity warning and a saved file's count read) is the
    # estimate from both filters and their union instead.
    a, b = kind(10_000, 0.01, layout=layout), kind(10_000, 0.01, layout=layout)
    a.add_many(np.arange(10_000, dtype=np.uint64))
    b.add_many(np.arange(10_000, 20_000, dtype=np.uint64))
    assert (a & b).approx_count > 1000  # the fill's estimate, as documented
    assert (a & b).insert_count <= 100
    c = kind(10_000, 0.01, layout=layout)
    c.add_many(np.arange(5_000, 15_000, dtype=np.uint64))
    both = a & c
    assert both.insert_count == pytest.approx(5_000, rel=0.05)
    a &= c
    assert a.insert_count == both.insert_count
    # A full filter says nothing of what it holds: the AND is the other
    # filter's bits, and its count the estimate from them.
    full = kind(10_000, 0.01, layout=layout)
    with pytest.warns(bloomline.CapacityWarning):
        full.add_many(np.arange(1_000_000, 3_000_000, dtype=np.uint64))
    small = kind(10_000, 0.01, layout=layout)
    small.add_many(np.arange(500, dtype=np.uint64))
    assert full.expected_fp_rate == 1.0
    assert (full & small).insert_count == pytest.approx(500, rel=0.05)
    # ... and of the keys two full filters share, nothing can be said: NaN,
    # as approx_jaccard says, not a confident 0.
    assert math.isnan(full.approx_intersection_count(full.copy()))
    # A union or AND that comes out full keeps its operands' count, never 0
    # (which would call it empty and keep its capacity warning quiet).
    assert (full | small).insert_count == full.insert_count > 10_000
    assert (full & full.copy()).insert_count == full.insert_count
    assert math.isnan(full.approx_intersection_count(small)) and math.isnan(full.approx_jaccard(small))


def test_in_place_operators_return_self(layout: str) -> None:
    a, b = make(layout, [1, 2, 3]), make(layout, [3, 4])
    ident = id(a)
    a |= b
    assert id(a) == ident and 4 in a
    a &= b
    assert id(a) == ident and 3 in a and 4 in a


@pytest.mark.parametrize(
    ("other_kwargs", "message"),
    [
        ({"layout": "other"}, r"filters differ in layout \((blocked|standard) != (blocked|standard)\)"),
        ({"capacity": 9000}, r"filters differ in num_bits \(\d+ != \d+\)"),
        ({"seed": 1}, r"filters differ in seed \(0 != 1\)"),
    ],
)
def test_incompatible_filters(layout: str, other_kwargs: dict[str, object], message: str) -> None:
    a = BloomFilter(5000, 0.01, layout=layout)
    kw: dict[str, object] = {"layout": layout}
    kw.update(other_kwargs)
    if kw["layout"] == "other":
        kw["layout"] = "standard" if layout == "blocked" else "blocked"
    capacity = kw.pop("capacity", 5000)
    b = BloomFilter(capacity, 0.01, **kw)  # type: ignore[arg-type]
    for op in (lambda: a | b, lambda: a & b):
        with pytest.raises(ValueError, match=message):
            op()
    with pytest.raises(ValueError, match=message):
        a |= b
    # == answers: filters that cannot hold the same bits are unequal (as sets
    # of another kind are), so a list's `in` or a dict of them works.
    assert (a == b) is False and (a != b) is True and b not in [a] and a in [b, a]


def test_num_hashes_mismatch() -> None:
    a = BloomFilter.from_params(4096, 3)
    b = BloomFilter.from_params(4096, 4)
    with pytest.raises(ValueError, match=r"filters differ in num_hashes \(3 != 4\)"):
        _ = a | b


@pytest.mark.parametrize("kind", [BloomFilter, CountingBloomFilter])
def test_comparisons_with_other_types(kind: type) -> None:
    bf = kind(10)
    assert (bf == 5) is False
    assert bf != "x"
    with pytest.raises(TypeError):
        _ = bf | {1, 2}
    # None is no filter: unequal, never "not initialised".
    assert (bf == None) is False and (bf != None) is True  # noqa: E711
    assert (None == bf) is False and bf not in [None] and None not in [bf]  # noqa: E711
    with pytest.raises(TypeError, match="unsupported operand"):
        _ = bf | None
    with pytest.raises(TypeError, match=r"approx_jaccard\(\) got arguments of the wrong type \(NoneType\)"):
        bf.approx_jaccard(None)


@pytest.mark.parametrize("kind", [BloomFilter, CountingBloomFilter])
def test_an_empty_filter_is_false(kind: type) -> None:
    bf = kind(1000)
    assert not bf
    bf.add("a")
    assert bf
    bf.clear()
    assert not bf


def test_copy_clear_and_equality(layout: str) -> None:
    a = make(layout, list(range(100)))
    for b in (a.copy(), copy.copy(a), copy.deepcopy(a)):
        assert b == a and b is not a
        b.add("new")
        assert "new" not in a or a.contains_many(["new"]).all()  # a false positive at most
        assert b != a
    a.clear()
    assert a.bits_set == 0 and a.approx_count == 0
    assert not a.contains_many(list(range(100))).any()
    assert a == BloomFilter(5000, 0.01, layout=layout)


def test_unhashable() -> None:
    with pytest.raises(TypeError):
        hash(BloomFilter(10))
    assert BloomFilter.__hash__ is None


def test_not_len_but_approx_count() -> None:
    bf = BloomFilter(10_000)
    with pytest.raises(TypeError):
        len(bf)  # type: ignore[arg-type]
    bf.update(range(5000))
    assert bf.approx_count == pytest.approx(5000, rel=0.03)


def test_properties(layout: str) -> None:
    bf = BloomFilter(100_000, 0.001, layout=layout, seed=42)
    p = optimal_params(100_000, 0.001, layout)
    assert bf.capacity == 100_000 and bf.error_rate == 0.001
    assert bf.num_bits == p.num_bits and bf.num_hashes == p.num_hashes
    assert bf.layout == layout and bf.seed == 42
    assert bf.nbytes == math.ceil(p.num_bits / 512) * 64
    assert bf.bits_set == 0 and bf.expected_fp_rate == 0.0
    bf.update(range(1000))
    assert bf.bits_set == int(np.unpackbits(np.asarray(bf)).sum())
    assert 0 < bf.expected_fp_rate < 1e-6


def test_bits_set_is_exact_after_every_operation(layout: str) -> None:
    a = make(layout, list(range(700)))
    b = make(layout, list(range(300, 1200)))
    for f in (a, b, a | b, a & b, BloomFilter.from_bytes(a.to_bytes())):
        assert f.bits_set == int(np.unpackbits(np.asarray(f)).sum())


def test_repr_is_honest_and_not_a_constructor_call(layout: str) -> None:
    bf = BloomFilter(1000, 0.01, layout=layout)
    bf.update(range(100))
    r = repr(bf)
    assert r.startswith("<BloomFilter ") and r.endswith(">")
    for part in ["capacity=1000", "error_rate=0.01", f"layout='{layout}'", f"num_bits={bf.num_bits}",
                 f"num_hashes={bf.num_hashes}", "seed=0", f"approx_count={round(bf.approx_count)}"]:
        assert part in r


def test_seed_changes_positions(layout: str) -> None:
    a, b = make(layout, list(range(200))), make(layout, list(range(200)), seed=1)
    assert bytes(memoryview(a)) != bytes(memoryview(b))
    assert make(layout, list(range(200)), seed=1).to_bytes() == b.to_bytes()


# ---- pickle, bytes, buffer ---------------------------------------------------


@pytest.mark.parametrize("protocol", range(0, pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_every_protocol(layout: str, protocol: int) -> None:
    bf = BloomFilter(1000, 0.01, layout=layout, seed=3)
    bf.update(["a", "b", 1, 2])
    back = pickle.loads(pickle.dumps(bf, protocol=protocol))
    assert back == bf
    assert (back.capacity, back.error_rate, back.seed, back.layout) == (1000, 0.01, 3, layout)
    assert back.contains_many(["a", "b", 1, 2]).all()


def test_pickle_gives_same_answers_in_another_process(layout: str, tmp_path: Path) -> None:
    keys = [f"https://example.com/{i}" for i in range(2000)]
    probes = keys + [f"https://example.org/{i}" for i in range(20_000)]
    bf = BloomFilter(2000, 0.01, layout=layout, seed=11)
    bf.update(keys)
    (tmp_path / "f.pkl").write_bytes(pickle.dumps(bf))
    here = bf.contains_many(probes)
    np.save(tmp_path / "probes.npy", np.array(probes))
    code = (
        "import pickle, sys, numpy as np\n"
        f"bf = pickle.loads(open({str(tmp_path / 'f.pkl')!r}, 'rb').read())\n"
        f"probes = np.load({str(tmp_path / 'probes.npy')!r})\n"
        "sys.stdout.write(''.join('1' if x else '0' for x in bf.contains_many(probes)))\n"
    )
    # A different PYTHONHASHSEED: nothing may depend on Python's salted hash().
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    there = np.array([c == "1" for c in out.stdout])
    assert there.tolist() == here.tolist()
    assert there[:2000].all() and there[2000:].mean() < 0.02


def test_to_bytes_round_trip(layout: str) -> None:
    bf = BloomFilter(3000, 0.001, layout=layout, seed=2**63 + 5)
    bf.update(range(2500))
    data = bf.to_bytes()
    assert isinstance(data, bytes)
    assert data[:8] == b"\x89BLOOML\n"
    assert len(data) == 128 + bf.nbytes + 8
    back = BloomFilter.from_bytes(data)
    assert back == bf and back.seed == 2**63 + 5
    assert BloomFilter.from_bytes(bytearray(data)) == bf
    assert BloomFilter.from_bytes(memoryview(data)) == bf


def _rewrite_header(data: bytes, offset: int, value: bytes) -> bytes:
    """Change a header field and fix the header checksum, to reach the checks
    behind it (a random corruption would be caught by the checksum first)."""
    from bloomline import murmur3_128

    b = bytearray(data)
    b[offset : offset + len(value)] = value
    b[120:128] = (murmur3_128(bytes(b[:120])) & (2**64 - 1)).to_bytes(8, "little")
    return bytes(b)


def test_from_bytes_rejects_bad_data() -> None:
    bf = BloomFilter(1000)
    bf.update(range(100))
    good = bf.to_bytes()
    cases = [
        (b"", "shorter than the 136-byte minimum"),
        (good[:-1], "truncated or padded"),
        (good + b"\x00", "truncated or padded"),
        (b"X" + good[1:], "bad magic"),
        (good[:8] + b"\x02\x00" + good[10:], "format version 2 is not supported"),
        (good[:50] + bytes([good[50] ^ 1]) + good[51:], "header checksum mismatch"),
        (good[:200] + bytes([good[200] ^ 0x10]) + good[201:], "payload checksum mismatch"),
        (_rewrite_header(good, 24, (2**63).to_bytes(8, "little")), r"num_bits must be in \[1, 2\*\*48\]"),
        (_rewrite_header(good, 24, (1024).to_bytes(8, "little")), "payload_len .* does not match"),
        (_rewrite_header(good, 32, (0).to_bytes(4, "little")), "num_hashes must be in"),
        (_rewrite_header(good, 11, b"\x07"), "unknown layout code 7"),
        (_rewrite_header(good, 12, b"\x09"), "unknown hash id 9"),
        (_rewrite_header(good, 10, b"\x02"), "slot_bits 1 is invalid for a CountingBloomFilter"),
        (_rewrite_header(good, 72, (2**62).to_bytes(8, "little")), "payload_len"),
        (_rewrite_header(good, 90, b"\x01"), "reserved header bytes are not zero"),
    ]
    for data, message in cases:
        with pytest.raises(ValueError, match=message):
            BloomFilter.from_bytes(data)
    with pytest.raises(TypeError, match="data must be bytes-like, got str"):
        BloomFilter.from_bytes("abc")  # type: ignore[arg-type]


def test_buffer_protocol_is_zero_copy_and_read_only(layout: str) -> None:
    bf = BloomFilter(10_000, 0.01, layout=layout)
    view = memoryview(bf)
    assert view.readonly and view.nbytes == bf.nbytes and view.format == "B"
    arr = np.asarray(bf)
    assert arr.dtype == np.uint8 and not arr.flags.writeable and arr.size == bf.nbytes
    before = arr.copy()
    bf.add("later")  # visible through the existing views: no copy was made
    assert (arr != before).any()
    assert bytes(view) == arr.tobytes()
    assert view.tobytes() == bf.to_bytes()[128 : 128 + bf.nbytes]
    with pytest.raises(TypeError):
        view[0] = 1
    del bf  # the view keeps the memory alive
    assert arr.sum() > 0


@pytest.mark.parametrize("cls", [bloomline.BloomFilter, bloomline.CountingBloomFilter])
def test_init_run_again_on_a_filter_is_refused_not_ignored(cls: Any) -> None:
    f = cls(1000, 0.01)
    f.add("kept")
    with pytest.raises(TypeError, match=r"__init__ was called on a filter that is already initialised"):
        f.__init__(5000, 0.1)
    assert f.capacity == 1000 and "kept" in f
    fresh = cls.__new__(cls)
    fresh.__init__(100)  # a first __init__ on a bare object still works
    assert fresh.capacity == 100
