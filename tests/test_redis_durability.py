"""Durability on Redis (WAIT after each add: wait_replicas) and the backend a
filter was made with (recorded in its meta, binding), against real servers:
a primary and a replica joined with REPLICAOF."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

redis = pytest.importorskip("redis")

from conftest import FaultProxy, RedisServer, module_args, start_pair, wait_until  # noqa: E402

from bloomline import ScalableBloomFilter  # noqa: E402
from bloomline.redis import (  # noqa: E402
    MissingKeyError,
    ModuleMissing,
    NotDurable,
    RedisBloomFilter,
    RedisStages,
    RedisWindowedFilter,
    UnknownOutcome,
)



@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[RedisServer, RedisServer]]:
    """A primary and its replica, plain Redis."""
    primary, replica = start_pair(tmp_path, [], [])
    yield primary, replica
    replica.stop()
    primary.stop()


# ---- WAIT after each add ----------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["plain", "module"])
def test_with_wait_replicas_an_acknowledged_add_is_on_the_replica(tmp_path: Path, backend: str) -> None:
    primary, replica = start_pair(tmp_path, module_args(backend), module_args(backend))
    try:
        f = RedisBloomFilter(primary.url, "d", 20_000, 0.001, backend=backend, wait_replicas=1)
        assert f.wait_replicas == 1 and f.backend == backend
        r, p = redis.Redis(port=replica.port), redis.Redis(port=primary.port)
        for _ in range(5):  # read at once after each add: WAIT returned only once the replica had it
            f.add_many(np.arange(2_000, dtype=np.uint64) + 2_000 * _)
            assert [r.get(s) for s in f.shard_keys()] == [p.get(s) for s in f.shard_keys()]
        assert f.add("single") is True
        assert [r.get(s) for s in f.shard_keys()] == [p.get(s) for s in f.shard_keys()]
        assert sum(r.bitcount(s) for s in f.shard_keys()) == f.bits_set > 0
    finally:
        replica.stop()
        primary.stop()


def test_too_few_replicas_raise_not_durable_with_the_primarys_answers(pair: tuple[RedisServer, RedisServer]) -> None:
    primary, replica = pair
    f = RedisBloomFilter(primary.url, "d", 20_000, 0.001, wait_replicas=1, wait_timeout_ms=300)
    assert f.add_many(["a", "b"]).all()
    redis.Redis(port=replica.port).execute_command("CLIENT", "PAUSE", 4000, "ALL")  # it acknowledges nothing
    start = time.monotonic()
    with pytest.raises(NotDurable, match=r"not yet on wait_replicas=1 replicas: 0 of 1 replicas acknowledged "
                                         r"within 300 ms\. Its 2 new keys are new") as e:
        f.add_many(["a", "c", "d"])
    assert time.monotonic() - start < 2.0  # within the timeout (and a round trip), not the socket's
    assert e.value.acked == 0 and e.value.wanted == 1
    assert e.value.new is not None and e.value.new.tolist() == [False, True, True]  # the primary's answers
    assert e.value.unknown is not None and not e.value.unknown.any()  # every key was answered
    with pytest.raises(NotDurable) as one:
        f.add("e")
    assert one.value.new is not None and one.value.new.tolist() == [True]
    assert not isinstance(one.value, redis.ConnectionError)  # a retry would answer "seen": not a lost connection
    assert f.contains_many(["c", "d", "e"]).all()  # on the primary all the same


@pytest.mark.parametrize("backend", ["plain", "module"])
def test_an_add_that_raised_waits_for_the_keys_it_answered_new(tmp_path: Path, backend: str) -> None:
    """A raising add's `new` makes a returning add's promise: one shard of
    four gone, the other three answer and are waited for; when the replica
    falls short, their keys move to `unknown` (a failover may lose them:
    the fault harness met keys new to two writers that way), else they
    stay new."""
    primary, replica = start_pair(tmp_path, module_args(backend), module_args(backend))
    try:
        p, r = redis.Redis(port=primary.port), redis.Redis(port=replica.port)
        for paused in (False, True):
            f = RedisBloomFilter(primary.url, f"d{int(paused)}", 20_000, 0.001, backend=backend, shards=4,
                                 wait_replicas=1, wait_timeout_ms=300)
            p.delete(f.shard_keys()[1])
            if paused:
                r.execute_command("CLIENT", "PAUSE", 3000, "ALL")  # it acknowledges nothing
            with pytest.raises(MissingKeyError) as e:
                f.add_many(np.arange(2_000, dtype=np.uint64))
            new, unknown = e.value.new, e.value.unknown
            assert new is not None and unknown is not None and not (new & unknown).any()
            notes = " ".join(getattr(e.value, "__notes__", [])) + str(e.value)  # (in the message before 3.11)
            if paused:  # nothing is safe: every key is to be treated as new, and the error says why
                assert not new.any() and unknown.all(), (new.sum(), unknown.sum())
                assert ("are in `unknown`, not `new`: they are not yet on wait_replicas=1 replicas (0 of 1 replicas "
                        "acknowledged") in notes
            else:  # acknowledged: the three shards' keys are new (and on the replica), the fourth's unknown
                assert new.any() and unknown.any() and (new | unknown).all() and "wait_replicas" not in notes
                for shard in (0, 2, 3):
                    assert r.dump(f.shard_keys()[shard]) == p.dump(f.shard_keys()[shard])
    finally:
        replica.stop()
        primary.stop()


@pytest.mark.parametrize("kind", ["chain", "window"])
def test_a_chain_or_windowed_add_that_raised_keeps_no_unwaited_key_new(pair: tuple[RedisServer, RedisServer],
                                                                      kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same promise for a chain's stage add and a windowed filter's add:
    the first of several windows answered, the second's connection cut
    before it ran, and its re-send too (retries=0): the add raises
    UnknownOutcome, and the first window's keys, never acknowledged by the
    replica, are in its `unknown`, not its `new`."""
    primary, replica = pair

    def make(client: Any, **kw: Any) -> Any:
        if kind == "chain":
            return ScalableBloomFilter(100_000, 0.001, store=RedisStages(client, "c", backend="plain", **kw))
        return RedisWindowedFilter(client, "w", 100_000, 0.001, window=3600, backend="plain", **kw)

    make(primary.url).add("warm")  # the filter and its scripts made, off the proxy
    proxy = FaultProxy(primary.port, "cut_before", every=10**9, min_bytes=20_000)  # (no cut yet)

    def one_by_one(parts: Any) -> Any:  # each command its own window; from the second on, every add is cut
        for i, part in enumerate(parts):
            if i == 1:
                proxy.every = 1
            yield [part]

    try:
        f = make(redis.Redis(port=proxy.port, socket_timeout=5), retries=0, wait_replicas=1, wait_timeout_ms=300)
        monkeypatch.setattr("bloomline.redis._backend.windows", one_by_one)
        monkeypatch.setattr("bloomline.redis._windowed.windows", one_by_one)
        redis.Redis(port=replica.port).execute_command("CLIENT", "PAUSE", 3000, "ALL")
        with pytest.raises(UnknownOutcome) as e:
            f.add_many(np.arange(20_000, dtype=np.uint64))
        assert proxy.faults >= 1
        new, unknown = e.value.new, e.value.unknown
        assert new is not None and unknown is not None
        assert not new.any() and unknown.all(), (int(new.sum()), int(unknown.sum()))
        assert "are in `unknown`, not `new`" in " ".join(getattr(e.value, "__notes__", [])) + str(e.value)
        assert make(primary.url).contains_many(np.arange(20_000, dtype=np.uint64)).any()  # the first window ran
    finally:
        proxy.close()


