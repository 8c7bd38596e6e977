"""RedisBloomFilter against a real redis-server (and a real 3-master cluster)."""

from __future__ import annotations

import multiprocessing as mp
import threading
import time
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from bloomline import BloomFilter

redis = pytest.importorskip("redis")
from bloomline.redis import RedisBloomFilter, UnknownOutcome  # noqa: E402


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


def test_a_client_that_decodes_replies_works_on_every_backend(backend_server: tuple[Any, str]) -> None:
    """redis-py clients are often made with decode_responses=True: the
    filter, a chain and an import read bytes all the same."""
    import hashlib

    from bloomline import ScalableBloomFilter
    from bloomline.redis import RedisStages

    server, backend = backend_server
    client = redis.Redis(host="127.0.0.1", port=server.port, decode_responses=True)
    f = RedisBloomFilter(client, "dec", 10_000, 0.001, backend=backend)
    assert f.add_many(["a", "b", "a"]).tolist() == [True, True, False]
    assert f.add("c") and "c" in f and "zz" not in f
    assert f.contains_many(["a", "b", "c", "d"]).tolist() == [True, True, True, False]
    if backend == "bf":
        return
    chain = ScalableBloomFilter(100, 0.01, store=RedisStages(client, "dec-chain", backend=backend))
    assert chain.add_many([f"k{i}" for i in range(500)]).sum() >= 499 and chain.num_stages > 1
    pytest.importorskip("scrapy")
    from bloomline.scrapy.migrate import import_set

    client.sadd("s:dupefilter", *[hashlib.sha1(str(i).encode()).hexdigest() for i in range(300)], "bad")
    report = import_set(client, "s:dupefilter", backend=backend, chunk=100)
    assert (report.imported, report.invalid, report.missing) == (300, 1, 0)


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
    from bloomline.redis._meta import plan

    big = plan(600_000_000, 0.001, "blocked", 0, None, 2**31, "bits")
    assert big["num_bits"] > 2**32 and big["shards"] >= 5 and big["shard_bits"] <= 2**31
    with pytest.raises(ValueError, match="layout 'standard' keeps every bit in one Redis string"):
        plan(600_000_000, 0.001, "standard", 0, None, 2**31, "bits")


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


def _count_new(target: Any, args: list[tuple[Any, ...]], n: int, *, timeout: float) -> npt.NDArray[np.int64]:
    """Run target(*a, queue) in one worker process per a (forking.worker_context); each puts the
    indexes (below n) it found new, or its traceback as a str. How many
    processes found each new."""
    return _count_new_and_exempt(target, args, n, timeout=timeout)[0]


