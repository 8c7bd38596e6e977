"""RedisJournalScheduler: scrapy-redis's scheduler with a local journal of
the requests a crawler took from Redis and has not finished. Real crawls
killed with SIGKILL against the loopback test site, and the scheduler
itself (opened as Scrapy's engine opens it) against a real redis-server,
with other crawlers in real processes, live and killed."""

from __future__ import annotations

import errno
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("scrapy")
pytest.importorskip("scrapy_redis")
pytest.importorskip("redis")

import redis  # noqa: E402
from conftest import RedisServer  # noqa: E402
from scrapy import Spider  # noqa: E402
from scrapy.http import Request  # noqa: E402
from scrapy_site import Site, crawl, journal_records, kill_9, pending_urls, start_crawl, tree  # noqa: E402

# scrapy-redis 0.9 counts its pushes with inc_value(spider=), which Scrapy 2.19 deprecates.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Passing a 'spider' argument:scrapy.exceptions.ScrapyDeprecationWarning")

MIDDLEWARE = 'SPIDER_MIDDLEWARES={"bloomline.scrapy.JournalDoneMiddleware": 0}'
U = "http://example.com"


def taken_journals(where: Path) -> list[Path]:
    return sorted(where.rglob("*.taken.journal*"))


def taken_urls(where: Path) -> set[str]:
    """The URLs pending in every journal of taken requests under `where`,
    read as docs/FORMAT.md says (not by the code under test); a record
    being written as it is read is read again."""
    for _ in range(100):
        try:
            return set().union(*(pending_urls(journal_records(p.read_bytes())) for p in taken_journals(where)))
        except Exception:  # a record half written (struct, pickle, the magic's assert)
            time.sleep(0.01)
    raise AssertionError("the journals never read whole")


# -- real crawls, killed -----------------------------------------------------------------------------

PAGES = 600


def killed_mid_crawl(tmp: Path, site: Site, redis_url: str, scheduler: str) -> None:
    """Crawl under `scheduler` with RedisBloomDupeFilter and scrapy-redis's
    queue at redis_url, and SIGKILL it after a quarter of the site with 8
    requests in flight: the site holds every request from then on
    unanswered, and the kill comes once every page it answered is handled
    (with the journal: finished in it), so that what the crawler had taken
    and not fetched is exactly what was in flight."""
    proc = start_crawl(tmp, site, f"SCHEDULER={scheduler}", "DUPEFILTER_CLASS=bloomline.scrapy.RedisBloomDupeFilter",
                       f"REDIS_URL={redis_url}", "SCHEDULER_PERSIST=True", MIDDLEWARE, log=tmp / "killed.log")
    try:
        deadline = time.monotonic() + 120
        while sum(site.pages().values()) < PAGES // 4 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.005)
        assert proc.poll() is None, (tmp / "killed.log").read_text()[-3000:]
        site.close_gate()
        if "Journal" in scheduler:
            deadline = time.monotonic() + 60
            while {site.url(p) for p in site.pages()} & taken_urls(tmp):
                assert time.monotonic() < deadline, "the answered pages were never finished"
                time.sleep(0.01)
        else:
            time.sleep(1.0)  # (scrapy-redis's scheduler has no record to wait on)
    finally:
        kill_9(proc)
    site.epoch += 1
    site.gate.set()


@pytest.mark.slow
def test_a_crawler_killed_with_requests_in_flight_loses_none_and_fetches_none_twice(
        tmp_path: Path, redis_server: RedisServer) -> None:
    """The requests a crawler took from Redis and had not fetched when it
    was killed are in its journal, and the next crawl on the machine queues
    them again: every page of the tree is fetched, none twice, and the
    clean end leaves no journal."""
    site = Site(PAGES, tree(PAGES, 3))
    try:
        killed_mid_crawl(tmp_path, site, redis_server.url, "bloomline.scrapy.RedisJournalScheduler")
        before = site.pages()
        in_flight = taken_urls(tmp_path)
        assert 1 <= len(in_flight) <= 16 and not in_flight & {site.url(p) for p in before}, in_flight
        r = crawl(tmp_path, site, "SCHEDULER=bloomline.scrapy.RedisJournalScheduler",
                  "DUPEFILTER_CLASS=bloomline.scrapy.RedisBloomDupeFilter", f"REDIS_URL={redis_server.url}",
                  "SCHEDULER_PERSIST=True", MIDDLEWARE)
        assert r.returncode == 0, r.stderr[-3000:]
        n = len(in_flight)
        assert f"{n} {'request' if n == 1 else 'requests'} taken and not finished by a crawler gone queued again" \
            in r.stderr, r.stderr[-3000:]
        pages = site.pages()
        assert site.lost() == set() and len(pages) == PAGES, (sorted(site.lost()), r.stderr[-3000:])
        assert max(pages.values()) == 1, sorted(p for p, n in pages.items() if n > 1)
        assert taken_journals(tmp_path) == []
    finally:
        site.stop()


@pytest.mark.slow
def test_scrapy_redis_own_scheduler_loses_what_a_killed_crawler_had_taken(
        tmp_path: Path, redis_server: RedisServer) -> None:
    """Why RedisJournalScheduler exists: the same kill under scrapy-redis's
    own scheduler, and the next crawl never fetches the requests that were
    in flight, nor the pages only they link to."""
    site = Site(PAGES, tree(PAGES, 3))
    try:
        killed_mid_crawl(tmp_path, site, redis_server.url, "scrapy_redis.scheduler.Scheduler")
        r = crawl(tmp_path, site, "SCHEDULER=scrapy_redis.scheduler.Scheduler",
                  "DUPEFILTER_CLASS=bloomline.scrapy.RedisBloomDupeFilter", f"REDIS_URL={redis_server.url}",
                  "SCHEDULER_PERSIST=True")
        assert r.returncode == 0, r.stderr[-3000:]
        assert len(site.lost()) >= 1 and len(site.pages()) < PAGES
    finally:
        site.stop()


