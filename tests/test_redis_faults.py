"""The faults that turned new keys into "seen", one test each,
against real redis-servers, a real 3-master cluster and a loopback proxy that
stalls, swallows or cuts replies. Each failed before bloomline.redis was
rewritten: the checks use redis-py's base errors where they can, so that
the old code fails on behaviour, not on a name it lacked."""

from __future__ import annotations

import threading
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

redis = pytest.importorskip("redis")
from redis.cluster import RedisCluster, key_slot  # noqa: E402

from bloomline import ScalableBloomFilter  # noqa: E402
from bloomline.redis import MissingKeyError, RedisBloomFilter, RedisStages  # noqa: E402
from conftest import FaultProxy, RedisServer, module_args, start_cluster  # noqa: E402
from forking import worker_context  # noqa: E402

pytestmark = pytest.mark.slow  # clusters, proxies and processes: left out of the fast subset (pytest -m "not slow")

BITS_BACKENDS = ["module", "plain"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Any:
    servers = start_cluster(tmp_path_factory.mktemp("faults-cluster"), module_args("module"))
    yield servers
    for s in servers:
        s.stop()


# ---- 1. a kept answer outlives every re-send -------------------------------------------


def test_a_dupefilter_check_whose_reply_is_swallowed_is_not_seen(module_server: RedisServer, tmp_path: Path) -> None:
    """The dupefilter's defaults (5 s socket timeout, two re-sends): the reply
    to a never-seen request's check is swallowed; the re-send 5 s later must
    still find the kept answer, and the request is new."""
    pytest.importorskip("scrapy")
    from scrapy.http import Request

    from bloomline.scrapy import RedisBloomDupeFilter

    proxy = FaultProxy(module_server.port, "drop", match=b"BLOOMLINE.CADD", limit=1)
    try:
        df = RedisBloomDupeFilter(f"redis://127.0.0.1:{proxy.port}/0", "crawl:dupefilter", spill_dir=str(tmp_path))
        start = time.monotonic()
        assert df.request_seen(Request("https://example.com/never-seen")) is False
        assert time.monotonic() - start >= 4.5 and proxy.faults == 1  # the reply was swallowed, the check re-sent
        assert df.request_seen(Request("https://example.com/never-seen")) is True
        assert df.request_seen(Request("https://example.com/other")) is False
    finally:
        proxy.close()


@pytest.mark.parametrize("backend", BITS_BACKENDS)
def test_a_resend_finds_its_kept_answer_after_a_stall(module_server: RedisServer, backend: str) -> None:
    """A reply stalled past the socket timeout: the re-send gets the kept
    answer (the TTL is derived from the retry window), and every fresh key
    is new once."""
    RedisBloomFilter(module_server.url, "stall", 100_000, 0.001, backend=backend)
    proxy = FaultProxy(module_server.port, "stall", stall_s=1.6, min_bytes=500, limit=1)
    try:
        f = RedisBloomFilter(redis.Redis(host="127.0.0.1", port=proxy.port, socket_timeout=1), "stall", backend=backend)
        assert f.answer_ttl_ms >= 1000 * (9 * 1 + 1)  # nine tries of 1 s, and more
        fresh = [f"https://fresh.example/{i}" for i in range(100)]
        assert f.add_many(fresh).all() and proxy.faults == 1
        assert not f.add_many(fresh).any()
    finally:
        proxy.close()


@pytest.mark.parametrize("backend", BITS_BACKENDS)
def test_a_resend_after_the_answer_may_be_gone_raises(module_server: RedisServer, backend: str) -> None:
    """answer_ttl_ms=1000 and no socket timeout: a reply stalled 1.6 s, then
    the connection cut. The keys were added, but a re-send could no longer
    be told from a first send: the call raises (every key unknown), never
    reports the 100 fresh keys as seen."""
    from bloomline.redis import UnknownOutcome

    RedisBloomFilter(module_server.url, "late", 100_000, 0.001, backend=backend)
    proxy = FaultProxy(module_server.port, "stall", stall_s=1.6, then_cut=True, min_bytes=500, limit=1)
    try:
        f = RedisBloomFilter(redis.Redis(host="127.0.0.1", port=proxy.port, socket_timeout=None), "late", backend=backend,
                             answer_ttl_ms=1000)
        fresh = [f"https://fresh.example/{i}" for i in range(100)]
        with pytest.raises(redis.ConnectionError) as caught:
            f.add_many(fresh)
        assert isinstance(caught.value, UnknownOutcome) and caught.value.unknown is not None
        assert caught.value.unknown.all() and not caught.value.new.any()
    finally:
        proxy.close()


@pytest.mark.parametrize("backend", BITS_BACKENDS)
@pytest.mark.parametrize("meanwhile", ["nothing", "the chain grows"])
def test_a_chain_add_resent_to_a_filled_stage_without_its_answer_raises(tmp_path: Path, backend: str,
                                                                        meanwhile: str) -> None:
    """A stage with room for one more key; the reply to the add that fills
    it is swallowed, and its kept answer is lost before the re-send (plain:
    the answer keys, the only ones with a TTL, evicted; the module: a
    reload, which forgets kept answers), the chain perhaps grown by another
    process meanwhile. The re-send takes nothing from a full or stale
    stage, and the key is then found in that stage, put there by the lost
    send alone: the call must raise with the key unknown, never say
    "seen" to the only caller that added it."""
    from bloomline.redis import UnknownOutcome

    server = RedisServer(tmp_path, *module_args(backend), "--enable-debug-command", "yes")
    proxy = FaultProxy(server.port, "drop", match=b":ans:", limit=0)
    try:
        admin = redis.Redis(host="127.0.0.1", port=server.port)
        client = redis.Redis(host="127.0.0.1", port=proxy.port, socket_timeout=2)
        f = ScalableBloomFilter(100, 0.01, store=RedisStages(client, "crawl", backend=backend, retries=2))
        f.add_many([f"filler-{i}" for i in range(99)])
        assert f.insert_count == 99 and f.num_stages == 1

        def lose_the_answer() -> None:
            # Once the lost send has run (its reply swallowed), while the
            # client waits out its 2 s socket timeout.
            deadline = time.monotonic() + 30
            while proxy.swallowed == 0 and time.monotonic() < deadline:
                time.sleep(0.005)
            if meanwhile == "the chain grows":
                other = ScalableBloomFilter(100, 0.01, store=RedisStages(admin, "crawl", backend=backend))
                other.add_many([f"other-{i}" for i in range(10)])
                assert other.num_stages == 2
            if backend == "plain":
                for k in admin.scan_iter(match="*:ans:*"):
                    admin.delete(k)
            else:
                admin.execute_command("DEBUG", "RELOAD")

        side = threading.Thread(target=lose_the_answer)
        side.start()
        proxy.limit = 1
        with pytest.raises(UnknownOutcome) as caught:
            f.add("the-only-add")
        side.join()
        assert proxy.faults == 1
        assert caught.value.unknown is not None and caught.value.unknown.tolist() == [True]
        assert caught.value.new is not None and caught.value.new.tolist() == [False]
    finally:
        proxy.close()
        server.stop()


def test_answer_ttl_is_checked_against_the_retry_window(module_server: RedisServer) -> None:
    client = redis.Redis(host="127.0.0.1", port=module_server.port, socket_timeout=1)
    with pytest.raises(ValueError, match=r"answer_ttl_ms=1000 is shorter than the retry window: 9 tries of "
                                         r"socket_timeout=1 s"):
        RedisBloomFilter(client, "w", 1000, 0.01, answer_ttl_ms=1000)
    for bad in (2**63 - 1, 999, 0, True, 1.5e6):
        with pytest.raises(ValueError, match=r"answer_ttl_ms must be an int in \[1000, 86400000\]"):
            RedisBloomFilter(client, "w", 1000, 0.01, answer_ttl_ms=bad)  # type: ignore[arg-type]
    assert RedisBloomFilter(client, "w", 1000, 0.01, retries=2, answer_ttl_ms=5000).answer_ttl_ms == 5000


# ---- 2, 3. cluster: NOSCRIPT and MOVED keep the batch's id ------------------------------


def test_cluster_script_flush_on_one_node_keeps_each_key_new_once(cluster: list[RedisServer]) -> None:
    client = RedisCluster(host="127.0.0.1", port=cluster[0].port)
    f = RedisBloomFilter(client, "flushed", 1_000_000, 1e-6, shards=12, backend="plain")
    assert f.add_many(["warm"]).all()  # the script is cached on every node now
    redis.Redis(host="127.0.0.1", port=cluster[1].port).script_flush()  # as a restart or failover of that node does
    keys = np.arange(20_000, dtype=np.uint64)
    assert int(f.add_many(keys).sum()) == 20_000  # each node's part applied once, under one id
    assert not f.add_many(keys).any()
    f.delete()
    client.close()


@pytest.mark.parametrize("backend", BITS_BACKENDS)
def test_cluster_reshard_is_followed(cluster: list[RedisServer], backend: str) -> None:
    from redis_harness import move_slot

    client = RedisCluster(host="127.0.0.1", port=cluster[0].port)
    f = RedisBloomFilter(client, f"moved-{backend}", 1_000_000, 1e-6, shards=12, backend=backend)
    first = np.arange(5_000, dtype=np.uint64)
    assert int(f.add_many(first).sum()) == 5_000
    move_slot([s.port for s in cluster], key_slot(f.shard_keys()[3].encode()))
    second = np.arange(5_000, 10_000, dtype=np.uint64)
    assert int(f.add_many(second).sum()) == 5_000  # MOVED followed, nothing applied twice
    assert not f.add_many(np.concatenate([first, second])).any()
    assert f.contains_many(second).all()
    f.delete()
    client.close()


# ---- 4. a shared chain keeps its bound ---------------------------------------------------


def _chain_worker(port: int, backend: str, order: int, n: int, q: Any) -> None:
    import traceback

    try:
        # Bulk loads on a busy single-threaded server: a 30 s socket timeout
        # (scrapy-redis's), as plain Redis at about 20 bits a key takes its time.
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=30)
        chain = ScalableBloomFilter(1000, 1e-6, store=RedisStages(client, "bound", backend=backend))
        keys = np.random.default_rng(order).permutation(n).astype(np.uint64)
        new = [keys[lo : lo + 10_000][chain.add_many(keys[lo : lo + 10_000])] for lo in range(0, n, 10_000)]
        q.put(np.concatenate(new))
    except Exception:  # noqa: BLE001 - reported to the test
        q.put(traceback.format_exc())


