"""Files: atomic saves that survive SIGKILL, mapped loads and writes, golden
files from earlier versions, and hostile bytes."""

from __future__ import annotations

import json
import os
import pickle
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bloomline
from bloomline import BloomFilter, CountingBloomFilter, ScalableBloomFilter, WindowedBloomFilter

pytestmark = pytest.mark.core  # run by CI's wheel and sanitizer (clang, flock) jobs (.ci/run)

DATA = Path(__file__).resolve().parent / "data"


def kinds(layout: str) -> list[object]:
    return [
        BloomFilter(20_000, 0.01, layout=layout, seed=5),
        CountingBloomFilter(20_000, 0.01, layout=layout, counter_bits=8, seed=5),
        ScalableBloomFilter(2_000, 0.01, layout=layout, seed=5),
        WindowedBloomFilter(20_000, 0.01, window=3600, layout=layout, seed=5),  # (the system clock)
    ]


def test_save_load_every_kind(layout: str, tmp_path: Path) -> None:
    for f in kinds(layout):
        f.update(range(10_000))  # type: ignore[attr-defined]
        path = tmp_path / f"{type(f).__name__}.blf"
        f.save(path)  # type: ignore[attr-defined]
        back = type(f).load(path)  # type: ignore[attr-defined]
        assert back == f
        assert bloomline.read_header(path.read_bytes())["kind"] == type(f).__name__
        assert not list(tmp_path.glob("*.tmp-*"))  # no temporary left behind
        assert (path.stat().st_mode & 0o777) == 0o644


def test_save_replaces_atomically(tmp_path: Path) -> None:
    path = tmp_path / "f.blf"
    a = BloomFilter(1000)
    a.add("old")
    a.save(path)
    b = BloomFilter(1000)
    b.add("new")
    b.save(str(path))
    assert "new" in BloomFilter.load(path) and "old" not in BloomFilter.load(path)


def test_io_errors_are_oserrors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        BloomFilter.load(tmp_path / "missing.blf")
    with pytest.raises(FileNotFoundError):
        BloomFilter(10).save(tmp_path / "no-such-dir" / "f.blf")
    (tmp_path / "short").write_bytes(b"abc")
    with pytest.raises(ValueError, match="shorter than the 136-byte minimum"):
        BloomFilter.load(tmp_path / "short", mmap=True)
    with pytest.raises(ValueError, match="shorter than the 136-byte minimum"):
        BloomFilter.load(tmp_path / "short")


def test_mmap_load_is_read_only_and_lazy(layout: str, tmp_path: Path) -> None:
    bf = BloomFilter(100_000, 0.01, layout=layout)
    keys = np.arange(100_000, dtype=np.uint64)
    bf.add_many(keys)
    bf.save(tmp_path / "f.blf")
    m = BloomFilter.load(tmp_path / "f.blf", mmap=True)
    assert m.mapped and m.read_only
    assert m == bf and m.contains_many(keys).all()
    assert m.bits_set == bf.bits_set  # from the header, not counted
    with pytest.raises(ValueError, match="read-only"):
        m.add("x")
    with pytest.raises(ValueError, match="read-only"):
        m.add_many(["x"])
    with pytest.raises(ValueError, match="read-only"):
        m.clear()
    c = m.copy()
    assert c.add("x") and not c.mapped
    # verify=True checks the payload checksum of a mapped file too
    raw = bytearray((tmp_path / "f.blf").read_bytes())
    raw[200] ^= 1
    (tmp_path / "bad.blf").write_bytes(bytes(raw))
    assert BloomFilter.load(tmp_path / "bad.blf", mmap=True)  # constant time: not checked
    with pytest.raises(ValueError, match="payload checksum mismatch"):
        BloomFilter.load(tmp_path / "bad.blf", mmap=True, verify=True)
    with pytest.raises(ValueError, match="payload checksum mismatch"):
        BloomFilter.load(tmp_path / "bad.blf")


