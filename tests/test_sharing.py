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

import contextlib
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
from typing import Any

import numpy as np
import pytest

import bloomline
from bloomline import BloomFilter, CountingBloomFilter, WindowedBloomFilter
from forking import FORK_AND_DIE

# core: run by CI's wheel and sanitizer (clang, flock) jobs (.ci/run); slow: many processes, killed and
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


# Holds the header lock of a file (byte 0, what a writer's open takes) for a
# while, as a writer in the middle of its open or flush does.
HOLD_HEADER = r"""
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX, 1, 0)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""

# Opens the file "r+" (waiting for its header lock), and once told to go on
# (a line on stdin), adds keys and closes.
OPEN_AND_ADD = r"""
import sys, numpy as np, bloomline
kind = bloomline.WindowedBloomFilter if sys.argv[2] == "windowed" else bloomline.BloomFilter
extra = {"clock": lambda: 10.0} if sys.argv[2] == "windowed" else {}
with kind.open(sys.argv[1], "r+", **extra) as f:
    sys.stdin.readline()
    f.add_many(np.arange(1000, dtype=np.uint64) + 7_000_000)
"""


@pytest.mark.parametrize("kind", ["bloom", "windowed"])
def test_a_save_never_replaces_a_file_a_writer_is_opening(kind: str, tmp_path: Path) -> None:
    # A save checked that no writer had the file mapped, then renamed its new
    # file over the path. A writer whose open fell between the two mapped the
    # old file, which the rename unlinked: its adds and its close went there,
    # and the file at the path never had them (5 of 240 trials of a hostile
    # read; here the writer is held in its open by the header lock, so the
    # build before this failed every time). Now the save holds the header
    # lock over its check and its rename, and a writer that finds the path
    # renamed once it has that lock opens the new file. Either way, keys
    # added after the save returned are in the file at the path.
    path = tmp_path / "f.blf"

    def make() -> Any:
        if kind == "windowed":
            return WindowedBloomFilter(10_000, 0.01, window=3600, clock=lambda: 10.0)
        return BloomFilter(10_000, 0.01)

    if kind == "windowed":
        make().save(path, shared=True)
    else:
        make().save(path)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_HEADER, str(path), "3"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        holder.stdout.close()
        writer = subprocess.Popen([sys.executable, "-c", OPEN_AND_ADD, str(path), kind], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # The writer has opened the file and waits for its header lock: its
        # descriptor of the file shows among its open files.
        deadline = time.monotonic() + 30

        def writer_has_it() -> bool:
            with contextlib.suppress(OSError):
                return any(os.readlink(f"/proc/{writer.pid}/fd/{fd}") == str(path)
                           for fd in os.listdir(f"/proc/{writer.pid}/fd"))
            return False

        while not writer_has_it() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert writer_has_it(), "the writer never opened the file"
        time.sleep(0.1)
        try:
            if kind == "windowed":
                make().save(path, shared=True)
            else:
                make().save(path)
        except ValueError as e:  # the writer got the lock first and joined: refused, as documented
            assert "is open for writing through a map" in str(e)
        out, err = writer.communicate("go\n", timeout=60)
        assert writer.returncode == 0, err
    finally:
        holder.kill()
        holder.wait()
    back = WindowedBloomFilter.load(path, clock=lambda: 10.0) if kind == "windowed" else BloomFilter.load(path)
    assert back.contains_many(np.arange(1000, dtype=np.uint64) + 7_000_000).all()


# One thread reads a ring file it maps "r+" (to_bytes takes the GIL back
# while it holds the file's header lock) while another saves over it.
READ_BESIDE_SAVES = r"""
import sys, threading, time, bloomline
path = sys.argv[1]
clock = lambda: 10.0
w = bloomline.WindowedBloomFilter.open(path, "r+", clock=clock)
other = bloomline.WindowedBloomFilter(1000, 0.01, window=3600, clock=clock)
stop = time.monotonic() + 2.0
counts = {"read": 0, "refused": 0}
def read():
    while time.monotonic() < stop:
        w.to_bytes()
        counts["read"] += 1
def save():
    while time.monotonic() < stop:
        try:
            other.save(path, shared=True)
        except ValueError:
            counts["refused"] += 1
