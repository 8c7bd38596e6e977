"""RedisBloomDupeFilter under scrapy-redis's scheduler, whose queue is in
Redis: what becomes of a request the filter recorded when its push to the
queue fails, and of the spill journal when Redis goes again while the spill
is handed on. Real redis-servers (the filter's and the queue's apart, so
that one can fail alone), scrapy-redis's real scheduler and queue; the engine
is a stand-in that hands requests to that scheduler, and the outage's probe
is run by hand."""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Optional

import pytest

pytest.importorskip("scrapy")
pytest.importorskip("scrapy_redis")
pytest.importorskip("redis")

from conftest import RedisServer  # noqa: E402
from forking import FORK_AND_DIE  # noqa: E402
from scrapy import Spider  # noqa: E402
from scrapy.http import Request  # noqa: E402
from scrapy_site import journal_records, pending_urls  # noqa: E402
from twisted.internet import defer  # noqa: E402

# scrapy-redis 0.9 counts its pushes with inc_value(spider=), which Scrapy 2.19 deprecates.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Passing a 'spider' argument:scrapy.exceptions.ScrapyDeprecationWarning")


def server(tmp: Path, *extra: str, port: Optional[int] = None) -> RedisServer:
    """A redis-server that writes every command to its append-only file
    before answering, so a restart keeps all of it."""
    tmp.mkdir(parents=True, exist_ok=True)
    return RedisServer(tmp, "--appendonly", "yes", "--appendfsync", "always", *extra, port=port)


class Crawl:
    """scrapy-redis's scheduler with our filter (at `filters`) and its queue
    (at `queues`, FIFO: a request pushed twice is there twice), opened as at
    spider_opened; engine.crawl hands a request to the scheduler."""

    def __init__(self, tmp: Path, filters: RedisServer, queues: RedisServer, *, retry: float = 60,
                 queue_args: tuple[str, ...] = (), settings: Optional[dict[str, Any]] = None) -> None:
        from scrapy.utils.test import get_crawler
        from scrapy_redis.scheduler import Scheduler

        class S(Spider):
            name = "push"

        self.crawler = get_crawler(S, {
            "DUPEFILTER_CLASS": "bloomline.scrapy.RedisBloomDupeFilter", "REDIS_URL": queues.url,
            "BLOOMLINE_REDIS_URL": filters.url, "SCHEDULER_PERSIST": True, "JOBDIR": str(tmp / "job"),
            "SCHEDULER_QUEUE_CLASS": "scrapy_redis.queue.FifoQueue", "BLOOMLINE_REDIS_RETRY_TIMEOUT": retry,
            **(settings or {})})
        self.spider = S.from_crawler(self.crawler)
        self.scheduler = Scheduler.from_crawler(self.crawler)
        self.scheduler.open(self.spider)
        self.df = self.scheduler.df
        self.handed: Callable[[Request], Any] = self.scheduler.enqueue_request
        self.crawler.engine = SimpleNamespace(
            pause=lambda: None, unpause=lambda: None, scheduler=self.scheduler, spider=self.spider,
            crawl=lambda request: self.handed(request), close_spider=lambda *a: defer.succeed(None))
        self.probes: list[float] = []  # the delays the outage asked its probe to run after
        self.df._outages._schedule = self.probes.append

    def open(self) -> None:
        self.df._opened(self.spider)

    def stop_at_hand_on(self, n: int, server: RedisServer) -> list[str]:
        """From now on, record each request handed to the engine and stop
        `server` as the n-th is handed on; returns the URLs handed on."""
        handed: list[str] = []

        def hand_on(request: Request) -> Any:
            handed.append(request.url)
            if len(handed) == n:
                server.stop()
            return self.scheduler.enqueue_request(request)

        self.handed = hand_on
        return handed

    def probe(self) -> None:
        self.df._outages._probe()

    def queued(self) -> list[str]:
        """The URLs in scrapy-redis's queue, taken out, sorted."""
        urls = []
        while (r := self.scheduler.queue.pop()) is not None:
            urls.append(r.url)
        return sorted(urls)

    def close(self) -> None:
        """The spider closes: the spill is closed and kept for the next crawl."""
        self.df._outages.stop()