# A dupefilter that kills its own process (SIGKILL) right after it recorded
# one link in Redis as new, before the scheduler kept it: a kill -9 (the OOM
# killer, a container stopped) landing exactly there. Written beside the
# spider, where `python -m scrapy` (cwd first on sys.path) imports it.
KILLED_AFTER_ITS_CHECK = """
import os, signal
from bloomline.scrapy import RedisBloomDupeFilter

class KilledAfterItsCheck(RedisBloomDupeFilter):
    def request_seen(self, request):
        seen = super().request_seen(request)
        if not seen and request.url.endswith({path!r}):
            os.kill(os.getpid(), signal.SIGKILL)
        return seen
"""


@pytest.mark.parametrize("scheduler", ["redis journal", "jobdir journal"])
def test_a_crawler_killed_between_its_check_and_its_push_loses_no_page(tmp_path: Path, redis_server: RedisServer,
                                                                       scheduler: str) -> None:
    """The dupefilter recorded a link in Redis as seen, then the crawler was
    killed before the scheduler kept it (scrapy-redis's push; the JOBDIR
    journal's push). The page that yielded it was unfinished, so the next
    crawl fetched it again, but found its link seen, and dropped it: that
    page and the pages only it links to were never fetched, and the crawl
    finished with exit 0 (a hostile read: 5 of a 100-page tree). The link
    is now journaled before its check, and queued again by the next crawl."""
    site = Site(100, tree(100))
    victim = "/page/7"
    (tmp_path / "killpoint.py").write_text(KILLED_AFTER_ITS_CHECK.format(path=victim))
    common = [f"REDIS_URL={redis_server.url}", "SCHEDULER_PERSIST=True", MIDDLEWARE]
    if scheduler == "redis journal":
        common.append("SCHEDULER=bloomline.scrapy.RedisJournalScheduler")
    else:
        common += ["SCHEDULER=bloomline.scrapy.JournalScheduler", f"JOBDIR={tmp_path / 'job'}"]
    try:
        r = crawl(tmp_path, site, "DUPEFILTER_CLASS=killpoint.KilledAfterItsCheck", *common)
        assert r.returncode == -9, r.stderr[-3000:]  # (killed at its own kill point)
        assert victim not in site.pages()
        site.epoch += 1
        r = crawl(tmp_path, site, "DUPEFILTER_CLASS=bloomline.scrapy.RedisBloomDupeFilter", *common)
        assert r.returncode == 0, r.stderr[-3000:]
        pages = site.pages()
        assert site.lost() == set() and len(pages) == 100, (sorted(site.lost()), r.stderr[-3000:])
    finally:
        site.stop()


# scrapy-redis's serializer (pickle), killing its own process as it reads
# one request popped from the queue while the file "armed" is beside it:
# Redis has taken the request off the queue, and the journal does not have
# it yet (a kill -9 landing in the pop's round trip).
KILLED_IN_ITS_POP = """
import os, pickle, signal

def loads(s):
    d = pickle.loads(s)
    if os.path.exists("armed") and d["url"].endswith({path!r}):
        os.kill(os.getpid(), signal.SIGKILL)
    return d

def dumps(obj):
    return pickle.dumps(obj, protocol=-1)
"""


@pytest.mark.parametrize("queue", ["PriorityQueue", "FifoQueue", "LifoQueue"])
def test_a_crawler_killed_in_its_pop_loses_no_page(tmp_path: Path, redis_server: RedisServer, queue: str) -> None:
    """Killed after Redis took a request off scrapy-redis's queue and
    before the journal had it: the request was in neither, and it and the
    pages only it links to were never fetched (a hostile read: 10 of 27
    runs of six random kills lost 5 to 21 pages). The pop now parks the
    request in Redis until the journal has it, and the next crawl pushes a
    dead crawler's parked request back."""
    site = Site(100, tree(100))
    (tmp_path / "killpoint_serializer.py").write_text(KILLED_IN_ITS_POP.format(path="/page/7"))
    common = ["SCHEDULER=bloomline.scrapy.RedisJournalScheduler",
              "DUPEFILTER_CLASS=bloomline.scrapy.RedisBloomDupeFilter", f"REDIS_URL={redis_server.url}",
              "SCHEDULER_PERSIST=True", MIDDLEWARE, "SCHEDULER_SERIALIZER=killpoint_serializer",
              f"SCHEDULER_QUEUE_CLASS=scrapy_redis.queue.{queue}"]
    try:
        (tmp_path / "armed").touch()
        r = crawl(tmp_path, site, *common)
        assert r.returncode == -9, r.stderr[-3000:]  # (killed at its own kill point)
        assert "/page/7" not in site.pages()
        (tmp_path / "armed").unlink()
        site.epoch += 1
        r = crawl(tmp_path, site, *common)
        assert r.returncode == 0, r.stderr[-3000:]
        pages = site.pages()
        assert site.lost() == set() and len(pages) == 100, (sorted(site.lost()), r.stderr[-3000:])
        assert pages["/page/7"] == 1
        keys = redis.Redis.from_url(redis_server.url).keys("*:taking:*")
        assert keys == [], keys  # the clean close let go of its parked request
    finally:
        site.stop()


# -- the scheduler itself, as the engine opens it ---------------------------------------------------


