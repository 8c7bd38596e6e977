"""A small program using bloomline's public API with full types: the test
suite runs `mypy --strict` on it, so the stubs (.pyi) and py.typed must
describe the package completely enough for a strict user."""

from __future__ import annotations

import datetime
import pickle

import numpy as np
import numpy.typing as npt

import bloomline
from bloomline import BloomFilter, CountingBloomFilter, DedupQueue, ScalableBloomFilter, WindowedBloomFilter
from bloomline.analysis import FPResult, fp_experiment


def dedup(urls: list[str], capacity: int) -> list[str]:
    bf = BloomFilter(capacity, 0.001, layout="blocked", seed=0)
    new: npt.NDArray[np.bool_] = bf.add_many(urls)
    return [u for u, n in zip(urls, new.tolist()) if n]


def counts(keys: list[int]) -> int:
    cf = CountingBloomFilter(1000, counter_bits=8)
    cf.update(keys)
    removed: bool = cf.discard(keys[0])
    total: int = int(cf.count_many(keys).sum())
    return total + int(removed)


def geometry() -> tuple[int, int, float]:
    p: bloomline.Params = bloomline.optimal_params(1_000_000, 0.01, "standard")
    rate: float = bloomline.false_positive_rate(1000, 20_000, 10, "standard")
    return p.num_bits, p.num_hashes, rate


def round_trip(bf: BloomFilter) -> BloomFilter:
    data: bytes = bf.to_bytes()
    same = BloomFilter.from_bytes(data)
    again: BloomFilter = pickle.loads(pickle.dumps(same))
    merged = again | bf
    merged &= bf
    assert merged.approx_count >= 0.0 and merged.capacity is not None
    return merged


def frontier() -> int:
    q = DedupQueue(ScalableBloomFilter(100, 0.01))
    q.push("https://a.example/")
    pushed: int = q.push_many(["https://b.example/", "https://a.example/"])
    return pushed + len(q)


def recrawl(urls: list[str], now: float) -> list[str]:
    w = WindowedBloomFilter(1000, 0.01, window=datetime.timedelta(days=7), generations=4, clock=lambda: now)
    due: npt.NDArray[np.bool_] = w.add_many(urls, refresh=False)
    again: bool = w.add(urls[0], refresh=False)
    assert w.window == 604800.0 and w.approx_count >= 0.0 and not again
    return [u for u, d in zip(urls, due.tolist()) if d]


def experiment() -> float:
    r: FPResult = fp_experiment(capacities=[1000], error_rates=[0.01], fills=[1.0], probes=10_000)
    return float(r.measured[0])


if __name__ == "__main__":
    print(dedup(["a", "b", "a"], 10), counts([1, 2, 3]), geometry(), round_trip(BloomFilter(10)), frontier(), recrawl(["a"], 0.0), experiment())