def _count_new_and_exempt(target: Any, args: list[tuple[Any, ...]], n: int, *,
                          timeout: float) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """_count_new, for workers that may also put, after a -1, the indexes a
    raising add had no answer for: (how many found each new, exempt)."""
    ctx = worker_context()
    q: mp.Queue[list[int]] = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*a, q)) for a in args]
    for p in procs:
        p.start()
    results = [q.get(timeout=timeout) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    for r in results:
        assert not isinstance(r, str), r  # a worker's traceback
    counts = np.zeros(n, dtype=np.int64)
    exempt = np.zeros(n, dtype=bool)
    for r in results:
        cut_at = r.index(-1) if -1 in r else len(r)
        np.add.at(counts, np.array(r[:cut_at], dtype=np.int64), 1)
        exempt[np.array(r[cut_at + 1 :], dtype=np.int64)] = True
    return counts, exempt


def _worker(url: str, urls: list[str], q: "mp.Queue[list[int]]") -> None:
    f = RedisBloomFilter(url, "fleet")
    new: list[int] = []
    for start in range(0, len(urls), 1000):
        chunk = urls[start : start + 1000]
        flags = f.add_many(chunk)
        new.extend(int(u.rsplit("/", 1)[1]) for u, is_new in zip(chunk, flags.tolist()) if is_new)
    q.put(new)


@pytest.mark.slow
def test_four_processes_each_url_new_exactly_once(redis_server: object) -> None:
    url = redis_server.url  # type: ignore[attr-defined]
    f = RedisBloomFilter(url, "fleet", 100_000, 0.001)
    rng = np.random.default_rng(4)
    all_urls = [f"https://site.example/page/{i}" for i in range(100_000)]
    parts = []
    for _ in range(4):  # overlapping: each process takes a random 60%
        idx = rng.permutation(100_000)[:60_000]
        parts.append([all_urls[i] for i in idx])
    counts = _count_new(_worker, [(url, p) for p in parts], 100_000, timeout=300)
    offered = np.zeros(100_000, dtype=bool)
    for p in parts:
        offered[[int(u.rsplit("/", 1)[1]) for u in p]] = True
    assert counts.max() == 1  # atomic test-and-set: never new twice
    missed = int(((counts == 0) & offered).sum())  # false positives: new keys seen as old
    # each add faces a rate below 0.1%: the expected count is under 100
    assert missed <= 100 * 1.5
    assert f.contains_many(np.array(all_urls)[offered]).all()


@pytest.mark.slow
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


# ---- backends: plain Redis, bloomline's module, the server's BF commands ----------------------

from conftest import FaultProxy, RedisServer  # noqa: E402
from forking import worker_context  # noqa: E402


def test_every_backend_answers_alike(backend_server: tuple[RedisServer, str]) -> None:
    server, backend = backend_server
    client = redis.Redis(host="127.0.0.1", port=server.port)
    f = RedisBloomFilter(client, "alike", 50_000, 0.001, backend=backend)
    assert f.backend == backend
    assert f.add("https://a.example/") is True and f.add("https://a.example/") is False
    assert f.add_many(["x", "y", "x", "https://a.example/"]).tolist() == [True, True, False, False]
    assert f.add_many(np.arange(12, dtype=np.int64).reshape(3, 4)).shape == (3, 4)  # shapes kept
    assert f.contains_many(np.arange(12).reshape(4, 3)).all()
    assert f.contains_many(["x", "nope"]).tolist() == [True, False]
    assert f.add_lines(b"l1\nl2\r\nl1\n").tolist() == [True, True, False]
    assert f.contains_lines(b"l2\nl3\n").tolist() == [True, False]
    with pytest.raises(TypeError, match="keys must be an iterable of keys"):
        f.add_many("abc")
    again = RedisBloomFilter(client, "alike")
    assert again.backend == backend and "x" in again
    # Every backend counts its new keys, and nbytes is the filter's own size
    # (its bits; the server's filter for 'bf', which sizes it by its own rule).
    assert f.insert_count == 1 + 2 + 12 + 2
    assert 0.5 * f.num_bits / 8 <= f.nbytes <= 2 * f.num_bits / 8
    client.close()


def test_every_backend_takes_every_key_form(backend_server: tuple[RedisServer, str]) -> None:
    """Floats, big ints, tuples and frozensets (docs/FORMAT.md, "Keys") by
    every backend: the bf backend sends their key bytes, the others their
    hashes; 42.0 is 42 on each, and a NaN is a null."""
    server, backend = backend_server
    client = redis.Redis(host="127.0.0.1", port=server.port)
    f = RedisBloomFilter(client, "forms", 10_000, 0.0001, backend=backend)
    keys = [42, 0.5, 2**70, -(2**64), ("a", 1), frozenset({"x", 2.5}), float("inf")]
    assert f.add_many(keys).tolist() == [True] * len(keys)
    same = [42.0, 0.5, 2.0**70, -(2.0**64), ("a", 1.0), frozenset({2.5, "x"}), float("inf")]
    assert f.contains_many(same).tolist() == [True] * len(keys)
    assert f.contains_many(np.array([42.0, 0.5, 43.0])).tolist() == [True, True, False]
    assert f.add(("a", 1.0)) is False and 2**64 not in f and 0 not in f and ("a", "1") not in f
    with pytest.raises(ValueError, match=r"keys\[1\] is null"):
        f.add_many([1.0, float("nan")])
    assert f.add_many([7.0, float("nan")], nulls="skip").tolist() == [True, False] and 7 in f
    with pytest.raises(ValueError, match="key is NaN"):
        f.add(float("nan"))
    client.close()


def test_auto_picks_the_module_then_plain(tmp_path_factory: pytest.TempPathFactory) -> None:
    from conftest import module_args

    with_module = RedisServer(tmp_path_factory.mktemp("m"), *module_args("module"))
    without = RedisServer(tmp_path_factory.mktemp("p"))
    try:
        assert RedisBloomFilter(with_module.url, "a", 1000, 0.01).backend == "module"
        assert RedisBloomFilter(without.url, "a", 1000, 0.01).backend == "plain"
        with pytest.raises(ValueError, match="backend 'module' needs bloomline's module"):
            RedisBloomFilter(without.url, "b", 1000, 0.01, backend="module")
        with pytest.raises(ValueError, match="backend must be one of"):
            RedisBloomFilter(without.url, "b", 1000, 0.01, backend="fast")
    finally:
        with_module.stop()
        without.stop()


def test_module_and_plain_share_the_same_bytes(tmp_path_factory: pytest.TempPathFactory, layout: str) -> None:
    from conftest import module_args

    server = RedisServer(tmp_path_factory.mktemp("m"), *module_args("module"))
    try:
        client = redis.Redis(host="127.0.0.1", port=server.port)
        keys = [f"https://example.com/{i}" for i in range(20_000)]
        by_module = RedisBloomFilter(client, "shared", 30_000, 0.01, layout=layout, seed=4, backend="module")
        assert by_module.add_many(keys[:10_000]).sum() >= 9_990
        assert by_module.add_many(keys[10_000:]).sum() >= 9_990
        # The plain backend writes the same bytes (a filter keeps the backend it was made with: another key).
        by_plain = RedisBloomFilter(client, "shared-p", 30_000, 0.01, layout=layout, seed=4, backend="plain")
        assert by_plain.add_many(keys).sum() >= 19_980
        local = BloomFilter(30_000, 0.01, layout=layout, seed=4)
        local.update(keys)
        assert by_module.to_filter() == local == by_plain.to_filter()  # byte for byte, whoever wrote them
        assert by_module.contains_many(keys).all()
        client.close()
    finally:
        server.stop()


def test_shards_are_made_at_full_size(redis_client: object) -> None:
    f = RedisBloomFilter(redis_client, "sized", 100_000, 0.01, shards=3)
    sizes = [redis_client.strlen(k) for k in f.shard_keys()]  # type: ignore[attr-defined]
    assert sum(sizes) == -(-f.num_bits // 512) * 64 and sizes[0] == f.shard_bits // 8
    new = f.add_many(range(1000))
    assert new.sum() >= 995 and f.insert_count == new.sum()  # the shards' counts: every key new to one caller
    assert not f.add_many(range(1000)).any() and f.insert_count == new.sum()


def test_shards_that_would_leave_one_empty_are_refused_naming_a_count_that_fits(redis_client: object) -> None:
    # 6 blocks in 4 shards of 2 leaves the 4th empty: its creation failed
    # inside a script, with Redis's "offset is out of range".
    blocks = -(-BloomFilter(300, 0.01).num_bits // 512)
    assert blocks == 6
    with pytest.raises(ValueError, match=r"shards=4 would leave the last shard empty \(6 blocks of 512 bits, 2 to a "
                                         r"shard\): pass shards=3"):
        RedisBloomFilter(redis_client, "empty", 300, 0.01, shards=4)
    f = RedisBloomFilter(redis_client, "empty", 300, 0.01, shards=3)
    assert f.add_many(range(100)).sum() >= 99


@pytest.mark.parametrize(("field", "value", "message"), [
    ("shards", "1", r"1 shards of \d+ bits do not hold num_bits \d+"),
    ("shard_bits", "512", r"2 shards of 512 bits do not hold num_bits \d+"),
    ("shard_bits", "1000", r"2 shards of 1000 bits do not hold num_bits \d+"),
    ("num_hashes", "0", r"num_hashes must be a whole number in \[1, 64\], got '0'"),
    ("num_bits", "-5", r"num_bits must be a whole number in \[1, 281474976710656\], got '-5'"),
    ("shards", "two", r"shards must be a whole number in \[1, 281474976710656\], got 'two'"),
])
def test_a_meta_damaged_by_hand_names_its_field(redis_client: Any, field: str, value: str, message: str) -> None:
    # It was an IndexError of a shard that is not there, or a
    # ZeroDivisionError (num_hashes 0 on the plain backend).
    RedisBloomFilter(redis_client, "hand", 3000, 0.01, shards=2).add_many(range(100))
    redis_client.hset("hand:meta", field, value)
    with pytest.raises(ValueError, match=r"the filter at key 'hand' has a damaged meta: " + message):
        RedisBloomFilter(redis_client, "hand").contains_many(range(100))


def test_attaching_with_another_layout_or_seed_names_the_field(redis_client: object) -> None:
    RedisBloomFilter(redis_client, "g", 1000, 0.01, layout="standard", seed=7)
    with pytest.raises(ValueError, match=r"differs in layout \(stored standard != given blocked\)"):
        RedisBloomFilter(redis_client, "g", layout="blocked")
    with pytest.raises(ValueError, match=r"differs in seed \(stored 7 != given 8\)"):
        RedisBloomFilter(redis_client, "g", seed=8)
    assert RedisBloomFilter(redis_client, "g", seed=7, layout="standard").seed == 7


def _same_keys_worker(port: int, backend: str, n: int, q: "mp.Queue[list[int]]") -> None:
    """Puts the keys found new, then (after -1) those a raising add had no
    answer for: a cut that struck before a command ran cannot be told from
    one after it, and its re-send answers "unknown" for keys another process
    added (UnknownOutcome, with its facts): the caller treats them as new."""
    import traceback

    try:
        r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=20)
        f = RedisBloomFilter(r, "fleet", backend=backend, retries=20)
        keys = np.arange(n, dtype=np.uint64)
        new: list[int] = []
        unknown: list[int] = []
        for start in range(0, n, 10_000):
            try:
                flags = f.add_many(keys[start : start + 10_000])
            except UnknownOutcome as e:
                assert e.new is not None and e.unknown is not None
                flags = e.new
                unknown.extend((np.nonzero(e.unknown)[0] + start).tolist())
            new.extend((np.nonzero(flags)[0] + start).tolist())
        q.put([*new, -1, *unknown])
    except Exception:  # reported to the test, not lost in a dead process
        q.put(traceback.format_exc())  # type: ignore[arg-type]


@pytest.mark.parametrize("cut", [False, True], ids=["steady", "cut connections"])
@pytest.mark.slow
def test_four_processes_adding_the_same_keys_see_each_new_exactly_once(backend_server: tuple[RedisServer, str],
                                                                      cut: bool) -> None:
    """200,000 keys added by four processes at once, each key new to exactly
    one of them, also when connections drop mid-batch (a proxy cuts every
    fifth reply: the command ran, its reply never came, the client sent it
    again)."""
    server, backend = backend_server
    n = 200_000
    RedisBloomFilter(server.url, "fleet", 1_000_000, 0.001, backend=backend)
    proxy = FaultProxy(server.port, "cut_after", every=5, min_bytes=10_000) if cut else None
    port = proxy.port if proxy else server.port
    counts, exempt = _count_new_and_exempt(_same_keys_worker, [(port, backend, n)] * 4, n, timeout=600)
    assert counts.max() == 1  # never new twice, retries included
    assert int(((counts == 0) & ~exempt).sum()) <= 5  # new to nobody: false positives only (expected well under 1)
    assert exempt.sum() < n // 10  # "unknown" is the rare answer to a cut, not the usual one
    if proxy:
        assert proxy.faults >= 4
        proxy.close()


def _chain_worker(port: int, backend: str, keys: list[int], q: "mp.Queue[list[int]]") -> None:
    from bloomline import ScalableBloomFilter
    from bloomline.redis import RedisStages

    import traceback

    try:
        chain = ScalableBloomFilter(500, 0.01, store=RedisStages(redis.Redis(host="127.0.0.1", port=port), "crawl",
                                                                 backend=backend))
        new: list[int] = []
        for start in range(0, len(keys), 250):
            chunk = np.array(keys[start : start + 250], dtype=np.uint64)
            new.extend(chunk[chain.add_many(chunk)].tolist())
        q.put(new)
    except Exception:  # reported to the test, not lost in a dead process
        q.put(traceback.format_exc())  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", ["plain", "module"])
@pytest.mark.slow
def test_a_chain_grows_in_redis_and_each_key_is_new_once(backend: str, tmp_path_factory: pytest.TempPathFactory,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    from conftest import module_args

    from bloomline import ScalableBloomFilter
    from bloomline.redis import RedisStages

    server = RedisServer(tmp_path_factory.mktemp("chain"), *module_args(backend))
    try:
        grown: list[int] = []
        store = RedisStages(server.url, "crawl", backend=backend)
        chain = ScalableBloomFilter(500, 0.01, store=store, on_grow=lambda c: grown.append(c.num_stages))
        rng = np.random.default_rng(17)
        parts = [sorted(rng.choice(6000, size=4000, replace=False).tolist()) for _ in range(4)]
        counts = _count_new(_chain_worker, [(server.port, backend, p) for p in parts], 6000, timeout=300)
        offered = np.zeros(6000, dtype=bool)
        for p in parts:
            offered[p] = True
        assert counts.max() == 1 and int(((counts == 0) & offered).sum()) <= 0.01 * offered.sum()
        assert store.stage_count() >= 4  # 500 + 1000 + 2000 < ~5,900 keys
        assert chain.contains_many(np.nonzero(offered)[0].astype(np.uint64)).all()  # sees the others' stages
        assert chain.num_stages == store.stage_count() and grown  # and said so
        absent = np.arange(10**9, 10**9 + 200_000, dtype=np.uint64)
        assert chain.contains_many(absent).mean() <= 0.01  # the compound bound holds
    finally:
        server.stop()


@pytest.mark.parametrize("backend", ["plain", "module"])
def test_cluster_backends(redis_cluster: list[object], backend: str) -> None:
    from redis.cluster import RedisCluster

    client = RedisCluster(host="127.0.0.1", port=redis_cluster[0].port)  # type: ignore[attr-defined]
    f = RedisBloomFilter(client, f"cl-{backend}", 200_000, 0.01, shards=12, backend=backend)
    assert f.backend == backend
    keys = [f"https://c.example/{i}" for i in range(30_000)]
    assert f.add_many(keys).sum() >= 29_900
    assert f.contains_many(keys).all() and not f.add_many(keys[:100]).any()
    assert {client.get_node_from_key(k).port for k in f.shard_keys()} == {s.port for s in redis_cluster}  # type: ignore[attr-defined]
    f.delete()
    client.close()


def test_every_backend_takes_arrow_columns_with_nulls(backend_server: tuple[RedisServer, str]) -> None:
    pa = pytest.importorskip("pyarrow")
    server, backend = backend_server
    f = RedisBloomFilter(redis.Redis(host="127.0.0.1", port=server.port), "arrow", 10_000, 0.001, backend=backend)
    col = pa.array(["a", None, "b", "a"])
    with pytest.raises(ValueError, match=r"keys\[1\] is null"):
        f.add_many(col)
    assert f.add_many(col, nulls="skip").tolist() == [True, False, True, False]
    assert f.contains_many(pa.chunked_array([["b"], [None, "zz"]]), nulls="skip").tolist() == [True, False, False]
    assert f.add_many(pa.array([5, -5], pa.int32())).tolist() == [True, True]
    assert f.contains_many([5, -5, 6]).tolist() == [True, True, False]  # the same integer keys
    f.update(pa.array(["u", None]), nulls="skip")
    assert "u" in f and f.contains_many(["a", None, "u"], nulls="skip").tolist() == [True, False, True]


def test_a_flushed_script_is_loaded_again_and_a_generator_is_not_lost(redis_server: RedisServer) -> None:
    client = redis.Redis(host="127.0.0.1", port=redis_server.port)
    f = RedisBloomFilter(client, "noscript", 10_000, 0.001, backend="plain")
    assert f.add_many(["a"]).tolist() == [True]
    client.script_flush()  # as after a server restart: the script is gone (NOSCRIPT)
    # the batch is retried after loading the script again, with the same keys
    assert f.add_many(k for k in ["b", "a", "c"]).tolist() == [True, False, True]
    assert f.contains_many(["a", "b", "c", "d"]).tolist() == [True, True, True, False]
    # a chain's stage adds through its own script, recovered the same way
    from bloomline import ScalableBloomFilter
    from bloomline.redis import RedisStages

    chain = ScalableBloomFilter(100, 0.01, store=RedisStages(client, "noscript-chain", backend="plain"))
    assert chain.add_many([1, 2]).tolist() == [True, True]
    client.script_flush()
    assert chain.add_many([2, 3]).tolist() == [False, True]


def test_a_notebook_display_never_waits_on_the_server(tmp_path: Any) -> None:
    # The display read approx_count, fill_ratio and expected_fp_rate, each a
    # round trip with every retry: some 40 s a count with the server killed,
    # without end with it stopped. It shows what the handle knows instead.
    from bloomline.redis import RedisWindowedFilter

    server = RedisServer(tmp_path)
    try:
        client = redis.Redis(host="127.0.0.1", port=server.port)
        f = RedisBloomFilter(client, "shown<b>", 1000, 0.01)
        w = RedisWindowedFilter(client, "window", 1000, 0.01, window=60)
        f.add("x")
    finally:
        server.stop()
    start = time.monotonic()
    shown = f._repr_html_() + w._repr_html_()
    assert time.monotonic() - start < 2.0
    assert "shown&lt;b&gt;" in shown and "<td>RedisWindowedFilter</td>" in shown
    assert shown.count("not read by a display") == 2

