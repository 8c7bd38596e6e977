"""A windowed filter's exports, copies and close while its ring rotates: a
save, to_bytes, pickle or copy shows the ring as before a rotation or as
after it (never a generation labelled with another's bits, never a file
that does not load), and closing a mapped ring while a thread adds leaves a
file that loads.

The rotations come from another thread of this process (a local filter) and
from another process (a mapped file, which every handle rotates). Loops are
bounded in count and in time.
"""

from __future__ import annotations

import io
import pickle
import struct
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from forking import exited_ok, in_forked_child

import bloomline
from bloomline import WindowedBloomFilter

pytestmark = pytest.mark.core
# (a build with flock locks only, as on macOS, takes one writer per file: no
# second handle or process maps the ring for writing)
many_writers = pytest.mark.skipif(bloomline.file_locks == "flock", reason="this build takes one writer per file")

SPAN = 25.0  # window 100 s, G = 4
PER_GENERATION = 3_000


def keys_of(g: int) -> np.ndarray:
    """Generation g's own keys (disjoint from every other generation's)."""
    return np.arange(PER_GENERATION, dtype=np.uint64) + np.uint64(g * 10**6)


def labels_hold(w: WindowedBloomFilter) -> list[str]:
    """Each live generation but the newest (which may be mid-add) holds
    every key added in it: a generation labelled with another's bits fails."""
    live = w.live_generations
    top = max((g for g, _ in live), default=None)
    return [f"generation {g} holds {f.contains_many(keys_of(g)).mean():.3f} of its keys"
            for g, f in live if g != top and not f.contains_many(keys_of(g)).all()]


class OnClock(pickle.Unpickler):
    """A windowed filter's pickle read on a given clock: a pickle carries
    none, and restored on the system clock this test's small times would be
    refused as another clock's (the bytes are the pickle's own)."""

    def __init__(self, data: bytes, at: float) -> None:
        super().__init__(io.BytesIO(data))
        self.at = at

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("bloomline._pickling", "restore"):
            return lambda b: WindowedBloomFilter.from_bytes(b if isinstance(b, bytes) else b.encode("latin-1"),
                                                            clock=lambda: self.at)
        return super().find_class(module, name)


def read_as_saved(f: WindowedBloomFilter) -> WindowedBloomFilter:
    """f with its clock at the start of the newest generation it holds: read
    as saved (no generation of it expires, and no clock is a window behind)."""
    newest = f._newest if f._newest is not None else 0
    f._clock = lambda: newest * SPAN
    return f


def rounds(bad: list[str], most: int, seconds: float = 6.0) -> Iterator[int]:
    """1, 2, ... until the time or the count runs out, or five bad exports are seen."""
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline and n < most and len(bad) < 5:
        n += 1
        yield n


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Threads switch often, so an export meets a rotation many times."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


@pytest.mark.usefixtures("fast_switching")
def test_exports_and_copies_while_a_thread_rotates_keep_every_label(tmp_path: Path) -> None:
    t = [0.0]
    w = WindowedBloomFilter(50_000, 0.001, window=100.0, generations=4, clock=lambda: t[0])
    stop = threading.Event()
    rotated = [0]

    def rotator() -> None:
        for g in range(100_000):
            if stop.is_set():
                return
            t[0] = g * SPAN + 1.0
            w.add_many(keys_of(g))
            rotated[0] = g

    th = threading.Thread(target=rotator)
    th.start()
    bad: list[str] = []
    exports = 0
    try:
        for exports in rounds(bad, 3_000):
            made: list[tuple[str, Any]] = [("copy", w.copy())]
            for what, data in (("to_bytes", w.to_bytes()), ("pickle", pickle.dumps(w))):
                at = t[0]  # (a clock at or after the export's: one behind it by a window is refused)
                try:
                    made.append((what, WindowedBloomFilter.from_bytes(data, clock=lambda: at)
                                 if what == "to_bytes" else OnClock(data, at).load()))
                except ValueError as e:
                    bad.append(f"{what} does not load: {e}")
            if exports % 20 == 0:
                w.save(tmp_path / "ring.blf", shared=True)
                at = t[0]
                made.append(("save(shared=True)", WindowedBloomFilter.load(tmp_path / "ring.blf", clock=lambda: at)))
            for what, f in made:
                bad += [f"{what}: {b}" for b in labels_hold(read_as_saved(f))]
    finally:
        stop.set()
        th.join()
    assert rotated[0] > 20, "the rotations did not overlap the exports"
    assert bad == [], f"{len(bad)} bad exports of {exports}, e.g. {bad[:3]}"


