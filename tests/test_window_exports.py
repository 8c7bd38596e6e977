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

import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bloomline import WindowedBloomFilter

pytestmark = pytest.mark.core

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
        deadline = time.monotonic() + 6.0
        while time.monotonic() < deadline and exports < 3_000 and len(bad) < 5:
            exports += 1
            made: list[tuple[str, Any]] = [("copy", w.copy())]
            for what, data in (("to_bytes", w.to_bytes()), ("pickle", pickle.dumps(w))):
                try:
                    made.append((what, WindowedBloomFilter.from_bytes(data, clock=lambda: 0.0)
                                 if what == "to_bytes" else pickle.loads(data)))
                except ValueError as e:
                    bad.append(f"{what} does not load: {e}")
            if exports % 20 == 0:
                w.save(tmp_path / "ring.blf", shared=True)
                made.append(("save(shared=True)", WindowedBloomFilter.load(tmp_path / "ring.blf", clock=lambda: 0.0)))
            for what, f in made:
                f._clock = lambda: 0.0  # (read as saved: the newest generation it holds is its clock's)
                bad += [f"{what}: {b}" for b in labels_hold(f)]
    finally:
        stop.set()
        th.join()
    assert rotated[0] > 20, "the rotations did not overlap the exports"
    assert bad == [], f"{len(bad)} bad exports of {exports}, e.g. {bad[:3]}"


ROTATOR = r"""
import sys, time, numpy as np, bloomline
t = [0.0]
w = bloomline.WindowedBloomFilter.open(sys.argv[1], "r+", clock=lambda: t[0])
end = time.monotonic() + float(sys.argv[2])
g = 0
print("ready", flush=True)
while time.monotonic() < end and g < 1_000_000:
    t[0] = g * 25.0 + 1.0
    w.add_many(np.arange(3000, dtype=np.uint64) + np.uint64(g * 10**6))
    g += 1
w.close()
print(g)
"""


def test_exports_of_a_mapped_ring_while_another_process_rotates_it(tmp_path: Path) -> None:
    path = tmp_path / "ring.blf"
    WindowedBloomFilter(50_000, 0.001, window=100.0, generations=4, clock=lambda: 0.0).save(path, shared=True)
    rot = subprocess.Popen([sys.executable, "-c", ROTATOR, str(path), "6"], stdout=subprocess.PIPE, text=True)
    assert rot.stdout is not None and rot.stdout.readline().strip() == "ready"
    w = WindowedBloomFilter.open(path, "r+", clock=lambda: 0.0)  # (its clock at 0: it follows the file)
    bad: list[str] = []
    exports = 0
    try:
        deadline = time.monotonic() + 6.0
        while time.monotonic() < deadline and exports < 5_000 and len(bad) < 5:
            exports += 1
            w.add(f"own {exports}")  # (this handle's own adds: its counts go into the export)
            try:
                back = WindowedBloomFilter.from_bytes(w.to_bytes(), clock=lambda: 0.0)
            except ValueError as e:
                bad.append(f"does not load: {e}")
                continue
            bad += labels_hold(back)
            if exports % 50 == 0:
                copy = w.copy()
                copy._clock = lambda: 0.0
                bad += [f"copy: {b}" for b in labels_hold(copy)]
    finally:
        w.close()
        rotations = int(rot.communicate(timeout=60)[0].split()[-1])
    assert rot.returncode == 0
    assert rotations > 20, "the rotations did not overlap the exports"
    assert bad == [], f"{len(bad)} bad exports of {exports}, e.g. {bad[:3]}"
    WindowedBloomFilter.load(path, clock=lambda: 0.0)  # (both closed: clean, verified)


def test_a_copy_of_a_mapped_ring_reads_the_file_first(tmp_path: Path) -> None:
    path = tmp_path / "ring.blf"
    WindowedBloomFilter(50_000, 0.001, window=100.0, generations=4, clock=lambda: 0.0).save(path, shared=True)
    tb = [1.0]
    with WindowedBloomFilter.open(path, clock=lambda: 1.0) as a, WindowedBloomFilter.open(path, clock=lambda: tb[0]) as b:
        a.add_many(keys_of(0))
        tb[0] = 5 * SPAN + 1.0  # b starts generation 5 where 0 was (expired), a makes no call meanwhile
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
                    started.set()
                    w.add_many(rng.integers(0, 2**63, 200_000, dtype=np.uint64))
                    added.append(1)
            except ValueError as e:  # closed: refused, as a later add must be
                refused.append(str(e))

        th = threading.Thread(target=adder)
        th.start()
        started.wait(timeout=30)
        time.sleep(0.02)
        w.close()
        th.join(timeout=60)
        assert refused and "closed" in refused[0], (added, refused)
        back = WindowedBloomFilter.load(path, clock=lambda: 0.0)  # verified: checksums match the bits
        assert back.approx_count > 0
        with WindowedBloomFilter.open(path, "r+", clock=lambda: 0.0) as again:  # the first writer checks every byte
            assert again.approx_count == pytest.approx(back.approx_count)