def assert_refuses_use_once_closed(f: Any, open_twin: Any) -> None:
    """A closed filter's memory is not read ("close(): Refuse further use"):
    == no longer compares its bits with an open filter's (it equals itself
    only, and never raises: a list's `in` compares with every item), nor does
    a view of them open. Its counts, kept by the handle, still answer (a
    closed handle's last word, for a summary), as do its geometry and repr."""
    assert f != open_twin and not (f == open_twin) and not (open_twin == f)
    assert f == f and [open_twin].count(f) == 0 and [f, open_twin].index(open_twin) == 1
    with pytest.raises(ValueError, match="I/O operation on a closed filter"):
        memoryview(f)
    for fact in ("insert_count", "approx_count", "num_hashes") + (
            ("bits_set",) if isinstance(f, BloomFilter) else ("nonzero_counters",)):
        assert getattr(f, fact) == getattr(open_twin, fact), fact
    assert bool(f) and repr(f).endswith(" closed>")


@pytest.mark.parametrize("kind", [BloomFilter, CountingBloomFilter])
def test_a_closed_filter_in_memory_refuses_its_memory(kind: Any) -> None:
    f = kind(1000, 0.01)
    f.update(range(100))
    twin = f.copy()
    f.close()
    assert_refuses_use_once_closed(f, twin)


@pytest.mark.skipif(bloomline.file_locks == "flock", reason="this build takes one writer per file (flock locks)")
@pytest.mark.parametrize("counted_first", [False, True])
@pytest.mark.parametrize("kind", [BloomFilter, CountingBloomFilter])
def test_a_union_through_one_of_two_writers_counts_the_others_keys_once(kind: Any, counted_first: bool,
                                                                        tmp_path: Path) -> None:
    # A handle's count is its own adds, added to the file's at its flush. A
    # union through one handle set its count to the estimate from every bit in
    # the file, the other handle's keys included, which that handle then added
    # in again: 9,968 for 8,000 keys. It now moves by what the union added.
    path = tmp_path / "f.blf"
    f = kind(10_000, 0.01)
    f.add_many(np.arange(5_000, dtype=np.uint64))
    f.save(path)
    with kind.open(path, "r+") as h1, kind.open(path, "r+") as h2:
        if counted_first:  # (a counting handle counts its counters once: the others' adds since were not in it)
            assert h1.approx_count > 0
        h2.add_many(np.arange(5_000, 7_000, dtype=np.uint64))
        g = kind(10_000, 0.01)
        g.add_many(np.arange(7_000, 8_000, dtype=np.uint64))
        h1 |= g
    back = kind.load(path)
    assert back.contains_many(np.arange(8_000, dtype=np.uint64)).all()
    assert back.insert_count == pytest.approx(8_000, rel=0.03)