def test_a_chain_on_redis_waits_too(pair: tuple[RedisServer, RedisServer]) -> None:
    primary, replica = pair
    store = RedisStages(primary.url, "c", wait_replicas=1, wait_timeout_ms=300)
    chain = ScalableBloomFilter(1_000, 0.001, store=store)
    assert chain.add_many(np.arange(3_000, dtype=np.uint64)).sum() >= 2_995  # grows, each stage add waited for
    r = redis.Redis(port=replica.port)
    assert r.get(store.stages_key) == str(chain.num_stages).encode()
    r.execute_command("CLIENT", "PAUSE", 4000, "ALL")
    with pytest.raises(NotDurable) as e:
        chain.add_many(np.arange(2_990, 3_010, dtype=np.uint64))
    assert e.value.new is not None and e.value.new[10:].all() and not e.value.new[:10].any()


def test_the_wait_options_are_checked(redis_server: RedisServer) -> None:
    for bad in (-1, 1.5, "1", True, None):
        with pytest.raises(ValueError, match=rf"wait_replicas must be an int >= 0 \(0: no WAIT\), got {bad!r}"):
            RedisBloomFilter(redis_server.url, "v", 1000, 0.01, wait_replicas=bad)  # type: ignore[arg-type]
    for bad in (0, -5, 2.5, False, 86_400_001):
        with pytest.raises(ValueError, match=rf"wait_timeout_ms must be an int in \[1, 86400000\].*got {bad!r}"):
            RedisBloomFilter(redis_server.url, "v", 1000, 0.01, wait_replicas=1, wait_timeout_ms=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="wait_timeout_ms must be"):
            RedisStages(redis_server.url, "v", wait_timeout_ms=bad)  # type: ignore[arg-type]
    client = redis.Redis(port=redis_server.port, socket_timeout=2)
    with pytest.raises(ValueError, match=r"wait_timeout_ms=1500 does not fit in the client's socket_timeout=2 s"):
        RedisBloomFilter(client, "v", 1000, 0.01, wait_replicas=1, wait_timeout_ms=1500)
    assert RedisBloomFilter(client, "v", 1000, 0.01, wait_replicas=1, wait_timeout_ms=1000).wait_replicas == 1


