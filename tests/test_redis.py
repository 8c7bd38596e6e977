"""RedisBloomFilter against a real redis-server (and a real 3-master cluster)."""

from __future__ import annotations

import multiprocessing as mp
import threading
import time

import numpy as np
import pytest

from bloomline import BloomFilter

redis = pytest.importorskip("redis")
from bloomline.redis import RedisBloomFilter  # noqa: E402


def test_add_contains_and_new_flags(redis_client: object, layout: str) -> None:
    f = RedisBloomFilter(redis_client, "crawl", 10_000, 0.001, layout=layout)
    assert f.add("https://a.example/") is True
    assert f.add("https://a.example/") is False
    assert "https://a.example/" in f and "https://b.example/" not in f
    out = f.add_many(["x", "y", "x", "https://a.example/"])
    assert out.tolist() == [True, True, False, False]
    assert f.contains_many(np.array(["x", "y", "z"])).tolist() == [True, True, False]
    f.add_many(np.arange(1000, dtype=np.int64))
    assert f.contains_many(list(range(1000))).all()
    assert f.approx_count == pytest.approx(1003, rel=0.05)


def test_attach_reads_parameters_and_checks_them(redis_client: object) -> None:
    a = RedisBloomFilter(redis_client, "f", 5000, 0.01, seed=3)
    a.add("k")
    b = RedisBloomFilter(redis_client, "f")
    assert (b.num_bits, b.num_hashes, b.seed, b.capacity) == (a.num_bits, a.num_hashes, 3, 5000)
    assert "k" in b
    with pytest.raises(ValueError, match=r"differs in capacity \(stored 5000 != given 6000\)"):
        RedisBloomFilter(redis_client, "f", 6000, 0.01, seed=3)
    with pytest.raises(ValueError, match=r"differs in seed \(stored 3 != given 0\)"):
        RedisBloomFilter(redis_client, "f", 5000, 0.01)
    with pytest.raises(ValueError, match="no filter at key 'nothing'"):
        RedisBloomFilter(redis_client, "nothing")


def test_sharding_and_more_than_2_32_bits_of_addressing(redis_client: object) -> None:
    f = RedisBloomFilter(redis_client, "sharded", 100_000, 0.01, shards=7)
    assert f.shards == 7 and f.shard_bits % 512 == 0 and f.shard_bits * 7 >= f.num_bits
    keys = [f"u{i}" for i in range(20_000)]
    f.add_many(keys)
    used = [k for k in f.shard_keys() if redis_client.exists(k)]  # type: ignore[attr-defined]
    assert len(used) == 7
    assert f.contains_many(keys).all()
    # the geometry of a filter of more than 2**32 bits: shards under the limit
    plan = RedisBloomFilter._plan(600_000_000, 0.001, "blocked", 0, None, 2**31)
    assert plan["num_bits"] > 2**32 and plan["shards"] >= 5 and plan["shard_bits"] <= 2**31
    with pytest.raises(ValueError, match="layout 'standard' keeps every bit in one Redis string"):
        RedisBloomFilter._plan(600_000_000, 0.001, "standard", 0, None, 2**31)


def test_local_and_redis_filters_have_identical_bits(redis_client: object, layout: str) -> None:
    keys = [f"https://example.com/{i}" for i in range(30_000)]
    local = BloomFilter(50_000, 0.01, layout=layout, seed=9)
    local.update(keys)
    remote = RedisBloomFilter(redis_client, "same", 50_000, 0.01, layout=layout, seed=9, shards=1)
    remote.add_many(keys)
    raw = redis_client.get(remote.shard_keys()[0])  # type: ignore[attr-defined]
    assert raw == bytes(memoryview(local))[: len(raw)]  # byte for byte, Redis numbering mapped
    assert remote.to_filter() == local
    up = RedisBloomFilter.from_filter(local, redis_client, "uploaded")
    probes = keys[:1000] + [f"https://example.org/{i}" for i in range(5000)]
    assert up.contains_many(probes).tolist() == local.contains_many(probes).tolist()
    assert up.bits_set == local.bits_set
    with pytest.raises(ValueError, match="already exists"):
        RedisBloomFilter.from_filter(local, redis_client, "uploaded")