# The rotator's clock is the test's handle's (as processes share a
# machine's): a file it writes before each generation's adds.
ROTATOR = r"""
import os, sys, time, numpy as np, bloomline
t = [0.0]
w = bloomline.WindowedBloomFilter.open(sys.argv[1], "r+", clock=lambda: t[0])
end = time.monotonic() + float(sys.argv[2])
g = 0
print("ready", flush=True)
while time.monotonic() < end and g < 1_000_000:
    t[0] = g * 25.0 + 1.0
    with open(sys.argv[3] + ".tmp", "w") as f:
        f.write(repr(t[0]))
    os.replace(sys.argv[3] + ".tmp", sys.argv[3])
    w.add_many(np.arange(3000, dtype=np.uint64) + np.uint64(g * 10**6))
    g += 1
w.close()
print(g)
"""


@many_writers
def test_exports_of_a_mapped_ring_while_another_process_rotates_it(tmp_path: Path) -> None:
    path = tmp_path / "ring.blf"
    WindowedBloomFilter(50_000, 0.001, window=100.0, generations=4, clock=lambda: 0.0).save(path, shared=True)
    clock = tmp_path / "clock"
    clock.write_text("0.0")
    rot = subprocess.Popen([sys.executable, "-c", ROTATOR, str(path), "6", str(clock)], stdout=subprocess.PIPE,
                           text=True)
    assert rot.stdout is not None and rot.stdout.readline().strip() == "ready"
    w = WindowedBloomFilter.open(path, "r+", clock=lambda: float(clock.read_text()))
    bad: list[str] = []
    exports = 0
    try:
        for exports in rounds(bad, 5_000):
            w.add(f"own {exports}")  # (this handle's own adds: its counts go into the export)
            try:
                data = w.to_bytes()
                at = w.current_generation * 25.0  # (at or after the export's)
                back = WindowedBloomFilter.from_bytes(data, clock=lambda: at)
            except ValueError as e:
                bad.append(f"does not load: {e}")
                continue
            bad += labels_hold(back)
            if exports % 50 == 0:
                bad += [f"copy: {b}" for b in labels_hold(read_as_saved(w.copy()))]
    finally:
        w.close()
        rotations = int(rot.communicate(timeout=60)[0].split()[-1])
    assert rot.returncode == 0
    assert rotations > 20, "the rotations did not overlap the exports"
    assert bad == [], f"{len(bad)} bad exports of {exports}, e.g. {bad[:3]}"
    WindowedBloomFilter.load(path, clock=lambda: rotations * 25.0)  # (both closed: clean, verified)


@many_writers
def test_a_copy_of_a_mapped_ring_reads_the_file_first(tmp_path: Path) -> None:
    path = tmp_path / "ring.blf"
    WindowedBloomFilter(50_000, 0.001, window=100.0, generations=4, clock=lambda: 0.0).save(path, shared=True)
    ta, tb = [1.0], [1.0]
    with WindowedBloomFilter.open(path, clock=lambda: ta[0]) as a, \
            WindowedBloomFilter.open(path, clock=lambda: tb[0]) as b:
        a.add_many(keys_of(0))
        tb[0] = 5 * SPAN + 1.0  # b starts generation 5 where 0 was (expired), a makes no call meanwhile
        ta[0] = 2 * SPAN  # (a's clock behind the file's by less than a window: it follows the file)
        b.add_many(keys_of(5))
        c = a.copy()
        assert c.current_generation == 5
        assert [g for g, _ in c.live_generations] == [5]
        assert c.contains_many(keys_of(5)).all() and not c.mapped


