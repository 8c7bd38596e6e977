"""Batch calls release the GIL: threads adding at once lose no bit, and
readers racing writers see every key that was added before they started."""

from __future__ import annotations

import threading

import numpy as np

from bloomline import BloomFilter


def _run_threads(targets: list[threading.Thread]) -> None:
    for t in targets:
        t.start()
    for t in targets:
        t.join(timeout=120)
        assert not t.is_alive()


def test_four_threads_adding_disjoint_sets_lose_nothing(layout: str) -> None:
    n_per_thread = 500_000
    parts = [np.arange(i * n_per_thread, (i + 1) * n_per_thread, dtype=np.uint64) for i in range(4)]
    shared = BloomFilter(2_000_000, 0.01, layout=layout)
    errors: list[BaseException] = []

    def work(keys: np.ndarray) -> None:
        try:
            for chunk in np.array_split(keys, 10):
                shared.add_many(chunk)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    _run_threads([threading.Thread(target=work, args=(p,)) for p in parts])
    assert not errors
    everything = np.concatenate(parts)
    assert shared.contains_many(everything).all()
    # Stronger than "found": the bits equal a filter built by one thread, so
    # no concurrent set was lost, and bits_set (kept from fetch-or results)
    # is exact.
    serial = BloomFilter(2_000_000, 0.01, layout=layout)
    serial.add_many(everything)
    assert shared == serial
    assert shared.bits_set == serial.bits_set == int(np.unpackbits(np.asarray(shared)).sum())


def test_readers_during_writes_see_old_keys(layout: str) -> None:
    bf = BloomFilter(1_000_000, 0.01, layout=layout)
    old = np.arange(200_000, dtype=np.uint64)
    bf.add_many(old)
    new = np.arange(200_000, 1_000_000, dtype=np.uint64)
    misses: list[int] = []

    def writer() -> None:
        for chunk in np.array_split(new, 20):
            bf.add_many(chunk)

    def reader() -> None:
        for _ in range(20):
            misses.append(int((~bf.contains_many(old)).sum()))

    _run_threads([threading.Thread(target=writer), threading.Thread(target=reader)])
    assert misses == [0] * 20
    assert bf.contains_many(new).all()


def test_threads_mixing_scalar_and_batch_adds(layout: str) -> None:
    bf = BloomFilter(200_000, 0.01, layout=layout)
    words = [f"https://example.com/page/{i}" for i in range(100_000)]

    def batch() -> None:
        bf.add_many(np.array(words[:50_000]))

    def scalar() -> None:
        for w in words[50_000:]:
            bf.add(w)

    _run_threads([threading.Thread(target=batch), threading.Thread(target=scalar)])
    assert bf.contains_many(words).all()