# The plain backend sets about 20 bits a key at 1e-6, each a BITFIELD
# operation: it gets fewer keys and probes, to stay within CI's time.
@pytest.mark.parametrize("backend,n,probes", [("module", 60_000, 1_000_000), ("plain", 30_000, 200_000)])
def test_four_processes_keep_a_shared_chain_within_its_bound(module_server: RedisServer, backend: str, n: int,
                                                            probes: int) -> None:
    """Four processes add the same keys in batches of 10,000 (ten times the
    first stage's capacity) to a chain at 1e-6: no stage takes more than its
    capacity, each key is new once, and the false-positive rate of the
    stages' actual bits stays under twice the target."""
    from bloomline.analysis import fp_rate_from_bits

    ScalableBloomFilter(1000, 1e-6, store=RedisStages(module_server.url, "bound", backend=backend))
    ctx = worker_context()
    q = ctx.Queue()
    procs = [ctx.Process(target=_chain_worker, args=(module_server.port, backend, i, n, q)) for i in range(4)]
    for p in procs:
        p.start()
    results = [q.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    for r in results:
        assert not isinstance(r, str), r
    counts = np.zeros(n, dtype=np.int64)
    for r in results:
        np.add.at(counts, r.astype(np.int64), 1)
    # (keys never new: false positives, 0.02 expected a run on the module's layout, so two allowed)
    assert counts.max() == 1 and (counts == 0).sum() <= 2
    store = RedisStages(module_server.url, "bound", backend=backend)
    chain = ScalableBloomFilter(1000, 1e-6, store=store)
    for i, (stage, count) in enumerate(store.stages()):
        assert count <= stage.capacity, f"stage {i} took {count} keys, over its capacity {stage.capacity}"
        assert stage.approx_count <= 1.03 * stage.capacity  # the bits agree, within the estimate's noise
    assert sum(c for _, c in store.stages()) == int(counts.sum())
    rates = [fp_rate_from_bits(s.to_filter()) for s in chain.stages]
    compound = 1 - float(np.prod([1 - r for r in rates]))
    assert compound <= 2e-6, f"the stages' bits give a false-positive rate of {compound:.3g}"
    hits = int(chain.contains_many(np.arange(10**9, 10**9 + probes, dtype=np.uint64)).sum())
    assert hits <= 5  # measured: about compound * probes expected (under 1)


# ---- 5. a cut during creation or growth does not wedge the key -------------------------


@pytest.mark.parametrize("backend", BITS_BACKENDS)
def test_a_cut_right_after_creating_the_meta_finishes_the_creation(module_server: RedisServer, backend: str) -> None:
    proxy = FaultProxy(module_server.port, "cut_after", match=b"version", limit=1)
    try:
        start = time.monotonic()
        f = RedisBloomFilter(redis.Redis(host="127.0.0.1", port=proxy.port), "cr", 10_000, 0.01, backend=backend)
        assert proxy.faults == 1 and time.monotonic() - start < 5
        assert f.add_many(["a", "b"]).all()
        assert RedisBloomFilter(module_server.url, "cr").contains_many(["a", "b"]).all()
    finally:
        proxy.close()


@pytest.mark.parametrize("backend", BITS_BACKENDS)
def test_a_cut_right_after_growing_the_chain_finishes_the_growth(module_server: RedisServer, backend: str) -> None:
    proxy = FaultProxy(module_server.port, "cut_after", match=b"version", every=2, limit=1)  # stage 1's
    try:
        start = time.monotonic()
        chain = ScalableBloomFilter(100, 0.01, store=RedisStages(redis.Redis(host="127.0.0.1", port=proxy.port), "gr", backend=backend))
        assert chain.add_many(np.arange(250, dtype=np.uint64)).all()
        assert proxy.faults == 1 and chain.num_stages == 2 and time.monotonic() - start < 5
        again = ScalableBloomFilter(100, 0.01, store=RedisStages(module_server.url, "gr", backend=backend))
        assert again.num_stages == 2 and again.contains_many(np.arange(250, dtype=np.uint64)).all()
    finally:
        proxy.close()


# ---- 6. a key that vanished is an error, never a fresh start ------------------------------


@pytest.fixture(params=["module", "plain", "bf"])
def any_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    backend = str(request.param)
    server = RedisServer(tmp_path, *module_args("module"), *(module_args("bf") if backend == "bf" else []))
    yield server, backend
    server.stop()


def test_a_deleted_shard_is_refused_not_made_anew(any_backend: tuple[RedisServer, str]) -> None:

    server, backend = any_backend
    client = redis.Redis(host="127.0.0.1", port=server.port)
    f = RedisBloomFilter(client, "gone", 10_000, 0.001, backend=backend)
    earlier = [f"https://a.example/{i}" for i in range(1000)]
    f.add_many(earlier)
    victim = f.shard_keys()[0]  # (for backend 'bf', the server's Bloom key)
    assert client.delete(victim) == 1
    with pytest.raises(redis.ResponseError, match=f"'{victim}', a key of the filter at 'gone', is gone") as caught:
        f.add_many(["https://b.example/"])
    assert isinstance(caught.value, MissingKeyError) and caught.value.key == victim
    with pytest.raises(MissingKeyError):
        f.contains_many(earlier[:10])
    assert not client.exists(victim)  # nothing made it anew
    with pytest.raises(MissingKeyError, match="is gone"):
        RedisBloomFilter(client, "gone")  # attaching checks every key


def test_a_filter_whose_meta_vanished_is_not_wiped_by_creating_it_again(any_backend: tuple[RedisServer, str]) -> None:
    server, backend = any_backend
    client = redis.Redis(host="127.0.0.1", port=server.port)
    f = RedisBloomFilter(client, "m", 10_000, 0.001, backend=backend)
    f.add_many(np.arange(1000))
    client.delete("m:meta")
    with pytest.raises(redis.ResponseError, match=r"lost its meta 'm:meta' .* while its data remains"):
        RedisBloomFilter(client, "m", 10_000, 0.001, backend=backend)
    data = f.shard_keys()[0]
    assert client.exists(data)  # still there, for a restore
    assert RedisBloomFilter.drop(client, "m") >= 1 and not client.keys("*m:*")  # every key of it, answers included
    g = RedisBloomFilter(client, "m", 10_000, 0.001, backend=backend)
    assert not g.contains_many(np.arange(1000)).any()


@pytest.mark.parametrize("backend", BITS_BACKENDS)
def test_expire_persist_and_ttl_cover_every_key(module_server: RedisServer, backend: str) -> None:
    client = redis.Redis(host="127.0.0.1", port=module_server.port)
    f = RedisBloomFilter(client, "t", 10_000, 0.001, backend=backend, shards=3)
    assert f.ttl() is None
    f.expire(100)
    assert 99 < f.ttl() <= 100  # type: ignore[operator]
    names = [k for k in client.keys("*") if b":ans:" not in k]  # the meta, the shards and their counts
    assert len(names) == 1 + 2 * 3
    assert all(0 < client.pttl(k) <= 100_000 for k in names)
    f.persist()
    assert f.ttl() is None and all(client.pttl(k) == -1 for k in names)
    with pytest.raises(ValueError, match="seconds must be a positive number, got 0"):
        f.expire(0)
    f.expire(0.3)
    time.sleep(0.5)
    assert not any(client.exists(k) for k in names)  # the whole filter went at once
    chain = ScalableBloomFilter(100, 0.01, store=RedisStages(client, "tc", backend=backend))
    store = chain._store
    store.expire(100)  # type: ignore[attr-defined]
    chain.add_many(np.arange(500, dtype=np.uint64))  # grows: the new stages take the time left
    assert chain.num_stages >= 3
    chain_keys = [k for k in client.keys("{tc}:*") if b":ans:" not in k]
    assert chain_keys and all(0 < client.pttl(k) <= 100_000 for k in chain_keys)
    assert 99 < store.ttl() <= 100  # type: ignore[attr-defined]
    store.persist()  # type: ignore[attr-defined]
    assert all(client.pttl(k) == -1 for k in chain_keys) and store.ttl() is None  # type: ignore[attr-defined]


def test_a_chain_whose_stage_count_vanished_is_not_started_anew(module_server: RedisServer) -> None:
    client = redis.Redis(host="127.0.0.1", port=module_server.port)
    chain = ScalableBloomFilter(100, 0.01, store=RedisStages(client, "sc"))
    chain.add_many(np.arange(300, dtype=np.uint64))
    client.delete("{sc}:stages")
    with pytest.raises(redis.ResponseError, match=r"'\{sc\}:stages', a key of the chain at 'sc', is gone"):
        chain.add_many(np.arange(300, 600, dtype=np.uint64))
    with pytest.raises(redis.ResponseError, match=r"'\{sc\}:stages', a key of the chain at 'sc', is gone"):
        ScalableBloomFilter(100, 0.01, store=RedisStages(client, "sc"))
    RedisStages(client, "sc").reset()
    assert not client.keys("{sc}:*")


def test_a_caught_missing_key_leaves_the_chain_as_it_was(module_server: RedisServer) -> None:
    """A reload that meets a vanished key raises and keeps the stages it
    had, so a caller that catches the error (a crawler going on with its
    next batch) gets the same clear error again, never an IndexError."""
    client = redis.Redis(host="127.0.0.1", port=module_server.port)
    chain = ScalableBloomFilter(100, 0.01, store=RedisStages(client, "ck"))
    other = ScalableBloomFilter(100, 0.01, store=RedisStages(client, "ck"))
    chain.add_many(np.arange(50, dtype=np.uint64))
    other.add_many(np.arange(50, 400, dtype=np.uint64))  # grows the chain past what `chain` has read
    assert other.num_stages > chain.num_stages == 1
    client.delete("{ck}:s1:meta")
    for _ in range(3):
        with pytest.raises(MissingKeyError, match=r"\{ck\}:s1:meta"):
            chain.add_many(np.arange(400, 450, dtype=np.uint64))
        with pytest.raises(MissingKeyError, match=r"\{ck\}:s1:meta"):
            chain.contains_many(np.arange(10, dtype=np.uint64))
    assert chain.num_stages == 1



@pytest.mark.parametrize("backend", BITS_BACKENDS)
def test_keys_a_full_stage_did_not_take_are_unknown_when_the_call_raises(module_server: RedisServer,
                                                                       backend: str) -> None:
    """A chain's add whose first send is cut before it runs is re-sent; with
    no kept answer the keys found present are '?', and the call raises. The
    stage fills part-way through that batch: the keys it did not take have
    no answer either, and must be `unknown` (to be treated as new), never
    read as "seen" (they were: only the '?' keys were unknown)."""
    from bloomline.redis import UnknownOutcome

    ScalableBloomFilter(1000, 0.01, store=RedisStages(module_server.url, "nt", backend=backend)).add_many(
        np.arange(500, dtype=np.uint64))
    proxy = FaultProxy(module_server.port, "cut_before", min_bytes=4000, limit=1)
    try:
        chain = ScalableBloomFilter(1000, 0.01, store=RedisStages(
            redis.Redis(host="127.0.0.1", port=proxy.port), "nt", backend=backend))
        keys = np.arange(1500, dtype=np.uint64)
        with pytest.raises(UnknownOutcome) as caught:
            chain.add_many(keys)
        assert proxy.faults == 1
        e = caught.value
        assert e.new is not None and e.unknown is not None
        assert e.unknown[:500].all()  # present, and the lost send might have added them
        answered = e.new | e.unknown
        assert answered[500:].all(), f"{int((~answered[500:]).sum())} fresh keys read as seen"
        assert not (e.new & e.unknown).any()
        # What was taken is in the chain; what was not is not claimed to be.
        assert chain.contains_many(keys[500:][e.new[500:]]).all()
    finally:
        proxy.close()

# ---- 7. a fixed filter past its capacity says so, once ----------------------------------


@pytest.mark.parametrize("backend", BITS_BACKENDS)
def test_a_fixed_filter_past_its_capacity_warns_once(module_server: RedisServer, backend: str) -> None:
    from bloomline import CapacityWarning

    f = RedisBloomFilter(module_server.url, "cap", 10_000, 0.01, backend=backend, shards=4)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for lo in range(0, 30_000, 1000):
            f.add_many(np.arange(lo, lo + 1000))
    caught = [w for w in seen if issubclass(w.category, CapacityWarning)]
    assert len(caught) == 1 and issubclass(CapacityWarning, UserWarning)
    assert "past its capacity of 10,000" in str(caught[0].message) and "ScalableBloomFilter" in str(caught[0].message)
    with warnings.catch_warnings(record=True) as seen:  # a chain grows instead: no warning
        warnings.simplefilter("always")
        chain = ScalableBloomFilter(1000, 0.01, store=RedisStages(module_server.url, "capc", backend=backend))
        chain.add_many(np.arange(30_000))
    assert not [w for w in seen if issubclass(w.category, CapacityWarning)]


@pytest.mark.parametrize("backend", BITS_BACKENDS)
def test_a_capacity_warning_made_an_error_carries_the_adds_answers(module_server: RedisServer, backend: str) -> None:
    """With warnings as errors the warning comes after the keys were
    recorded for the whole fleet: it carries the add's answers (``new``,
    ``unknown``) as the add's own errors do, so a caller that must not lose
    a key knows which were new (a batch, and one key through the fast path)."""
    from bloomline import CapacityWarning

    f = RedisBloomFilter(module_server.url, "caperr", 100, 0.01, backend=backend, shards=1)
    keys = np.arange(150, dtype=np.uint64)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CapacityWarning)
        with pytest.raises(CapacityWarning, match="past its capacity of 100") as caught:
            f.add_many(keys)
    new, unknown = caught.value.new, caught.value.unknown  # type: ignore[attr-defined]
    assert new.shape == (150,) and not unknown.any() and new.sum() >= 140  # (a few false positives read "seen")
    assert not f.add_many(keys).any()  # every key was recorded: a second add finds them all
    one = RedisBloomFilter(module_server.url, "caperr1", 2, 0.01, backend=backend, shards=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CapacityWarning)
        assert one.add("a") and one.add("b")
        with pytest.raises(CapacityWarning) as caught:
            one.add("c")
    assert caught.value.new.tolist() == [True] and caught.value.unknown.tolist() == [False]  # type: ignore[attr-defined]
    assert one.add("c") is False