def test_closing_a_mapped_ring_while_a_thread_adds_leaves_a_file_that_loads(tmp_path: Path) -> None:
    for trial in range(4):
        path = tmp_path / f"ring{trial}.blf"
        WindowedBloomFilter(2_000_000, 0.001, window=100.0, clock=lambda: 0.0).save(path, shared=True)
        w = WindowedBloomFilter.open(path, "r+", clock=lambda: 0.0)
        started = threading.Event()
        added: list[int] = []
        refused: list[str] = []

        def adder() -> None:
            rng = np.random.default_rng(trial)
            try:
                for _ in range(200):
                    # (keys of a space below the capacity: however late the close comes, no
                    # CapacityWarning, an error under pytest's settings, stops this thread first)
                    w.add_many(rng.integers(0, 1_900_000, 200_000, dtype=np.uint64))
                    added.append(1)
                    started.set()  # (after a first batch: the close meets the next one, however slow the build)
            except ValueError as e:  # closed: refused, as a later add must be
                refused.append(str(e))

        th = threading.Thread(target=adder)
        th.start()
        assert started.wait(timeout=60)
        time.sleep(0.02)
        w.close()
        th.join(timeout=60)
        assert refused and "closed" in refused[0], (added, refused)
        back = WindowedBloomFilter.load(path, clock=lambda: 0.0)  # verified: checksums match the bits
        assert back.approx_count > 0
        with WindowedBloomFilter.open(path, "r+", clock=lambda: 0.0) as again:  # the first writer checks every byte
            assert again.approx_count == pytest.approx(back.approx_count)


@many_writers  # (OFD locks: the parent's lock is on its own open file)
def test_a_forked_childs_export_waits_for_its_parents_lock_and_leaves_it_held(tmp_path: Path) -> None:
    """A forked child shares its parent's open file, and with it the
    parent's locks: an export there takes a lock on a descriptor of its own,
    so it waits for a rotation its parent holds, and its unlock does not
    drop the parent's lock."""
    import fcntl
    import os
    import struct

    path = tmp_path / "ring.blf"
    WindowedBloomFilter(10_000, 0.01, window=60.0, clock=lambda: 0.0).save(path, shared=True)
    w = WindowedBloomFilter.open(path, "r+", clock=lambda: 0.0)
    w.add("x")
    (fd,) = [int(f) for f in os.listdir("/proc/self/fd")
             if os.path.realpath(f"/proc/self/fd/{f}") == os.path.realpath(path)]
    other = os.open(path, os.O_RDWR)

    def lock(on: int, kind: int, cmd: int) -> bytes:
        return fcntl.fcntl(on, cmd, struct.pack("hhqqi", kind, 0, 0, 1, 0))  # byte 0: the header lock

    def parent_holds() -> bool:
        return struct.unpack("hhqqi", lock(other, fcntl.F_WRLCK, fcntl.F_OFD_GETLK))[0] != fcntl.F_UNLCK

    lock(fd, fcntl.F_WRLCK, fcntl.F_OFD_SETLK)  # as a rotation of the parent's holds it
    try:
        pid = os.fork()
        if pid == 0:  # the child: its export must wait, then load
            try:
                WindowedBloomFilter.from_bytes(w.to_bytes(), clock=lambda: 0.0)
                os._exit(0)
            except BaseException:  # noqa: BLE001 - the exit status says it
                os._exit(3)
        time.sleep(0.5)
        assert os.waitpid(pid, os.WNOHANG) == (0, 0), "the child's export did not wait for the parent's lock"
        assert parent_holds()
    finally:
        lock(fd, fcntl.F_UNLCK, fcntl.F_OFD_SETLK)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    os.close(other)
    w.close()


