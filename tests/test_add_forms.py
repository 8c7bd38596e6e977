"""Blocked adds come in two forms (layout_blocked.hpp): "blind", which sets a
key's k bits without looking first (k unrolled up to 16, a loop above), and
"look first", which writes nothing for a key already present. Each chunk of
2048 keys takes the form its predecessor's keys called for: blind while at
least half were new, look-first after a chunk of mostly known keys. Every
input (arrays hashed inside the add loop, lists hashed first, and threads=,
which hashes in parallel) goes through the same add driver.

Whichever form runs, the bits, the "was new" answers and the counts must be
those of key-by-key adds. The sequences below make both forms run, and
switch between them inside one add_many call.
"""

from __future__ import annotations

import numpy as np
import pytest

from bloomline import BloomFilter

pytestmark = pytest.mark.core  # run by CI's wheel and sanitizer (clang, flock) jobs (.ci/run)

# Across the unrolled counts (1..16) and the run-time loop above them.
K_VALUES = [1, 2, 5, 6, 7, 8, 10, 15, 16, 17, 24, 64]
BATCH = 40_000  # 20 chunks of 2048 keys per add_many call


def batches(rng: np.random.Generator) -> list[np.ndarray]:
    """Five add_many calls: new keys (with repeats inside the call), then the
    same keys again (mostly known), then 30% new (look-first throughout),
    then 80% new (back to blind), then a mixed call with in-batch repeats."""
    first = rng.integers(0, 2**62, size=BATCH, dtype=np.int64)
    first[::10] = first[1::10]  # repeats inside one call: new only at the first place
    known_again = rng.permutation(first)
    fresh = iter(rng.integers(2**62, 2**63 - 1, size=4 * BATCH, dtype=np.int64))

    def mix(new_share: float) -> np.ndarray:
        out = rng.choice(first, size=BATCH)
        is_new = rng.random(BATCH) < new_share
        out[is_new] = [next(fresh) for _ in range(int(is_new.sum()))]
        return out

    last = mix(0.5)
    last[1::7] = last[::7][: len(last[1::7])]
    return [first, known_again, mix(0.3), mix(0.8), last]


def crowded_filter(k: int, seed: int) -> BloomFilter:
    # about 30-50% of the bits set by the end: keys share words and blocks
    num_bits = -(-(k * 2 * 2 * BATCH) // 512) * 512
    return BloomFilter.from_params(num_bits, k, layout="blocked", seed=seed)


@pytest.mark.parametrize("k", K_VALUES)
@pytest.mark.parametrize(("source", "threads"), [("array", 1), ("list", 1), ("array", 2)])
def test_batch_adds_equal_key_by_key_adds(k: int, source: str, threads: int, rng: np.random.Generator) -> None:
    batch = crowded_filter(k, seed=k)
    scalar = crowded_filter(k, seed=k)
    for i, keys in enumerate(batches(rng)):
        got = batch.add_many(keys if source == "array" else keys.tolist(), threads=threads)
        want = [scalar.add(x) for x in keys.tolist()]
        assert got.tolist() == want, (k, source, threads, i)
        assert batch.bits_set == scalar.bits_set, (k, source, threads, i)
        assert batch.to_bytes() == scalar.to_bytes(), (k, source, threads, i)
    # the sequence really had known keys and new keys in it
    assert 0.2 < batch.bits_set / batch.num_bits < 0.9


def test_known_keys_leave_the_filter_unchanged(rng: np.random.Generator) -> None:
    """A call of only known keys after a call of new ones starts blind (it
    rewrites the same bits) and then looks first; neither changes a bit or a
    count, and every answer is "not new"."""
    bf = crowded_filter(7, seed=3)
    keys = rng.integers(0, 2**63 - 1, size=5000, dtype=np.int64)
    assert bf.add_many(keys).mean() > 0.99  # new, but for a few false positives
    before = bf.to_bytes()
    for _ in range(2):
        assert not bf.add_many(rng.permutation(keys)).any()
        assert bf.to_bytes() == before


def test_keys_sharing_a_block_in_one_batch(rng: np.random.Generator) -> None:
    """Blind array adds take two keys at a time with their bits interleaved
    (a's bit 0, b's bit 0, a's bit 1, ...), unless the two share a block:
    there b could set a bit that a has yet to look at, and a would be called
    known when it was new. The pairs below are made for that: in a one-block
    filter, a lacks exactly one bit and b sets it."""
    k = 8
    base = BloomFilter.from_params(512, k, layout="blocked", seed=5)
    base.add_many(rng.integers(0, 2**63 - 1, size=70, dtype=np.int64))
    candidates = iter(rng.integers(0, 2**63 - 1, size=200_000, dtype=np.int64).tolist())

    def bits_added(keys: list[int]) -> int:
        f = base.copy()
        before = f.bits_set
        for x in keys:
            f.add(x)
        return f.bits_set - before

    pairs: list[tuple[int, int]] = []
    for a in candidates:
        if len(pairs) == 30:
            break
        if bits_added([a]) != 1:
            continue
        for _ in range(2000):  # about 1 in 64 keys sets a's missing bit
            b = next(candidates)
            if bits_added([b, a]) == bits_added([b]):  # after b, a adds nothing
                pairs.append((a, b))
                break
    assert len(pairs) == 30
    for a, b in pairs:
        batch, scalar = base.copy(), base.copy()
        got = batch.add_many(np.array([a, b], dtype=np.int64)).tolist()
        want = [scalar.add(a), scalar.add(b)]
        assert want[0] is True
        assert got == want, (a, b)
        assert batch.to_bytes() == scalar.to_bytes()