def opened(tmp: Path, redis_url: str, **settings: Any) -> Any:
    """A RedisJournalScheduler opened as Scrapy's engine opens it, with
    scrapy-redis's FIFO queue and dupefilter at redis_url and its journals
    in tmp/job."""
    from scrapy.utils.test import get_crawler

    from bloomline.scrapy import RedisJournalScheduler

    class S(Spider):
        name = "taken"

    crawler = get_crawler(S, {
        "REDIS_URL": redis_url, "SCHEDULER_PERSIST": True, "JOBDIR": str(tmp / "job"),
        "SCHEDULER_QUEUE_CLASS": "scrapy_redis.queue.FifoQueue",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        "SPIDER_MIDDLEWARES": {"bloomline.scrapy.JournalDoneMiddleware": 0}, **settings})
    spider = S.from_crawler(crawler)
    scheduler = RedisJournalScheduler.from_crawler(crawler)
    scheduler.open(spider)
    return scheduler


def queued(scheduler: Any) -> list[str]:
    """The URLs in the queue, taken out (not through the scheduler)."""
    urls = []
    while (r := scheduler.queue.pop()) is not None:
        urls.append(r.url)
    return urls


TAKES_AND_WAITS = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from test_scrapy_redis_journal import opened
s = opened(Path(sys.argv[2]), sys.argv[3], **json.loads(sys.argv[4]))
print("taken", s.next_request().url, flush=True)
sys.stdin.readline()
"""


def taking_child(tmp: Path, redis_url: str, **settings: Any) -> Any:
    """A crawler in another process that took one request and waits."""
    import json

    child = subprocess.Popen([sys.executable, "-c", TAKES_AND_WAITS, str(Path(__file__).parent), str(tmp), redis_url,
                              json.dumps(settings)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline() == f"taken {U}/theirs\n"
    return child


def finish(scheduler: Any, request: Request) -> None:
    """The request's page is done, as JournalDoneMiddleware reports it."""
    from bloomline.scrapy.journal import JOURNAL_META_ID
    from bloomline.scrapy.scheduler import request_done

    scheduler.crawler.signals.send_catch_log(signal=request_done, request_id=request.meta[JOURNAL_META_ID])


def kill(child: Any) -> None:
    child.kill()
    child.wait(timeout=30)
    child.stdin.close()
    child.stdout.close()


def test_a_live_crawlers_journal_is_left_to_it_and_a_dead_ones_is_queued_again(
        tmp_path: Path, redis_server: RedisServer) -> None:
    first = opened(tmp_path, redis_server.url)
    assert first.enqueue_request(Request(f"{U}/theirs"))
    first.close("finished")
    child = taking_child(tmp_path, redis_server.url)
    try:
        ours = opened(tmp_path, redis_server.url)
        assert ours.next_request() is None and taken_urls(tmp_path) == {f"{U}/theirs"}  # its owner lives
        ours.close("finished")
    finally:
        kill(child)
    later = opened(tmp_path, redis_server.url)
    request = later.next_request()
    assert request is not None and request.url == f"{U}/theirs"
    assert len(taken_journals(tmp_path)) == 1 and taken_urls(tmp_path) == {f"{U}/theirs"}  # taken again, by later
    finish(later, request)
    later.close("finished")
    assert taken_journals(tmp_path) == []


def test_a_second_crawl_in_one_process_leaves_the_first_ones_journal(tmp_path: Path,
                                                                      redis_server: RedisServer) -> None:
    first = opened(tmp_path, redis_server.url)
    first.enqueue_request(Request(f"{U}/one"))
    one = first.next_request()
    assert one is not None
    second = opened(tmp_path, redis_server.url)
    assert queued(second) == [] and taken_urls(tmp_path) == {f"{U}/one"}
    second.close("finished")
    finish(first, one)
    first.close("finished")
    assert taken_journals(tmp_path) == []