def test_the_dupefilter_fetches_a_page_whose_check_is_not_durable(pair: tuple[RedisServer, RedisServer],
                                                                  tmp_path: Path) -> None:
    pytest.importorskip("scrapy")
    from scrapy import Request
    from scrapy.settings import Settings

    from bloomline.scrapy import RedisBloomDupeFilter

    primary, replica = pair
    base = {"REDIS_URL": primary.url, "BLOOMLINE_REDIS_KEY": "df"}
    for name, bad, said in (("BLOOMLINE_REDIS_REPLICAS", -1, "an integer >= 0"),
                            ("BLOOMLINE_REDIS_REPLICAS", "two", "an integer >= 0"),
                            ("BLOOMLINE_REDIS_REPLICAS_TIMEOUT", 0, r"in \(0, 4\)"),
                            ("BLOOMLINE_REDIS_REPLICAS_TIMEOUT", 5, r"in \(0, 4\)")):
        settings = {**base, "BLOOMLINE_REDIS_REPLICAS": 1, name: bad}
        with pytest.raises(ValueError, match=rf"{name} must be {said}, got {bad!r}"):
            RedisBloomDupeFilter.from_settings(Settings(settings))
    df = RedisBloomDupeFilter.from_settings(Settings(dict(base, BLOOMLINE_REDIS_REPLICAS=1,
                                                          BLOOMLINE_REDIS_REPLICAS_TIMEOUT=0.3)))
    assert df.request_seen(Request("http://127.0.0.1/a")) is False and df.not_durable == 0
    redis.Redis(port=replica.port).execute_command("CLIENT", "PAUSE", 3000, "ALL")
    assert df.request_seen(Request("http://127.0.0.1/b")) is False  # new on the primary: fetched
    assert df.not_durable == 1
    assert df.request_seen(Request("http://127.0.0.1/b")) is True  # (the front filter: no second fetch here)
    df.close()


def test_the_recrawl_dupefilter_fetches_a_page_whose_check_is_not_durable(pair: tuple[RedisServer, RedisServer],
                                                                          tmp_path: Path) -> None:
    """BLOOMLINE_RECRAWL_AFTER with BLOOMLINE_REDIS_REPLICAS: the windowed
    filter WAITs after an add that wrote; a check the replica did not take
    in time is new all the same (fetched), counted, and raises NotDurable
    with its facts from the filter itself."""
    pytest.importorskip("scrapy")
    from scrapy import Request
    from scrapy.settings import Settings

    from bloomline.redis import RedisWindowedFilter
    from bloomline.scrapy import RedisBloomDupeFilter

    primary, replica = pair
    df = RedisBloomDupeFilter.from_settings(Settings({
        "REDIS_URL": primary.url, "BLOOMLINE_REDIS_KEY": "rdf", "BLOOMLINE_RECRAWL_AFTER": 600,
        "BLOOMLINE_REDIS_REPLICAS": 1, "BLOOMLINE_REDIS_REPLICAS_TIMEOUT": 0.3}))
    assert isinstance(df.seen, RedisWindowedFilter) and df.seen.wait_replicas == 1
    assert df.request_seen(Request("http://127.0.0.1/a")) is False and df.not_durable == 0
    wait_until(lambda: redis.Redis(port=replica.port).exists("{rdf:recrawl}:meta") == 1)  # acknowledged: on the replica
    redis.Redis(port=replica.port).execute_command("CLIENT", "PAUSE", 3000, "ALL")
    assert df.request_seen(Request("http://127.0.0.1/b")) is False  # new on the primary: fetched
    assert df.not_durable == 1
    assert df.request_seen(Request("http://127.0.0.1/b")) is True  # (no front filter: the primary's answer)
    f = RedisWindowedFilter(primary.url, "w", 1000, 0.01, window=600, wait_replicas=1, wait_timeout_ms=300)
    with pytest.raises(NotDurable) as e:
        f.add_many(["x", "y"])
    assert e.value.new is not None and e.value.new.all()
    assert f.add("x", refresh=False) is False  # a seen key left where it is: nothing written, no WAIT
    df.close()