def test_open_r_plus_writes_through(layout: str, tmp_path: Path) -> None:
    path = tmp_path / "f.blf"
    CountingBloomFilter(10_000, 0.01, layout=layout).save(path)
    BloomFilter(10_000, 0.01, layout=layout).save(tmp_path / "b.blf")
    with BloomFilter.open(tmp_path / "b.blf") as f:
        assert f.mapped and not f.read_only
        f.update(range(5000))
        assert bloomline.read_header((tmp_path / "b.blf").read_bytes())["insert_count"] == 0
        f.flush()
        # while open, the file is flagged dirty but loads (checksum not current)
        assert BloomFilter.load(tmp_path / "b.blf").contains_many(range(5000)).all()
    assert f.closed
    with pytest.raises(ValueError, match="closed"):
        _ = 1 in f
    with pytest.raises(ValueError, match="closed"):
        f.add(1)
    back = BloomFilter.load(tmp_path / "b.blf")  # verified: the checksum is current again
    assert_refuses_use_once_closed(f, back)
    assert back.contains_many(range(5000)).all()
    assert bloomline.read_header((tmp_path / "b.blf").read_bytes())["insert_count"] >= 4990
    with CountingBloomFilter.open(path) as c:
        c.update(["a", "a", "b"])
        c.remove("b")
    c2 = CountingBloomFilter.load(path)
    assert c2.count("a") >= 2 and "b" not in c2
    with pytest.raises(ValueError, match="mode must be 'r' or 'r\\+', got 'w'"):
        BloomFilter.open(path, "w")
    with pytest.raises(ValueError, match="this holds a CountingBloomFilter, not a BloomFilter"):
        BloomFilter.open(path)
    with pytest.raises(ValueError, match="cannot be memory-mapped"):
        ScalableBloomFilter(10).save(tmp_path / "s.blf")
        BloomFilter.load(tmp_path / "s.blf", mmap=True)
    for saved in ({}, {"shared": True}):
        WindowedBloomFilter(10, window=60).save(tmp_path / "w.blf", **saved)
        with pytest.raises(ValueError, match=r"a WindowedBloomFilter cannot be memory-mapped as one filter; use "
                                             r"WindowedBloomFilter.open\(path\) for one saved with shared=True"):
            BloomFilter.open(tmp_path / "w.blf")


# ---- crashes -----------------------------------------------------------------

SAVER = """
import sys, numpy as np, bloomline
path = sys.argv[1]
bf = bloomline.BloomFilter(2_000_000, 0.01)
gen = 0
while True:
    gen += 1
    bf.add_many(np.arange(gen * 1000, dtype=np.uint64))
    bf.add(f"generation-{gen}")
    bf.save(path)
    sys.stdout.write(f"{gen}\\n"); sys.stdout.flush()
"""


@pytest.mark.slow
def test_sigkill_during_saves_leaves_a_loadable_file(tmp_path: Path) -> None:
    path = tmp_path / "seen.blf"
    script = tmp_path / "saver.py"
    script.write_text(SAVER)
    rng = random.Random(6019)
    kills = 0
    killed: set[int] = set()
    deadline = time.monotonic() + 240
    while kills < 50 and time.monotonic() < deadline:
        proc = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE, text=True)
        killed.add(proc.pid)
        assert proc.stdout is not None
        if kills == 0 or not path.exists():
            proc.stdout.readline()  # let one save complete first
        time.sleep(rng.uniform(0.0, 0.4))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
        kills += 1
        f = BloomFilter.load(path)  # verifies both checksums
        header = bloomline.read_header(path.read_bytes())
        assert header["kind"] == "BloomFilter" and f.num_bits == header["num_slots"]
        assert "generation-1" in f
    assert kills >= 50
    # Never a broken target, and nothing else beside it but temporaries
    # (seen.blf.tmp-PID-N) of killed saves: at most one per killed process
    # (a finished save renames its own), none longer than a whole file. On
    # Linux the new file is written unnamed (O_TMPFILE) and named only for
    # its rename, so a kill leaves one only between those two directory
    # operations: a few in these 50 at most (2 in a CI run on a loaded
    # machine, before the window was cut to those two operations), where a
    # file written under its name the whole time left about half of them
    # behind (25 of 50), a whole filter each.
    full = path.stat().st_size
    others = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("seen.blf.tmp-"))
    assert others == ["saver.py", "seen.blf"], others
    leftovers = list(tmp_path.glob("seen.blf.tmp-*"))
    pids = [int(p.name.split("-")[1]) for p in leftovers]
    assert set(pids) <= killed and len(pids) == len(set(pids)), sorted(pids)
    assert all(p.stat().st_size <= full for p in leftovers)
    if unnamed_files_work(tmp_path):
        assert len(leftovers) <= 8, sorted(p.name for p in leftovers)


def unnamed_files_work(directory: Path) -> bool:
    """Can this directory hold an O_TMPFILE (Linux, and a file system that has it)?"""
    if not hasattr(os, "O_TMPFILE") or not os.path.isdir("/proc/self/fd"):
        return False
    try:
        os.close(os.open(directory, os.O_TMPFILE | os.O_WRONLY, 0o644))
    except OSError:
        return False
    return True