def kept(tmp: Path) -> list[str]:
    """The URLs pending in the spill journals on disk, sorted."""
    urls: set[str] = set()
    for path in (tmp / "job").rglob("*.journal*"):
        urls |= pending_urls(journal_records(path.read_bytes()))
    return sorted(urls)


@pytest.fixture
def servers(tmp_path: Path) -> Any:
    """The filter's Redis and the queue's, apart; restarted on their ports
    by `up`, and stopped at the end."""
    made: dict[str, RedisServer] = {}

    def up(name: str, *extra: str) -> RedisServer:
        old = made.get(name)
        if old is not None:
            old.stop()  # (if it still runs)
        made[name] = server(tmp_path / name, *extra, port=old.port if old else None)
        return made[name]

    up("filter")
    up("queue")
    yield SimpleNamespace(up=up, get=made.__getitem__)
    for s in made.values():
        s.stop()


def url(name: str) -> str:
    return f"http://example.com/{name}"


def test_a_request_whose_push_to_the_queue_fails_is_spilled_not_lost(tmp_path: Path, servers: Any) -> None:
    """A push that failed after the check had recorded the request lost it:
    seen for ever, never queued, and with no check failing no outage began
    (here the queue's Redis is away while the filter's answers; one Redis
    back before the next check does the same). The request is spilled and
    the outage begins; once both servers answer it is queued, with the
    request spilled after it, each once. A push that fails while the spill
    is handed on puts the request back in the same spill: it is queued once
    (a second journal opened on the spill's file queued it twice)."""
    c = Crawl(tmp_path, servers.get("filter"), servers.get("queue"))
    c.open()
    assert c.scheduler.enqueue_request(Request(url("a"))) is True
    servers.get("queue").stop()
    c.scheduler.enqueue_request(Request(url("b")))  # checked (new, recorded), then its push fails: spilled
    assert c.df._outages.active
    assert c.scheduler.enqueue_request(Request(url("c"))) is False  # spilled unchecked
    c.probe()  # the filter's Redis answers, the queue's does not: still away
    assert c.df._outages.active
    servers.up("queue")
    c.probe()  # both answer: b is queued (it was recorded), c is checked and queued
    assert not c.df._outages.active
    assert c.queued() == [url("a"), url("b"), url("c")]
    assert c.df.request_seen(Request(url("b"))) is True and c.df.request_seen(Request(url("c"))) is True
    # The queue's Redis gone again while the spill is handed on.
    servers.get("queue").stop()
    c.scheduler.enqueue_request(Request(url("d")))  # checked, then its push fails: spilled
    assert c.scheduler.enqueue_request(Request(url("e"))) is False  # spilled unchecked
    handed = c.stop_at_hand_on(1, servers.up("queue"))
    c.probe()  # both answer; as d is handed on, the queue's Redis goes: d is spilled again
    assert c.df._outages.active and handed == [url("d")]
    servers.up("queue")
    c.handed = c.scheduler.enqueue_request
    c.probe()
    assert not c.df._outages.active
    assert c.queued() == [url("d"), url("e")]
    assert not list((tmp_path / "job").rglob("*.journal"))  # the spill is empty and gone
    # A dont_filter request (never checked) whose push fails is queued once
    # Redis is back, and is not recorded: the filter still finds it new.
    servers.get("queue").stop()
    c.scheduler.enqueue_request(Request(url("f"), dont_filter=True))
    assert c.df._outages.active
    servers.up("queue")
    c.probe()
    assert c.queued() == [url("f")] and c.df.request_seen(Request(url("f"))) is False
    c.df.close("finished")


