"""Adds on several threads give exactly one thread's answers, counts and
bytes (parallel.hpp: each thread owns a range of the filter's memory and
makes every write in it, in input order): for every input kind, both
layouts, bits and counters, repeated keys, nulls, shared mapped files, and
batches longer than one super-chunk; and the CLI's output is the same
byte for byte."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

import bloomline
from bloomline import BloomFilter, CountingBloomFilter

pytestmark = pytest.mark.core  # run by CI's wheel and sanitizer (clang, flock) jobs (.ci/run)

N = 300_000  # past one super-chunk of the blocked path (2**18) and several of the slot path (2**16)


def _urls(n: int) -> list[str]:
    # Repeats within the batch (every 7th key is key 3), across super-chunks too.
    return [f"https://s{i % 997}.example/{(3 if i % 7 == 0 else i):x}" for i in range(n)]


def _inputs() -> dict[str, Callable[[], Any]]:
    rng = np.random.default_rng(37)
    ints = rng.integers(0, 2**63, size=N, dtype=np.uint64)
    ints[::7] = ints[3]
    urls = _urls(N)
    made: dict[str, Callable[[], Any]] = {
        "uint64": lambda: ints,
        "int32": lambda: ints.astype(np.int32),
        "S": lambda: np.array(urls, dtype="S"),
        "U": lambda: np.array(urls),
        "list[str]": lambda: urls,
        "object": lambda: np.array(urls, dtype=object),
        "hash_many": lambda: bloomline.hash_many(np.array(urls, dtype="S")),
        "float64": lambda: (ints % 100_000).astype(np.float64) / 4,
        "tuples": lambda: [(u, i % 3) for i, u in enumerate(urls[:100_000])],
    }
    try:
        import pyarrow as pa

        made["arrow str"] = lambda: pa.array(urls)
        made["arrow chunked int"] = lambda: pa.chunked_array([ints[: N // 2], ints[N // 2:]])
    except ImportError:  # pragma: no cover - pyarrow is a test dependency
        pass
    return made


INPUTS = _inputs()
KINDS: dict[str, Callable[[str], Any]] = {
    "bloom": lambda layout: BloomFilter(200_000, 0.01, layout=layout),
    "counting4": lambda layout: CountingBloomFilter(200_000, 0.01, layout=layout),
    "counting8": lambda layout: CountingBloomFilter(200_000, 0.01, layout=layout, counter_bits=8),
}


def same_state(a: Any, b: Any) -> None:
    assert a.insert_count == b.insert_count
    assert a.approx_count == b.approx_count
    assert a.to_bytes() == b.to_bytes()


@pytest.mark.filterwarnings("ignore::bloomline.CapacityWarning")
@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("layout", ["blocked", "standard"])
@pytest.mark.parametrize("name", sorted(INPUTS))
def test_threads_give_one_threads_answers_counts_and_bytes(name: str, layout: str, kind: str) -> None:
    keys = INPUTS[name]()
    one, many = KINDS[kind](layout), KINDS[kind](layout)
    r1 = one.add_many(keys)
    rn = many.add_many(keys, threads=3)
    assert r1.tolist() == rn.tolist()
    assert 0 < r1.sum() < len(r1)  # some keys new, some repeated: the answers say something
    same_state(one, many)
    # A second batch on top: the known keys are known on every owner.
    assert one.add_many(keys).tolist() == many.add_many(keys, threads=2).tolist()
    same_state(one, many)


@pytest.mark.parametrize("threads", [8, 16])
def test_many_threads_take_larger_chunks_with_one_threads_answers(threads: int) -> None:
    """From 8 threads a super-chunk is 2**19 keys, from 16 2**20: a batch
    of 2.5 of them (repeats across their edges) and a second batch on top."""
    rng = np.random.default_rng(threads)
    n = (1 << 18) * (threads // 4) * 5 // 2
    keys = rng.integers(0, n // 2, size=n, dtype=np.uint64)  # about 43% repeats, across chunk edges
    for layout in ("blocked", "standard"):
        one, many = BloomFilter(n, 0.01, layout=layout), BloomFilter(n, 0.01, layout=layout)
        assert one.add_many(keys).tolist() == many.add_many(keys, threads=threads).tolist()
        same_state(one, many)
        more = rng.integers(0, n, size=n // 3, dtype=np.uint64)
        assert one.add_many(more).tolist() == many.add_many(more, threads=threads).tolist()
        same_state(one, many)


@pytest.mark.filterwarnings("ignore::bloomline.CapacityWarning")
@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("layout", ["blocked", "standard"])
@pytest.mark.parametrize("name", ["uint64", "S", "list[str]", "generator"])
def test_update_on_threads_leaves_one_threads_counts_and_bytes(name: str, layout: str, kind: str) -> None:
    """update(threads=N) asks for no answers (the threaded add skips handing
    them back) and leaves what add_many on one thread leaves; a generator
    is taken a chunk at a time, each chunk on the threads."""
    urls = _urls(N)
    make_keys: Callable[[], Any] = ((lambda: (u for u in urls)) if name == "generator" else INPUTS[name])
    one, many = KINDS[kind](layout), KINDS[kind](layout)
    one.add_many(make_keys() if name != "generator" else urls)
    many.update(make_keys(), threads=3)
    assert many.insert_count > 0
    same_state(one, many)
    # A second update on top, with nulls left out, against add_many's.
    with_nulls = [None if i % 5 == 0 else u for i, u in enumerate(urls[: N // 2])]
    one.add_many(with_nulls, nulls="skip")
    many.update(with_nulls, nulls="skip", threads=2)
    same_state(one, many)
    with pytest.raises(ValueError, match="threads"):
        many.update(urls[:10], threads=-1)


def test_nulls_and_counts_of_counters_past_saturation() -> None:
    keys: list[Any] = [None if i % 11 == 0 else f"k{i % 5000}" for i in range(100_000)]
    for make in (lambda: BloomFilter(50_000, 0.01), lambda: CountingBloomFilter(50_000, 0.01, counter_bits=4)):
        one, many = make(), make()
        assert one.add_many(keys, nulls="skip").tolist() == many.add_many(keys, nulls="skip", threads=2).tolist()
        same_state(one, many)
        if isinstance(one, CountingBloomFilter):  # each key 20 times: counters saturate at 15
            assert one.saturated_counters == many.saturated_counters > 0
            assert one.nonzero_counters == many.nonzero_counters


def test_lines_and_a_shared_mapped_file(tmp_path: Path) -> None:
    data = "\n".join(_urls(N)).encode()
    one = BloomFilter(300_000, 0.001)
    r1 = one.add_lines(data)
    path = tmp_path / "f.blf"
    BloomFilter(300_000, 0.001).save(path)
    with BloomFilter.open(path, "r+") as mapped:
        assert mapped.add_lines(data, threads=2).tolist() == r1.tolist()
    again = BloomFilter.load(path)
    assert again.to_bytes() == one.to_bytes()


def test_threads_zero_is_one_per_cpu_and_small_batches_stay_on_one() -> None:
    keys = np.arange(100_000, dtype=np.uint64)
    one, many, small = BloomFilter(100_000, 0.01), BloomFilter(100_000, 0.01), BloomFilter(100_000, 0.01)
    assert one.add_many(keys).tolist() == many.add_many(keys, threads=0).tolist()
    assert small.add_many(keys[:10], threads=8).tolist() == [True] * 10
    same_state(one, many)


@pytest.mark.parametrize("last_newline", [True, False])
def test_lines_on_threads_are_one_threads(last_newline: bool) -> None:
    """Lines added, looked up or selected on N threads: one thread's answers,
    bits and bytes, and select_lines equals a plain Python reference
    (endings kept, CRLF too, a last line given \\n), with lines far longer
    than the others among them."""
    rng = np.random.default_rng(5)
    n = 120_000
    ends = [b"\r\n" if r < 0.2 else b"\n" for r in rng.random(n)]
    parts = [(b"line-%d" % i) * int(k) + e for i, (k, e) in enumerate(zip(rng.integers(0, 4, n), ends))]
    for i in (0, 1, 40_000, 40_001, n - 1):
        parts[i] = b"L%d" % i + b"x" * 300_000 + ends[i]
    if not last_newline:
        parts[-1] = parts[-1].rstrip(b"\r\n")
    data = b"".join(parts)
    one = BloomFilter(n, 0.001)
    first = one.add_lines(data)
    assert first.sum() == len(set(p.rstrip(b"\r\n") for p in parts))
    for t in (2, 3, 8, 0):
        many = BloomFilter(n, 0.001)
        assert many.add_lines(data, threads=t).tolist() == first.tolist(), t
        same_state(one, many)
        assert many.contains_lines(data, threads=t).all()
    for mask in (rng.random(n) < 0.5, np.ones(n, bool), np.zeros(n, bool), np.arange(n) == n - 1):
        expected = b"".join(p if p.endswith(b"\n") else p + b"\n" for p, k in zip(parts, mask) if k)
        for t in (1, 2, 3, 8, 0):
            assert bloomline.select_lines(data, mask, threads=t) == expected, t
    with pytest.raises(ValueError, match="threads must be in"):
        bloomline.select_lines(data, np.ones(n, bool), threads=-1)


@pytest.mark.parametrize("make", [lambda: BloomFilter(200_000, 0.001), lambda: BloomFilter(200_000, 0.001, layout="standard"),
                                  lambda: CountingBloomFilter(200_000, 0.001)], ids=["blocked", "standard", "counting"])
def test_dedup_lines_is_add_lines_then_select_lines(make: Callable[[], Any]) -> None:
    """dedup_lines (one split for the add and the copy) gives what add_lines
    then select_lines give, with the block's line count and new count, on
    one thread or several, and leaves the filter as add_lines does. The
    blocks are sized so that the split, the add and the copy ask for
    different numbers of threads."""
    rng = np.random.default_rng(9)

    def block(n: int, width: int) -> bytes:
        keys = rng.integers(0, 40_000, n)  # repeats, within the block and across blocks
        return b"".join(b"u%d" % k + b"x" * width + (b"\r\n" if r < 0.2 else b"\n")
                        for k, r in zip(keys, rng.random(n)))

    blocks = [block(25_000, 0), block(40_000, 80), block(150_000, 4)]  # 0.2 MB; 3.6 MB, 40k lines; 1.6 MB, 150k
    blocks.append(block(30_000, 0).rstrip(b"\r\n") + b"\r")  # a last line ended by a lone \r
    blocks.append(b"")
    for t in (1, 2, 3, 0):
        reference, fused = make(), make()
        for data in blocks:
            new = reference.add_lines(data)
            out, lines, kept = fused.dedup_lines(bytearray(data), threads=t)
            assert (out, lines, kept) == (bloomline.select_lines(data, new), len(new), int(new.sum())), t
        same_state(reference, fused)
    with pytest.raises(TypeError, match="data must be bytes-like"):
        make().dedup_lines("text")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="threads must be in"):
        make().dedup_lines(b"a\n", threads=-1)


@pytest.mark.slow
def test_cli_dedup_and_build_are_identical_byte_for_byte(tmp_path: Path) -> None:
    lines = tmp_path / "in.txt"
    # Blocks of a threaded run are larger (1 MiB a thread): the lines cross
    # block edges differently; CRLF endings and a last line without one too.
    text = "\n".join(u + "\r" if i % 5 == 0 else u for i, u in enumerate(_urls(400_000)))
    lines.write_bytes(text.encode())
    outs = {}
    for t in ("1", "2", "0"):
        run = subprocess.run([sys.executable, "-m", "bloomline", "dedup", "-q", "--threads", t, str(lines)],
                             capture_output=True, check=True, timeout=300)
        built = tmp_path / f"b{t}.blf"
        subprocess.run([sys.executable, "-m", "bloomline", "build", "-q", "--threads", t, str(built), str(lines)],
                       capture_output=True, check=True, timeout=300)
        outs[t] = (run.stdout, built.read_bytes())
    assert outs["1"] == outs["2"] == outs["0"]
    assert outs["1"][0].count(b"\n") == len(set(_urls(400_000)))  # first occurrences, in input order
    assert outs["1"][0].splitlines()[:3] == [u.encode() for u in _urls(400_000)[:3]]
    bad = subprocess.run([sys.executable, "-m", "bloomline", "dedup", "--threads", "-1", str(lines)],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--threads: must be in [0, 1024]" in bad.stderr


def test_exports_while_a_threaded_add_runs_always_load() -> None:
    """A threaded add holds the writer mutex per super-chunk, so an export
    taken meanwhile (another thread) sees whole chunks, loads, and holds
    every key added before it began."""
    import threading

    keys = np.arange(2_000_000, dtype=np.uint64)
    f = BloomFilter(3_000_000, 0.001)
    f.add_many(keys[:1000])
    done = threading.Event()
    exports: list[bytes] = []

    def export() -> None:
        while not done.is_set() and len(exports) < 50:
            exports.append(f.to_bytes())

    t = threading.Thread(target=export)
    t.start()
    try:
        f.add_many(keys, threads=2)
    finally:
        done.set()
        t.join(timeout=60)
    assert exports
    for data in exports:
        g = bloomline.from_bytes(data)
        assert g.contains_many(keys[:1000]).all()
    assert f.contains_many(keys).all()