# ---- the backend a filter was made with --------------------------------------------------------


def _copy_keys(src: Any, dst: Any) -> None:
    for k in src.keys("*"):
        if b":ans:" not in k:
            dst.restore(k, 0, src.dump(k), replace=True)


def test_a_module_filter_never_switches_to_plain(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "p").mkdir()
    with_module, without = RedisServer(tmp_path / "m", *module_args("module")), RedisServer(tmp_path / "p")
    try:
        made = RedisBloomFilter(with_module.url, "f", 20_000, 0.001)
        assert made.backend == "module"
        made.add_many(np.arange(10_000, dtype=np.uint64))
        chain = ScalableBloomFilter(1_000, 0.01, store=RedisStages(with_module.url, "c"))
        chain.add_many(np.arange(1_500, dtype=np.uint64))
        # The same keys on a server without the module (a replica without it, promoted).
        _copy_keys(redis.Redis(port=with_module.port), redis.Redis(port=without.port))
        for backend in ("auto", "plain"):
            with pytest.raises(ValueError, match=r"the filter at key 'f' was made with backend 'module'"):
                RedisBloomFilter(without.url, "f", backend=backend)
            with pytest.raises(ValueError, match=r"the filter at key '\{c\}:s0' was made with backend 'module'"):
                ScalableBloomFilter(1_000, 0.01, store=RedisStages(without.url, "c", backend=backend))
        with pytest.raises(ValueError, match="load it on every node, replicas too|Load the module on every node"):
            RedisBloomFilter(without.url, "f", 20_000, 0.001)  # with its parameters too: never made anew
        # Given the module's own server, plain is refused as well: a filter keeps its backend.
        with pytest.raises(ValueError, match=r"made with backend 'module', and a filter keeps its backend: backend "
                                             r"'plain' is refused"):
            RedisBloomFilter(with_module.url, "f", backend="plain")
        plain_made = RedisBloomFilter(with_module.url, "q", 1_000, 0.01, backend="plain")
        assert RedisBloomFilter(with_module.url, "q").backend == "plain" == plain_made.backend  # auto keeps it
        with pytest.raises(ValueError, match=r"made with backend 'plain'.*backend 'module' is refused"):
            RedisBloomFilter(with_module.url, "q", backend="module")
    finally:
        with_module.stop()
        without.stop()


def test_a_chain_growing_on_a_promoted_server_without_the_module_raises_a_redis_error_with_facts(
        tmp_path: Path) -> None:
    """A failover to a server without the module lands between a chain's
    add that filled its stage and the new stage's attach: the add raises
    ModuleMissing, a redis error (caught where an add's other refusals
    are) carrying the batch's facts, and a ValueError as at open."""
    (tmp_path / "m").mkdir()
    (tmp_path / "p").mkdir()
    with_module, without = RedisServer(tmp_path / "m", *module_args("module")), RedisServer(tmp_path / "p")
    proxy = FaultProxy(with_module.port, "stall", every=10**9)  # (never stalls: only a place to re-point)
    try:
        chain = ScalableBloomFilter(1_000, 0.01, store=RedisStages(redis.Redis(port=proxy.port), "c"))
        store = chain._store
        grow = store.new_stage

        def failed_over(*args: Any) -> Any:  # the stage is full: a replica without the module promoted now
            _copy_keys(redis.Redis(port=with_module.port), redis.Redis(port=without.port))
            proxy.repoint(without.port)
            return grow(*args)

        store.new_stage = failed_over
        keys = np.arange(1_500, dtype=np.uint64)
        with pytest.raises(redis.ResponseError, match=r"the filter at key '\{c\}:s1' was made with backend "
                                                      r"'module'") as raised:
            chain.add_many(keys)
        assert isinstance(raised.value, ModuleMissing) and isinstance(raised.value, ValueError)
        new, unknown = getattr(raised.value, "new", None), getattr(raised.value, "unknown", None)
        assert new is not None and unknown is not None
        assert not (new & unknown).any()
        took = int(redis.Redis(port=with_module.port).get(store.count_key(0)))
        assert int(new.sum()) == took  # stage 0's answers are kept...
        assert int(unknown.sum()) >= len(keys) - took - 20  # ...and the keys it did not take have none
    finally:
        proxy.close()
        with_module.stop()
        without.stop()