def test_a_push_that_fails_each_time_while_ping_passes_ends_at_the_retry_timeout(
        tmp_path: Path, servers: Any, caplog: pytest.LogCaptureFixture) -> None:
    """A request the queue's Redis drops the connection for each time (here
    a body over its proto-max-bulk-len) while PINGs pass: each probe found
    Redis back, the recheck's push failed again, and a new outage began with
    a new clock, for ever (the crawl hung). The outage goes on with its own
    clock, the crawl stops at BLOOMLINE_REDIS_RETRY_TIMEOUT, and the request
    stays in the spill for the next crawl."""
    queues = servers.up("queue", "--proto-max-bulk-len", "1mb")
    c = Crawl(tmp_path, servers.get("filter"), queues, retry=1.0)
    c.open()
    huge = Request(url("huge"), method="POST", body=b"x" * (32 << 20))
    c.scheduler.enqueue_request(huge)  # recorded; the server drops the connection as the push arrives
    assert c.df._outages.active
    deadline = time.monotonic() + 20
    with caplog.at_level(logging.INFO, logger="scrapy.dupefilters"):
        while not c.df.failed and time.monotonic() < deadline:
            time.sleep(0.2)
            c.probe()
    assert c.df.failed, "the outage never ended"
    (error,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert f"127.0.0.1:{queues.port}" in error and "scrapy-redis's queue" in error, error
    c.close()
    assert kept(tmp_path) == [url("huge")]


def test_a_push_the_queue_refuses_stops_the_crawl_and_keeps_the_request(
        tmp_path: Path, servers: Any, caplog: pytest.LogCaptureFixture) -> None:
    """The queue's Redis refuses the push (out of memory): the request was
    recorded, so it is spilled, and the crawl stops as for a refused check
    (one ERROR line naming the queue's Redis); it used to raise out of the
    scheduler, the request lost."""
    c = Crawl(tmp_path, servers.get("filter"), servers.get("queue"))
    c.open()
    c.scheduler.server.config_set("maxmemory", 1)
    with caplog.at_level(logging.ERROR, logger="scrapy.dupefilters"):
        c.scheduler.enqueue_request(Request(url("a")))
    assert c.df.failed
    (error,) = [r.getMessage() for r in caplog.records]
    assert "refused a push" in error and "scrapy-redis's queue" in error and "bloomline_redis_unavailable" in error
    c.close()
    assert kept(tmp_path) == [url("a")]
    c.scheduler.server.config_set("maxmemory", 0)
    c2 = Crawl(tmp_path, servers.get("filter"), servers.get("queue"))
    c2.open()  # the next crawl hands it on
    assert c2.queued() == [url("a")] and kept(tmp_path) == []


def test_an_earlier_crawls_spill_is_handed_on_with_its_pushes_watched(tmp_path: Path, servers: Any) -> None:
    """The next crawl hands on what an earlier one spilled as it opens. With
    the queue's Redis away then, that push raised out of spider_opened: the
    pushes were watched only after it, the request was stranded in a claimed
    file, and the crawl ran on with no probe. Now it goes back to the spill,
    the outage begins with its quick probe, and it is queued once Redis is
    back."""
    first = Crawl(tmp_path, servers.get("filter"), servers.get("queue"))
    first.open()
    servers.get("queue").stop()
    first.scheduler.enqueue_request(Request(url("b")))  # recorded; its push fails: spilled
    first.close()
    assert kept(tmp_path) == [url("b")]
    servers.up("queue")
    second = Crawl(tmp_path, servers.get("filter"), servers.get("queue"))  # (scrapy-redis PINGs its Redis here)
    servers.get("queue").stop()
    second.open()  # hands b on: its push fails again
    assert second.df._outages.active and second.probes[-1] == pytest.approx(0.1)
    assert kept(tmp_path) == [url("b")]
    servers.up("queue")
    second.probe()
    assert second.queued() == [url("b")] and kept(tmp_path) == []


def test_handing_on_a_kept_request_that_raises_keeps_it_and_stops_the_crawl(tmp_path: Path, servers: Any) -> None:
    """The engine raises as a kept request is handed on: the request goes
    back in the spill and the crawl stops; it used to stay handed out, and
    the spill's close at the end of the crawl marked it done (lost)."""
    c = Crawl(tmp_path, servers.get("filter"), servers.get("queue"))
    c.open()
    servers.get("filter").stop()
    assert c.scheduler.enqueue_request(Request(url("a"))) is False  # its check met the outage: spilled
    servers.up("filter")

    def raises(request: Request) -> Any:
        raise RuntimeError("the engine is closing")

    c.handed = raises
    c.probe()
    assert c.df.failed
    c.close()
    assert kept(tmp_path) == [url("a")]


def test_a_second_crawl_in_one_process_keeps_what_it_spills_while_handing_on(tmp_path: Path,
                                                                              servers: Any) -> None:
    """Two crawls of one spider in one process (a CrawlerRunner loop): the
    second claims the first's spill, and Redis goes as it hands it on. Both
    spills were named by the pid alone, so the second's own spill had the
    claimed file's name, and renaming that file back replaced it: the
    request handed on was lost. Each spill now has a name of its own."""
    first = Crawl(tmp_path, servers.get("filter"), servers.get("queue"))
    first.open()
    servers.get("filter").stop()
    for name in "ab":
        first.scheduler.enqueue_request(Request(url(name)))  # a's check met the outage; b spilled unchecked
    first.close()
    servers.up("filter")
    second = Crawl(tmp_path, servers.get("filter"), servers.get("queue"))
    handed = second.stop_at_hand_on(2, servers.get("filter"))
    second.open()
    assert handed == [url("a"), url("b")] and second.df._outages.active
    second.close()
    assert kept(tmp_path) == [url("b")]
    assert second.queued() == [url("a")]


def test_a_crawl_in_one_process_leaves_another_running_crawls_spill(tmp_path: Path, servers: Any) -> None:
    """Two crawls of one spider running in one process (a CrawlerProcess):
    the second, opening with Redis back, took the first's open spill (the
    same pid and owner), which the first went on spilling to (a file
    rewritten under it: what it spilled after was lost). It is left to the
    first, and taken by a crawl after the first has closed."""
    first = Crawl(tmp_path, servers.get("filter"), servers.get("queue"))
    first.open()
    servers.get("filter").stop()
    first.scheduler.enqueue_request(Request(url("a")))  # spilled: the first crawl's spill is open
    servers.up("filter")
    second = Crawl(tmp_path, servers.get("filter"), servers.get("queue"))
    second.open()
    assert second.queued() == [] and kept(tmp_path) == [url("a")]  # left to the crawl that writes it
    second.close()
    first.close()
    third = Crawl(tmp_path, servers.get("filter"), servers.get("queue"))
    third.open()
    assert third.queued() == [url("a")] and kept(tmp_path) == []


SPILLS_AND_WAITS = """
import sys
from pathlib import Path
from types import SimpleNamespace
sys.path.insert(0, sys.argv[1])
from scrapy.http import Request
from test_scrapy_redis_push import Crawl
c = Crawl(Path(sys.argv[2]), SimpleNamespace(url=sys.argv[3]), SimpleNamespace(url=sys.argv[4]))
c.open()
print("open", flush=True)
sys.stdin.readline()  # the filter's Redis is away now
c.scheduler.enqueue_request(Request("http://example.com/theirs"))
print("spilled", flush=True)
sys.stdin.readline()  # killed meanwhile
"""


def spilling_child(tmp: Path, servers: Any) -> Any:
    """A crawl in another process that has spilled one request (its check
    met the filter's Redis away, which is back when this returns) and waits,
    its spill open."""
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", SPILLS_AND_WAITS, str(Path(__file__).parent), str(tmp),
                              servers.get("filter").url, servers.get("queue").url], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdin is not None
    assert child.stdout.readline() == "open\n"
    servers.get("filter").stop()
    child.stdin.write("go\n")
    child.stdin.flush()
    assert child.stdout.readline() == "spilled\n"
    servers.up("filter")
    return child