def test_clear_and_delete(redis_client: object) -> None:
    f = RedisBloomFilter(redis_client, "tmp", 1000, 0.01)
    f.add("a")
    f.clear()
    assert "a" not in f and f.bits_set == 0
    f.delete()
    assert not redis_client.exists("tmp:meta")  # type: ignore[attr-defined]


def _worker(url: str, urls: list[str], q: "mp.Queue[list[int]]") -> None:
    f = RedisBloomFilter(url, "fleet")
    new: list[int] = []
    for start in range(0, len(urls), 1000):
        chunk = urls[start : start + 1000]
        flags = f.add_many(chunk)
        new.extend(int(u.rsplit("/", 1)[1]) for u, is_new in zip(chunk, flags.tolist()) if is_new)
    q.put(new)


def test_four_processes_each_url_new_exactly_once(redis_server: object) -> None:
    url = redis_server.url  # type: ignore[attr-defined]
    f = RedisBloomFilter(url, "fleet", 100_000, 0.001)
    rng = np.random.default_rng(4)
    all_urls = [f"https://site.example/page/{i}" for i in range(100_000)]
    parts = []
    for _ in range(4):  # overlapping: each process takes a random 60%
        idx = rng.permutation(100_000)[:60_000]
        parts.append([all_urls[i] for i in idx])
    ctx = mp.get_context("spawn")
    q: mp.Queue[list[int]] = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(url, p, q)) for p in parts]
    for p in procs:
        p.start()
    results = [q.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    counts = np.zeros(100_000, dtype=np.int64)
    for r in results:
        np.add.at(counts, np.array(r, dtype=np.int64), 1)
    offered = np.zeros(100_000, dtype=bool)
    for p in parts:
        offered[[int(u.rsplit("/", 1)[1]) for u in p]] = True
    assert counts.max() == 1  # atomic test-and-set: never new twice
    missed = int(((counts == 0) & offered).sum())  # false positives: new keys seen as old
    # each add faces a rate below 0.1%: the expected count is under 100
    assert missed <= 100 * 1.5
    assert f.contains_many(np.array(all_urls)[offered]).all()


def test_connection_loss_raises(redis_server: object) -> None:
    f = RedisBloomFilter(redis_server.url, "lossy", 5_000_000, 0.01)  # type: ignore[attr-defined]
    keys = np.arange(300_000, dtype=np.uint64)
    errors: list[BaseException] = []
    results: list[object] = []

    def batch() -> None:
        try:
            results.append(f.add_many(keys))
        except BaseException as exc:  # noqa: BLE001 - recorded and checked
            errors.append(exc)

    t = threading.Thread(target=batch)
    t.start()
    time.sleep(0.3)
    redis_server.stop()  # type: ignore[attr-defined]
    t.join(timeout=120)
    assert not t.is_alive()
    if results:  # the batch beat the kill: the next call must fail
        with pytest.raises(redis.ConnectionError):
            f.add_many(keys[:10])
    else:
        assert len(errors) == 1 and isinstance(errors[0], redis.ConnectionError)
    with pytest.raises(redis.ConnectionError):
        _ = "x" in f


def test_cluster(redis_cluster: list[object]) -> None:
    from redis.cluster import RedisCluster

    client = RedisCluster(host="127.0.0.1", port=redis_cluster[0].port)  # type: ignore[attr-defined]
    f = RedisBloomFilter(client, "clustered", 200_000, 0.01, shards=12)
    keys = [f"https://c.example/{i}" for i in range(30_000)]
    assert f.add_many(keys).sum() >= 29_900
    assert f.contains_many(keys).all()
    assert not f.add_many(keys[:100]).any()
    g = RedisBloomFilter(client, "clustered")
    assert g.contains_many(keys[:1000]).all()
    # the shards spread over every master
    nodes = {client.get_node_from_key(k).port for k in f.shard_keys()}
    assert nodes == {s.port for s in redis_cluster}  # type: ignore[attr-defined]
    local = f.to_filter()
    assert local.contains_many(keys).all()
    f.delete()
    client.close()