WRITER = """
import sys, bloomline
f = bloomline.BloomFilter.open(sys.argv[1], "r+")
i = 0
while True:
    batch = [f"url-{i}-{j}" for j in range(100)]
    f.add_many(batch)
    sys.stdout.write(f"{i}\\n"); sys.stdout.flush()
    i += 1
"""


def test_sigkill_of_a_mapped_writer_loses_nothing_reported(tmp_path: Path) -> None:
    path = tmp_path / "live.blf"
    BloomFilter(1_000_000, 0.001).save(path)
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    proc = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    reported = -1
    deadline = time.monotonic() + 60
    while reported < 300 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        reported = int(line)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    assert reported >= 300
    f = BloomFilter.load(path)  # dirty (never closed): loads, counts its bits
    assert bloomline.read_header(path.read_bytes())["insert_count"] == 0
    keys = [f"url-{i}-{j}" for i in range(reported + 1) for j in range(100)]
    assert f.contains_many(keys).all()
    # Its insert count read as the header's (0) made a copy saved from it a
    # clean file that said 0 keys, whose capacity warning came that much
    # later: a dirty file's count is now at least its bits' estimate, by
    # every read.
    mapped = BloomFilter.load(path, mmap=True)
    for read in (f, mapped, BloomFilter.from_bytes(path.read_bytes()), bloomline.from_bytes(path.read_bytes())):
        assert read.insert_count >= 0.95 * len(keys), (read.insert_count, len(keys))
    mapped.close()
    f.save(tmp_path / "copy.blf")
    assert BloomFilter.load(tmp_path / "copy.blf").insert_count == f.insert_count


# ---- golden files ---------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(json.loads((DATA / "golden.json").read_text())))
def test_golden_files_still_load(name: str) -> None:
    meta = json.loads((DATA / "golden.json").read_text())[name]
    f = bloomline.from_bytes((DATA / name).read_bytes())
    assert type(f).__name__ == meta["kind"]
    present = [f"golden-{i}" for i in range(1000)]
    absent = [f"absent-{i}" for i in range(1000)]
    assert f.contains_many(present).all()
    assert int(f.contains_many(absent).sum()) == meta["absent_hits"]
    again = type(f).load(DATA / name)
    assert again == f


# ---- the atomic writer, from Python ------------------------------------------------------


def test_atomic_writer_commits_or_leaves_the_target_alone(tmp_path: Path) -> None:
    path = tmp_path / "out.bin"
    path.write_bytes(b"old")
    with bloomline._core.AtomicWriter(path) as w:
        w.write(b"new ")
        w.write(bytearray(b"bytes"))
        w.commit()
    assert path.read_bytes() == b"new bytes"
    with bloomline._core.AtomicWriter(path) as w:
        w.write(b"never")  # no commit: nothing happens to the target
    with pytest.raises(RuntimeError, match="boom"), bloomline._core.AtomicWriter(str(path)) as w:
        w.write(b"half")
        raise RuntimeError("boom")
    assert path.read_bytes() == b"new bytes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]
    with pytest.raises(ValueError, match="committed or aborted"):
        w.write(b"x")
    with pytest.raises(FileNotFoundError):
        bloomline._core.AtomicWriter(tmp_path / "no-dir" / "f")



