"""Errors that carry their facts, and smaller mends of the Redis filters
(docs/design/redis.md, "Every error an add raises carries its facts" and
what follows it): every error an add raises says which keys were new and which have
no answer, whatever its cause; LOADING is "not run"; a Sentinel client that
decodes; a chain read in one step; an import that deletes its set only if
nothing came in since its check, and resumes wherever it stopped; a dump
whose counts never lag its bits; the retry window from the client's real
timeout. Real redis-servers on loopback; the hooks below only choose when a
real event (memory filling, a chain growing, a crawler's SADD) happens."""

from __future__ import annotations

import hashlib
import subprocess
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

redis = pytest.importorskip("redis")

from bloomline import ScalableBloomFilter  # noqa: E402
from bloomline.redis import RedisBloomFilter, RedisStages  # noqa: E402
from bloomline.redis import _backend  # noqa: E402
from conftest import RedisServer, free_port, module_args, need, start_cluster  # noqa: E402

FILL = 96 << 20  # a value that takes the server past maxmemory once written
HEADROOM = 64 << 20  # maxmemory above what the server uses: every command of the batch fits


def _cap_memory(client: Any) -> None:
    """noeviction, and maxmemory HEADROOM above what the server uses now."""
    used = int(client.info("memory")["used_memory"])
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", used + HEADROOM)


def _fill_after(sender: Any, client: Any, calls: int = 1) -> None:
    """After the sender's `calls`-th round of commands, another client
    fills the server's memory (as another writer would): the commands sent
    after it are refused with OOM."""
    real = sender.run
    done = [0]

    def run(jobs: Any, *more: Any) -> Any:
        replies = real(jobs, *more)
        done[0] += 1
        if done[0] == calls:
            client.setrange("filler", FILL - 1, b"\0")
        return replies

    sender.run = run