def test_a_forked_child_closes_and_exports_while_a_parent_thread_held_the_rotation_lock(tmp_path: Path) -> None:
    """A lock a thread of the parent held at the fork stays held in the
    child, where that thread does not exist: the child gets fresh ones, so
    its close (of a mapped ring) and its exports do not wait forever."""
    path = tmp_path / "ring.blf"
    WindowedBloomFilter(10_000, 0.01, window=60.0, clock=lambda: 0.0).save(path, shared=True)
    mapped = WindowedBloomFilter.open(path, "r+", clock=lambda: 0.0)
    local = WindowedBloomFilter(10_000, 0.01, window=60.0, clock=lambda: 0.0)
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with mapped._rotating, local._rotating:
            held.set()
            release.wait(timeout=30)

    t = threading.Thread(target=holder)
    t.start()
    assert held.wait(timeout=30)
    def in_child() -> bool:
        local.add("y")
        WindowedBloomFilter.from_bytes(local.to_bytes(), clock=lambda: 0.0)
        mapped.to_bytes()
        mapped.close()
        return True

    try:
        status = in_forked_child(in_child)
    finally:
        release.set()
        t.join(timeout=30)
    assert exited_ok(status), status
    mapped.close()


@many_writers
def test_a_mapped_rings_export_counts_this_handles_adds_after_another_restarted_the_place(tmp_path: Path) -> None:
    """Handle a starts the generation, handle b adds 300 keys: b's export
    and, after b's flush, a's count them (they had been dropped, b's count
    being of the generation before)."""
    path = tmp_path / "ring.blf"
    WindowedBloomFilter(10_000, 0.01, window=60.0, clock=lambda: 0.0).save(path, shared=True)
    with WindowedBloomFilter.open(path, clock=lambda: 0.0) as a, WindowedBloomFilter.open(path, clock=lambda: 0.0) as b:
        a.add("first")
        b.add_many([f"b{i}" for i in range(300)])

        def counts(w: WindowedBloomFilter) -> list[int]:
            back = WindowedBloomFilter.from_bytes(w.to_bytes(), clock=lambda: 0.0)
            return [f.insert_count for _, f in back.live_generations]

        assert counts(b) == [300]
        b.flush()
        assert counts(a) == [301]
    assert [f.insert_count for _, f in WindowedBloomFilter.load(path, clock=lambda: 0.0).live_generations] == [301]


def test_a_ring_read_while_a_handle_has_restarted_a_place_exports_what_loads(tmp_path: Path) -> None:
    """A checkpoint read from a mapped ring while a handle holds it (or
    after it died): place 0 held 3,000 keys of a generation, then was
    restarted for the generation G + 1 later and took 10. The loaded
    generation counts 10 (the place's record), and its save, to_bytes and
    pickle load. (It kept the 3,000 of the place's own header, rewritten
    only at the last close, and what it wrote was refused: count 3000
    exceeds its bits set.) Times are the system clock's, which a pickle reads."""
    path = tmp_path / "ring.blf"
    now = time.time()
    WindowedBloomFilter(10_000, 0.01, window=100.0, generations=4, clock=lambda: now - 125).save(path, shared=True)
    with WindowedBloomFilter.open(path, "r+", clock=lambda: now - 125) as w:
        w.add_many(range(3000))
    with WindowedBloomFilter.open(path, "r+", clock=lambda: now) as live:
        live.add_many(range(100_000, 100_010))  # the same place, 5 generations on
        live.flush()
        snap = WindowedBloomFilter.load(path, clock=lambda: now)
        (number, first), = snap.live_generations
        assert first.insert_count == 10
        snap.save(tmp_path / "again.blf")
        for back in (WindowedBloomFilter.from_bytes(snap.to_bytes(), clock=lambda: now),
                     WindowedBloomFilter.load(tmp_path / "again.blf", clock=lambda: now), pickle.loads(pickle.dumps(snap))):
            assert [(g, f.insert_count) for g, f in back.live_generations] == [(number, 10)]
            assert back.contains_many(np.arange(100_000, 100_010)).all()


