"""Many writers on one filter file: handles in threads and in processes that
map the same file for writing (BloomFilter.open(path, "r+")). No bit is
ever lost, the header stays true (a count of writers; the last close makes
the checksum current), a writer killed at any moment leaves a file that the
next open repairs, and "new" between processes is at-least-once (a key two
processes add at the same instant may be new to both).

Builds with flock locks only (macOS, and Linux built with -DBLOOMLINE_FLOCK=ON,
bloomline.file_locks == "flock") take one writer per file at a time: there
the tests of many writers are skipped, and the tests at the end check that a
second writer is refused with a clear error and that no add is lost."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import bloomline
from bloomline import BloomFilter, CountingBloomFilter

# core: run by CI's wheel, clang/flock and sanitizer jobs (.ci/run); slow: many processes, killed and
# restarted, left out of the fast subset (pytest -m "not slow")
pytestmark = [pytest.mark.core, pytest.mark.slow]

FLOCK = bloomline.file_locks == "flock"
many_writers = pytest.mark.skipif(FLOCK, reason="this build takes one writer per file (flock locks, as on macOS)")
flock_only = pytest.mark.skipif(not FLOCK, reason="this build takes many writers per file (OFD locks)")
ONE_WRITER = r"is open for writing by another handle, and this build allows one writer per file"

# A writer process: open the file for writing, wait for "go" on stdin, add
# its keys in batches (by every route), report each finished batch on
# stdout, close unless told to hang on.
WORKER = r"""
import sys, numpy as np, bloomline
path, lo, n, batch, kind, hold = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
cls = bloomline.CountingBloomFilter if kind == "counting" else bloomline.BloomFilter
f = cls.open(path, "r+")
sys.stdout.write("ready\n"); sys.stdout.flush()
sys.stdin.readline()
keys = np.arange(lo, lo + n, dtype=np.uint64)
new = 0
for i, start in enumerate(range(0, n, batch)):
    chunk = keys[start:start + batch]
    if i % 3 == 0:
        new += int(f.add_many(chunk).sum())
    elif i % 3 == 1:
        new += sum(f.add(int(k)) for k in chunk[:50]) + int(f.add_many(chunk[50:]).sum())
    else:
        f.update(iter(chunk.tolist()))
    sys.stdout.write(f"done {start + len(chunk)}\n"); sys.stdout.flush()
if hold == "close":
    f.close()
sys.stdout.write(f"new {new}\n"); sys.stdout.flush()
if hold == "hang":
    sys.stdin.readline()
"""


def next_line(p: subprocess.Popen[str], timeout: float = 60.0) -> str:
    """The worker's next line of output. A worker that says nothing for
    `timeout` seconds is killed, so a hung worker fails the test rather than
    hanging it; one that has died fails it at once (no line: EOF)."""
    assert p.stdout is not None
    watchdog = threading.Timer(timeout, p.kill)
    watchdog.start()
    try:
        line = p.stdout.readline()
    finally:
        watchdog.cancel()
    if not line:
        raise AssertionError(f"worker {p.pid} ended before its next line (exit code {p.wait(timeout=30)}; "
                             f"killed if it had said nothing for {timeout:g} s)")
    return line


def wait_for(p: subprocess.Popen[str], prefix: str) -> str:
    """Read the worker's output up to the first line starting with prefix."""
    while True:
        line = next_line(p)
        if line.startswith(prefix):
            return line


def start_worker(path: Path, lo: int, n: int, batch: int = 5000, kind: str = "bloom",
                 hold: str = "close") -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, "-c", WORKER, str(path), str(lo), str(n), str(batch), kind, hold],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert next_line(p) == "ready\n"
    return p


def go(*procs: subprocess.Popen[str]) -> None:
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()


def finish(p: subprocess.Popen[str]) -> list[str]:
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 0
    return out.splitlines()


def keys_of(lo: int, n: int) -> np.ndarray:
    return np.arange(lo, lo + n, dtype=np.uint64)


