"""RedisWindowedFilter when its keys are lost while a generation lives
(evicted, deleted): every handle that could report a key new a second time
raises MissingKeyError instead, on both backends that keep one. The cases
here are those a hostile read found slipping past the adds' own checks: a
handle attaching after the meta alone was lost, a handle whose first reply
came from a kept answer, a batch the filter was lost in the middle of, and
a ring lost under a meta that was kept (a restart from an older snapshot)."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest

redis = pytest.importorskip("redis")
import bloomline.redis._backend as _backend  # noqa: E402
import bloomline.redis._windowed as _windowed  # noqa: E402
from bloomline import _core  # noqa: E402
from bloomline.redis._wire import Job, pack  # noqa: E402
from bloomline.redis import MissingKeyError, RedisWindowedFilter, delete_windowed  # noqa: E402

from conftest import FaultProxy, RedisServer, module_args  # noqa: E402

LOST = r"'\{%s\}:meta', a key of the windowed filter at '%s', is gone while a generation of the filter lives"
REMADE = r"the windowed filter at '%s' was lost and made again since this handle's last add, whose generation still lives"


@pytest.fixture(params=["plain", "module"])
def window_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    server = RedisServer(tmp_path_factory.mktemp("redis"), *module_args(str(request.param)))
    yield server
    server.stop()


@pytest.mark.parametrize("also", ["meta only", "meta and the current generation"])
def test_a_handle_attaching_after_the_meta_was_lost_is_refused(window_server: Any, also: str) -> None:
    """The meta gone while the ring lives (with the current generation too:
    an older one is left): a new handle is not told "made" (its adds would
    start afresh, and one with other parameters would attach unchecked),
    whatever parameters it asks for."""
    r = redis.Redis.from_url(window_server.url)
    window, generations = 6.0, 2  # a generation every 3 s
    f = RedisWindowedFilter(r, "crawl", 1000, 0.01, window=window, generations=generations)
    assert f.add_many([f"old{i}" for i in range(100)]).all()
    first = f.current_generation
    deadline = time.monotonic() + 10
    while f.current_generation == first and time.monotonic() < deadline:
        time.sleep(0.05)
    assert f.add_many([f"cur{i}" for i in range(100)]).all() and f.current_generation == first + 1
    place = f.current_generation % (generations + 1)
    lost = ["{crawl}:meta"] + ([] if also == "meta only" else [f"{{crawl}}:w:bits:{place}", f"{{crawl}}:w:gen:{place}"])
    r.delete(*lost)
    for kwargs in ({}, {"seed": 1}, {"window": 2 * window}):
        with pytest.raises(MissingKeyError, match=LOST % ("crawl", "crawl")):
            RedisWindowedFilter(r, "crawl", 1000, 0.01, **{"window": window, "generations": generations, **kwargs})
    with pytest.raises(MissingKeyError, match=r"bloomline.redis.delete_windowed\(redis, 'crawl'\), to start over"):
        f.add("old0")
    assert delete_windowed(r, "crawl") >= 2  # no handle can attach: the way to start over, as the error says
    assert not r.keys("{crawl}:*")
    assert RedisWindowedFilter(r, "crawl", 1000, 0.01, window=window, generations=generations).add("old0") is True


def test_a_handle_that_only_looks_up_is_refused_when_the_meta_is_lost_beside_a_live_generation(
        window_server: Any) -> None:
    """The meta and the generation holding a key lost (evicted, deleted)
    while a newer generation lives: a handle that never added (a checker)
    is refused on every read, as an add is, never told "not seen" for a key
    added a moment ago (its slot record went with the meta, so only the
    live ring tells the loss from an idle filter's expiry)."""
    r = redis.Redis.from_url(window_server.url)
    window, generations = 2.0, 2  # a generation every second
    writer = RedisWindowedFilter(r, "looks", 1000, 0.01, window=window, generations=generations)
    checker = RedisWindowedFilter(r, "looks", 1000, 0.01, window=window, generations=generations)
    assert writer.add("old") is True and "old" in checker
    first = writer.current_generation
    deadline = time.monotonic() + 5
    while writer.current_generation == first and time.monotonic() < deadline:
        time.sleep(0.02)
    assert writer.add("cur") is True and writer.current_generation == first + 1
    place = first % (generations + 1)
    r.delete("{looks}:meta", f"{{looks}}:w:bits:{place}", f"{{looks}}:w:gen:{place}")
    for read in (lambda: "old" in checker, lambda: checker.contains_many(["old", "cur"]),
                 lambda: checker.approx_count, lambda: checker.expected_fp_rate, lambda: checker.add("old")):
        with pytest.raises(MissingKeyError, match=LOST % ("looks", "looks")):
            read()


def test_a_reply_from_a_kept_answer_still_binds_the_handle_to_its_filter(window_server: Any) -> None:
    """A handle whose first add came back from the kept answer (its reply
    lost, the re-send answered) knows the generation and the meta it added
    under, so a filter lost and made again after it is refused, not read as
    a fresh start."""
    RedisWindowedFilter(window_server.url, "warm", 1000, 0.01, window=60, generations=2).add("x")  # scripts cached
    proxy = FaultProxy(window_server.port, "cut_after", match=b":ans:", limit=1)
    try:
        f = RedisWindowedFilter(f"redis://127.0.0.1:{proxy.port}/0", "kept", 1000, 0.01, window=3600, generations=4)
        assert f.add_many(["a", "b"]).tolist() == [True, True]
        assert proxy.faults == 1 and f._sender.stats["resent"] == 1
        r = redis.Redis.from_url(window_server.url)
        r.delete(*f.redis_keys())  # the filter lost whole while its generation lives
        with pytest.raises(MissingKeyError, match=LOST % ("kept", "kept")):
            f.add_many(["a", "b"])
    finally:
        proxy.close()


@pytest.mark.parametrize("by", ["a new handle", "a handle of the same making"])
def test_a_reply_lost_across_a_delete_and_a_remake_binds_the_handle_to_the_new_making(window_server: Any,
                                                                                       by: str) -> None:
    """A handle that never added sends an add; it runs, and its reply is
    held past the client's timeout while another handle deletes the filter
    and makes it again. By a new handle: the re-send is refused (another
    ident); the handle had no keys to lose, so it takes the new making and
    sends again, under new answer names. By a handle of the same making
    (same ident, a new epoch): the re-send goes, and finds the first send's
    kept answer, which names the deleted making. Either way the module's
    kept answer (in its memory, which a delete does not reach) answered for
    the old making and bound the handle to it, every later call refused;
    an answer kept under another making now answers nothing, and the add
    runs in the new one, as on the plain backend."""
    RedisWindowedFilter(window_server.url, "warm", 1000, 0.01, window=60, generations=2).add("x")  # scripts cached
    r = redis.Redis.from_url(window_server.url)
    proxy = FaultProxy(window_server.port, "stall", match=b":ans:", limit=1, stall_s=1.5)
    try:
        f = RedisWindowedFilter(redis.Redis(port=proxy.port, socket_timeout=0.5), "across", 1000, 0.01, window=3600,
                                generations=4, retries=3)
        sibling = RedisWindowedFilter(r, "across", 1000, 0.01, window=3600, generations=4)
        remade: list[RedisWindowedFilter] = []

        def delete_and_make_again() -> None:
            deadline = time.monotonic() + 5
            while proxy.faults == 0 and time.monotonic() < deadline:  # (bounded) the add has run
                time.sleep(0.01)
            sibling.delete()
            remade.append(sibling if by != "a new handle" else
                          RedisWindowedFilter(r, "across", 1000, 0.01, window=3600, generations=4))
            assert remade[0].add("x") is True

        t = threading.Thread(target=delete_and_make_again)
        t.start()
        assert f.add_many(["a", "b"]).tolist() == [True, True]  # new in the new making
        t.join()
        assert proxy.faults == 1 and len(remade) == 1 and f.ident == remade[0].ident
        assert f.add("c") is True and f.add("x") is False and f.contains_many(["a", "b", "z"]).tolist() == [
            True, True, False]
        assert remade[0].add("a") is False
    finally:
        proxy.close()


def test_a_filter_lost_and_made_again_within_a_moment_is_another_making(window_server: Any) -> None:
    """In one packet to the server: A's add makes the meta, the filter is
    deleted whole, and B's add makes it again, microseconds apart. The two
    makings must differ (the module wrote milliseconds, so they were most
    often equal): else A's lookup of the key it just added answered "not
    seen" from B's filter, and an answer kept under A's making would answer
    for B's. A's lookup is refused."""
    r = redis.Redis.from_url(window_server.url)
    for i in range(20):
        name = f"moment{i}"
        a, b = (RedisWindowedFilter(r, name, 1000, 0.01, window=3600, generations=4) for _ in "ab")
        r.delete(f"{{{name}}}:meta")  # (made by the first add below)
        jobs = []
        for f, key in ((a, "mine"), (b, "other")):
            _shard, body, count = _core.redis_key(key, f._w.num_bits, f._w.num_hashes, f._w.layout, f._w.seed,
                                                  f._w.nbytes * 8, f._b.window_form_add)
            jobs.append(f._b.window_add_job(f._w, f"{{{name}}}:ans:{key}", 60_000, True, body, count))
        conn = r.connection_pool.get_connection()
        try:
            conn.send_packed_command([pack(jobs[0], by_text=True) + pack(Job(b"x", b"DEL", tuple(a.redis_keys())))
                                      + pack(jobs[1], by_text=True)])
            first, _deleted, again = (conn.read_response() for _ in range(3))
        finally:
            r.connection_pool.release(conn)
        assert first[0] == again[0] == b"1" and first[3] != again[3], (first, again)
        a._newest, a._epoch = int(first[2]), first[3].decode()  # (as the reply would have set them)
        with pytest.raises(MissingKeyError, match=REMADE % name):
            "mine" in a  # noqa: B015 - the lookup raises


def test_a_filter_lost_between_two_windows_of_one_batch_raises(window_server: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Each window of a batch's commands carries the generation and meta
    the windows before it added under: the filter deleted between two of
    them raises, where the second would have made it again and called a key
    of both halves new twice."""
    r = redis.Redis.from_url(window_server.url)
    f = RedisWindowedFilter(r, "halves", 100_000, 0.01, window=3600, generations=4)
    step = f._b.window_chunk_keys(f._w)
    monkeypatch.setattr(_backend, "WINDOW_BYTES", 1)  # every command its own window
    sent = _windowed._send
    calls = [0]

    def send_then_lose(sender: Any, jobs: list[Any]) -> list[Any]:
        out = sent(sender, jobs)
        calls[0] += 1
        if calls[0] == 1:
            r.delete(*f.redis_keys())  # evicted whole between the batch's two windows
        return out

    monkeypatch.setattr(_windowed, "_send", send_then_lose)
    keys = [f"u{i}" for i in range(step)] + ["u0"]  # u0 at the first place of both commands
    with pytest.raises(MissingKeyError, match=LOST % ("halves", "halves")) as raised:
        f.add_many(keys, refresh=False)
    assert calls[0] == 2
    assert raised.value.new is not None and raised.value.new[0] and not raised.value.new[-1]
    with pytest.raises(MissingKeyError):
        f.add("u1")


@pytest.mark.parametrize("refresh", [True, False])
def test_a_filter_lost_between_two_commands_of_one_window_raises(window_server: Any, monkeypatch: pytest.MonkeyPatch,
                                                                refresh: bool) -> None:
    """A handle's first batch, its chunks in one window (made before any
    reply, so none carries a generation to check): the filter deleted
    between the window's two commands, as another client's DEL or an
    eviction lands between a pipeline's commands. The second command made
    the filter again, and the keys the first was told new read new again
    to every handle, with no error; its making differs, so the add raises."""
    r = redis.Redis.from_url(window_server.url)
    f = RedisWindowedFilter(r, "pipelined", 100_000, 0.01, window=3600, generations=4)
    other = RedisWindowedFilter(r, "pipelined", 100_000, 0.01, window=3600, generations=4)
    step = f._b.window_chunk_keys(f._w)
    sent = _windowed._send
    windows_sent = []

    def lose_between(sender: Any, jobs: list[Any]) -> list[Any]:
        windows_sent.append(len(jobs))
        first = sent(sender, jobs[:1])
        r.delete(*f.redis_keys())  # evicted whole between the window's first and second command
        return first + sent(sender, jobs[1:])

    monkeypatch.setattr(_windowed, "_send", lose_between)
    keys = [f"p{i}" for i in range(step)] + [f"q{i}" for i in range(step)]
    with pytest.raises(MissingKeyError, match=REMADE % "pipelined") as raised:
        f.add_many(keys, refresh=refresh)
    monkeypatch.setattr(_windowed, "_send", sent)
    assert windows_sent == [2]  # (one window of two commands)
    new = raised.value.new
    assert new is not None and new[:step].all()  # the first chunk was told new, then lost: the error says so
    with pytest.raises(MissingKeyError, match=REMADE % "pipelined"):
        f.add("p0")  # its keys are gone from the filter: it refuses, as after a loss between two batches
    # What a handle that goes on finds: the lost keys new again, but for false positives against the second
    # chunk's keys (a generation at 40% of its capacity: about 1 in 10,000).
    assert int(np.count_nonzero(~other.add_many(keys[:step]))) <= step // 1000


def test_a_restart_from_a_snapshot_older_than_the_generation_raises(window_server: Any) -> None:
    """The snapshot holds the meta (made at attach) but not the generation
    started after it: the handle that added to that generation, still live,
    raises on its next add. (Its epoch matched the kept meta's, and the add
    started the generation afresh: a key this handle added read new again.)"""
    r = redis.Redis.from_url(window_server.url)
    f = RedisWindowedFilter(r, "snap", 1000, 0.01, window=3600, generations=4)
    r.save()  # the meta alone on disk
    assert f.add("k") is True
    window_server.stop()
    again = RedisServer(window_server.dir, *window_server.extra, port=window_server.port)
    try:
        assert r.exists("{snap}:meta") == 1  # (loaded before the server answered PING)
        assert not r.exists(*f.redis_keys()[1:])  # the ring was not in the snapshot
        with pytest.raises(MissingKeyError, match=r"'\{snap\}:w:gen:\d', a key of the windowed filter at 'snap'"):
            f.add("k")
        with pytest.raises(MissingKeyError):
            f.add_many(["k", "other"])
        # A clear, or a handle that never added, still goes on: nothing tells them the ring was lost.
        fresh = RedisWindowedFilter(r, "snap", 1000, 0.01, window=3600, generations=4)
        assert fresh.add("k") is True
        f.clear()
        assert f.add("k") is True and fresh.add("k") is False
    finally:
        again.stop()


def test_a_lost_generation_started_again_by_another_handle_raises(window_server: Any) -> None:
    """As above, but another handle adds first after the restart and starts
    the lost generation again in its slot, with the same number: the handle
    whose keys were in the lost one still raises (each start of a
    generation has its own id, which the handle sends back). Before, the
    slot's number matched and this handle's key read new a second time."""
    r = redis.Redis.from_url(window_server.url)
    f = RedisWindowedFilter(r, "again", 1000, 0.01, window=3600, generations=4)
    r.save()  # the meta alone on disk
    assert f.add("k") is True
    number = f.current_generation
    window_server.stop()
    restarted = RedisServer(window_server.dir, *window_server.extra, port=window_server.port)
    try:
        other = RedisWindowedFilter(r, "again", 1000, 0.01, window=3600, generations=4)
        assert other.add("other") is True  # (it starts the generation again: nothing tells it the first was lost)
        assert r.hget(f"{{again}}:w:gen:{number % 5}", "number") == str(number).encode()
        gone = r"'\{again\}:w:gen:\d', a key of the windowed filter at 'again'"
        with pytest.raises(MissingKeyError, match=gone):
            f.add("k")
        with pytest.raises(MissingKeyError, match=gone):
            f.contains_many(["k"])
        assert other.add("other") is False and other.add("more") is True  # the other handle goes on
        f.clear()  # (forgets on purpose: this handle goes on)
        assert f.add("k") is True and other.add("k") is False
    finally:
        restarted.stop()


ADDS_THROUGH = """
import sys
import redis
from bloomline.redis import RedisWindowedFilter
a = RedisWindowedFilter(redis.Redis(port=int(sys.argv[1])), "resent", 1000, 0.01, window=3600, generations=4)
print(a.add("a"), flush=True)
"""


def test_a_lost_generation_started_again_by_the_re_sent_add_that_started_it_raises(window_server: Any) -> None:
    """As above, but the generation is started again by the very add that
    started it, re-sent: its reply was lost, and the restart lost both its
    run and its kept answer. A start named by the add alone was the same
    again, and the handle that added after it read its key new a second
    time; each run's start now carries the server's clock. (The adder is
    another process, whose reply the proxy holds, then cuts.)"""
    import subprocess
    import sys

    r = redis.Redis.from_url(window_server.url)
    b = RedisWindowedFilter(r, "resent", 1000, 0.01, window=3600, generations=4)
    RedisWindowedFilter(r, "warm", 1000, 0.01, window=3600).add("w")  # (the plain add's script loaded: sent once, it runs)
    r.save()  # the meta alone on disk
    proxy = FaultProxy(window_server.port, "stall", stall_s=5.0, then_cut=True, match=b":ans:", limit=1)
    adder = subprocess.Popen([sys.executable, "-c", ADDS_THROUGH, str(proxy.port)], stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not r.keys("{resent}:w:gen:*") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert b.add("b") is True and proxy.faults == 1  # (into the generation the other's add started)
        window_server.stop()  # (before the held reply is cut: the re-send meets the restarted server)
        restarted = RedisServer(window_server.dir, *window_server.extra, port=window_server.port)
        try:
            out, _ = adder.communicate(timeout=60)
            assert out == "True\n" and r.keys("{resent}:w:gen:*")  # (re-sent: it started the generation again)
            with pytest.raises(MissingKeyError, match=r"'\{resent\}:w:gen:\d', a key of the windowed filter"):
                b.add("b")
        finally:
            restarted.stop()
    finally:
        adder.kill()
        adder.wait(timeout=30)
        proxy.close()


def test_clear_is_one_step_that_an_old_handle_of_a_filter_made_again_cannot_take(window_server: Any) -> None:
    """clear() deletes the generations and the meta's records of them in
    one script (an add between two of its commands started a generation the
    next command deleted, and every handle's adds raised until the meta
    expired); a handle of a filter deleted and made again is refused it, as
    its adds are, rather than clear the new filter."""
    r = redis.Redis.from_url(window_server.url)
    old = RedisWindowedFilter(r, "again", 1000, 0.01, window=3600, generations=2)
    assert old.add("a")
    old.delete()
    new = RedisWindowedFilter(r, "again", 1000, 0.01, window=3600, generations=2)
    assert new.add("b")
    stale = RedisWindowedFilter(r, "again", 1000, 0.01, window=3600, generations=2)
    r.delete("{again}:meta")  # (made again below by an add: another making, another ident)
    r.delete(*new.redis_keys())
    remade = RedisWindowedFilter(r, "again", 1000, 0.01, window=3600, generations=2)
    assert remade.add("c")
    with pytest.raises(MissingKeyError, match="deleted and made again"):
        stale.clear()
    assert "c" in remade
    before = r.hget("{again}:meta", "epoch")
    remade.clear()
    after = r.hget("{again}:meta", "epoch")
    assert "c" not in remade and after != before and after.split(b"/")[0] == before
    assert not r.hexists("{again}:meta", "slot0") and r.keys("{again}:w:*") == []


def test_a_handle_whose_keys_all_expired_goes_on_after_a_new_one_made_the_filter_again(window_server: Any) -> None:
    """An idle fleet's filter expires whole; a worker started since adds
    first and makes it again under its own ident. A long-lived worker's
    keys are all out of the window by then, so it takes the new making and
    goes on: it was refused on every call for good (the Scrapy dupefilter
    stopped the crawl). So do its whole-ring reads, which raised where its
    lookups and adds went on. (Its clear() is still refused until then: a
    handle of an older making never clears the new filter.)"""
    r = redis.Redis.from_url(window_server.url)
    old = RedisWindowedFilter(r, "idle", 1000, 0.01, window=1.0, generations=2)  # life 1.5 s + 1 s margin
    counter, copier, looker = (RedisWindowedFilter(r, "idle", 1000, 0.01, window=1.0, generations=2) for _ in "ccl")
    assert old.add("a")
    deadline = time.monotonic() + 10
    while r.exists("{idle}:meta") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not r.keys("{idle}:w:*")  # (the ring expired with the meta; kept answers outlive them)
    new = RedisWindowedFilter(r, "idle", 1000, 0.01, window=1.0, generations=2)
    assert new.add("b") is True and new.ident != old.ident
    assert "b" in old and old.ident == new.ident  # (a lookup takes the new making too)
    assert looker.contains_many(["b", "zz"]).tolist() == [True, False]  # (a batch: its chunks made again)
    assert counter.approx_count == pytest.approx(1, abs=0.1) and counter.ident == new.ident  # (and a whole-ring read)
    assert "b" in copier.to_filter() and copier.ident == new.ident
    assert old.add("a") is True and old.add_many(["b", "c"]).tolist() == [False, True]
    assert new.add("a") is False


def test_a_restart_from_a_snapshot_older_than_a_clear_raises(window_server: Any) -> None:
    """The snapshot holds the meta as it was before a clear; the handle
    added after the clear, to a generation the snapshot does not have. Its
    next add raises: the server went back past the clear (the mark the
    handle names is newer than the meta's), where the add compared only the
    meta's making and called the handle's key new again."""
    r = redis.Redis.from_url(window_server.url)
    f = RedisWindowedFilter(r, "snapclear", 1000, 0.01, window=3600, generations=4)
    assert f.add("before")
    r.save()
    f.clear()
    assert f.add("k") is True and "/" in r.hget("{snapclear}:meta", "epoch").decode()
    window_server.stop()
    again = RedisServer(window_server.dir, *window_server.extra, port=window_server.port)
    try:
        assert "/" not in r.hget("{snapclear}:meta", "epoch").decode()  # (the snapshot's meta: before the clear)
        with pytest.raises(MissingKeyError, match=REMADE % "snapclear"):
            f.add("k")
        other = RedisWindowedFilter(r, "snapclear", 1000, 0.01, window=3600, generations=4)
        assert other.add("k") is True  # (a handle that never added cannot tell)
        other.clear()
        assert f.add("k") is True  # (a clear newer than its mark: forgotten on purpose, it goes on)
    finally:
        again.stop()


def test_an_add_that_wrote_nothing_does_not_bind_the_handle_to_its_generation(window_server: Any) -> None:
    """A refresh=False add that found every key seen (a recrawl filter's
    check of a known page) wrote nothing to the generation it went to: its
    loss (a promoted replica that never had that generation's start) loses
    none of this handle's keys, and refuses none of its calls."""
    r = redis.Redis.from_url(window_server.url)
    f = RedisWindowedFilter(r, "crawl", 1000, 0.01, window=6.0, generations=2)  # a generation every 3 s
    assert f.add("a")
    first = f.current_generation
    deadline = time.monotonic() + 10
    while f.current_generation == first and time.monotonic() < deadline:
        time.sleep(0.05)
    assert f.add("a", refresh=False) is False
    place = (first + 1) % 3
    assert r.hget("{crawl}:meta", f"slot{place}") == str(first + 1).encode()  # the add started that generation
    r.delete(f"{{crawl}}:w:bits:{place}", f"{{crawl}}:w:gen:{place}")
    r.hdel("{crawl}:meta", f"slot{place}")
    assert f.add("b") is True and "a" in f


@pytest.mark.parametrize("field,value", [("number", str(2**60)), ("number", "1e300"), ("number", "-1"),
                                         ("slot", str(2**60)), ("slot", "x")])
def test_a_damaged_generation_number_is_refused_never_read_as_expired(window_server: Any, field: str,
                                                                      value: str) -> None:
    """A generation's number or the meta's record of a slot that is no
    integer in [0, 2**53) (damaged; past 2**53 a double would read every
    generation as expired, and its keys as never seen): every call that
    reads the ring is refused, on both backends."""
    r = redis.Redis.from_url(window_server.url)
    f = RedisWindowedFilter(r, "dmg", 1000, 0.01, window=3600, generations=2)
    assert f.add("k0")
    place = f.current_generation % 3
    if field == "number":
        r.hset(f"{{dmg}}:w:gen:{place}", "number", value)
    else:
        r.hset("{dmg}:meta", f"slot{place}", value)
    calls = {"add": lambda: f.add("k1"), "in": lambda: "k0" in f, "contains_many": lambda: f.contains_many(["k0"]),
             "live_generations": lambda: f.live_generations, "approx_count": lambda: f.approx_count,
             "to_filter": f.to_filter}
    for name, call in calls.items():
        with pytest.raises(redis.ResponseError, match=r"is no integer in \[0, 2\*\*53\)"):
            call()
            pytest.fail(f"{name} answered")


def test_a_meta_without_its_epoch_refuses_an_add_before_it_writes(window_server: Any) -> None:
    """A meta without its epoch (damaged: every making writes one) cannot
    check a later call of a handle that added under it: the add is refused
    before it writes anything."""
    r = redis.Redis.from_url(window_server.url)
    f = RedisWindowedFilter(r, "noep", 1000, 0.01, window=3600, generations=2)
    assert f.add("k0")
    r.hdel("{noep}:meta", "epoch")
    fresh = RedisWindowedFilter(r, "noep", 1000, 0.01, window=3600, generations=2)
    with pytest.raises(MissingKeyError, match=LOST % ("noep", "noep")):  # (its add's meta is not the one there)
        f.add("k1")
    with pytest.raises(redis.ResponseError, match="has no epoch"):
        fresh.add("k1")
    assert "k1" not in fresh and "k0" in fresh and fresh.approx_count < 1.5  # (nothing written, nothing wiped)
