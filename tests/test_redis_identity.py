"""A filter replaced under an attached handle is refused, not written.

Each making of a filter in Redis has an identity (its meta's `ident`),
and the names of its keys carry it: every add reads its shard's count
first, on the module and plain backends (a chain's stage its stage's
count), and backend 'bf' names the server's Bloom key by it. A handle attached before
the filter was dropped and made again (or restored over with --replace)
names counts that are gone, and its adds raise MissingKeyError instead of
adding with the old geometry or seed (which made keys new twice).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import RedisServer, module_args

redis = pytest.importorskip("redis")
from bloomline import ScalableBloomFilter  # noqa: E402
from bloomline.redis import MissingKeyError, RedisBloomFilter, RedisStages, RedisWindowedFilter  # noqa: E402
from bloomline.redis import dump, restore  # noqa: E402

BACKENDS = ["module", "plain"]


def client(server: RedisServer) -> Any:
    return redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=30)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("remake", ["same size, another seed", "another size"])
def test_a_filter_made_again_under_an_attached_writer_is_refused(module_server: RedisServer, backend: str,
                                                                  remake: str) -> None:
    r = client(module_server)
    writer = RedisBloomFilter(r, "seen", 10_000, 0.01, backend=backend)
    keys = np.arange(1000, dtype=np.uint64)
    assert writer.add_many(keys).all()
    RedisBloomFilter.drop(r, "seen")
    capacity, seed = (10_000, 7) if remake.startswith("same") else (50_000, 0)
    other = RedisBloomFilter(r, "seen", capacity, 0.01, backend=backend, seed=seed)
    assert other.add_many(keys).all()
    with pytest.raises(MissingKeyError, match="dropped and made again"):
        writer.add_many(np.arange(1000, 2000, dtype=np.uint64))
    with pytest.raises(MissingKeyError):
        writer.add(5)
    # The new filter is untouched by the old handle: its keys are each new once.
    fresh = RedisBloomFilter(r, "seen", backend=backend)
    assert not fresh.add_many(keys).any()
    assert fresh.add_many(np.arange(1000, 2000, dtype=np.uint64)).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_restore_with_replace_under_an_attached_writer_is_refused(module_server: RedisServer, backend: str,
                                                                    tmp_path: Path) -> None:
    r = client(module_server)
    writer = RedisBloomFilter(r, "seen", 10_000, 0.01, backend=backend)
    writer.add_many(np.arange(100, dtype=np.uint64))
    dump(r, "seen", tmp_path / "seen.blf")
    restore(tmp_path / "seen.blf", r, "seen", replace=True, backend=backend)
    with pytest.raises(MissingKeyError, match="dropped and made again"):
        writer.add_many(np.arange(100, 200, dtype=np.uint64))
    again = RedisBloomFilter(r, "seen", backend=backend)  # attaching again works
    assert again.contains_many(np.arange(100, dtype=np.uint64)).all()
    assert again.add_many(np.arange(100, 200, dtype=np.uint64)).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_chain_reset_and_made_again_under_an_attached_writer_is_refused(module_server: RedisServer,
                                                                          backend: str) -> None:
    """A chain's stage counts carry their stage's ident too: a writer attached
    to a chain since reset and made again with the same parameters (so the
    stage count and the stages' names match) is refused, not adding to the
    new chain's first stage as if it were its own."""
    r = client(module_server)
    writer = ScalableBloomFilter(1_000, 0.01, store=RedisStages(r, "c", backend=backend))
    keys = np.arange(500, dtype=np.uint64)
    assert writer.add_many(keys).all()
    RedisStages(r, "c").reset()
    other = ScalableBloomFilter(1_000, 0.01, store=RedisStages(r, "c", backend=backend))
    assert other.add_many(keys[:100]).all()
    with pytest.raises(MissingKeyError, match="dropped and made again") as e:
        writer.add_many(np.arange(500, 600, dtype=np.uint64))
    assert e.value.unknown is not None and e.value.unknown.all()  # nothing of it was answered
    # The new chain holds what its own writers added, and nothing of the old one's.
    assert other.contains_many(keys[:100]).all()
    assert other.add_many(np.arange(100, 500, dtype=np.uint64)).all()


def test_a_server_bloom_filter_made_again_under_an_attached_writer_is_refused(tmp_path: Path) -> None:
    """Backend 'bf': bloomline's count beside the server's Bloom key is named
    by the filter's ident, and every add reads it first."""
    server = RedisServer(tmp_path, *module_args("bf"))
    try:
        r = client(server)
        writer = RedisBloomFilter(r, "seen", 10_000, 0.01, backend="bf")
        keys = [f"k{i}" for i in range(1000)]
        assert writer.add_many(keys).all()
        RedisBloomFilter.drop(r, "seen")
        other = RedisBloomFilter(r, "seen", 10_000, 0.01, backend="bf")  # the very same parameters
        assert other.add_many(keys[:10]).all()
        with pytest.raises(MissingKeyError, match="dropped and made again"):
            writer.add_many([f"k{i}" for i in range(1000, 1100)])
        with pytest.raises(MissingKeyError):
            writer.add("x")
        assert other.add_many(keys[10:]).all()  # untouched by the old handle
    finally:
        server.stop()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_name_holds_one_kind_of_filter(module_server: RedisServer, backend: str) -> None:
    """A chain's and a windowed filter's keys share the hash tag ({x}), a
    fixed filter's start with the name: all three could live at one name,
    where dump, restore and the CLI would find one and each kind's delete
    would leave the others. Making a second kind there is refused, either
    way round; one already there is attached as before."""
    r = client(module_server)
    chain = ScalableBloomFilter(100, 0.01, store=RedisStages(r, "x", backend=backend))
    assert chain.add_many(np.arange(300, dtype=np.uint64)).all()
    with pytest.raises(ValueError, match="a chain already exists at key 'x', so a windowed filter cannot be made"):
        RedisWindowedFilter(r, "x", 1000, 0.01, window=3600, backend=backend)
    with pytest.raises(ValueError, match="a chain already exists at key 'x', so a filter cannot be made"):
        RedisBloomFilter(r, "x", 1000, 0.01, backend=backend)
    window = RedisWindowedFilter(r, "y", 1000, 0.01, window=3600, backend=backend)
    assert window.add("page")
    with pytest.raises(ValueError, match="a windowed filter already exists at key 'y', so a chain cannot be made"):
        ScalableBloomFilter(100, 0.01, store=RedisStages(r, "y", backend=backend)).add("k")
    fixed = RedisBloomFilter(r, "z", 1000, 0.01, backend=backend)
    fixed.add("k")
    with pytest.raises(ValueError, match="a filter already exists at key 'z', so a windowed filter cannot be made"):
        RedisWindowedFilter(r, "z", 1000, 0.01, window=3600, backend=backend)
    # Each is attached as before, and holds what it held.
    assert RedisWindowedFilter(r, "y", 1000, 0.01, window=3600, backend=backend).add("page") is False
    assert "k" in RedisBloomFilter(r, "z", 1000, 0.01, backend=backend)
    assert ScalableBloomFilter(100, 0.01, store=RedisStages(r, "x", backend=backend)).contains_many(
        np.arange(300, dtype=np.uint64)).all()
    assert r.keys("{y}:s*") == [] and not r.exists("{y}:stages", "{y}:chain")  # (the refused chain left nothing)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_chains_reset_deletes_its_own_keys_only(module_server: RedisServer, backend: str) -> None:
    """Other keys under the chain's hash tag (a windowed filter's meta, as
    an earlier bloomline let one be made at the same name, or the user's
    own) are left: a reset once deleted every key under the tag, and a
    crawler restarted since saw every URL new again."""
    r = client(module_server)
    chain = ScalableBloomFilter(100, 0.01, store=RedisStages(r, "x", backend=backend))
    assert chain.add_many(np.arange(300, dtype=np.uint64)).all()
    r.set("{x}:mine", b"kept")
    r.hset("{x}:meta", "kind", "windowed")
    chain._store.reset()  # type: ignore[attr-defined]
    assert not r.exists("{x}:stages") and not r.keys("{x}:s[0-9]*") and not r.exists("{x}:chain")
    assert r.get("{x}:mine") == b"kept" and r.hget("{x}:meta", "kind") == b"windowed"