def kill(child: Any) -> None:
    """SIGKILL a spilling_child, and let go of its pipes."""
    child.kill()
    child.wait(timeout=30)
    child.stdin.close()
    child.stdout.close()


def test_a_live_process_keeps_its_spill_and_a_dead_ones_is_taken(tmp_path: Path, servers: Any) -> None:
    """Processes on one machine share the spill directory. A crawl whose
    Redis is back took every spill of its key, also one that another live
    process was still spilling to, and rewrote it under that process (what
    it spilled after was lost). A live process's spill is left to it; once
    that process is gone, the next crawl takes it."""
    child = spilling_child(tmp_path, servers)
    try:
        ours = Crawl(tmp_path, servers.get("filter"), servers.get("queue"))
        ours.open()
        assert ours.queued() == [] and kept(tmp_path) == [url("theirs")]  # left to its live owner
    finally:
        kill(child)
    later = Crawl(tmp_path, servers.get("filter"), servers.get("queue"))
    later.open()
    assert later.queued() == [url("theirs")] and kept(tmp_path) == []


def test_a_spill_is_taken_only_by_a_crawl_of_its_own_key_on_its_own_redis(tmp_path: Path, servers: Any) -> None:
    """Spills were named for the dupefilter key folded to a file name: a
    spider whose key folds alike ('新闻:dupefilter' and '体育:dupefilter'
    both fold to '___dupefilter'), or a crawl of the same key on another
    Redis, took the spill, and crawled another spider's requests (recorded
    in the first one's filter, which never fetched them). Each is left to
    a crawl of its own key on its own Redis."""
    kill(spilling_child(tmp_path, servers))  # spilled at 'push:dupefilter' on the filter's Redis, then killed
    folds_alike = Crawl(tmp_path, servers.get("filter"), servers.get("queue"),
                        settings={"SCHEDULER_DUPEFILTER_KEY": "push_dupefilter"})
    folds_alike.open()
    assert folds_alike.queued() == [] and kept(tmp_path) == [url("theirs")]
    folds_alike.close()
    other_redis = Crawl(tmp_path, servers.get("queue"), servers.get("queue"))
    other_redis.open()
    assert other_redis.queued() == [] and kept(tmp_path) == [url("theirs")]
    other_redis.close()
    own = Crawl(tmp_path, servers.get("filter"), servers.get("queue"))
    own.open()
    assert own.queued() == [url("theirs")] and kept(tmp_path) == []