# ---- 8. the smaller defects ------------------------------------------------------------------


def test_arrow_streams_are_read_once_by_every_backend(any_backend: tuple[RedisServer, str]) -> None:
    pa = pytest.importorskip("pyarrow")
    server, backend = any_backend
    f = RedisBloomFilter(server.url, "arrow", 10_000, 0.001, backend=backend)
    batches = [pa.record_batch([pa.array(["a", "b"])], names=["k"]), pa.record_batch([pa.array(["c"])], names=["k"])]

    def reader() -> Any:  # a stream that can be read once
        return pa.RecordBatchReader.from_batches(batches[0].schema, batches)

    assert f.add_many(reader()).tolist() == [True, True, True]
    assert f.contains_many(reader()).tolist() == [True, True, True]
    assert f.add_many(reader()).tolist() == [False, False, False]


@pytest.mark.parametrize("name", ["a}b", "x{}y", "}lead", "{}", "%7Bz"])
def test_key_names_with_braces_work_on_a_cluster(cluster: list[RedisServer], name: str) -> None:
    client = RedisCluster(host="127.0.0.1", port=cluster[0].port)
    for backend in BITS_BACKENDS:
        f = RedisBloomFilter(client, f"{name}-{backend}", 10_000, 0.01, backend=backend, shards=3)
        assert f.add_many(["a", "b"]).all() and f.contains_many(["a", "b", "c"]).tolist() == [True, True, False]
        chain = ScalableBloomFilter(100, 0.01, store=RedisStages(client, f"{name}-c-{backend}", backend=backend))
        assert chain.add_many(np.arange(300, dtype=np.uint64)).all()
        f.delete()
        chain._store.reset()  # type: ignore[attr-defined]
    client.close()


