"""Every case of the Redis fault harness (tests/redis_harness.py), once, at a
small scale: four processes add the same 20,000 keys to one filter in Redis
while the fault strikes; each key is new to exactly one of them, or one a
raising call had no answer for (those batches are counted and printed in
the "Redis fault harness" section of pytest's summary)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("redis")

import redis_harness  # noqa: E402
from conftest import HARNESS_LINES  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("backend,kind,fault", redis_harness.cases(), ids=["/".join(c) for c in redis_harness.cases()])
def test_each_key_is_new_exactly_once_or_its_call_raised(backend: str, kind: str, fault: str, tmp_path: Path) -> None:
    if backend == "bf":
        from conftest import redisbloom_path

        redisbloom_path()  # skips (or fails in CI) without RedisBloom
    outcome = redis_harness.run(redis_harness.Spec(backend, kind, fault, 20_000, 0), tmp_path)
    HARNESS_LINES.append(redis_harness.describe(outcome))
    assert outcome.faults >= 1, redis_harness.describe(outcome)  # the fault struck
    if fault in ("del", "expire"):  # and the adds met it: a vanished key refuses every call that needs it
        assert outcome.errors["MissingKeyError"] >= 1, redis_harness.describe(outcome)
    assert outcome.new_twice == 0, redis_harness.describe(outcome)
    assert outcome.never_new == 0, redis_harness.describe(outcome)
    # Raising is the last resort, not the answer to every fault; but a key
    # that vanished (deleted, expired, evicted) refuses every call after it.
    assert outcome.raised_keys < 20_000 or fault in ("del", "expire", "evict"), redis_harness.describe(outcome)