@many_writers
@pytest.mark.parametrize("kind", ["bloom", "counting"])
def test_two_processes_and_two_threads_lose_no_bit_20_times(tmp_path: Path, kind: str) -> None:
    cls = CountingBloomFilter if kind == "counting" else BloomFilter
    n = 40_000
    for run in range(20):
        path = tmp_path / f"shared-{run}.blf"
        cls(300_000, 0.01, layout="blocked" if run % 2 else "standard").save(path)
        procs = [start_worker(path, lo, n, kind=kind) for lo in (0, 10**9)]
        handles = [cls.open(path, "r+") for _ in range(2)]

        def add(h: object, lo: int) -> None:
            h.add_many(keys_of(lo, n // 2))  # type: ignore[attr-defined]
            h.update(keys_of(lo + n // 2, n // 2))  # type: ignore[attr-defined]

        threads = [threading.Thread(target=add, args=(h, lo)) for h, lo in zip(handles, (2 * 10**9, 3 * 10**9))]
        go(*procs)
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for p in procs:
            finish(p)
        header = bloomline.read_header(path.read_bytes())
        assert header["dirty"]  # the two thread handles are still open
        for h in handles:
            h.close()  # type: ignore[attr-defined]
        f = cls.load(path)  # verified: clean, checksum current
        assert not bloomline.read_header(path.read_bytes())["dirty"]
        for lo in (0, 10**9, 2 * 10**9, 3 * 10**9):
            assert f.contains_many(keys_of(lo, n)).all(), (run, lo)
        assert bloomline.read_header(path.read_bytes())["insert_count"] >= 4 * n * 0.97


@many_writers
def test_one_writer_closing_while_another_writes_keeps_the_file_dirty(tmp_path: Path) -> None:
    path = tmp_path / "f.blf"
    BloomFilter(100_000, 0.01).save(path)
    keeper = start_worker(path, 0, 20_000, hold="hang")
    with BloomFilter.open(path, "r+") as mine:
        mine.add_many(keys_of(10**9, 1000))
    header = bloomline.read_header(path.read_bytes())
    assert header["dirty"]  # the worker still has it open: no checksum, not clean
    go(keeper)
    wait_for(keeper, "new")
    keeper.send_signal(signal.SIGKILL)
    keeper.communicate(timeout=30)
    f = BloomFilter.load(path)  # dirty, its writer dead: it loads, nothing lost
    assert f.contains_many(keys_of(0, 20_000)).all() and f.contains_many(keys_of(10**9, 1000)).all()


@many_writers
def test_kill_9_of_one_of_two_writers_30_times(tmp_path: Path) -> None:
    rng = random.Random(19)
    for run in range(30):
        path = tmp_path / f"k{run}.blf"
        BloomFilter(400_000, 0.01, layout=rng.choice(["blocked", "standard"])).save(path)
        survivor_done = rng.random() < 0.5
        victim = start_worker(path, 0, 200_000, batch=2000)
        survivor = start_worker(path, 10**9, 20_000, batch=2000, hold="close" if survivor_done else "hang")
        go(victim, survivor)
        time.sleep(rng.uniform(0.0, 0.25))
        victim.send_signal(signal.SIGKILL)
        out, _ = victim.communicate(timeout=30)
        reported = max([int(line.split()[1]) for line in out.splitlines() if line.startswith("done")], default=0)
        if survivor_done:  # the last writer out repairs what the dead one left
            finish(survivor)
        else:  # or the next open does, the survivor killed too (after its adds)
            wait_for(survivor, "new")
            survivor.send_signal(signal.SIGKILL)
            survivor.communicate(timeout=30)
            assert bloomline.read_header(path.read_bytes())["dirty"]
        with BloomFilter.open(path, "r+") as repaired:
            assert repaired.contains_many(keys_of(0, reported)).all()
            assert repaired.insert_count >= 0.9 * reported
        f = BloomFilter.load(path)  # clean again: checksum verified
        assert not bloomline.read_header(path.read_bytes())["dirty"]
        assert f.contains_many(keys_of(0, reported)).all()
        if survivor_done:
            assert f.contains_many(keys_of(10**9, 20_000)).all()
            assert bloomline.read_header(path.read_bytes())["insert_count"] >= 0.9 * (reported + 20_000)


@many_writers
def test_new_between_processes_is_at_least_once(tmp_path: Path) -> None:
    """The same keys added by two processes at the same time: each key is
    new to at least one of them (no key lost). It may be new to both:
    exactly-once across processes is what the Redis filter offers."""
    path = tmp_path / "f.blf"
    n = 100_000
    BloomFilter(300_000, 0.01).save(path)
    procs = [start_worker(path, 0, n, batch=n) for _ in range(2)]
    go(*procs)
    news = [int(finish(p)[-1].split()[1]) for p in procs]
    f = BloomFilter.load(path)
    assert f.contains_many(keys_of(0, n)).all()
    # every key new somewhere; duplicates ("new" to both) are allowed
    assert sum(news) >= n * 0.97


def test_save_over_a_mapped_file(tmp_path: Path) -> None:
    path = tmp_path / "f.blf"
    BloomFilter(10_000, 0.01).save(path)
    with BloomFilter.open(path, "r+") as live:
        live.add("before")
        live.save(path)  # its own file: flushed in place, not replaced
        live.add("after")  # still goes to the file at path
        with pytest.raises(ValueError, match="is open for writing through a map"):
            BloomFilter(10_000, 0.01).save(path)  # would swap the file from under `live`
        other = tmp_path / "copy.blf"
        live.save(other)
        assert "before" in BloomFilter.load(other)
    back = BloomFilter.load(path)
    assert "before" in back and "after" in back
    ro = BloomFilter.load(path, mmap=True)
    with pytest.raises(ValueError, match="mapped read-only"):
        ro.save(path)


def test_read_only_maps_say_how_they_were_opened(tmp_path: Path) -> None:
    path = tmp_path / "f.blf"
    BloomFilter(1000).save(path)
    for f in (BloomFilter.open(path, "r"), BloomFilter.load(path, mmap=True)):
        with pytest.raises(ValueError, match=r"read-only \(mapped read-only from '.*f\.blf'"):
            f.add("x")
        assert "mmap=True" not in str(pytest.raises(ValueError, f.add, "x").value)


# Writers that open, add a few keys and close, again and again, until told to stop.
CYCLER = r"""
import sys, time, numpy as np, bloomline
path, lo, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3]
import os
cycles = 0
deadline = time.monotonic() + 120
while not os.path.exists(stop) and time.monotonic() < deadline:
    with bloomline.BloomFilter.open(path, "r+") as f:
        f.add_many(np.arange(lo + 200 * cycles, lo + 200 * (cycles + 1), dtype=np.uint64))
    cycles += 1
    if cycles == 1:
        print("running", flush=True)
print(cycles)
"""


@many_writers  # (two writers share the file: the flock path takes one)
@pytest.mark.parametrize("where", ["tmp", "shm"])
def test_readers_never_call_a_file_that_writers_share_corrupt(tmp_path: Path, where: str) -> None:
    """3,000 verified loads (whole reads and verified maps) while two
    processes open, add and close the file: none reports corruption."""
    base = tmp_path
    if where == "shm":
        if not os.path.isdir("/dev/shm"):
            pytest.skip("no /dev/shm")
        base = Path(tempfile.mkdtemp(dir="/dev/shm"))
    try:
        path, stop = base / "shared.blf", base / "stop"
        BloomFilter(1_000_000, 0.01).save(path)  # 1.2 MB: a verified load takes a while
        writers = [subprocess.Popen([sys.executable, "-c", CYCLER, str(path), str(lo), str(stop)],
                                    stdout=subprocess.PIPE, text=True) for lo in (0, 10**9)]
        for w in writers:
            assert next_line(w) == "running\n"
        errors: list[str] = []
        loads = 0
        deadline = time.monotonic() + 120
        try:
            while loads < 3000 and time.monotonic() < deadline:
                try:
                    f = BloomFilter.load(path, mmap=True, verify=True) if loads % 2 else BloomFilter.load(path)
                    f.close()
                except ValueError as e:
                    errors.append(str(e))
                loads += 1
        finally:
            stop.touch()
            cycles = [int(w.communicate(timeout=120)[0]) for w in writers]
            print(f"{loads} loads while the writers made {cycles} open-add-close cycles")
        assert loads == 3000, f"only {loads} loads in 120 s"
        assert errors == [], f"{len(errors)} of {loads} loads failed, first: {errors[0]}"
        assert min(cycles) >= 20  # the loads overlapped many opens and closes
        # afterwards the file is clean and holds every key the writers added
        f = BloomFilter.load(path)
        assert not bloomline.read_header(path.read_bytes())["dirty"]
        for lo, c in zip((0, 10**9), cycles):
            assert f.contains_many(np.arange(lo, lo + 200 * c, dtype=np.uint64)).all()
    finally:
        if where == "shm":
            shutil.rmtree(base, ignore_errors=True)


# ---- one writer per file: flock builds ------------------------------------

OPENER = r"""
import sys, bloomline
try:
    f = bloomline.BloomFilter.open(sys.argv[1], "r+")
except ValueError as e:
    print("refused", e)
else:
    f.add("from-the-opener")
    f.close()
    print("opened")
"""


def test_file_locks_says_how_many_writers_a_file_takes(tmp_path: Path) -> None:
    path = tmp_path / "f.blf"
    BloomFilter(10_000, 0.01).save(path)
    assert bloomline.file_locks in ("ofd", "flock")
    with BloomFilter.open(path, "r+") as first:
        first.add("first")
        if FLOCK:
            with pytest.raises(ValueError, match=ONE_WRITER):
                BloomFilter.open(path, "r+")
        else:
            with BloomFilter.open(path, "r+") as second:
                second.add("second")
    back = BloomFilter.load(path)
    assert "first" in back and ("second" in back) != FLOCK


@flock_only
@pytest.mark.parametrize("kind", ["bloom", "counting"])
def test_a_second_writer_is_refused_and_no_add_is_lost(tmp_path: Path, kind: str) -> None:
    cls = CountingBloomFilter if kind == "counting" else BloomFilter
    path = tmp_path / "f.blf"
    cls(300_000, 0.01).save(path)
    writer = start_worker(path, 0, 100_000, kind=kind, hold="hang")  # open for writing, adds on "go"
    go(writer)
    # While it adds: a handle of this process, and another process, are
    # refused with an error naming the file and why; readers still read.
    with pytest.raises(ValueError, match=ONE_WRITER) as refused:
        cls.open(path, "r+")
    assert str(path) in str(refused.value)
    other = subprocess.run([sys.executable, "-c", OPENER.replace("BloomFilter", cls.__name__), str(path)],
                           capture_output=True, text=True, timeout=60, check=True)
    assert other.stdout.startswith("refused ") and "one writer per file" in other.stdout, other.stdout
    with pytest.raises(ValueError, match="is open for writing through a map"):
        cls(300_000, 0.01).save(path)  # saving over it would lose the writer's later adds
    cls.load(path)  # a reader is not a writer
    wait_for(writer, "new")
    writer.send_signal(signal.SIGKILL)  # never closed: its lock goes with the process
    writer.communicate(timeout=30)
    # The file is dirty: the next writer gets it and repairs the header.
    assert bloomline.read_header(path.read_bytes())["dirty"]
    with cls.open(path, "r+") as next_writer:
        assert next_writer.contains_many(keys_of(0, 100_000)).all()
        next_writer.add_many(keys_of(10**9, 1000))
    f = cls.load(path)  # clean and checksummed again
    assert not bloomline.read_header(path.read_bytes())["dirty"]
    assert f.contains_many(keys_of(0, 100_000)).all() and f.contains_many(keys_of(10**9, 1000)).all()
    assert bloomline.read_header(path.read_bytes())["insert_count"] >= 0.97 * 101_000


@flock_only
def test_writers_racing_to_open_one_wins_the_others_are_refused_20_times(tmp_path: Path) -> None:
    for run in range(20):
        path = tmp_path / f"race-{run}.blf"
        BloomFilter(10_000, 0.01).save(path)
        procs = [subprocess.Popen([sys.executable, "-c", OPENER, str(path)], stdout=subprocess.PIPE, text=True)
                 for _ in range(3)]
        outs = [p.communicate(timeout=60)[0] for p in procs]
        assert all(p.returncode == 0 for p in procs)
        opened = [o for o in outs if o.startswith("opened")]
        refused = [o for o in outs if o.startswith("refused") and "one writer per file" in o]
        # One at a time: each opener either wrote or was told why not; a
        # later one may open after an earlier one closed.
        assert len(opened) >= 1 and len(opened) + len(refused) == 3, outs
        assert "from-the-opener" in BloomFilter.load(path)  # verified: clean, nothing lost
        assert not bloomline.read_header(path.read_bytes())["dirty"]


@flock_only
def test_a_killed_writer_releases_the_file_and_the_next_open_repairs_it(tmp_path: Path) -> None:
    rng = random.Random(23)
    for run in range(10):
        path = tmp_path / f"k{run}.blf"
        BloomFilter(400_000, 0.01, layout=rng.choice(["blocked", "standard"])).save(path)
        victim = start_worker(path, 0, 200_000, batch=2000)
        go(victim)
        time.sleep(rng.uniform(0.0, 0.25))
        victim.send_signal(signal.SIGKILL)
        out, _ = victim.communicate(timeout=30)
        reported = max([int(line.split()[1]) for line in out.splitlines() if line.startswith("done")], default=0)
        with BloomFilter.open(path, "r+") as repaired:  # not refused: the lock died with its process
            assert repaired.contains_many(keys_of(0, reported)).all()
            assert repaired.insert_count >= 0.9 * reported
        f = BloomFilter.load(path)
        assert not bloomline.read_header(path.read_bytes())["dirty"]
        assert f.contains_many(keys_of(0, reported)).all()