threads = [threading.Thread(target=read), threading.Thread(target=save)]
for t in threads: t.start()
for t in threads: t.join()
w.close()
print(counts["read"] > 0, counts["refused"] > 0)
"""


def test_a_save_beside_a_thread_reading_the_file_it_would_replace_never_hangs(tmp_path: Path) -> None:
    # The first cut of the held save waited for the header lock already in
    # its first check, with the GIL held, while the reading thread held that
    # lock and waited for the GIL: both hung for good (5 of 5 runs of a
    # hostile read). The first check is a test again, and the held one, at
    # the rename, waits without the GIL.
    path = tmp_path / "ring.blf"
    WindowedBloomFilter(1000, 0.01, window=3600, clock=lambda: 10.0).save(path, shared=True)
    r = subprocess.run([sys.executable, "-c", READ_BESIDE_SAVES, str(path)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and r.stdout.split() == ["True", "True"], (r.stdout, r.stderr[-2000:])


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


@many_writers  # (OFD locks: the readers' share of the header lock exists on this path only)
@pytest.mark.parametrize("kind", ["windowed", "bloom"])
def test_a_read_only_open_waits_for_a_writer_holding_the_header_lock(tmp_path: Path, kind: str) -> None:
    """A writer holds the header lock while it opens, flushes or closes a
    shared file (here: this test, through fcntl). A read-only open must
    wait for it, as a verified load does; a windowed ring opened "r" used
    to read on and catch the writer half-way (checksum errors on a healthy
    file)."""
    import fcntl
    import struct

    if not hasattr(fcntl, "F_OFD_SETLKW"):
        pytest.skip("no OFD locks")
    path = tmp_path / "shared.blf"
    if kind == "windowed":
        WindowedBloomFilter(1000, 0.01, window=3600).save(path, shared=True)
    else:
        BloomFilter(1000, 0.01).save(path)
    opened = threading.Event()

    def read_only() -> None:
        f = WindowedBloomFilter.open(path, "r") if kind == "windowed" else BloomFilter.open(path, "r")
        f.close()
        opened.set()

    fd = os.open(path, os.O_RDWR)
    lock = struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0)  # byte 0: the header lock
    unlock = struct.pack("hhqqi4x", fcntl.F_UNLCK, os.SEEK_SET, 0, 1, 0)
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLKW, lock)
        reader = threading.Thread(target=read_only)
        reader.start()
        assert not opened.wait(0.5)  # waiting on the writer
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, unlock)
        reader.join(timeout=30)
        assert opened.is_set()
    finally:
        os.close(fd)


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


# A writer that adds, forks a child that outlives it, and dies without
# closing (FORK_AND_DIE): its child's pid on stdout.
WRITER_FORKS_AND_DIES = """
import os, sys, time, numpy as np, bloomline
kind, path = sys.argv[1], sys.argv[2]
if kind == "windowed":
    f = bloomline.WindowedBloomFilter.open(path, "r+", clock=lambda: 10.0)
else:
    f = getattr(bloomline, kind).open(path, "r+")