def test_a_generation_whose_filter_counts_otherwise_takes_its_records_count() -> None:
    """A compact kind-4 container, every checksum valid, whose generation
    record says 15 new keys while that generation's own kind-1 header says
    10**6 (an export races adds, so the two may differ by the adds between
    them): the record's count is the generation's. (The header's was kept:
    it warned of a capacity never reached, and its own save did not load.)"""
    w = WindowedBloomFilter(30, 0.05, window=100.0, generations=4, clock=lambda: 1.0)
    w.update(range(15))
    buf = bytearray(w.to_bytes())
    rec = 128 + 24  # the first generation's kind-1 encoding, after the container's header and the record's head
    assert struct.unpack_from("<Q", buf, rec + 56)[0] == 15  # (its insert_count)
    struct.pack_into("<Q", buf, rec + 56, 10**6)
    struct.pack_into("<Q", buf, rec + 120, bloomline.murmur3_128(bytes(buf[rec:rec + 120])) & (2**64 - 1))
    end = 128 + struct.unpack_from("<Q", buf, 72)[0]  # the container's payload checksum
    struct.pack_into("<Q", buf, end, bloomline.murmur3_128(bytes(buf[128:end])) & (2**64 - 1))
    back = WindowedBloomFilter.from_bytes(bytes(buf), clock=lambda: 1.0)
    assert [f.insert_count for _, f in back.live_generations] == [15]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        back.add("one more")  # (no capacity warning: 16 of 30)
    again = WindowedBloomFilter.from_bytes(back.to_bytes(), clock=lambda: 1.0)
    assert [f.insert_count for _, f in again.live_generations] == [16]


@many_writers
def test_a_shared_handles_fill_counts_every_process_after_flush_and_a_closed_one_shows(tmp_path: Path) -> None:
    """flush() recounts the places' bits from the file, so fill_ratio and
    expected_fp_rate take other handles' adds as approx_count does (they
    stayed this handle's own); a closed mapped filter's repr and HTML say
    closed (they raised)."""
    path = tmp_path / "ring.blf"
    WindowedBloomFilter(10_000, 0.01, window=60.0, clock=lambda: 0.0).save(path, shared=True)
    with WindowedBloomFilter.open(path, clock=lambda: 1.0) as a, WindowedBloomFilter.open(path, clock=lambda: 1.0) as b:
        b.add("own")
        a.add_many(range(3000))
        a.flush()
        before = b.fill_ratio
        b.flush()
        reader = WindowedBloomFilter.load(path, clock=lambda: 1.0)
        assert before < b.fill_ratio == reader.fill_ratio > 0.01
        assert b.expected_fp_rate == reader.expected_fp_rate > 0
        assert b.approx_count == reader.approx_count == pytest.approx(3001, rel=0.02)
    assert repr(b).endswith("seed=0 closed>") and "(closed)" in b._repr_html_()


def test_closing_a_ring_mapped_read_only_closes_it(tmp_path: Path) -> None:
    """close() of a ring opened with "r" once left it open: closed False,
    to_bytes and copy still answering, repr raising BufferError. Now as a
    writer's close and as BloomFilter's: closed, said by repr, and any
    later use raises ValueError."""
    path = tmp_path / "ring.blf"
    w = WindowedBloomFilter(1000, 0.01, window=100.0, clock=lambda: 0.0)
    w.add("a")
    w.save(path, shared=True)
    r = WindowedBloomFilter.open(path, "r", clock=lambda: 0.0)
    assert "a" in r and not r.closed
    r.close()
    assert r.closed and r.read_only
    assert repr(r).endswith("closed>")
    for use in (r.to_bytes, r.copy, lambda: "a" in r, lambda: r.approx_count):
        with pytest.raises(ValueError, match="closed"):
            use()
    r.close()  # (twice: nothing more)
    assert WindowedBloomFilter.load(path, clock=lambda: 0.0) == w