def _one_part_a_window(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each command of a batch sent on its own round: the fill lands between two.
    monkeypatch.setattr(_backend, "WINDOW_BYTES", 1)


def _partition(caught: Any, n: int) -> tuple[Any, Any]:
    """The facts of an add refused part-way over n fresh keys: some new, the
    rest unknown, none both, and none answered "seen"."""
    new, unknown = caught.value.new, caught.value.unknown
    assert new is not None and unknown is not None and len(new) == len(unknown) == n
    assert 0 < int(new.sum()) < n and not (new & unknown).any()
    assert (new | unknown).all()  # nothing was answered "seen": every key was fresh
    return new, unknown


def _readded(again: Any, new: Any, unknown: Any) -> None:
    """The same keys added once the memory is back: the unknown ones new, the new ones seen."""
    assert again[unknown].all(), f"{int((~again[unknown]).sum())} refused keys read as seen"
    assert not again[new].any()


# ---- every error an add raises carries its facts ----------------------------------------


def test_a_batch_refused_part_way_by_oom_says_which_keys_were_new(backend_server: tuple[RedisServer, str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch whose first command is applied and whose next ones are refused
    with OOM: the error (the server's own, OutOfMemoryError) says which keys
    were new and which have no answer; once the memory is back, the keys
    without an answer are new, and the new ones seen."""
    server, backend = backend_server
    client = redis.Redis(host="127.0.0.1", port=server.port)
    f = RedisBloomFilter(client, "oom", 200_000, 1e-7, backend=backend)
    _cap_memory(client)
    _one_part_a_window(monkeypatch)
    _fill_after(f._h.sender, client)
    keys = np.arange(120_000, dtype=np.uint64)
    with pytest.raises(redis.exceptions.OutOfMemoryError) as caught:
        f.add_many(keys)
    new, unknown = _partition(caught, len(keys))
    assert new.shape == unknown.shape == keys.shape
    client.delete("filler")
    _readded(f.add_many(keys), new, unknown)


def test_facts_keep_the_callers_shape_with_nulls_skipped(redis_server: RedisServer,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    client = redis.Redis(host="127.0.0.1", port=redis_server.port)
    f = RedisBloomFilter(client, "oomn", 100_000, 1e-7, backend="plain")
    _cap_memory(client)
    _one_part_a_window(monkeypatch)
    _fill_after(f._h.sender, client)
    keys: list[Any] = [None] + [f"k{i}" for i in range(30_000)]
    with pytest.raises(redis.exceptions.OutOfMemoryError) as caught:
        f.add_many(keys, nulls="skip")
    new, unknown = caught.value.new, caught.value.unknown  # type: ignore[attr-defined]
    assert len(new) == len(unknown) == len(keys) and not new[0] and not unknown[0]
    assert new[1:].any() and unknown[1:].any() and (new | unknown)[1:].all()


@pytest.mark.parametrize("backend", ["module", "plain"])
def test_a_chains_add_refused_by_oom_carries_the_facts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       backend: str) -> None:
    """The same through a chain (ScalableBloomFilter over RedisStages)."""
    server = RedisServer(tmp_path, *module_args("module"))
    try:
        client = redis.Redis(host="127.0.0.1", port=server.port)
        chain = ScalableBloomFilter(200_000, 1e-7, store=RedisStages(client, "ooc", backend=backend))
        _cap_memory(client)
        _one_part_a_window(monkeypatch)
        _fill_after(chain._store._sender, client)  # type: ignore[attr-defined]
        keys = np.arange(120_000, dtype=np.uint64)
        with pytest.raises(redis.exceptions.OutOfMemoryError) as caught:
            chain.add_many(keys)
        new, unknown = _partition(caught, len(keys))
        client.delete("filler")
        _readded(chain.add_many(keys), new, unknown)
    finally:
        server.stop()


def test_a_chain_that_cannot_grow_says_which_keys_have_no_answer(redis_server: RedisServer) -> None:
    """A batch fills the first stage part-way and the next stage cannot be
    made (memory filled just after the stage add: the growth is refused
    with OOM): the keys the full stage took are new, the rest unknown."""
    client = redis.Redis(host="127.0.0.1", port=redis_server.port)
    chain = ScalableBloomFilter(1000, 1e-4, store=RedisStages(client, "full", backend="plain"))
    chain.add_many(np.arange(990, dtype=np.uint64))
    _cap_memory(client)
    _fill_after(chain._store._sender, client)  # type: ignore[attr-defined]
    with pytest.raises(redis.exceptions.OutOfMemoryError) as caught:
        chain.add_many(np.arange(990, 1100, dtype=np.uint64))
    new, unknown = caught.value.new, caught.value.unknown  # type: ignore[attr-defined]
    assert new is not None and unknown is not None and len(new) == 110
    assert int(new.sum()) == 10 and new[:10].all() and unknown[10:].all() and not unknown[:10].any()
    assert chain.num_stages == 1


@pytest.mark.slow
def test_a_cluster_batch_with_one_master_out_of_memory_says_which_keys_were_new(tmp_path: Path) -> None:
    """One master of three under maxmemory, noeviction: its parts of a batch
    are refused, the others' applied; the error says which is which, and
    once that master has room its keys are new."""
    servers = start_cluster(tmp_path, module_args("module"))
    try:
        client = redis.cluster.RedisCluster(host="127.0.0.1", port=servers[0].port)
        for backend in ("module", "plain"):
            f = RedisBloomFilter(client, f"oom-{backend}", 300_000, 1e-7, shards=12, backend=backend)
            low = redis.Redis(host="127.0.0.1", port=servers[1].port)
            low.config_set("maxmemory-policy", "noeviction")
            low.config_set("maxmemory", 1)
            keys = np.arange(300_000, dtype=np.uint64)
            with pytest.raises(redis.exceptions.OutOfMemoryError) as caught:
                f.add_many(keys)
            new, unknown = _partition(caught, len(keys))
            low.config_set("maxmemory", 0)
            _readded(f.add_many(keys), new, unknown)
            f.delete()
        # The retry window comes from the timeout the nodes' connections have
        # (redis-py's default where none was given).
        assert RedisBloomFilter(client, "oom-plain-w", 1000, 0.01).retry_window_s == pytest.approx(
            _window(_default_timeout()))
        client.close()
    finally:
        for s in servers:
            s.stop()


# ---- LOADING is "not run": sent again after a pause -------------------------------------


def _loading_server(tmp: Path, backend: str) -> RedisServer:
    """A server whose DEBUG RELOAD takes about half a second of loading (a delay a
    key, and clients answered while it loads), with 10,000 keys to load."""
    server = RedisServer(tmp, *module_args(backend), "--enable-debug-command", "local", "--key-load-delay", "50",
                         "--loading-process-events-interval-bytes", "1024")
    redis.Redis(host="127.0.0.1", port=server.port).execute_command("DEBUG", "POPULATE", "10000")
    return server


def _while_loading(server: RedisServer, action: Callable[[], Any]) -> Any:
    """action()'s result, called once the server is loading (DEBUG RELOAD
    from another client); the load is over when this returns."""
    reloading = threading.Thread(target=lambda: redis.Redis(host="127.0.0.1", port=server.port).execute_command(
        "DEBUG", "RELOAD"))
    reloading.start()
    try:
        watcher = redis.Redis(host="127.0.0.1", port=server.port)
        deadline = time.monotonic() + 10
        while int(watcher.info("persistence")["loading"]) != 1:
            assert time.monotonic() < deadline, "the server never started loading"
            time.sleep(0.005)
        return action()
    finally:
        reloading.join(timeout=60)


@pytest.mark.parametrize("backend", ["module", "plain", "bf"])
def test_a_batch_sent_while_the_server_loads_waits_and_answers(tmp_path: Path, backend: str) -> None:
    """LOADING means "not run": the batch is sent again once the server has
    loaded, and answers as any other (keys added before the reload seen, the
    others new), never UnknownOutcome for keys that were never sent twice."""
    server = _loading_server(tmp_path, backend)
    try:
        f = RedisBloomFilter(server.url, "ld", 100_000, 1e-6, backend=backend)
        before = [f"https://before.example/{i}" for i in range(2000)]
        assert f.add_many(before).all()
        fresh = [f"https://fresh.example/{i}" for i in range(2000)]
        answer = _while_loading(server, lambda: f.add_many(before + fresh))
        assert not answer[:2000].any() and answer[2000:].all()
        assert f._h.sender.stats["LOADING"] >= 1 and f._h.sender.stats["lost"] == 0
        # A single key too (its own path), and a lookup.
        assert _while_loading(server, lambda: f.add("https://one.example/")) is True
        assert _while_loading(server, lambda: "https://one.example/" in f) is True
    finally:
        server.stop()


def test_a_chain_sent_while_the_server_loads_waits_and_answers(tmp_path: Path) -> None:
    server = _loading_server(tmp_path, "module")
    try:
        chain = ScalableBloomFilter(10_000, 1e-6, store=RedisStages(server.url, "ldc", retries=0))
        assert chain.add_many(np.arange(3000, dtype=np.uint64)).all()
        answer = _while_loading(server, lambda: chain.add_many(np.arange(6000, dtype=np.uint64)))
        assert not answer[:3000].any() and answer[3000:].all()
    finally:
        server.stop()


# ---- the retry window, from the timeout the client really has ---------------------------


def _default_timeout() -> Any:
    """The socket timeout redis-py's connections have when given none."""
    return redis.Connection().socket_timeout


def _window(timeout: float, retries: int = 8) -> float:
    pauses = sum(min(0.05 * 2**i, 2.0) for i in range(retries))
    return (retries + 1) * timeout + pauses


def test_the_retry_window_comes_from_the_clients_real_timeout(redis_server: RedisServer) -> None:
    """A URL, a client from a URL and one made plainly all get redis-py's
    default timeout (5 s in redis-py 8, not none): the window and the
    answers' life follow from it; a timeout given, or none, is used as given."""
    default = _default_timeout()
    made = [redis_server.url, redis.Redis.from_url(redis_server.url), redis.Redis(port=redis_server.port)]
    for i, client in enumerate(made):
        f = RedisBloomFilter(client, f"w{i}", 1000, 0.01, backend="plain")
        if default is None:
            assert f.retry_window_s is None and f.answer_ttl_ms == 120_000
        else:
            assert f.retry_window_s == pytest.approx(_window(default))
            assert f.answer_ttl_ms == max(10_000, int(np.ceil(2000 * _window(default))) + 1000)
        assert RedisStages(client, f"c{i}", backend="plain").retry_window_s == f.retry_window_s
    two = RedisBloomFilter(redis.Redis(port=redis_server.port, socket_timeout=2), "w2s", 1000, 0.01, retries=3)
    assert two.retry_window_s == pytest.approx(_window(2, 3))
    none = RedisBloomFilter(redis.Redis(port=redis_server.port, socket_timeout=None), "wn", 1000, 0.01)
    assert none.retry_window_s is None and none.answer_ttl_ms == 120_000
    assert "2 minutes without a socket timeout" not in (RedisBloomFilter.__doc__ or "")


# ---- a Sentinel's client that decodes -----------------------------------------------------


@pytest.fixture
def sentinel(redis_server: RedisServer, tmp_path: Path) -> Iterator[int]:
    """A Sentinel on loopback monitoring redis_server as 'primary'; its port."""
    port = free_port()
    conf = tmp_path / "sentinel.conf"
    conf.write_text(f"port {port}\nbind 127.0.0.1\ndir {tmp_path}\n"
                    f"sentinel monitor primary 127.0.0.1 {redis_server.port} 1\n")
    proc = subprocess.Popen([need("redis-server"), str(conf), "--sentinel"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if redis.Redis(port=port).execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "primary"):
                    break
            except redis.ConnectionError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("redis-server --sentinel did not start")
            time.sleep(0.05)
        yield port
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_a_sentinel_client_that_decodes_works_as_a_plain_one_does(sentinel: int) -> None:
    from redis.sentinel import Sentinel

    client = Sentinel([("127.0.0.1", sentinel)]).master_for("primary", decode_responses=True, socket_timeout=2)
    f = RedisBloomFilter(client, "sent", 10_000, 0.001, backend="plain")
    assert f.add_many(["a", "b"]).all() and not f.add("a") and "b" in f
    assert f.retry_window_s == pytest.approx(_window(2))
    chain = ScalableBloomFilter(100, 0.01, store=RedisStages(client, "sentc", backend="plain"))
    assert chain.add_many(np.arange(300, dtype=np.uint64)).all()
    assert client.get("sentc-none") is None and client.set("s", "x") and client.get("s") == "x"  # still decodes


# ---- a chain's stage count and first stage, read in one step ------------------------------


def test_attaching_while_another_process_makes_the_chain_is_not_a_lost_key(redis_server: RedisServer) -> None:
    """A process attaches to a chain that does not exist yet; another makes
    it right after the first reads the stage count (the hook): the first
    must find a new chain, not "{key}:stages is gone while its stages
    remain"."""
    client = redis.Redis(port=redis_server.port)
    store = RedisStages(client, "race", backend="plain")
    real = store._sender.run
    fired = []

    def run(jobs: Any, *more: Any) -> Any:
        replies = real(jobs, *more)
        if not fired and any(job.route == store.stages_key.encode() for job in jobs):
            fired.append(True)  # another process makes the chain, and adds to it
            ScalableBloomFilter(100, 0.01, store=RedisStages(redis_server.url, "race", backend="plain")).add_many(
                np.arange(50, dtype=np.uint64))
        return replies

    store._sender.run = run  # type: ignore[method-assign]
    chain = ScalableBloomFilter(100, 0.01, store=store)
    assert fired and chain.num_stages == 1
    assert not chain.add_many(np.arange(50, dtype=np.uint64)).any()  # the other's keys: seen
    assert chain.add_many(np.arange(50, 60, dtype=np.uint64)).all()


# ---- a dump whose counts never lag its bits --------------------------------------------------


@pytest.mark.parametrize("backend", ["module", "plain"])
def test_a_dump_taken_while_a_writer_adds_never_counts_fewer_keys_than_its_bits(
        redis_server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    """A writer adds 3,000 fresh keys after every round trip of the dump (the
    hook: as a busy crawl would, at the worst moments). Each stage's count in
    the file is at least what its bits hold, so the restored chain's stages
    never take keys past their capacity."""
    from bloomline.redis import dump, restore
    from bloomline.redis._wire import Sender

    server = RedisServer(tmp_path, *module_args(backend))
    try:
        writer = ScalableBloomFilter(50_000, 1e-4, store=RedisStages(server.url, "live", backend=backend))
        writer.add_many(np.arange(70_000, dtype=np.uint64))  # two stages, the second part-full
        real, lo, busy = Sender.run, [10**9], [False]

        def run(self: Any, jobs: Any, *more: Any) -> Any:
            replies = real(self, jobs, *more)
            if not busy[0]:
                busy[0] = True
                writer.add_many(np.arange(lo[0], lo[0] + 3000, dtype=np.uint64))
                lo[0] += 3000
                busy[0] = False
            return replies

        monkeypatch.setattr(Sender, "run", run)
        local = dump(server.url, "live", tmp_path / "live.bloom")
        monkeypatch.setattr(Sender, "run", real)
        assert lo[0] > 10**9 + 3000  # the writer added between the dump's reads
        for i, (stage, count) in enumerate(zip(local.stages, local._stage_counts)):
            assert stage.approx_count <= count + 0.03 * stage.capacity, (
                f"stage {i}: its bits hold about {stage.approx_count:,.0f} keys, its count says {count:,}")
        restored = restore(tmp_path / "live.bloom", server.url, "copy", backend=backend)
        restored.add_many(np.arange(2 * 10**9, 2 * 10**9 + 100_000, dtype=np.uint64))
        store = RedisStages(server.url, "copy", backend=backend)
        for i, (stage, count) in enumerate(store.stages()):
            assert stage.approx_count <= 1.03 * stage.capacity, f"stage {i} passed its capacity"
    finally:
        server.stop()


def test_restore_never_counts_fewer_keys_than_a_stages_bits(redis_server: RedisServer) -> None:
    """A file whose last stage's count lags its bits (as dumps taken while
    writers added were): restored, the stage counts what its bits hold (at
    most its capacity) and takes no keys past it; bits past the capacity
    warn."""
    from bloomline import _core
    from bloomline.redis import restore

    chain = ScalableBloomFilter(1000, 0.01)
    chain.add_many(np.arange(1000, dtype=np.uint64))
    lagging = _core.encode_chain(chain.rule, chain.layout, chain.seed, chain.stages, [500])
    restored = restore(lagging, redis_server.url, "lag", backend="plain")
    store = RedisStages(redis_server.url, "lag", backend="plain")
    assert store.stages()[0][1] >= 970
    restored.add_many(np.arange(10**6, 10**6 + 100, dtype=np.uint64))
    assert restored.num_stages == 2  # the stage was full: the keys went to the next
    over = ScalableBloomFilter(1000, 0.01)
    over.add_many(np.arange(1000, dtype=np.uint64))
    stage = over.stages[0]
    with pytest.warns(UserWarning, match="past its capacity"):
        stage.add_many(np.arange(5000, 5500, dtype=np.uint64))  # its bits now hold 1,500 keys
    data = _core.encode_chain(over.rule, over.layout, over.seed, [stage], [900])
    with pytest.warns(UserWarning, match=r"stage 0 of the chain restored at 'over' holds about 1,[45]\d\d keys"):
        restore(data, redis_server.url, "over", backend="plain")
    assert RedisStages(redis_server.url, "over", backend="plain").stages()[0][1] == 1000


def _over_capacity_chain() -> tuple[ScalableBloomFilter, bytes]:
    """A three-stage chain whose first stage's bits hold 1,500 keys of its 1,000, as a file."""
    from bloomline import _core

    chain = ScalableBloomFilter(1000, 0.01)
    chain.add_many(np.arange(7000, dtype=np.uint64))
    assert chain.num_stages == 3
    with pytest.warns(UserWarning, match="past its capacity"):
        chain.stages[0].add_many(np.arange(10**6, 10**6 + 500, dtype=np.uint64))
    return chain, _core.encode_chain(chain.rule, chain.layout, chain.seed, chain.stages, chain._stage_counts)


@pytest.mark.parametrize("backend", ["plain", "module"])
def test_a_capacity_warning_made_an_error_leaves_the_chain_restored_whole(tmp_path: Path, backend: str) -> None:
    """Under warnings-as-errors, the capacity warning of a restored chain's
    first stage is raised once every stage is in Redis: the chain answers as
    the file does. (Before, it was raised mid-upload, leaving one stage.)"""
    from bloomline.redis import restore

    server = RedisServer(tmp_path, *module_args(backend))
    try:
        chain, data = _over_capacity_chain()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(UserWarning, match="stage 0 of the chain restored at 'whole'"):
                restore(data, server.url, "whole", backend=backend)
        attached = ScalableBloomFilter(1000, 0.01, store=RedisStages(server.url, "whole", backend=backend))
        assert attached.num_stages == 3
        probes = np.arange(2 * 10**6, 2 * 10**6 + 50_000, dtype=np.uint64)
        for keys in (np.arange(7000, dtype=np.uint64), np.arange(10**6, 10**6 + 500, dtype=np.uint64), probes):
            np.testing.assert_array_equal(attached.contains_many(keys), chain.contains_many(keys))
    finally:
        server.stop()


def _three_stages() -> ScalableBloomFilter:
    local = ScalableBloomFilter(1000, 0.01)
    local.add_many(np.arange(6000, dtype=np.uint64))
    assert local.num_stages >= 3
    return local


@pytest.mark.parametrize("backend", ["plain", "module"])
def test_a_crawler_attaching_while_a_chain_is_restored_is_refused_until_it_is_whole(
        tmp_path: Path, backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A chain's restore made its stages one by one, each visible once made:
    a crawler that attached mid-upload took keys into stages the upload
    then overwrote, and those keys read new twice. Now the chain appears
    whole, in one step: a crawler that attaches before is refused (saying
    why), and one after answers as the file does. (The hook only chooses
    when the second process attaches: after the second stage's upload.)"""
    from bloomline.redis import MissingKeyError, restore

    server = RedisServer(tmp_path, *module_args(backend))
    try:
        local = _three_stages()
        keys = np.arange(6000, dtype=np.uint64)
        mid: list[Any] = []
        upload = RedisStages.upload

        def upload_then_a_crawler_attaches(self: RedisStages, index: int, stage: Any, count: int) -> None:
            upload(self, index, stage, count)
            if index == 1:
                try:
                    crawler = ScalableBloomFilter(1000, 0.01, store=RedisStages(server.url, "r", backend=backend))
                    mid.append(int(crawler.add_many(keys).sum()))  # (the keys it took as new)
                except MissingKeyError as e:
                    mid.append(e)

        monkeypatch.setattr(RedisStages, "upload", upload_then_a_crawler_attaches)
        restore(local.to_bytes(), server.url, "r", backend=backend)
        monkeypatch.undo()
        [refused] = mid
        assert isinstance(refused, MissingKeyError), f"a crawler attached mid-restore took {refused} keys as new"
        assert "is being restored" in str(refused)
        attached = ScalableBloomFilter(1000, 0.01, store=RedisStages(server.url, "r", backend=backend))
        assert attached.num_stages == local.num_stages and not attached.add_many(keys).any()
    finally:
        server.stop()


KILLED_MID_RESTORE = """
import os, sys
import numpy as np
from bloomline import ScalableBloomFilter
from bloomline.redis import RedisStages, restore
upload = RedisStages.upload
def upload_then_die(self, index, stage, count):
    upload(self, index, stage, count)
    if index == 1:
        os._exit(9)  # killed between two stages' uploads
RedisStages.upload = upload_then_die
local = ScalableBloomFilter(1000, 0.01)
local.add_many(np.arange(6000, dtype=np.uint64))
restore(local.to_bytes(), sys.argv[1], "r", backend=sys.argv[2])
"""


@pytest.mark.parametrize("backend", ["plain", "module"])
def test_a_restore_killed_midway_leaves_a_chain_that_refuses_until_restored_again(tmp_path: Path,
                                                                                  backend: str) -> None:
    """A restoring process killed between two stages leaves no chain that
    answers: an attach is refused and says how to mend it, and a restore
    with replace=True makes it whole."""
    import sys

    from bloomline.redis import MissingKeyError, restore

    server = RedisServer(tmp_path, *module_args(backend))
    try:
        r = subprocess.run([sys.executable, "-c", KILLED_MID_RESTORE, server.url, backend], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 9, r.stderr
        with pytest.raises(MissingKeyError, match="is being restored.*interrupted.*replace=True"):
            ScalableBloomFilter(1000, 0.01, store=RedisStages(server.url, "r", backend=backend))
        for each in ("ttl", "persist"):  # (they looped for ever: no stage count, read as a chain that grew)
            with pytest.raises(MissingKeyError, match="is being restored"):
                getattr(RedisStages(server.url, "r"), each)()
        with pytest.raises(ValueError, match="already exists"):
            restore(_three_stages().to_bytes(), server.url, "r", backend=backend)
        restore(_three_stages().to_bytes(), server.url, "r", backend=backend, replace=True)
        attached = ScalableBloomFilter(1000, 0.01, store=RedisStages(server.url, "r", backend=backend))
        assert not attached.add_many(np.arange(6000, dtype=np.uint64)).any()
    finally:
        server.stop()


@pytest.mark.parametrize("backend", ["plain", "module"])
def test_a_failed_restore_leaves_a_replacing_restore_that_finished_meanwhile(
        tmp_path: Path, backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A restore that failed deleted everything at its key as it cleaned up,
    including the chain another restore (replace=True) had finished there
    meanwhile, whose caller was told it was restored: every key read new.
    The failed one now deletes only while no chain is whole at the key.
    (The hook only chooses when the second restore runs: as the first
    uploads its second stage.)"""
    from bloomline.redis import MissingKeyError, restore

    server = RedisServer(tmp_path, *module_args(backend))
    try:
        first, second = _three_stages(), ScalableBloomFilter(1000, 0.01)
        second.add_many(np.arange(10**6, 10**6 + 1500, dtype=np.uint64))
        upload = RedisStages.upload

        def upload_and_be_replaced(self: RedisStages, index: int, stage: Any, count: int) -> None:
            if index == 1:
                monkeypatch.setattr(RedisStages, "upload", upload)
                restore(second.to_bytes(), server.url, "r", backend=backend, replace=True)
            upload(self, index, stage, count)

        monkeypatch.setattr(RedisStages, "upload", upload_and_be_replaced)
        with pytest.raises(MissingKeyError):
            restore(first.to_bytes(), server.url, "r", backend=backend)
        attached = ScalableBloomFilter(1000, 0.01, store=RedisStages(server.url, "r", backend=backend))
        assert attached.num_stages == second.num_stages
        assert attached.contains_many(np.arange(10**6, 10**6 + 1500, dtype=np.uint64)).all()
    finally:
        server.stop()


@pytest.mark.parametrize("backend", ["plain", "module"])
def test_a_filter_restore_replaced_as_it_uploads_leaves_the_replacing_one_whole(
        tmp_path: Path, backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """As for chains: a fixed filter's restore wrote its bits into the filter
    another restore (replace=True) had made at the same keys meanwhile (its
    keys then read new), or deleted it as it failed. Each write now checks
    the filter is still its own making, and the failed one deletes only
    its own. (The hook only chooses when the second restore runs.)"""
    from bloomline import BloomFilter
    from bloomline.redis import MissingKeyError, restore

    server = RedisServer(tmp_path, *module_args(backend))
    try:
        first, second = BloomFilter(5000, 0.01), BloomFilter(5000, 0.01)
        first.add_many(np.arange(2000, dtype=np.uint64))
        second.add_many(np.arange(10**6, 10**6 + 2000, dtype=np.uint64))
        upload = _backend.BitsBackend.upload

        def replaced_then_upload(self: Any, *args: Any, **kwargs: Any) -> Any:
            monkeypatch.setattr(_backend.BitsBackend, "upload", upload)
            restore(second.to_bytes(), server.url, "f", backend=backend, replace=True)
            return upload(self, *args, **kwargs)

        monkeypatch.setattr(_backend.BitsBackend, "upload", replaced_then_upload)
        with pytest.raises(MissingKeyError, match="was made again"):
            restore(first.to_bytes(), server.url, "f", backend=backend)
        there = RedisBloomFilter(server.url, "f")
        assert there.contains_many(np.arange(10**6, 10**6 + 2000, dtype=np.uint64)).all()
        assert there.contains_many(np.arange(2000, dtype=np.uint64)).sum() < 100  # (false positives only)
    finally:
        server.stop()


@pytest.mark.parametrize("kind", ["chain", "filter"])
def test_an_upload_that_fails_midway_leaves_nothing_at_its_key(redis_server: RedisServer, kind: str) -> None:
    """A chain (restore) or a fixed filter (from_filter) whose upload runs
    out of Redis's memory part way is deleted again: nothing of it is left
    to be taken for the whole (its missing bits' keys would read new)."""
    from bloomline import BloomFilter
    from bloomline.redis import restore

    client = redis.Redis(port=redis_server.port)
    used = int(client.info("memory")["used_memory"])
    client.config_set("maxmemory-policy", "noeviction")
    try:
        if kind == "chain":
            big = ScalableBloomFilter(200_000, 1e-4)
            big.add_many(np.arange(1_000_000, dtype=np.uint64))
            assert big.num_stages >= 3
            client.config_set("maxmemory", used + big.stages[0].num_bits // 8 + (1 << 20))  # room for stage 0
            with pytest.raises(redis.ResponseError, match="maxmemory"):
                restore(big.to_bytes(), redis_server.url, "partial", backend="plain")
        else:
            bf = BloomFilter(1_000_000, 1e-4)
            bf.add_many(np.arange(1_000_000, dtype=np.uint64))
            client.config_set("maxmemory", used + bf.num_bits // 8 // 4)  # room for a quarter of its shards
            with pytest.raises(redis.ResponseError, match="maxmemory"):
                RedisBloomFilter.from_filter(bf, redis_server.url, "partial", shard_bits=2**20, backend="plain")
    finally:
        client.config_set("maxmemory", 0)
    assert client.keys("*partial*") == []


# ---- import-set: deleted only as checked, resumable wherever it stopped ----------------------


def _fps(lo: int, hi: int) -> list[str]:
    return [hashlib.sha1(str(i).encode()).hexdigest() for i in range(lo, hi)]


def test_a_fingerprint_added_after_the_check_is_not_lost_with_the_set(redis_server: RedisServer,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A crawler still on scrapy-redis SADDs a fingerprint right after the
    final check (the hook): --delete-set must not delete it unimported; it
    ends in the filter, and the set goes only once checked with it."""
    pytest.importorskip("scrapy")
    from bloomline.scrapy.migrate import import_set

    client = redis.Redis(port=redis_server.port)
    client.sadd("crawl:dupefilter", *_fps(0, 1000))
    real, late = ScalableBloomFilter.contains_many, _fps(5000, 5001)[0]

    def contains_many(self: Any, keys: Any, **kwargs: Any) -> Any:
        answer = real(self, keys, **kwargs)
        client.sadd("crawl:dupefilter", late)  # the crawler, once the check has read the set
        return answer

    monkeypatch.setattr(ScalableBloomFilter, "contains_many", contains_many)
    report = import_set(client, "crawl:dupefilter", chunk=10_000, delete_set=True)
    monkeypatch.setattr(ScalableBloomFilter, "contains_many", real)
    info = RedisStages(client, "crawl:dupefilter").info()
    assert info is not None
    chain = ScalableBloomFilter(int(info["initial_capacity"]), float(info["error_rate"]),
                                tightening=float(info["tightening"]), store=RedisStages(client, "crawl:dupefilter"))
    held = bool(chain.contains_many([bytes.fromhex(late)])[0])
    kept = bool(client.sismember("crawl:dupefilter", late))
    assert held or kept, "a fingerprint added after the check is in neither the filter nor the set"
    assert report.missing == 0 and report.rounds >= 2 and held


def test_an_import_stopped_before_recording_its_rule_resumes(redis_server: RedisServer,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("scrapy")
    from bloomline.scrapy.migrate import import_set

    client = redis.Redis(port=redis_server.port)
    client.sadd("stop:dupefilter", *_fps(0, 2000))

    def stopped(self: Any, **fields: Any) -> None:
        raise KeyboardInterrupt  # between making the chain and recording its rule

    real = RedisStages.set_info
    monkeypatch.setattr(RedisStages, "set_info", stopped)
    with pytest.raises(KeyboardInterrupt):
        import_set(client, "stop:dupefilter")
    monkeypatch.setattr(RedisStages, "set_info", real)
    assert client.exists("{stop:dupefilter}:stages")  # the chain was made
    report = import_set(client, "stop:dupefilter", delete_set=True)
    assert report.missing == 0 and report.deleted and report.imported == 2000
    info = RedisStages(client, "stop:dupefilter").info()
    assert info is not None and info["fingerprints"] == "scrapy-redis"
    # A chain a crawl made (no rule, no import of this set begun) is still refused.
    ScalableBloomFilter(1000, 0.01, store=RedisStages(client, "other:dupefilter"))
    client.sadd("other:dupefilter:set", *_fps(0, 10))
    with pytest.raises(ValueError, match="by Scrapy's fingerprinter"):
        import_set(client, "other:dupefilter:set", "other:dupefilter")