@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv (util-linux)")
def test_a_file_the_saver_may_replace_but_not_read_is_replaced(tmp_path: Path) -> None:
    # Mode 0200, a process without root's override: the held save could not
    # open it, took it for no file at all, and refused to rename over what
    # was there ("File exists").
    path = tmp_path / "f.blf"
    BloomFilter(1000, 0.01).save(path)
    path.chmod(0o200)
    code = ("import sys, bloomline; f = bloomline.BloomFilter(1000, 0.01); f.add('new'); f.save(sys.argv[1]); "
            "print('saved')")
    r = subprocess.run(["setpriv", "--bounding-set=-all", "--inh-caps=-all", sys.executable, "-c", code, str(path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "saved\n", r.stderr[-2000:]
    path.chmod(0o600)
    assert "new" in BloomFilter.load(path)


def test_a_relative_save_lands_where_it_began_when_the_directory_changes(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A save to a relative path, the working directory changed (by another
    thread, say) before it commits: the file lands in the directory the save
    began in, beside the file it replaces. Every step after the writer is
    made works in the directory it opened then; the rename by path failed
    (ENOENT), and a file named by path at commit would have landed in the
    new directory, silently."""
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    (here / "out.bin").write_bytes(b"old")
    monkeypatch.chdir(here)
    with bloomline._core.AtomicWriter("out.bin") as w:
        w.write(b"new")
        os.chdir(elsewhere)
        w.commit()
    assert (here / "out.bin").read_bytes() == b"new"
    assert sorted(p.name for p in here.iterdir()) == ["out.bin"] and not list(elsewhere.iterdir())


# ---- readers check what they rely on ---------------------------------------------------


def _resign(data: bytearray) -> bytes:
    """Header and payload checksums made right again for hand-made bytes."""
    import struct

    from bloomline import murmur3_128

    data[120:128] = struct.pack("<Q", murmur3_128(bytes(data[:120])) & (2**64 - 1))
    data[-8:] = struct.pack("<Q", murmur3_128(bytes(data[128:-8])) & (2**64 - 1))
    return bytes(data)


@pytest.mark.parametrize("kind", ["bloom", "counting"])
def test_bits_past_num_slots_are_refused_by_every_reader(kind: str, tmp_path: Path) -> None:
    f = (BloomFilter.from_params(1000, 3, layout="standard") if kind == "bloom"
         else CountingBloomFilter.from_params(1001, 3, layout="standard", counter_bits=4))
    f.update(range(50))
    raw = bytearray(f.to_bytes())
    raw[-9] |= 0x80  # the payload's last byte: padding past num_slots
    bad = _resign(raw)
    with pytest.raises(ValueError, match="bits are set past num_slots"):
        bloomline.from_bytes(bad)
    (tmp_path / "bad.blf").write_bytes(bad)
    with pytest.raises(ValueError, match="bits are set past num_slots"):
        type(f).load(tmp_path / "bad.blf")
    with pytest.raises(ValueError, match="bits are set past num_slots"):
        type(f).load(tmp_path / "bad.blf", mmap=True, verify=True)
    with pytest.raises(ValueError, match="bits are set past num_slots"):
        type(f).open(tmp_path / "bad.blf", "r+", verify=True)
    if kind == "bloom":
        with pytest.raises(ValueError, match="bits are set past num_slots"):
            BloomFilter.from_buffer(bytes(raw[128:-8]), 1000, 3, layout="standard")
        with pytest.raises(ValueError, match="bits are set past num_slots"):
            BloomFilter.from_buffer(b"\xff" * 64, 1, 1, layout="standard")


def test_a_fill_that_does_not_match_the_payload_is_refused(tmp_path: Path) -> None:
    f = BloomFilter(1000)
    f.update(range(100))
    raw = bytearray(f.to_bytes())
    raw[80:88] = (3).to_bytes(8, "little")  # a low fill, checksums made right
    bad = _resign(raw)
    with pytest.raises(ValueError, match=f"fill 3 does not match the payload \\({f.bits_set} bits set\\)"):
        BloomFilter.from_bytes(bad)
    (tmp_path / "f.blf").write_bytes(bad)
    with pytest.raises(ValueError, match="fill 3 does not match"):
        BloomFilter.open(tmp_path / "f.blf", verify=True)
    assert BloomFilter.open(tmp_path / "f.blf", "r").bits_set == 3  # unverified opens trust the header


def test_paths_are_str_bytes_or_pathlike_and_never_hold_nul(tmp_path: Path) -> None:
    f = BloomFilter(100)
    f.add("k")
    for path in (str(tmp_path / "a.blf"), bytes(tmp_path / "b.blf"), tmp_path / "c.blf"):
        f.save(path)
        assert "k" in BloomFilter.load(path) and "k" in BloomFilter.open(path, "r")
    s = ScalableBloomFilter(10)
    s.save(bytes(tmp_path / "s.blf"))
    assert ScalableBloomFilter.load(tmp_path / "s.blf") == s
    for bad in (str(tmp_path / "x\0y.blf"), bytes(tmp_path / "x\0y.blf")):
        for call in (lambda p: f.save(p), BloomFilter.load, lambda p: BloomFilter.open(p), lambda p: s.save(p),
                     lambda p: BloomFilter.load(p, mmap=True)):
            with pytest.raises(ValueError, match="NUL byte|null byte"):
                call(bad)
    assert not list(tmp_path.glob("x*"))
    with pytest.raises(TypeError):
        f.save(3)  # type: ignore[arg-type]


# ---- one save path for every kind ----------------------------------------------------------


def _savers(tmp_path: Path) -> dict[str, object]:
    s = ScalableBloomFilter(100, 0.01)
    s.update(range(300))  # three stages
    w = WindowedBloomFilter(1000, 0.01, window=3600)
    w.update(range(300))
    return {"bloom": BloomFilter(1000, 0.01), "counting": CountingBloomFilter(1000, 0.01), "scalable": s, "windowed": w}


@pytest.mark.parametrize("kind", ["bloom", "counting", "scalable", "windowed"])
def test_every_kind_refuses_to_save_over_a_file_mapped_for_writing(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "shared.blf"
    BloomFilter(10_000, 0.01).save(path)
    f = _savers(tmp_path)[kind]
    with BloomFilter.open(path, "r+") as live:
        live.add("kept")
        with pytest.raises(ValueError, match=r"'.*shared\.blf' is open for writing through a map"):
            f.save(path)  # type: ignore[attr-defined]
        live.add("after")
    back = BloomFilter.load(path)  # the writer's file is still the one at path
    assert "kept" in back and "after" in back
    assert not list(tmp_path.glob("*.tmp-*"))


@pytest.mark.parametrize("kind", ["bloom", "counting", "scalable", "windowed"])
def test_saving_over_a_file_keeps_its_mode(kind: str, tmp_path: Path) -> None:
    f = _savers(tmp_path)[kind]
    path = tmp_path / "f.blf"
    for mode in (0o600, 0o664, 0o640):
        path.write_bytes(b"old")
        path.chmod(mode)
        f.save(path)  # type: ignore[attr-defined]
        assert path.stat().st_mode & 0o7777 == mode
        assert type(f).load(path) == f  # type: ignore[attr-defined]
    new = tmp_path / "new.blf"
    f.save(new)  # type: ignore[attr-defined]
    assert new.stat().st_mode & 0o777 == 0o644 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("kind", ["bloom", "counting", "scalable", "windowed"])
def test_saving_over_a_read_only_file_is_refused(kind: str, tmp_path: Path) -> None:
    f = _savers(tmp_path)[kind]
    path = tmp_path / "f.blf"
    path.write_bytes(b"precious")
    path.chmod(0o444)
    with pytest.raises(PermissionError, match=r"read-only file, mode 0444, is not replaced") as e:
        f.save(path)  # type: ignore[attr-defined]
    assert e.value.filename == str(path)
    assert path.read_bytes() == b"precious" and path.stat().st_mode & 0o7777 == 0o444
    assert not list(tmp_path.glob("*.tmp-*"))


def test_a_save_that_cannot_start_names_the_path_given(tmp_path: Path) -> None:
    target = tmp_path / "no-dir" / "f.blf"
    for f in _savers(tmp_path).values():
        with pytest.raises(FileNotFoundError) as e:
            f.save(target)  # type: ignore[attr-defined]
        assert e.value.filename == str(target) and ".tmp-" not in str(e.value)


# ---- pickles name only bloomline ----------------------------------------------------------


class OnlyBloomline(pickle.Unpickler):
    """An unpickler that resolves nothing outside the bloomline package."""

    def find_class(self, module: str, name: str) -> object:
        if module == "bloomline" or module.startswith("bloomline."):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refused {module}.{name}")


@pytest.mark.parametrize("protocol", range(6))
def test_pickles_of_every_kind_name_only_bloomline(protocol: int, tmp_path: Path) -> None:
    import io

    BloomFilter(5000, 0.01).save(tmp_path / "m.blf")
    mapped = BloomFilter.open(tmp_path / "m.blf", "r+")
    filters: list[object] = [*_savers(tmp_path).values(), mapped,
                             CountingBloomFilter.from_params(4096, 3, layout="standard", counter_bits=16)]
    for f in filters:
        f.update(["a", "b", 7])  # type: ignore[attr-defined]
    mapped.flush()
    filters.append(BloomFilter.load(tmp_path / "m.blf", mmap=True))
    for f in filters:
        data = pickle.dumps(f, protocol=protocol)
        back = OnlyBloomline(io.BytesIO(data)).load()
        assert type(back) is type(f) and back.to_bytes() == f.to_bytes()  # type: ignore[attr-defined]
        assert not getattr(back, "mapped", False)  # a pickle holds the bytes, not the mapping
    mapped.close()


@pytest.mark.parametrize("kind", ["BloomFilter", "CountingBloomFilter", "ScalableBloomFilter", "WindowedBloomFilter"])
def test_a_subclass_is_refused_by_pickle_and_copy_rather_than_given_back_as_its_kind(kind: str) -> None:
    """A pickle or a copy holds the kind's checked bytes and gives back the
    kind itself: a subclass would come back as a plain filter without its
    class or attributes. Refused, naming both."""
    import copy

    base = getattr(bloomline, kind)
    extra = {"window": 60.0} if kind == "WindowedBloomFilter" else {}
    tagged = type("Tagged", (base,), {})(1000, 0.01, **extra)
    tagged.tag = "mine"
    tagged.add("a")
    for what, call in (("a pickle of", pickle.dumps), ("copy.copy of", copy.copy), ("copy.deepcopy of", copy.deepcopy)):
        with pytest.raises(TypeError, match=f"{what} a Tagged would give back a plain {kind}, without its class"):
            call(tagged)
    plain = base(1000, 0.01, **extra)
    plain.add("a")
    for back in (pickle.loads(pickle.dumps(plain)), copy.copy(plain), copy.deepcopy(plain)):
        assert type(back) is base and "a" in back


def test_pickle_text_that_is_no_latin_1_is_a_valueerror() -> None:
    """Protocols 0-2 carry a filter's bytes as latin-1 text: other text is
    refused as data, not as a codec's error."""
    from bloomline._pickling import restore

    with pytest.raises(ValueError, match="data is text with characters past U\\+00FF"):
        restore("\u20ac" * 200)


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("v0_pickle_*.pickle")))
def test_pickles_that_named_core_from_bytes_still_load(name: str) -> None:
    # Written by bloomline at commit 5fb566b, before pickles named only
    # bloomline._pickling.restore: a BloomFilter or
    # CountingBloomFilter pickle then named pybind11's reduction of
    # _core.from_bytes (builtins.eval); an unrestricted unpickler still reads it.
    f = pickle.loads((DATA / name).read_bytes())
    assert type(f).__name__ == {"bloom": "BloomFilter", "counting": "CountingBloomFilter",
                                "scalable": "ScalableBloomFilter"}[name.split("_")[2]]
    assert f.contains_many([f"golden-{i}" for i in range(300)]).all()