KILLED_AS_IT_HANDS_ON = """
import os, signal, sys
from pathlib import Path
from types import SimpleNamespace
sys.path.insert(0, sys.argv[1])
from test_scrapy_redis_push import Crawl
c = Crawl(Path(sys.argv[2]), SimpleNamespace(url=sys.argv[3]), SimpleNamespace(url=sys.argv[4]))
c.handed = lambda request: os.kill(os.getpid(), signal.SIGKILL)
c.open()
"""


def test_a_spill_claimed_by_a_process_killed_as_it_hands_it_on_is_taken_by_the_next_crawl(
        tmp_path: Path, servers: Any) -> None:
    """A crawl claims an earlier crawl's spill (renaming it, so that no
    other process takes it too) and is killed as it hands it on: the file
    was left under its claimed name, which no later crawl looked for, and
    its requests were never fetched. A claimed spill whose process is gone
    is taken by the next crawl."""
    import signal
    import subprocess
    import sys

    kill(spilling_child(tmp_path, servers))  # a crawl that spilled, then was killed
    child = subprocess.run([sys.executable, "-c", KILLED_AS_IT_HANDS_ON, str(Path(__file__).parent), str(tmp_path),
                            servers.get("filter").url, servers.get("queue").url], capture_output=True, text=True,
                           timeout=60)
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
    assert [p.suffix for p in (tmp_path / "job").iterdir() if not p.name.startswith(".owner.")] == [".claimed"]
    third = Crawl(tmp_path, servers.get("filter"), servers.get("queue"))
    third.open()
    assert third.queued() == [url("theirs")] and kept(tmp_path) == []



