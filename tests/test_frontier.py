"""DedupQueue: a crawl frontier that never enqueues a URL twice."""

from __future__ import annotations

import pickle
import threading
import warnings
from typing import Any

import pytest
from forking import exited_ok, in_forked_child
from interrupting import with_sigint_after

from bloomline import BloomFilter, CapacityWarning, DedupQueue, ScalableBloomFilter


def test_push_pop_fifo_and_seen() -> None:
    q = DedupQueue()
    urls = [f"https://example.com/{i % 50}" for i in range(200)]
    pushed = [q.push(u) for u in urls]
    assert sum(pushed) == 50
    assert len(q) == 50 and bool(q)
    assert list(q) == [f"https://example.com/{i}" for i in range(50)]  # iteration does not consume
    assert len(q) == 50
    assert q.pop() == "https://example.com/0"
    assert q.seen("https://example.com/0") and not q.push("https://example.com/0")
    assert not q.seen("https://example.org/")
    while q:
        q.pop()
    with pytest.raises(IndexError, match="pop from an empty DedupQueue"):
        q.pop()


def test_push_many() -> None:
    q = DedupQueue()
    assert q.push_many(["a", "b", "a", "c"]) == 3
    assert q.push_many(["c", "d"]) == 1
    assert list(q) == ["a", "b", "c", "d"]


def test_default_filter_grows() -> None:
    q = DedupQueue(initial_capacity=100)
    q.push_many(f"u{i}" for i in range(10_000))
    assert isinstance(q.filter, ScalableBloomFilter) and q.filter.num_stages > 1
    assert len(q) >= 9_990


def test_fixed_filter_warns_once_past_capacity() -> None:
    """The filter's own CapacityWarning, once (the queue adds no word of its own)."""
    q = DedupQueue(BloomFilter(1000, 0.01))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(3000):
            q.push(f"u{i}")
        q.push_many([f"v{i}" for i in range(100)])
    said = [w for w in caught if issubclass(w.category, CapacityWarning)]
    assert len(said) == 1 and "past its capacity of 1,000" in str(said[0].message)


def test_a_push_while_another_gives_the_warning_keeps_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The warning is given after the lock is let go, so another thread may
    push meanwhile: its add must not warn (as an error, it would come before
    its key is queued: seen and never queued, lost). A hostile read found
    that a hold taken per push, and given back by resetting the filter's
    flag, let exactly that happen."""
    import threading

    import bloomline.frontier as frontier

    q = DedupQueue(BloomFilter(100, 0.01))
    q.push_many([f"u{i}" for i in range(100)])  # at its capacity: the next new key passes it
    giving, pushed = threading.Event(), threading.Event()
    note = frontier._core.note_capacity

    def slow_note(f: BloomFilter) -> None:
        giving.set()
        assert pushed.wait(timeout=30)  # the other thread's push runs now, in full
        note(f)

    monkeypatch.setattr(frontier._core, "note_capacity", slow_note)
    outcome: list[object] = []

    def first() -> None:
        try:
            q.push("past")
        except CapacityWarning as e:
            outcome.append(e)

    with warnings.catch_warnings():  # (this thread's only: the threads below run inside it)
        warnings.simplefilter("error", CapacityWarning)
        t = threading.Thread(target=first)
        t.start()
        assert giving.wait(timeout=30)
        assert q.push("other") is True  # no warning here: the first push owes it
        pushed.set()
        t.join(timeout=30)
    assert len(outcome) == 1 and "past its capacity of 100" in str(outcome[0])
    assert "past" in q and "other" in q and list(q)[-2:] == ["past", "other"]


def test_repr_of_a_queue_whose_filter_is_past_telling_says_inf() -> None:
    """A filter with every bit set estimates inf keys: the queue's repr says so (it raised OverflowError)."""
    q = DedupQueue(BloomFilter(10, 0.5))
    with pytest.warns(CapacityWarning):
        q.push_many([f"u{i}" for i in range(100_000)])
    assert q._seen.approx_count == float("inf") and "seen~inf filter=BloomFilter" in repr(q)


def test_pickle_keeps_queue_and_filter() -> None:
    q = DedupQueue()
    q.push_many(["a", "b", "c"])
    q.pop()
    r = pickle.loads(pickle.dumps(q))
    assert list(r) == ["b", "c"]
    assert r.seen("a") and not r.push("a")
    assert r.push("d") and list(r) == ["b", "c", "d"]


def test_bad_filter_type() -> None:
    with pytest.raises(TypeError, match="seen must be a BloomFilter or ScalableBloomFilter, got set"):
        DedupQueue(set())  # type: ignore[arg-type]



