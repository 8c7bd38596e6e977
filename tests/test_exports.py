"""Exports made while others add: every save, to_bytes and pickle is a
snapshot whose header matches its payload, so it loads, always, and holds
every key acknowledged before the export began.

Writers are threads of this process (their batch adds release the GIL) and,
for a file mapped "r+", other processes adding through their own handles
while this process exports through its own.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bloomline
from bloomline import BloomFilter, CountingBloomFilter

pytestmark = pytest.mark.core

KINDS: dict[str, Callable[[], Any]] = {
    "blocked": lambda: BloomFilter(2_000_000, 0.01),
    "standard": lambda: BloomFilter(2_000_000, 0.01, layout="standard"),
    "counting": lambda: CountingBloomFilter(1_000_000, 0.01),
}
LOADERS = {"blocked": BloomFilter, "standard": BloomFilter, "counting": CountingBloomFilter}
BATCH = 2_000
PACE = 0.003  # seconds between a writer's batches: the adds last long enough to overlap many exports


class Writers:
    """Threads adding disjoint ranges of keys in batches; acknowledged(w) is
    how many of writer w's keys an add_many has returned for. With `hold`,
    the writers make their last batch, or stop on time, only once
    `overlapped` is set (by the test, when enough exports overlapped them):
    a loaded machine cannot let them finish before the exports begin."""

    def __init__(self, f: Any, count: int, seconds: float, *, hold: bool = False) -> None:
        self.f = f
        self.done = [0] * count
        self.stop_at = time.monotonic() + seconds
        self.overlapped = threading.Event()
        if not hold:
            self.overlapped.set()
        # Within capacity (past it, the filter warns): the writers stop at it.
        self.max_batches = f.capacity // (count * BATCH)
        self.errors: list[BaseException] = []
        self.threads = [threading.Thread(target=self._run, args=(w,)) for w in range(count)]

    def keys(self, w: int, n: int) -> np.ndarray:
        return np.arange(n, dtype=np.uint64) + np.uint64(w) * np.uint64(1 << 40)

    def _run(self, w: int) -> None:
        try:
            for b in range(self.max_batches):
                if b == self.max_batches - 1:
                    self.overlapped.wait(timeout=60)
                if time.monotonic() > self.stop_at and self.overlapped.is_set():
                    return
                self.f.add_many(self.keys(w, (b + 1) * BATCH)[b * BATCH:])
                self.done[w] = (b + 1) * BATCH
                time.sleep(PACE)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.errors.append(e)

    def __enter__(self) -> Writers:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.overlapped.set()
        for t in self.threads:
            t.join(timeout=60)
        assert not self.errors, self.errors

    def running(self) -> bool:
        return any(t.is_alive() for t in self.threads)

    def check_holds(self, loaded: Any, acknowledged: list[int]) -> None:
        for w, n in enumerate(acknowledged):
            if n:
                assert loaded.contains_many(self.keys(w, n)).all(), f"writer {w}: a key acknowledged before the export is absent"


EXPORTS: dict[str, Callable[[Any, Path, int, str], Any]] = {
    "save": lambda f, tmp, i, kind: (f.save(tmp / f"s{i}.blf"), LOADERS[kind].load(tmp / f"s{i}.blf"))[1],
    "to_bytes": lambda f, tmp, i, kind: LOADERS[kind].from_bytes(f.to_bytes()),
    "pickle": lambda f, tmp, i, kind: pickle.loads(pickle.dumps(f)),
    "save_stream": lambda f, tmp, i, kind: _via_stream(f, tmp / f"w{i}.blf", kind),
}


def _via_stream(f: Any, path: Path, kind: str) -> Any:
    with open(path, "wb") as out:
        f.save(out)
    with open(path, "rb") as src:
        return LOADERS[kind].load(src)


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("export", sorted(EXPORTS))
def test_exports_while_threads_add_always_load(tmp_path: Path, kind: str, export: str) -> None:
    f = KINDS[kind]()
    exports = 0
    with Writers(f, 4, seconds=2.0, hold=True) as w:
        while w.running() and exports < 30:
            acknowledged = list(w.done)
            loaded = EXPORTS[export](f, tmp_path, exports, kind)  # a ValueError here is the defect
            w.check_holds(loaded, acknowledged)
            exports += 1
            if exports == 3:
                w.overlapped.set()
    assert exports >= 3, "the writers finished before the exports could overlap them"


def test_stress_eight_writers_while_others_save_export_and_pickle(tmp_path: Path) -> None:
    # Eight threads adding while three others save, export and pickle, for
    # a bounded time: every file and blob loads and holds every key
    # acknowledged before its export began.
    f = BloomFilter(8_000_000, 0.01)
    results: list[tuple[str, int]] = []
    failures: list[BaseException] = []

    def exporter(name: str, w: Writers) -> None:
        i = 0
        try:
            while w.running() and i < 40:
                acknowledged = list(w.done)
                loaded = EXPORTS[name](f, tmp_path, 1000 * len(name) + i, "blocked")
                w.check_holds(loaded, acknowledged)
                results.append((name, i))
                if {n for n, _ in list(results)} == set(names):
                    w.overlapped.set()
                i += 1
        except BaseException as e:  # noqa: BLE001
            failures.append(e)

    names = ("save", "to_bytes", "pickle")
    with Writers(f, 8, seconds=4.0, hold=True) as w:
        ex = [threading.Thread(target=exporter, args=(name, w)) for name in names]
        for t in ex:
            t.start()
        for t in ex:
            t.join(timeout=120)
    assert not failures, failures
    assert {name for name, _ in results} == {"save", "to_bytes", "pickle"}, results


WORKER = """
import sys, numpy as np, bloomline
cls = getattr(bloomline, sys.argv[1])
f = cls.open(sys.argv[2], "r+")
lo, n = int(sys.argv[3]), int(sys.argv[4])
f.add_many(np.arange(lo, lo + n, dtype=np.uint64))
f.close()
"""


@pytest.mark.skipif(bloomline.file_locks == "flock", reason="this build takes one writer per file (flock locks, as on macOS)")
@pytest.mark.parametrize("kind", ["BloomFilter", "CountingBloomFilter"])
def test_a_shared_handle_exports_what_the_other_writers_added(tmp_path: Path, kind: str) -> None:
    # The crawl guide's multiprocessing pattern: the parent holds the file "r+"
    # while two workers add through their own handles; then the parent's
    # exports hold the workers' keys and load.
    cls = getattr(bloomline, kind)
    path = tmp_path / "shared.blf"
    cls(400_000, 0.01).save(path)
    parent = cls.open(path, "r+")
    try:
        for lo in (0, 10**9):
            subprocess.run([sys.executable, "-c", WORKER, kind, str(path), str(lo), "100000"], check=True, timeout=120)
        keys = np.concatenate([np.arange(0, 100_000, dtype=np.uint64), np.arange(10**9, 10**9 + 100_000, dtype=np.uint64)])
        parent.save(tmp_path / "other.blf")
        for loaded in (cls.load(tmp_path / "other.blf"), cls.from_bytes(parent.to_bytes()),
                       pickle.loads(pickle.dumps(parent)), parent.copy()):
            assert loaded.contains_many(keys).all()
            assert abs(loaded.approx_count - 200_000) < 4_000, loaded.approx_count
    finally:
        parent.close()
    assert cls.load(path).contains_many(keys).all()