f.add_many(np.arange(5000, dtype=np.uint64))
""" + FORK_AND_DIE


@pytest.mark.parametrize("through", ["path", "symlink"])
@pytest.mark.parametrize("kind", ["BloomFilter", "CountingBloomFilter", "windowed"])
def test_a_writers_forked_child_keeps_none_of_its_locks_once_the_writer_dies(tmp_path: Path, kind: str,
                                                                            through: str) -> None:
    """A child forked from a writer shares the open file its map holds, and
    with it the writer locks: once the writer was killed, the next writer
    did not find itself alone while the child lived, so the dead writer's
    header was not repaired (its insert count stayed 0, the file stayed
    dirty after the last close) and a save over the file was refused (a
    flock build refused the next writer outright). The child now maps the
    file through an open file of its own at its fork."""
    path = tmp_path / "f.blf"
    if kind == "windowed":
        new_windowed_file(path)
    else:
        getattr(bloomline, kind)(100_000, 0.01).save(path)
    opened = path
    if through == "symlink":  # (the writer maps it through a link: the child reopens the file, not the link)
        opened = tmp_path / "link.blf"
        opened.symlink_to(path.name)
    r = subprocess.run([sys.executable, "-c", WRITER_FORKS_AND_DIES, kind, str(opened)], capture_output=True,
                       text=True, timeout=120)
    child = int(r.stdout)
    try:
        os.kill(child, 0)  # (the child lives on)
        assert bloomline.read_header(path.read_bytes())["dirty"]  # (its writer never closed)
        if kind == "windowed":
            with WindowedBloomFilter.open(path, "r+", clock=lambda: 10.0) as w:
                assert w.contains_many(keys_of(0, 5000)).all()
        else:
            with getattr(bloomline, kind).open(path, "r+") as f:
                assert f.contains_many(keys_of(0, 5000)).all()
                assert f.insert_count >= 4900, f.insert_count  # repaired: the writer alone
        assert not bloomline.read_header(path.read_bytes())["dirty"]  # the last writer out cleaned it
        if kind != "windowed":
            getattr(bloomline, kind)(10, 0.01).save(path)  # no writer left: a save over it is not refused
    finally:
        os.kill(child, signal.SIGKILL)


KCMP = {"x86_64": 312, "aarch64": 272}  # kcmp(2)'s syscall number: are two descriptors one open file?


@pytest.mark.skipif(sys.platform != "linux" or os.uname().machine not in KCMP, reason="kcmp(2) is Linux's")
def test_a_fork_while_another_thread_opens_a_file_for_writing_leaves_the_child_none_of_the_writers_open_file(
        tmp_path: Path) -> None:
    """A fork landing while another thread opened a file 'r+' (the open
    releases the GIL; a sparse file's blocks are reserved between the open
    and the map) found the map not yet known to the fork hook, so the child
    kept the writer's open file, and with it the writer's locks (a hostile
    read: 249 of 3,000 such children). Now no child shares it."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    path = tmp_path / "f.blf"
    BloomFilter(20_000_000, 0.01).save(path)
    size = path.stat().st_size
    own_fds = threading.Lock()  # (the test's own descriptor on the file is not the library's: no fork meanwhile)
    stop = threading.Event()
    opens = [0]

    def opener() -> None:
        while not stop.is_set():
            with own_fds:  # a sparse file again, so that each open reserves its blocks
                fd = os.open(path, os.O_RDWR)
                libc.fallocate(fd, 3, ctypes.c_long(4096), ctypes.c_long(size - 8192))
                os.close(fd)
            f = BloomFilter.open(path, "r+")
            opens[0] += 1
            f.close()

    def shared_with(pid: int) -> int:
        def on_the_file(p: int) -> list[int]:
            fds = []
            for name in os.listdir(f"/proc/{p}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{p}/fd/{name}") == str(path):
                        fds.append(int(name))
            return fds
        return sum(libc.syscall(KCMP[os.uname().machine], os.getpid(), pid, 0, mine, theirs) == 0
                   for mine in on_the_file(os.getpid()) for theirs in on_the_file(pid))

    thread = threading.Thread(target=opener, daemon=True)
    thread.start()
    sharing = forks = 0
    deadline = time.monotonic() + 60
    try:
        while forks < 300 and time.monotonic() < deadline:
            with own_fds:
                pid = os.fork()
            if pid == 0:
                os._exit(min(shared_with(os.getppid()), 100))
            _, status = os.waitpid(pid, 0)
            forks += 1
            sharing += os.WIFEXITED(status) and os.WEXITSTATUS(status) > 0
    finally:
        stop.set()
        thread.join(30)
    assert forks >= 100 and opens[0] >= 20, (forks, opens[0])
    assert sharing == 0, f"{sharing} of {forks} children kept the writer's open file"


# ---- a windowed filter in one file, shared by processes --------------------

# A process holding a windowed file open for writing, its clock read from a
# file of its own (so that the test moves each process's time), answering
# commands on stdin: "add LO N" and "has LO N" print how many keys were new
# or present, "gen" the current generation, "close" closes and exits.
WINDOW_WORKER = r"""
import sys, numpy as np, bloomline
path, clock_file = sys.argv[1], sys.argv[2]
def clock():
    with open(clock_file) as f:
        return float(f.read())
w = bloomline.WindowedBloomFilter.open(path, "r+", clock=clock)
print("ready", flush=True)
for line in sys.stdin:
    cmd, *args = line.split()
    if cmd in ("add", "has"):
        lo, n = int(args[0]), int(args[1])
        keys = np.arange(lo, lo + n, dtype=np.uint64)
        if cmd == "add" and len(args) > 2:  # one key at a time, by the scalar path
            print(sum(w.add(int(k)) for k in keys), flush=True)
        else:
            print(int((w.add_many(keys) if cmd == "add" else w.contains_many(keys)).sum()), flush=True)
    elif cmd == "gen":
        print(w.current_generation, flush=True)
    elif cmd == "close":
        w.close()
        print("closed", flush=True)
        break
"""