def test_a_pickle_taken_while_another_thread_pushes_holds_each_key_queued_or_unseen() -> None:
    """A key's add to the seen-set and its place in the queue are one step:
    a checkpoint taken while a push is between the two waits for it, and
    never holds a key seen but not queued (never crawled after a restore)."""
    import threading

    added, go = threading.Event(), threading.Event()

    class Stalling(ScalableBloomFilter):
        def add(self, key: object) -> bool:  # type: ignore[override]
            new = super().add(key)  # type: ignore[arg-type]
            if key == "stall":
                added.set()
                go.wait(timeout=30)  # the push stops here, between its add and its place in the queue
            return new

    q = DedupQueue(Stalling(1000, 0.001))
    q.push("first")
    pusher = threading.Thread(target=q.push, args=("stall",))
    pusher.start()
    assert added.wait(timeout=30)
    taken: list[bytes] = []
    checkpoint = threading.Thread(target=lambda: taken.append(pickle.dumps(q)))
    checkpoint.start()
    checkpoint.join(timeout=0.5)
    go.set()
    pusher.join(timeout=30)
    checkpoint.join(timeout=30)
    r = pickle.loads(taken[0])
    assert list(r) == ["first", "stall"] and r.seen("stall")


def test_a_capacity_warning_raised_as_an_error_comes_after_the_keys_are_queued() -> None:
    """The add that takes a fixed filter past its capacity warns; raised as
    an error it would leave its keys seen and never queued. It is raised
    once they are queued."""
    for many in (False, True):
        q = DedupQueue(BloomFilter(10, 0.01))
        q.push_many([f"u{i}" for i in range(10)])
        with warnings.catch_warnings():
            warnings.simplefilter("error", CapacityWarning)
            with pytest.raises(CapacityWarning):
                q.push_many(["u10", "u11"]) if many else q.push("u10")
        assert list(q)[10:] == (["u10", "u11"] if many else ["u10"])
        assert q.seen("u10") and q.push("u10") is False


def test_a_forked_child_pushes_and_pickles_while_a_parent_thread_held_the_lock() -> None:
    """A lock a thread of the parent held at the fork stays held in the
    child, where that thread does not exist: the child's queues (made
    directly and from a pickle) get fresh ones (_forks), so its push, pop
    and pickle do not wait forever."""
    made = DedupQueue()
    restored = pickle.loads(pickle.dumps(made))
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with made._lock, restored._lock:
            held.set()
            release.wait(timeout=30)

    t = threading.Thread(target=holder)
    t.start()
    assert held.wait(timeout=30)
    try:
        status = in_forked_child(lambda: all(
            q.push("https://example.com/a") and q.pop() == "https://example.com/a"
            and pickle.loads(pickle.dumps(q)) is not None for q in (made, restored)))
    finally:
        release.set()
        t.join(timeout=30)
    assert exited_ok(status), status


def test_a_ctrl_c_during_a_batch_push_leaves_every_seen_key_queued() -> None:
    """A SIGINT while push_many's add runs in C was raised as the add
    returned, before the new keys were queued: every key seen, none queued
    (a crawler that saves on Ctrl-C never fetched them). Now it is raised
    after they are queued. Real signals at several delays into a 1M-key
    push; each run's queue holds exactly the keys its filter took."""
    urls = [f"https://example.com/page/{i}" for i in range(1_000_000)]
    DedupQueue(BloomFilter(10, 0.01)).push_many(["warm-up"])  # (first-use imports done)
    after_the_add = 0
    for delay in (0.005, 0.02, 0.05, 0.1, 0.2, 0.4):
        q = DedupQueue(BloomFilter(3_000_000, 0.001))
        with_sigint_after(delay, lambda: q.push_many(urls))
        back = pickle.loads(pickle.dumps(q))
        assert len(back) == back.filter.insert_count, delay
        after_the_add += len(back) == len(urls)
    assert after_the_add > 0  # (some signal came while the batch was in hand)


def test_a_key_the_filter_refuses_is_not_left_queued() -> None:
    q = DedupQueue(BloomFilter(100, 0.01))
    with pytest.raises(TypeError, match="key must be"):
        q.push(object())
    assert len(q) == 0 and q.push("a") and not q.push("a") and list(q) == ["a"]


def test_a_key_an_add_answered_new_before_it_raised_stays_queued(redis_server: Any) -> None:
    """A seen-set in Redis whose add raises with its facts (NotDurable: too
    few replicas acknowledged; the keys were recorded): the queue dropped
    the keys, which the filter then answered "seen" for ever. Those new (or
    unanswered) are queued."""
    pytest.importorskip("redis")
    from bloomline.redis import NotDurable, RedisStages

    seen = ScalableBloomFilter(1000, 0.01, store=RedisStages(redis_server.url, "q", wait_replicas=1,
                                                             wait_timeout_ms=50))
    q = DedupQueue(seen)
    with pytest.raises(NotDurable):
        q.push("https://example.com/a")
    with pytest.raises(NotDurable):
        q.push_many(["https://example.com/b", "https://example.com/a", "https://example.com/c"])
    assert list(q) == ["https://example.com/a", "https://example.com/b", "https://example.com/c"]