def test_the_module_refuses_nonzero_reserved_header_bytes(module_server: RedisServer) -> None:
    client = redis.Redis(host="127.0.0.1", port=module_server.port)
    f = RedisBloomFilter(client, "hdr", 1000, 0.01, backend="module")
    blob = b"B\x03\x00\x00" + b"\x00\x00\x00\x00" + b"\x01\x00\x02\x00\x03\x00"
    assert client.execute_command("BLOOMLINE.HAS", f.shard_keys()[0], blob) == b"0"
    for bad in (b"B\x03\x01\x00", b"B\x03\x00\x07"):
        with pytest.raises(redis.ResponseError, match="malformed positions"):
            client.execute_command("BLOOMLINE.HAS", f.shard_keys()[0], bad + blob[4:])


def test_a_large_plain_batch_does_not_hold_the_server(module_server: RedisServer) -> None:
    """300,000 keys on plain Redis: the server answers others meanwhile (the
    batch goes as commands of 10,000 keys)."""
    f = RedisBloomFilter(module_server.url, "big", 1_000_000, 0.01, backend="plain")
    pings: list[float] = []
    done = threading.Event()

    def ping() -> None:
        other = redis.Redis(host="127.0.0.1", port=module_server.port)
        while not done.is_set():
            t = time.perf_counter()
            other.ping()
            pings.append(time.perf_counter() - t)
            time.sleep(0.01)

    t = threading.Thread(target=ping)
    t.start()
    start = time.perf_counter()
    f.add_many(np.arange(300_000, dtype=np.uint64))
    took = time.perf_counter() - start
    done.set()
    t.join()
    assert took > 0.5 and len(pings) > 10  # long enough to tell
    assert max(pings) < took / 4  # no single command held the server for the batch's length