@pytest.mark.slow
def test_a_real_crawl_whose_queue_redis_is_killed_and_back_in_two_seconds_fetches_every_page(
        tmp_path: Path, servers: Any) -> None:
    """A real crawl under scrapy-redis's scheduler, its queue's Redis
    (append-only, apart from the filter's) killed after a quarter of the
    site and back on its port 2 s later: the pushes that failed meanwhile
    are spilled and queued once it is back, and the crawl ends by itself
    with every page fetched once, but for the one queue command in flight
    as the server died, whose outcome is unknown (the server may have run
    it and lost only its reply):
    - a push: the request is spilled and queued again once the server is
      back (at least once), so its page may be fetched twice;
    - a pop (scrapy-redis's own, MULTI/EXEC of ZRANGE and ZREMRANGEBYRANK,
      is at most once): the request may be gone, lost with the pages only
      it links to. The crawl need not see that pop fail: redis-py retries
      it, and a retry that meets the server back pops the next request.
    So at most one page lost on its own or fetched twice, never both."""
    import re
    import signal
    import subprocess

    from scrapy_site import Site, start_crawl, tree

    pages = 600
    site = Site(pages, tree(pages, 3))
    log = tmp_path / "crawl.log"
    try:
        proc = start_crawl(tmp_path, site, "SCHEDULER=scrapy_redis.scheduler.Scheduler",
                           "DUPEFILTER_CLASS=bloomline.scrapy.RedisBloomDupeFilter",
                           f"REDIS_URL={servers.get('queue').url}", f"BLOOMLINE_REDIS_URL={servers.get('filter').url}",
                           "BLOOMLINE_REDIS_RETRY_TIMEOUT=30", "SCHEDULER_IDLE_BEFORE_CLOSE=0", log=log)
        deadline = time.monotonic() + 60
        while sum(site.pages().values()) < pages // 4 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.005)
        assert proc.poll() is None, log.read_text()[-3000:]
        servers.get("queue").proc.send_signal(signal.SIGKILL)
        servers.get("queue").proc.wait(timeout=10)
        time.sleep(2)
        servers.up("queue")
        try:
            assert proc.wait(timeout=120) == 0, log.read_text()[-3000:]
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        text = log.read_text()
        fetched = site.pages()
        missing = set(range(pages)) - {int(p.rsplit("/", 1)[1]) for p in fetched}
        twice = sorted(p for p, n in fetched.items() if n > 1)
        assert len(site.lost()) + len(twice) <= 1 and max(fetched.values()) <= 2, (sorted(missing), twice, text[-3000:])
        assert re.search(r"'finish_reason': 'finished'", text), text[-3000:]
        assert "(scrapy-redis's queue) unreachable" in text and "is back after" in text, text[-3000:]
        # scrapy-redis's own pop may meet the dead server first: Scrapy logs
        # that traceback (its frames only); none may pass through bloomline.
        for trace in re.findall(r"Traceback \(most recent call last\):\n(?:\s.*\n)+\S.*", text):
            assert "bloomline" not in trace and "Connection" in trace.splitlines()[-1], trace
    finally:
        site.stop()


@pytest.mark.slow
def test_a_crawl_that_must_stop_as_it_opens_stops_cleanly(tmp_path: Path, servers: Any) -> None:
    """A real crawl opens with an earlier crawl's spill to hand on, and the
    queue's Redis refuses the push (out of memory): the crawl must stop as
    the spider opens, before the engine runs. It stops with one ERROR line,
    finish reason bloomline_redis_unavailable and exit status 1, fetching
    nothing, and the request stays in the spill."""
    import re

    from scrapy_site import Site, crawl

    kill(spilling_child(tmp_path, servers))  # its spill: push:dupefilter's, in tmp/job
    queues = servers.get("queue")
    redis_client = __import__("redis").Redis.from_url(queues.url)
    redis_client.config_set("maxmemory", 1)
    site = Site(20)
    try:
        r = crawl(tmp_path, site, "SCHEDULER=scrapy_redis.scheduler.Scheduler",
                  "DUPEFILTER_CLASS=bloomline.scrapy.RedisBloomDupeFilter", f"REDIS_URL={queues.url}",
                  f"BLOOMLINE_REDIS_URL={servers.get('filter').url}", "BLOOMLINE_REDIS_KEY=push:dupefilter",
                  f"JOBDIR={tmp_path / 'job'}", "SCHEDULER_PERSIST=True", timeout=120)
    finally:
        site.stop()
        redis_client.config_set("maxmemory", 0)
        redis_client.close()
    assert r.returncode == 1, r.stderr[-3000:]
    assert re.search(r"'finish_reason': 'bloomline_redis_unavailable'", r.stderr), r.stderr[-3000:]
    errors = [line for line in r.stderr.splitlines() if " ERROR: " in line]
    assert len(errors) == 1 and "refused a push" in errors[0], errors
    assert "Traceback" not in r.stderr and "slot not assigned" not in r.stderr, r.stderr[-3000:]
    assert not site.pages()
    assert kept(tmp_path) == [url("theirs")]