def test_a_replica_without_the_module_is_found_at_creation(tmp_path: Path) -> None:
    primary, replica = start_pair(tmp_path, module_args("module"), [])
    try:
        with pytest.raises(ValueError, match=rf"the replica 127\.0\.0\.1:{replica.port} of this server has no "
                                             r"bloomline module: a replica without it drops every add"):
            RedisBloomFilter(primary.url, "m", 1000, 0.01, backend="module")
        auto = RedisBloomFilter(primary.url, "a", 1000, 0.01)
        assert auto.backend == "plain"  # what every node can run, and it stays so
        assert auto.add_many(["x", "y"]).all()
        r = redis.Redis(port=replica.port)
        wait_until(lambda: sum(r.bitcount(s) for s in auto.shard_keys()) == auto.bits_set)
    finally:
        replica.stop()
        primary.stop()


def test_a_failover_to_a_replica_without_the_module_raises_instead_of_starting_afresh(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "r").mkdir()
    primary = RedisServer(tmp_path / "p", *module_args("module"))
    replica = RedisServer(tmp_path / "r")
    try:
        made = RedisBloomFilter(primary.url, "f", 20_000, 0.001)
        assert made.backend == "module"
        r = redis.Redis(port=replica.port)
        r.execute_command("REPLICAOF", "127.0.0.1", primary.port)  # joined after the filter was made
        wait_until(lambda: r.info("replication").get("master_link_status") == "up")
        assert made.add_many(np.arange(10_000, dtype=np.uint64)).all()  # the replica cannot run these adds
        r.execute_command("REPLICAOF", "NO", "ONE")  # promoted
        for backend in ("auto", "plain"):
            with pytest.raises(ValueError, match=r"made with backend 'module'"):
                RedisBloomFilter(replica.url, "f", backend=backend)  # never 10,000 keys new again
    finally:
        replica.stop()
        primary.stop()


@pytest.mark.parametrize("backend", ["module", "plain"])
def test_a_wait_that_would_reach_another_server_after_a_failover_is_not_durable(tmp_path: Path, backend: str) -> None:
    """The add lands on a primary with no replica; before its WAIT, its
    address moves (a failover: the proxy now leads to another primary, whose
    replica acknowledges everything). A WAIT on a new connection would count
    that other server's replica: the add must raise NotDurable instead."""
    other, other_replica = start_pair(tmp_path, module_args(backend), module_args(backend))
    (tmp_path / "lone").mkdir()
    lone = RedisServer(tmp_path / "lone", *module_args(backend))
    proxy = FaultProxy(lone.port, "stall", every=10**9)  # (never stalls: only a place to re-point)
    try:
        for server in (lone, other):  # the same filter on both, as a failover leaves it
            RedisBloomFilter(redis.Redis(port=server.port), "f", 20_000, 0.001, backend=backend)
        client = redis.Redis(port=proxy.port, socket_timeout=5)
        f = RedisBloomFilter(client, "f", backend=backend, wait_replicas=1, wait_timeout_ms=300)
        sender = f._h.sender
        real = sender.replicated

        def moved(routes: Any) -> Any:
            proxy.repoint(other.port)  # between the add's reply and its WAIT
            return real(routes)

        sender.replicated = moved  # type: ignore[method-assign]
        with pytest.raises(NotDurable, match="went out on another connection than its WAIT's, or one that was lost"
                           ) as e:
            f.add_many(["a", "b", "c"])
        assert e.value.new is not None and e.value.new.all()  # answered new by the lone primary, which has them
        assert redis.Redis(port=lone.port).exists(*f.shard_keys())
    finally:
        proxy.close()
        for s in (lone, other, other_replica):
            s.stop()