def test_flush_on_start_removes_dead_crawlers_journals_with_the_queue(tmp_path: Path,
                                                                     redis_server: RedisServer,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    first = opened(tmp_path, redis_server.url)
    first.enqueue_request(Request(f"{U}/theirs"))
    first.close("finished")
    kill(taking_child(tmp_path, redis_server.url))
    with caplog.at_level(logging.INFO):
        fresh = opened(tmp_path, redis_server.url, SCHEDULER_FLUSH_ON_START=True)
    assert queued(fresh) == [] and taken_urls(tmp_path) == set()
    assert "SCHEDULER_FLUSH_ON_START" in caplog.text
    fresh.close("finished")


def test_a_redirect_finishes_the_request_it_replaces_once_it_is_in_redis(tmp_path: Path,
                                                                          redis_server: RedisServer) -> None:
    """A redirect or retry (made by a downloader middleware, carrying its
    request's meta) finishes the request it replaces once it is queued, and
    the journal's id never travels to Redis."""
    from bloomline.scrapy.journal import JOURNAL_META_ID

    s = opened(tmp_path, redis_server.url)
    s.enqueue_request(Request(f"{U}/a"))
    taken = s.next_request()
    assert taken is not None and JOURNAL_META_ID in taken.meta
    assert taken_urls(tmp_path) == {f"{U}/a"}
    s.enqueue_request(taken.replace(url=f"{U}/b"))
    assert taken_urls(tmp_path) == set()
    again = s.queue.pop()
    assert again.url == f"{U}/b" and JOURNAL_META_ID not in again.meta
    s.close("finished")


def test_a_page_is_finished_only_once_its_output_ended_and_its_links_are_queued(
        tmp_path: Path, redis_server: RedisServer) -> None:
    """A callback's link that copies the response's meta (the journal id
    with it) is a child, not a redirect: the page stays unfinished until its
    output has ended and every link it yielded is in Redis."""
    from bloomline.scrapy.journal import JOURNAL_META_ID
    from bloomline.scrapy.scheduler import request_done, request_yielded

    s = opened(tmp_path, redis_server.url)
    s.enqueue_request(Request(f"{U}/page"))
    page = s.next_request()
    rid = page.meta[JOURNAL_META_ID]
    links = [Request(f"{U}/link/{i}", meta=dict(page.meta)) for i in range(2)]
    for link in links:
        s.crawler.signals.send_catch_log(signal=request_yielded, request_id=rid, request=link)
    s.enqueue_request(links[0])
    s.crawler.signals.send_catch_log(signal=request_done, request_id=rid)
    assert taken_urls(tmp_path) == {f"{U}/page"}  # one link not yet in Redis
    s.enqueue_request(links[1])
    assert taken_urls(tmp_path) == set()
    assert sorted(queued(s)) == [f"{U}/link/0", f"{U}/link/1"]
    s.close("finished")


def test_a_full_disk_stops_the_crawl_and_puts_the_request_back(tmp_path: Path, redis_server: RedisServer,
                                                              small_fs: Any, caplog: pytest.LogCaptureFixture) -> None:
    """A journal that cannot be written: the request being taken goes back
    to Redis, the crawl stops (one ERROR line naming the reason), and the
    requests taken before stay pending in the journal."""
    from conftest import fill_disk

    from bloomline.scrapy.journal import JournalUnwritable

    from types import SimpleNamespace

    from twisted.internet import defer

    d = small_fs("256k")
    s = opened(tmp_path, redis_server.url, JOBDIR=str(d))
    closes: list[str] = []
    s.crawler.engine = SimpleNamespace(pause=lambda: None, running=True, spider=s.spider,
                                       close_spider=lambda spider, reason: closes.append(reason) or defer.succeed(None))
    for i in range(1000):  # (not filtered: no intent is journaled, so the small disk is the takes' alone)
        s.enqueue_request(Request(f"{U}/{i}", body=b"x" * 500, dont_filter=True))
    fill_disk(d, leave=8 << 10)
    taken = []
    with caplog.at_level(logging.ERROR):
        for _ in range(1000):  # 8 KiB holds far fewer than 1000 of these
            request = s.next_request()
            if request is None:
                break
            taken.append(request.url)
    assert 0 < len(taken) < 1000
    assert isinstance(s._taken.unwritable, JournalUnwritable) and s._taken.unwritable.errno == errno.ENOSPC
    assert closes == ["bloomline_journal_unwritable"] and "cannot write the journal" in caplog.text
    assert s.next_request() is None  # stopped
    st = os.statvfs(d)
    assert st.f_bavail * st.f_frsize >= 64 << 10  # the room kept for the stop is given up for it
    left = queued(s)
    assert len(left) == 1000 - len(taken) and set(left).isdisjoint(taken)  # the one refused is back
    s.close("bloomline_journal_unwritable")
    assert taken_urls(d) == set(taken)  # kept for the next crawl


def test_a_request_neither_journaled_nor_put_back_stays_parked(tmp_path: Path, redis_server: RedisServer,
                                                               small_fs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk refused the journal's write of a request taken, and Redis
    refused its push back to the queue (a double fault): the ERROR line said
    it stayed parked for the next crawl, but the close let go of the parked
    key. It now stays parked."""
    from conftest import fill_disk
    from twisted.internet import defer

    from types import SimpleNamespace

    d = small_fs("256k")
    s = opened(tmp_path, redis_server.url, JOBDIR=str(d))
    s.crawler.engine = SimpleNamespace(pause=lambda: None, running=True, spider=s.spider,
                                       close_spider=lambda spider, reason: defer.succeed(None))
    assert s.enqueue_request(Request(f"{U}/parked", body=b"x" * 4096, dont_filter=True))
    fill_disk(d, leave=0)

    def cut(request: Request) -> None:
        raise redis.ConnectionError("the connection was cut")

    monkeypatch.setattr(s.queue, "push", cut)  # (the push back, cut; Redis itself stays up)
    assert s.next_request() is None
    s.close("bloomline_journal_unwritable")
    r = redis.Redis.from_url(redis_server.url)
    parked = r.keys("*:taking:*")
    assert len(parked) == 1 and s.queue._decode_request(r.lindex(parked[0], 0)).url == f"{U}/parked"


def test_a_link_whose_intent_cannot_be_journaled_is_not_recorded(tmp_path: Path, redis_server: RedisServer,
                                                                small_fs: Any) -> None:
    """A link is journaled before the dupefilter records it: on a full disk
    that write fails, the crawl stops, and the link is neither recorded nor
    queued (the page that yielded it stays unfinished, and is fetched again
    with it), where a recorded one would have been seen and in no queue."""
    from conftest import fill_disk
    from twisted.internet import defer

    from types import SimpleNamespace

    d = small_fs("256k")
    s = opened(tmp_path, redis_server.url, JOBDIR=str(d))
    closes: list[str] = []
    s.crawler.engine = SimpleNamespace(pause=lambda: None, running=True, spider=s.spider,
                                       close_spider=lambda spider, reason: closes.append(reason) or defer.succeed(None))
    assert s.enqueue_request(Request(f"{U}/before"))
    fill_disk(d, leave=0)
    link = Request(f"{U}/link", body=b"x" * 4096)
    assert not s.enqueue_request(link)
    assert closes == ["bloomline_journal_unwritable"]
    assert not s.server.sismember(s.df.key, s.df.request_fingerprint(link))  # not recorded
    assert queued(s) == [f"{U}/before"]
    s.close("bloomline_journal_unwritable")


@pytest.mark.slow
def test_a_crawl_stopped_by_a_full_disk_leaves_a_checkpoint_that_loads(tmp_path: Path, redis_server: RedisServer,
                                                                       small_fs: Any) -> None:
    """With JOBDIR on a full file system the journal fails and the crawl
    stops; Scrapy then writes spider.state to JOBDIR. No room was kept for
    it (as JournalScheduler keeps), so it was written empty and the resume
    could not load it. Now the journal's reserve is given up for the stop:
    spider.state loads, and the resume (the JOBDIR copied where there is
    room) fetches every page; twice only those the journal could not
    finish."""
    import pickle
    import shutil

    from conftest import fill_disk

    site = Site(PAGES, tree(PAGES, 3))
    try:
        job = small_fs("512k") / "job"
        job.mkdir()
        settings = ("SCHEDULER=bloomline.scrapy.RedisJournalScheduler", f"REDIS_URL={redis_server.url}",
                    "DUPEFILTER_CLASS=bloomline.scrapy.RedisBloomDupeFilter", "SCHEDULER_PERSIST=True", MIDDLEWARE)
        filler = fill_disk(job, leave=(64 + 24) << 10)  # the reserve, and a journal of about 50 requests
        r1 = crawl(tmp_path, site, *settings, f"JOBDIR={job}")
        assert r1.returncode == 1, r1.stderr[-3000:]
        assert "'finish_reason': 'bloomline_journal_unwritable'" in r1.stderr, r1.stderr[-3000:]
        assert 0 < len(site.pages()) < PAGES
        assert pickle.loads((job / "spider.state").read_bytes()) == {}  # the site's spider keeps no state
        pending = taken_urls(job)  # taken and not finished as the journal failed: fetched again (at least once)
        roomy = tmp_path / "roomy"
        shutil.copytree(job, roomy, ignore=lambda d, names: [filler.name] if Path(d) == job else [])
        r2 = crawl(tmp_path, site, *settings, f"JOBDIR={roomy}")
        assert r2.returncode == 0 and " ERROR: " not in r2.stderr, r2.stderr[-3000:]
        pages = site.pages()
        assert site.lost() == set() and len(pages) == PAGES, (sorted(site.lost()), r2.stderr[-3000:])
        assert {site.url(p) for p, n in pages.items() if n > 1} <= pending
        assert taken_journals(roomy) == [] and reserves(roomy) == []
    finally:
        site.stop()


def reserves(where: Path) -> list[Path]:
    return sorted(where.rglob("*.taken.reserve"))


def test_a_crawler_keeps_room_for_its_stop_and_a_dead_ones_room_is_given_back(tmp_path: Path,
                                                                              redis_server: RedisServer) -> None:
    """Each crawler holds 64 KiB beside its journal for its stop (given up
    at its close); a killed one's is removed by the next crawl, with the
    journal it hands back."""
    first = opened(tmp_path, redis_server.url)
    [reserve] = reserves(tmp_path)
    assert reserve.stat().st_size == 64 << 10 and reserve.with_suffix(".journal") == first._taken.path
    assert first.enqueue_request(Request(f"{U}/theirs"))
    first.close("finished")
    assert reserves(tmp_path) == []
    child = taking_child(tmp_path, redis_server.url)
    assert len(reserves(tmp_path)) == 1
    alive = opened(tmp_path, redis_server.url)  # a live crawler's room is its own
    assert len(reserves(tmp_path)) == 2
    alive.close("finished")
    kill(child)
    later = opened(tmp_path, redis_server.url)
    assert [r.with_suffix(".journal") for r in reserves(tmp_path)] == [later._taken.path]
    assert queued(later) == [f"{U}/theirs"]
    later.close("finished")
    assert reserves(tmp_path) == []


def test_a_journal_claimed_under_this_processs_pid_by_a_dead_one_is_queued_again(
        tmp_path: Path, redis_server: RedisServer) -> None:
    """A crawler killed while it handed a dead crawler's journal back left
    it claimed under its pid; in a container every start has the same pid
    (1), and such a file was skipped as this process's own for good."""
    import os

    first = opened(tmp_path, redis_server.url)
    first.enqueue_request(Request(f"{U}/theirs"))
    first.close("finished")
    kill(taking_child(tmp_path, redis_server.url))
    [left] = taken_journals(tmp_path)
    left.rename(left.with_name(f"{left.name}.{os.getpid()}.claimed"))  # as a pid-1 crawler killed mid-claim leaves it
    later = opened(tmp_path, redis_server.url)
    assert queued(later) == [f"{U}/theirs"]
    later.close("finished")
    assert taken_journals(tmp_path) == []


def test_queues_whose_keys_fold_to_one_file_name_never_share_journals(tmp_path: Path,
                                                                      redis_server: RedisServer) -> None:
    first = opened(tmp_path, redis_server.url, SCHEDULER_QUEUE_KEY="crawl:requests")
    first.enqueue_request(Request(f"{U}/theirs"))
    first.close("finished")
    kill(taking_child(tmp_path, redis_server.url, SCHEDULER_QUEUE_KEY="crawl:requests"))
    other = opened(tmp_path, redis_server.url, SCHEDULER_QUEUE_KEY="crawl_requests")  # the same file-safe name
    assert queued(other) == [] and taken_urls(tmp_path) == {f"{U}/theirs"}
    other.close("finished")
    same = opened(tmp_path, redis_server.url, SCHEDULER_QUEUE_KEY="crawl:requests")
    assert queued(same) == [f"{U}/theirs"]
    same.close("finished")


def test_a_killed_crawlers_journal_goes_back_to_its_own_redis_only(tmp_path: Path,
                                                                     redis_server: RedisServer) -> None:
    """Journals were named for the queue's key alone: a crawl of the same
    spider against another Redis (or database) on the machine took a killed
    crawler's journal and pushed its requests into its own queue; the
    crawl they came from never fetched them, or the pages only they link to."""
    db0, db1 = f"redis://127.0.0.1:{redis_server.port}/0", f"redis://127.0.0.1:{redis_server.port}/1"
    first = opened(tmp_path, db0)
    first.enqueue_request(Request(f"{U}/theirs"))
    first.close("finished")
    kill(taking_child(tmp_path, db0))
    other = opened(tmp_path, db1)
    assert queued(other) == [] and taken_urls(tmp_path) == {f"{U}/theirs"}
    other.close("finished")
    own = opened(tmp_path, db0)
    assert queued(own) == [f"{U}/theirs"]
    own.close("finished")
    assert taken_journals(tmp_path) == []


def _renamed_for(journal: Path, pid: int) -> None:
    """A journal and its owner's lock, named for another pid (as a crawler
    in a PID namespace of its own names them: pid 1, or a pid that here is
    another process's, or none's)."""
    import re

    m = re.fullmatch(r"(.*)\.([0-9]+)(-[0-9a-f]+\.o)([0-9a-f]+)(\.taken\.journal)", journal.name)
    assert m is not None, journal.name
    lock = journal.with_name(f".owner.{m.group(2)}-{m.group(4)}.lock")
    assert lock.exists()
    lock.rename(lock.with_name(f".owner.{pid}-{m.group(4)}.lock"))
    journal.rename(journal.with_name(f"{m.group(1)}.{pid}{m.group(3)}{m.group(4)}{m.group(5)}"))


def test_a_journal_is_taken_when_its_owner_died_whatever_runs_under_its_pid(
        tmp_path: Path, redis_server: RedisServer) -> None:
    """A journal's owner was told alive by its pid: a crawler that was pid 1
    of its container, killed, left a journal that no later crawl took while
    any process had pid 1, with no word; and a live crawler of another
    container, whose pid here is none's, had its open journal taken. The
    owner's lock tells: held while it lives, whatever its pid."""
    import os

    first = opened(tmp_path, redis_server.url)
    first.enqueue_request(Request(f"{U}/theirs"))
    first.close("finished")
    child = taking_child(tmp_path, redis_server.url)
    try:
        [journal] = taken_journals(tmp_path)
        _renamed_for(journal, 2**22 + 7)  # (over any pid_max: no process here has it)
        ours = opened(tmp_path, redis_server.url)
        assert queued(ours) == [] and taken_urls(tmp_path) == {f"{U}/theirs"}  # its owner lives: left to it
        ours.close("finished")
    finally:
        kill(child)
    [journal] = taken_journals(tmp_path)
    _renamed_for(journal, os.getppid())  # (its owner is dead; a live process has its pid)
    later = opened(tmp_path, redis_server.url)
    assert queued(later) == [f"{U}/theirs"]
    later.close("finished")
    assert taken_journals(tmp_path) == []
    assert not [p for p in (tmp_path / "job").iterdir() if p.name.startswith(".owner.") and str(os.getpid()) not in p.name]


def test_a_second_crawl_naming_the_directory_otherwise_leaves_the_first_ones_journal(
        tmp_path: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    first = opened(tmp_path, redis_server.url, JOBDIR="job")
    first.enqueue_request(Request(f"{U}/one"))
    one = first.next_request()
    assert one is not None
    second = opened(tmp_path, redis_server.url, JOBDIR=str(tmp_path / "job"))
    assert queued(second) == [] and taken_urls(tmp_path) == {f"{U}/one"}
    second.close("finished")
    finish(first, one)
    first.close("finished")
    assert taken_journals(tmp_path) == []


def open_on(path: Path) -> list[str]:
    """This process's descriptors open on path."""
    fds = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") in (str(path), f"{path} (deleted)"):
                fds.append(fd)
        except OSError:  # (the listing's own descriptor, closed)
            pass
    return fds


def test_a_close_whose_flush_meets_redis_gone_still_closes_the_journal(tmp_path: Path) -> None:
    """Without SCHEDULER_PERSIST scrapy-redis's close flushes the queue; with
    Redis gone that raises, and the journal was left open (its descriptor,
    and a file no later crawl of the process would take). It is closed, and
    kept with what it had not finished: the queue and filter were not
    flushed, so the request taken stays recorded as seen (marked done, it
    was never fetched again)."""
    from bloomline.scrapy import redis_scheduler

    (tmp_path / "redis").mkdir()
    server = RedisServer(tmp_path / "redis")
    try:
        s = opened(tmp_path, server.url, SCHEDULER_PERSIST=False)
        s.enqueue_request(Request(f"{U}/one"))
        assert s.next_request() is not None
        path = s._taken.path
        assert open_on(path)
    finally:
        server.stop()
    with pytest.raises(Exception, match="(?i)connect"):
        s.close("finished")
    assert s._taken is None and path.resolve() not in redis_scheduler._OPEN
    assert not open_on(path)
    assert taken_urls(tmp_path) == {f"{U}/one"}  # kept for the next crawl to queue again


@pytest.mark.parametrize("scheduler", ["bloomline", "scrapy-redis"])
def test_a_crawl_that_failed_on_redis_keeps_its_queue_without_scheduler_persist(
        tmp_path: Path, redis_server: RedisServer, scheduler: str, caplog: pytest.LogCaptureFixture) -> None:
    """SCHEDULER_PERSIST off: the close flushes the queue and the filter.
    After the dupefilter failed on Redis (here the server refused a write)
    the filter is kept for the next crawl to resume from, and the flush
    deleted the queue all the same: its requests stayed recorded as seen and
    no crawl fetched them. The queue is kept with the filter, and so is the
    journal of the requests taken and not finished."""
    import redis

    from bloomline.scrapy import RedisBloomDupeFilter

    settings = {"SCHEDULER_PERSIST": False, "DUPEFILTER_CLASS": "bloomline.scrapy.RedisBloomDupeFilter"}
    if scheduler == "bloomline":
        s = opened(tmp_path, redis_server.url, **settings)
    else:
        from scrapy.utils.test import get_crawler
        from scrapy_redis.scheduler import Scheduler

        class S(Spider):
            name = "taken"

        crawler = get_crawler(S, {"REDIS_URL": redis_server.url, "JOBDIR": str(tmp_path / "job"),
                                  "SCHEDULER_QUEUE_CLASS": "scrapy_redis.queue.FifoQueue", **settings})
        s = Scheduler.from_crawler(crawler)
        s.open(S.from_crawler(crawler))
        s.df._outages.guard_pushes(s)  # (as the dupefilter's spider_opened does, once the engine runs)
    assert isinstance(s.df, RedisBloomDupeFilter)
    for i in range(3):
        assert s.enqueue_request(Request(f"{U}/queued{i}"))
    assert s.next_request() is not None  # taken, never finished
    client = redis.Redis.from_url(redis_server.url)
    client.config_set("maxmemory", 1)
    try:
        s.enqueue_request(Request(f"{U}/refused"))  # Redis refuses the check: the crawl fails
        assert s.df.failed
        with caplog.at_level(logging.WARNING):
            s.close("bloomline_redis_unavailable")
    finally:
        client.config_set("maxmemory", 0)
    assert "queue" in caplog.text and "is kept" in caplog.text
    kept = sorted(r.decode() for r in client.keys("*"))
    assert s.queue.key in kept and len(s.queue) == 2  # the two never taken
    if scheduler == "bloomline":
        assert taken_urls(tmp_path) == {f"{U}/queued0"}  # and the one taken, for the next crawl


OFFSITE_SPIDER = """
import sys
import scrapy
from scrapy import signals

sys.path.insert(0, {tests!r})
from scrapy_site import journal_records, pending_urls


class OffsiteSpider(scrapy.Spider):
    name = "offsite"
    allowed_domains = ["127.0.0.1"]

    def __init__(self, start_url=None, dead_port=None, **kw):
        super().__init__(**kw)
        self.start_url = start_url
        self.dead_port = dead_port

    @classmethod
    def from_crawler(cls, crawler, *args, **kw):
        spider = super().from_crawler(crawler, *args, **kw)
        crawler.signals.connect(spider.idle, signal=signals.spider_idle)
        return spider

    async def start(self):
        yield scrapy.Request(self.start_url)

    def parse(self, response):
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, self.parse)
        yield scrapy.Request("http://offsite.example/elsewhere")  # refused by Scrapy's OffsiteMiddleware
        yield scrapy.Request(f"http://127.0.0.1:{{self.dead_port}}{{response.url[response.url.index('/page'):]}}")
        if response.url.endswith("/page/0"):
            twice = scrapy.Request("http://offsite.example/twice")
            yield twice  # the same object twice, refused twice
            yield twice
            yield response.follow("/missing/0", self.parse)  # 404: HttpErrorMiddleware ignores it
            yield response.follow("/redirect/1", self.parse)  # to a page already seen: the redirect is dropped
            yield scrapy.Request(f"http://127.0.0.1:{{self.dead_port}}/errback", errback=self.rescue)

    def rescue(self, failure):
        self.logger.info("rescued %s", failure.request.url)
        yield scrapy.Request(self.start_url.replace("/page/0", "/missing/rescued"), callback=self.parse)

    def idle(self):
        from pathlib import Path
        pending = set()
        for path in Path(".").rglob("*.journal"):  # (JournalScheduler's queue is empty at idle)
            pending |= pending_urls(journal_records(path.read_bytes()))
        self.logger.info("pending at idle: %d", len(pending))
"""


@pytest.mark.slow
@pytest.mark.parametrize("scheduler", ["RedisJournalScheduler", "JournalScheduler"])
def test_a_link_refused_offsite_or_whose_download_fails_is_finished(tmp_path: Path, redis_server: RedisServer,
                                                                    scheduler: str) -> None:
    """Scrapy's OffsiteMiddleware refuses a request from a request_scheduled
    handler, and the engine never enqueues it: a page with an offsite link
    waited for it forever. A request whose download fails reaches no spider
    middleware: it stayed unfinished too. Both stayed pending in the
    journal (fetched again after every kill, their count growing in a crawl
    that never closes). So did the same request refused twice, a redirect
    to a page already seen (JournalScheduler), and a failed request whose
    own errback yields a request. At idle everything is finished, under
    either scheduler, and Scrapy logs and counts as it would without them:
    failed downloads logged, 404s ignored, the errback called."""
    import re

    from conftest import free_port

    settings = (f"SCHEDULER=bloomline.scrapy.{scheduler}", "DUPEFILTER_CLASS=bloomline.scrapy.RedisBloomDupeFilter",
                f"REDIS_URL={redis_server.url}", "SCHEDULER_PERSIST=True") if scheduler.startswith("Redis") else \
        (f"SCHEDULER=bloomline.scrapy.{scheduler}", "DUPEFILTER_CLASS=bloomline.scrapy.BloomDupeFilter",
         f"JOBDIR={tmp_path / 'job'}")
    site = Site(40, tree(40, 3))
    try:
        spider = tmp_path / "offsite_spider.py"
        spider.write_text(OFFSITE_SPIDER.format(tests=str(Path(__file__).parent)))
        r = subprocess.run([sys.executable, "-m", "scrapy", "runspider", str(spider), "-a", f"start_url={site.url()}",
                            "-a", f"dead_port={free_port()}", "-s", "RETRY_ENABLED=False",
                            "-s", "LOG_LEVEL=INFO", "-s", "TELNETCONSOLE_ENABLED=False",
                            "-s", MIDDLEWARE, *(a for setting in settings for a in ("-s", setting))],
                           capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-3000:]
        assert len(site.pages()) == 40 and "'offsite/filtered': 42" in r.stderr, r.stderr[-3000:]
        assert "'downloader/exception_count': 41" in r.stderr and r.stderr.count("Error downloading") == 40
        assert "rescued http://127.0.0.1" in r.stderr and "'httperror/response_ignored_count': 2" in r.stderr
        assert re.findall(r"pending at idle: (\d+)", r.stderr) == ["0"], r.stderr[-3000:]
    finally:
        site.stop()


@pytest.mark.slow
@pytest.mark.parametrize("scheduler", ["RedisJournalScheduler", "JournalScheduler"])
def test_the_schedulers_and_the_redis_filter_run_without_a_twisted_reactor(tmp_path: Path, redis_server: RedisServer,
                                                                            scheduler: str) -> None:
    """Scrapy 2.15+ can run on asyncio alone (TWISTED_REACTOR_ENABLED=False)
    and refuses any import of Twisted's reactor: the watch for refused
    requests imported it for every link a page yielded, and
    RedisBloomDupeFilter for its health probe as the spider opened, each an
    ERROR (and no probe)."""
    from scrapy_site import JOURNAL

    settings = (f"SCHEDULER=bloomline.scrapy.{scheduler}", MIDDLEWARE,
                "DUPEFILTER_CLASS=bloomline.scrapy.RedisBloomDupeFilter", f"REDIS_URL={redis_server.url}") \
        if scheduler.startswith("Redis") else (*JOURNAL, f"JOBDIR={tmp_path / 'job'}")
    site = Site(40, tree(40, 3))
    try:
        r = crawl(tmp_path, site, *settings, "TWISTED_REACTOR_ENABLED=False")
        assert r.returncode == 0 and len(site.pages()) == 40, r.stderr[-3000:]
        assert "ERROR" not in r.stderr and "Traceback" not in r.stderr, r.stderr[-3000:]
    finally:
        site.stop()


def test_a_request_a_callback_sends_with_the_pages_meta_does_not_finish_the_page(
        tmp_path: Path, redis_server: RedisServer) -> None:
    """A request made with a copy of the response's meta (the page's journal
    id in it) and handed to engine.crawl, not yielded, was taken for a
    redirect: the page was finished as it was pushed, before the links its
    callback yields after it were kept."""
    s = opened(tmp_path, redis_server.url)
    s.enqueue_request(Request(f"{U}/page"))
    page = s.next_request()
    s.enqueue_request(Request(f"{U}/sent", meta=dict(page.meta)))
    assert taken_urls(tmp_path) == {f"{U}/page"}
    s.enqueue_request(page.replace(url=f"{U}/moved"))  # a redirect: a copy made on the way to the download
    assert taken_urls(tmp_path) == set()
    s.close("finished")


def test_a_request_unfinished_at_a_clean_close_is_kept_for_the_next_crawl(tmp_path: Path,
                                                                          redis_server: RedisServer) -> None:
    """A clean close marked every request taken as done, also a page whose
    link could not be queued (its enqueue raised): lost, with the pages only
    it links to. With SCHEDULER_PERSIST it is kept, and queued again."""
    s = opened(tmp_path, redis_server.url)
    s.enqueue_request(Request(f"{U}/page"))
    assert s.next_request() is not None  # never finished
    s.close("finished")
    assert taken_urls(tmp_path) == {f"{U}/page"}
    later = opened(tmp_path, redis_server.url)
    assert queued(later) == [f"{U}/page"]
    later.close("finished")
    assert taken_journals(tmp_path) == []


@pytest.mark.filterwarnings("ignore:Spider.log:scrapy.exceptions.ScrapyDeprecationWarning")  # (scrapy-redis's "Resuming")
def test_a_refused_crawl_keeps_the_queue_a_failed_one_kept(tmp_path: Path, redis_server: RedisServer) -> None:
    """scrapy-redis's own scheduler, SCHEDULER_PERSIST off: a crawl whose
    filter refuses to open (here: another BLOOMLINE_CAPACITY) keeps the
    filter, and its close's flush deleted the queue beside it, whose
    requests the filter records as seen. The flush is skipped."""
    from types import SimpleNamespace

    from scrapy.utils.test import get_crawler
    from scrapy_redis.scheduler import Scheduler

    class S(Spider):
        name = "taken"

    def scheduler(capacity: int) -> Any:
        crawler = get_crawler(S, {"REDIS_URL": redis_server.url, "SCHEDULER_PERSIST": False,
                                  "SCHEDULER_QUEUE_CLASS": "scrapy_redis.queue.FifoQueue",
                                  "DUPEFILTER_CLASS": "bloomline.scrapy.RedisBloomDupeFilter",
                                  "BLOOMLINE_CAPACITY": capacity})
        s = Scheduler.from_crawler(crawler)
        s.open(S.from_crawler(crawler))
        crawler.engine = SimpleNamespace(scheduler=s, pause=lambda: None)
        return s

    first = scheduler(100_000)
    for i in range(3):
        assert first.enqueue_request(Request(f"{U}/queued{i}"))
    refused = scheduler(12_345)
    assert refused.df.refused is not None
    refused.df._spider_opened(refused.spider)  # (its one ERROR line; the engine stops the crawl)
    refused.close("bloomline_settings_changed")
    assert len(refused.queue) == 3  # kept, for a crawl with the first one's settings to fetch