def test_an_owner_lock_is_made_again_where_its_directory_was_made_again(tmp_path: Path) -> None:
    """A long-running process whose journal directory was removed and made
    again (JOBDIR cleaned between two crawls) named its new journals for a
    lock that no longer existed: another process took them as a dead
    owner's while it wrote them."""
    import shutil

    from bloomline.scrapy._owners import _holds_lock, own_journal_path

    where = tmp_path / "job"
    own_journal_path(where, "k-0123456789ab", "taken")
    shutil.rmtree(where)
    journal = own_journal_path(where, "k-0123456789ab", "taken")
    [lock] = [p for p in where.iterdir() if p.name.startswith(".owner.")]
    assert lock.name.split(".")[2] == journal.name.split(".")[1].split("-")[0] + "-" + journal.name.split(".o")[1].split(".")[0]
    assert _holds_lock(lock)  # held (by this process, on another open of it): its journals are left alone


OWNS_FORKS_AND_DIES = """
import os, sys, time
from pathlib import Path
from bloomline.scrapy._owners import own_journal_path
journal = own_journal_path(Path(sys.argv[1]), "k-0123456789ab", "taken")
journal.write_bytes(b"")
""" + FORK_AND_DIE  # (the owner dies; its child lives)


def test_a_dead_owners_journal_is_taken_while_a_child_it_forked_lives(tmp_path: Path) -> None:
    """A child forked from a crawler kept a copy of its owner lock: once
    the crawler died, its journals were left alone (owner alive) while the
    child lived. The child now closes its copy."""
    import signal
    import subprocess

    from bloomline.scrapy._owners import left_journals

    where = tmp_path / "job"
    r = subprocess.run([sys.executable, "-c", OWNS_FORKS_AND_DIES, str(where)], capture_output=True, text=True,
                       timeout=120)
    child = int(r.stdout)
    try:
        [(journal, _)] = left_journals(where, ["k-0123456789ab"], "taken", "test")
        assert journal.name.startswith("k-0123456789ab.")
    finally:
        os.kill(child, signal.SIGKILL)



def test_a_lock_file_its_maker_died_making_is_swept_once_old(tmp_path: Path) -> None:
    """An owner lock is made under a `.new` name, locked, then renamed: a
    process killed between the two left the `.new` file for good. One free
    and older than a minute is removed; a fresh one (being made now) is not."""
    from bloomline.scrapy._owners import left_journals

    tmp_path.mkdir(exist_ok=True)
    old, fresh = tmp_path / ".owner.4242-00aa11bb22cc.lock.new", tmp_path / ".owner.4343-00aa11bb22cd.lock.new"
    old.write_bytes(b"")
    fresh.write_bytes(b"")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    assert left_journals(tmp_path, ["k-0123456789ab"], "taken", "test") == []
    assert not old.exists() and fresh.exists()


def test_a_fork_while_another_thread_makes_an_owner_lock_leaves_the_child_no_copy(tmp_path: Path) -> None:
    """A fork between an owner lock's making and its record gave the child
    a copy it did not know to close: a dead crawler's journals looked owned
    while the child lived (60 of 1,109 forks in a hostile read). Making and
    recording are now one step a fork waits for."""
    import threading

    from forking import exited_ok, in_forked_child

    from bloomline.scrapy import _owners

    stop = threading.Event()

    def maker() -> None:
        for i in range(400):  # (a lock a directory, held for the process's life: bounded, let go below)
            if stop.is_set():
                return
            _owners.own_journal_path(tmp_path / str(i), "k-0123456789ab", "taken")
            time.sleep(0.001)  # (a fork takes longer in a big process: the makings last as long as the forks)

    def holds_no_owner_lock() -> bool:
        links = (os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
                 if os.path.islink(f"/proc/self/fd/{fd}"))
        return not any("/.owner." in link for link in links)

    t = threading.Thread(target=maker)
    t.start()
    try:
        statuses = []
        while t.is_alive() and len(statuses) < 300:
            statuses.append(in_forked_child(holds_no_owner_lock))
    finally:
        stop.set()
        t.join(timeout=60)
        for where in [w for w in _owners._owner["locks"] if w.startswith(str(tmp_path))]:
            os.close(_owners._owner["locks"].pop(where))  # (this test's directories' locks: the process lives on)
    assert len(statuses) >= 10 and sum(not exited_ok(s) for s in statuses) == 0, statuses