@pytest.mark.parametrize("backend", ["module", "plain"])
def test_a_batch_whose_first_commands_went_to_the_old_primary_is_not_durable(tmp_path: Path, backend: str,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch in several windows (one per shard here): its address moves
    after the first (a failover cuts the connection). The rest go to the
    promoted server, whose replica acknowledges them; the WAIT, on that
    connection, cannot answer for the first window, which only the old
    primary has: the add raises NotDurable, never a durable answer."""
    other, other_replica = start_pair(tmp_path, module_args(backend), module_args(backend))
    (tmp_path / "lone").mkdir()
    lone = RedisServer(tmp_path / "lone", *module_args(backend))
    proxy = FaultProxy(lone.port, "stall", every=10**9)  # (never stalls: only a place to re-point)
    try:
        RedisBloomFilter(redis.Redis(port=lone.port), "f", 20_000, 0.001, backend=backend, shards=4)
        _copy_keys(redis.Redis(port=lone.port), redis.Redis(port=other.port))  # the same filter, as a failover leaves it
        client = redis.Redis(port=proxy.port, socket_timeout=5)
        f = RedisBloomFilter(client, "f", backend=backend, wait_replicas=1, wait_timeout_ms=300)
        monkeypatch.setattr("bloomline.redis._backend.WINDOW_BYTES", 1)  # each shard's command its own window
        sender = f._h.sender
        real = sender._exchange
        sent: list[int] = []

        def exchange(pool: Any, payloads: Any, *args: Any, **kwargs: Any) -> Any:
            out = real(pool, payloads, *args, **kwargs)
            # (The filter is attached: only adds and WAITs now. A NOSCRIPT reply is not an add that ran.)
            ran = not any(b"WAIT" in p for p, _ in payloads) and not any(isinstance(r, Exception) for r in out[0])
            sent.append(int(ran))
            if ran and sent.count(1) == 1:
                proxy.repoint(other.port)  # after the first window's reply
            return out

        sender._exchange = exchange  # type: ignore[method-assign]
        keys = np.arange(4_000, dtype=np.uint64)
        with pytest.raises(NotDurable, match="went out on another connection than its WAIT's") as e:
            f.add_many(keys)
        assert sent.count(1) >= 4  # four windows
        assert e.value.new is not None and e.value.new.all()
        lone_bits = sum(redis.Redis(port=lone.port).bitcount(k) for k in f.shard_keys()) if backend == "plain" else 0
        assert backend != "plain" or 0 < lone_bits < f.bits_set  # the first window only, on the old primary
    finally:
        proxy.close()
        for s in (lone, other, other_replica):
            s.stop()


def test_a_reconnect_between_adds_or_a_reply_lost_on_the_same_server_stays_durable(
        pair: tuple[RedisServer, RedisServer]) -> None:
    """No false NotDurable: an add that needed no WAIT (every key seen)
    followed by a reconnect leaves nothing to the next add's WAIT; and a
    reply lost and re-sent to the same server is answered by the re-send,
    which the WAIT on its connection covers."""
    primary, replica = pair
    p = redis.Redis(port=primary.port)
    f = RedisBloomFilter(primary.url, "s", 20_000, 0.001, wait_replicas=1, wait_timeout_ms=1000)
    assert f.add_many(["a", "b"]).all()
    assert not f.add_many(["a", "b"]).any()  # nothing new: no WAIT
    p.client_kill_filter(_type="normal", skipme=True)  # the filter's connection is gone: the next add reconnects
    assert f.add_many(["c"]).all()
    proxy = FaultProxy(primary.port, "cut_after", match=b"EVAL", limit=1)  # the next add's reply lost, once
    try:
        g = RedisBloomFilter(redis.Redis(port=proxy.port, socket_timeout=5), "s", wait_replicas=1,
                             wait_timeout_ms=1000)
        assert g.add_many(np.arange(100, dtype=np.uint64)).all()
        assert proxy.faults == 1 and g._h.sender.stats["resent"] >= 1
        assert redis.Redis(port=replica.port).dump(g.shard_keys()[0]) == p.dump(g.shard_keys()[0])
    finally:
        proxy.close()