class WindowProcess:
    """A WINDOW_WORKER process with its own clock file."""

    def __init__(self, path: Path, clock_file: Path, at: float = 0.0) -> None:
        self.clock_file = clock_file
        self.set_clock(at)
        self.p = subprocess.Popen([sys.executable, "-c", WINDOW_WORKER, str(path), str(clock_file)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert next_line(self.p) == "ready\n"

    def set_clock(self, t: float) -> None:
        self.clock_file.write_text(repr(t))

    def send(self, line: str) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def ask(self, line: str) -> int:
        self.send(line)
        return int(next_line(self.p))

    def close(self) -> None:
        self.send("close")
        assert next_line(self.p) == "closed\n"
        self.p.communicate(timeout=60)  # (closes the pipes)
        assert self.p.returncode == 0


def new_windowed_file(path: Path, capacity: int = 100_000, generations: int = 4) -> None:
    bloomline.WindowedBloomFilter(capacity, 0.001, window=100.0, generations=generations,
                                  clock=lambda: 0.0).save(path, shared=True)


@many_writers
def test_a_windowed_file_shared_by_two_processes_one_window_at_a_time(tmp_path: Path) -> None:
    """Window 100 s, 4 generations of 25 s. Keys are new once per window
    across the processes; a generation one process starts is the current one
    of the other, whose clock stays behind (by a window at most: further is
    refused); the file loads afterwards with the newest generation kept."""
    path = tmp_path / "w.blf"
    new_windowed_file(path)
    a = WindowProcess(path, tmp_path / "clock-a")
    b = WindowProcess(path, tmp_path / "clock-b")  # its clock stays at 0 throughout
    assert a.ask("add 0 5000") >= 4990  # (false positives of a fresh filter: a few at most)
    assert b.ask("add 2500 5000") <= 2510  # half of them a's: seen
    assert b.ask("add 0 300 scalar") == 0  # the scalar path says the same
    assert a.ask("has 0 7500") == 7500
    a.set_clock(60.0)  # generation 2: a starts it
    assert a.ask("add 10000 1000") >= 998
    assert b.ask("gen") == 2  # b's clock says 0: the file says 2
    assert b.ask("has 10000 1000") == 1000
    assert b.ask("add 10000 1000") == 0
    a.set_clock(124.0)  # generation 4: keys of generation 0 still seen (within window + window / 4)
    assert a.ask("add 0 5000") == 0
    b.set_clock(30.0)  # (generation 1: 4 behind the file's next one, which it follows)
    a.set_clock(130.0)  # generation 5: generation 0 has gone, and with it what only it held
    assert b.ask("has 0 2500") == 2500  # (a refreshed them into generation 4 just now)
    assert a.ask("gen") == 5 and b.ask("gen") == 4  # a generation is the file's once a handle starts it
    assert a.ask("add 20000 10") == 10  # (an add starts it)
    assert b.ask("gen") == 5
    assert b.ask("has 5000 2500") < 10  # b's own adds of generation 0 (not refreshed) have gone
    b.close()
    a.close()
    header = bloomline.read_header(path.read_bytes())
    assert not header["dirty"] and header["num_slots"] == 5
    back = WindowedBloomFilter.load(path, clock=lambda: 130.0)  # verified; the clock state kept (a read a window behind is refused)
    assert back.current_generation == 5
    assert [g for g, _ in back.live_generations] == [2, 4, 5]
    assert back.contains_many(keys_of(0, 5000)).all() and back.contains_many(keys_of(5000, 2500)).sum() < 10
    assert back.contains_many(keys_of(10000, 1000)).all()


@many_writers
def test_a_new_generation_is_started_once_however_many_processes_ask_10_times(tmp_path: Path) -> None:
    """Three processes move to a generation whose place holds an expired
    one, at the same moment, and add: no process's rotation clears another's
    adds (each key they added is there), and the expired keys are gone."""
    for run in range(10):
        path = tmp_path / f"w{run}.blf"
        new_windowed_file(path, capacity=200_000)
        procs = [WindowProcess(path, tmp_path / f"clock-{run}-{i}") for i in range(3)]
        assert procs[0].ask("add 0 20000") >= 19_990  # generation 0, place 0
        for p in procs:
            p.set_clock(126.0)  # generation 5: place 0 again
        for i, p in enumerate(procs):
            p.send(f"add {10**9 * (i + 1)} 20000")
        news = [int(next_line(p.p)) for p in procs]
        assert min(news) >= 19_990, (run, news)
        for i, p in enumerate(procs):
            assert p.ask(f"has {10**9 * (i + 1)} 20000") == 20000, run
            assert procs[(i + 1) % 3].ask(f"has {10**9 * (i + 1)} 20000") == 20000, run
        assert procs[0].ask("has 0 20000") < 100  # generation 0 cleared (but for false positives)
        for p in procs:
            p.close()
        back = WindowedBloomFilter.load(path, clock=lambda: 126.0)
        assert [g for g, _ in back.live_generations] == [5]


@many_writers
def test_two_processes_adding_the_same_keys_at_once_each_key_new_at_least_once(tmp_path: Path) -> None:
    path = tmp_path / "w.blf"
    new_windowed_file(path, capacity=300_000)
    procs = [WindowProcess(path, tmp_path / f"clock-{i}", at=30.0) for i in range(2)]
    for p in procs:
        p.send("add 0 200000")
    news = [int(next_line(p.p)) for p in procs]
    assert sum(news) >= 200_000 - 20 and max(news) <= 200_000  # at least once; duplicates allowed
    for p in procs:
        p.close()
    back = WindowedBloomFilter.load(path, clock=lambda: 30.0)
    assert back.contains_many(keys_of(0, 200_000)).all()
    assert back.add_many(keys_of(0, 200_000)).sum() == 0


def test_a_windowed_file_killed_writer_loads_and_the_next_close_cleans_it(tmp_path: Path) -> None:
    path = tmp_path / "w.blf"
    new_windowed_file(path)
    p = WindowProcess(path, tmp_path / "clock", at=10.0)
    assert p.ask("add 0 5000") >= 4990
    p.p.send_signal(signal.SIGKILL)
    p.p.communicate(timeout=30)
    assert bloomline.read_header(path.read_bytes())["dirty"]
    dirty = WindowedBloomFilter.load(path, clock=lambda: 10.0)  # dirty: not checked, still read
    assert dirty.contains_many(keys_of(0, 5000)).all()
    with WindowedBloomFilter.open(path, "r+", clock=lambda: 10.0) as w:
        assert w.contains_many(keys_of(0, 5000)).all()
        assert w.mapped and not w.read_only and not w.closed
    assert w.closed
    with pytest.raises(ValueError, match="closed"):
        w.add("x")
    assert not bloomline.read_header(path.read_bytes())["dirty"]
    assert WindowedBloomFilter.load(path, clock=lambda: 10.0).contains_many(keys_of(0, 5000)).all()


def test_a_windowed_file_damaged_or_compact_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "w.blf"
    w = WindowedBloomFilter(1000, 0.01, window=100.0, clock=lambda: 0.0)
    w.add("a")
    w.save(path)  # the compact form: loads, is not mapped
    with pytest.raises(ValueError, match=r"compact form.*save\(path, shared=True\)"):
        WindowedBloomFilter.open(path)
    w.save(path, shared=True)
    good = path.read_bytes()
    for offset in (200, len(good) // 2, len(good) - 20):
        bad = bytearray(good)
        bad[offset] ^= 0x10
        path.write_bytes(bytes(bad))
        with pytest.raises(ValueError, match="invalid bloomline data"):
            WindowedBloomFilter.load(path)
        with pytest.raises(ValueError, match="invalid bloomline data"):
            WindowedBloomFilter.open(path, "r+")  # the first writer of a clean file checks every byte
    path.write_bytes(good)
    with WindowedBloomFilter.open(path, "r", clock=lambda: 0.0) as ro:
        assert "a" in ro and ro.read_only
        with pytest.raises(ValueError, match="read-only"):
            ro.add("a")


def test_a_windowed_file_saved_to_itself_is_flushed_in_place(tmp_path: Path) -> None:
    path = tmp_path / "w.blf"
    new_windowed_file(path)
    with WindowedBloomFilter.open(path, clock=lambda: 0.0) as w:
        w.add("kept")
        w.save(path)  # its own file: flushed, not replaced
        assert bloomline.read_header(path.read_bytes())["dirty"]
        w.save(tmp_path / "copy.blf")  # elsewhere: the compact form
    for saved in (path, tmp_path / "copy.blf"):
        assert "kept" in WindowedBloomFilter.load(saved, clock=lambda: 0.0)


WINDOW_FORK = r"""
import os, sys, bloomline
t = [0.0]
w = bloomline.WindowedBloomFilter.open(sys.argv[1], "r+", clock=lambda: t[0])
w.add("parent")
pid = os.fork()
if pid == 0:
    for doing in ("add", "rotate"):
        try:
            if doing == "rotate":
                t[0] = 60.0  # a new generation: starting it would clear a place of the file
            w.add("child")
        except ValueError as e:
            print("child", doing, "refused:", e, flush=True)
    w.close()  # lets go of its copy only
    os._exit(0)
os.waitpid(pid, 0)
w.add("parent again")
w.close()
print("parent closed", flush=True)
"""


def test_a_forked_child_cannot_write_or_rotate_through_its_parents_windowed_file(tmp_path: Path) -> None:
    path = tmp_path / "w.blf"
    new_windowed_file(path)
    r = subprocess.run([sys.executable, "-c", WINDOW_FORK, str(path)], capture_output=True, text=True, timeout=120)
    assert "child add refused: this filter's memory was opened for writing by a parent" in r.stdout, r.stdout + r.stderr
    assert "child rotate refused:" in r.stdout and "before a fork" in r.stdout, r.stdout
    assert "parent closed" in r.stdout and r.returncode == 0, r.stderr
    back = WindowedBloomFilter.load(path, clock=lambda: 0.0)  # clean: the child's close released nothing
    assert "parent" in back and "parent again" in back and "child" not in back
    assert not bloomline.read_header(path.read_bytes())["dirty"]


# A rotator moves its own clock a generation at a time, refreshing a set S
# into each new generation and adding fresh keys; a reader in another
# process, its clock at 0 (it follows the file), checks S over and over.
# The rotator's clock is the reader's (as processes share a machine's): a
# file it writes before each generation's adds.
ROTATOR = r"""
import os, sys, numpy as np, bloomline
t = [0.0]
w = bloomline.WindowedBloomFilter.open(sys.argv[1], "r+", clock=lambda: t[0])
stable = np.arange(0, 3000, dtype=np.uint64)
for g in range(int(sys.argv[2])):
    t[0] = g * 25.0 + 1.0  # window 100 s, 4 generations: one generation a step
    with open(sys.argv[3] + ".tmp", "w") as f:
        f.write(repr(t[0]))
    os.replace(sys.argv[3] + ".tmp", sys.argv[3])
    w.add_many(stable)  # refreshed into every generation: never expires
    w.add_many(np.arange(10**6 * (g + 1), 10**6 * (g + 1) + 20000, dtype=np.uint64))
w.close()
print("rotated", flush=True)
"""
READER = r"""
import os, sys, numpy as np, bloomline
def clock():
    with open(sys.argv[3]) as f:
        return float(f.read())
w = bloomline.WindowedBloomFilter.open(sys.argv[1], "r", clock=clock)
stable = np.arange(0, 3000, dtype=np.uint64)
checks = misses = 0
while checks == 0 or not os.path.exists(sys.argv[2]):
    checks += 1
    misses += int((~w.contains_many(stable)).sum()) + sum(int(k) not in w for k in stable[:50])
    if checks == 1:
        print("ready", flush=True)
print(checks, misses, w.current_generation, flush=True)
"""


@many_writers
def test_a_rotation_never_hides_a_live_key_from_a_reader_in_another_process(tmp_path: Path) -> None:
    path, stop, clock = tmp_path / "w.blf", tmp_path / "stop", tmp_path / "clock"
    new_windowed_file(path, capacity=50_000)
    clock.write_text("0.0")
    with WindowedBloomFilter.open(path, clock=lambda: 0.0) as w:
        w.add_many(np.arange(0, 3000, dtype=np.uint64))
    reader = subprocess.Popen([sys.executable, "-c", READER, str(path), str(stop), str(clock)], stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout is not None and reader.stdout.readline() == "ready\n"  # open, and checking
        rotator = subprocess.run([sys.executable, "-c", ROTATOR, str(path), "60", str(clock)], capture_output=True, text=True,
                                 timeout=300)
        assert rotator.stdout == "rotated\n", rotator.stderr
        assert rotator.stderr == ""  # no capacity warning: a place started afresh counts its keys from zero
    finally:
        stop.touch()
        out, _ = reader.communicate(timeout=60)
    checks, misses, seen_generation = (int(x) for x in out.split())
    assert checks >= 20 and misses == 0, out  # 59 rotations under its lookups, none hid a key of S
    assert seen_generation == 59  # the file's newest generation
    back = WindowedBloomFilter.load(path, clock=lambda: 59 * 25.0)
    assert [g for g, _ in back.live_generations] == list(range(55, 60))
    for _, gen in back.live_generations:  # the counts the rotator flushed: 3,000 refreshed + 20,000 fresh each
        assert 22_900 <= gen.insert_count <= 23_000, gen.insert_count
