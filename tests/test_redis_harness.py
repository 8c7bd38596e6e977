"""Every case of the Redis fault harness (tests/redis_harness.py), once, at a
small scale: four processes add the same 20,000 keys to one filter in Redis
while the fault strikes; each key is new to exactly one of them, or one a
raising call had no answer for (a batch that raised NotDurable has none
that is safe; those batches are counted and printed in the "Redis fault
harness" section of pytest's summary)."""

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
    # The fault struck (a failover: the lost reply, then the promotion).
    assert outcome.faults >= (2 if fault == "failover" else 1), redis_harness.describe(outcome)
    # And the adds met it: a vanished or replaced key refuses every call that needs it; a node out of memory, or
    # a promoted server without the module, refuses the adds sent to it.
    if fault in ("del", "expire", "replace"):
        assert outcome.errors["MissingKeyError"] >= 1, redis_harness.describe(outcome)
    if fault in ("oom", "nomodule"):
        assert outcome.raised_batches >= 1, redis_harness.describe(outcome)
    assert outcome.new_twice == 0, redis_harness.describe(outcome)
    assert outcome.never_new == 0, redis_harness.describe(outcome)
    # Raising is the last resort, not the answer to every fault; but a key
    # that vanished (deleted, expired, evicted) or was replaced refuses every
    # call after it, as a promoted server without the module does.
    assert outcome.raised_keys < 20_000 or fault in ("del", "expire", "evict", "replace", "nomodule"), \
        redis_harness.describe(outcome)
