"""RedisBloomDupeFilter in real crawls: Scrapy's scheduler and scrapy-redis's,
a real redis-server (killed and restarted), a 2,000-page site of 12 links a
page served from loopback."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("scrapy")

pytestmark = pytest.mark.slow  # real crawls in subprocesses: left out of the fast subset (pytest -m "not slow")
redis = pytest.importorskip("redis")

from conftest import RedisServer  # noqa: E402
from scrapy_site import Site, crawl, start_crawl, twelve_links  # noqa: E402
from scrapy.http import Request  # noqa: E402
from bloomline.redis import RedisWindowedFilter  # noqa: E402

PAGES = 2000  # (5,000, then 3,000, while CI took too long: the claims need no more)
OURS = "DUPEFILTER_CLASS=bloomline.scrapy.RedisBloomDupeFilter"
SCRAPY_REDIS = ("SCHEDULER=scrapy_redis.scheduler.Scheduler",
                "DUPEFILTER_CLASS=bloomline.scrapy.RedisBloomDupeFilter")  # scrapy-redis reads DUPEFILTER_CLASS


@pytest.fixture
def site() -> Iterator[Site]:
    s = Site(PAGES, twelve_links(PAGES))
    yield s
    s.stop()


def finish_reason(log: str) -> str:
    m = re.search(r"'finish_reason': '([^']*)'", log)
    return m.group(1) if m else ""


def our_lines(log: str, level: str) -> list[str]:
    return [line for line in log.splitlines() if f"[scrapy.dupefilters] {level}:" in line]


def stat(log: str, name: str) -> float:
    m = re.search(rf"'{re.escape(name)}': ([0-9.e+-]+)", log)
    assert m, f"no stat {name}"
    return float(m.group(1))


def assert_clean(log: str) -> None:
    """No traceback, no unretrieved task exception, no deprecation warning."""
    for bad in ("Traceback", "Task exception was never retrieved", "Engine slot not assigned", "Deprecat"):
        assert bad not in log, log[-3000:]


def test_grows_in_redis_and_fetches_the_whole_site(site: Site, tmp_path: Path, redis_server: RedisServer) -> None:
    r = crawl(tmp_path, site, OURS, f"REDIS_URL={redis_server.url}", "BLOOMLINE_CAPACITY=250",
              "BLOOMLINE_ERROR_RATE=1e-6")
    assert r.returncode == 0, r.stderr[-3000:]
    assert_clean(r.stderr)
    pages = site.pages()
    # A new page is dropped with probability under 1e-6 a check (the URLs
    # hold the site's random port, so each run draws anew): 2,000 new pages
    # expect 0.002 lost; 2 or more happens with probability about 2e-6.
    assert len(pages) >= PAGES - 1 and max(pages.values()) == 1
    grew = [line for line in our_lines(r.stderr, "INFO") if "added after" in line]
    assert len(grew) >= 3, r.stderr[-3000:]  # 250, 500, 1,000, 2,000: at least 4 stages
    # Each stage logged once (the growth was once reported twice), in order.
    numbers = [int(line.split("stage ", 1)[1].split()[0]) for line in grew]
    assert numbers == list(range(1, len(grew) + 1)), grew
    assert stat(r.stderr, "bloomline/stages") == len(grew) + 1
    assert stat(r.stderr, "bloomline/expected_fp_rate") < 1e-4
    assert abs(stat(r.stderr, "bloomline/approx_count") - PAGES) < PAGES * 0.05
    # Only first sightings in this process went to Redis: one per page.
    filtered = stat(r.stderr, "dupefilter/filtered")
    checks = stat(r.stderr, "bloomline/redis_checks")
    assert checks <= len(pages) + 2 and checks / (filtered + len(pages)) < 0.1
    # SCHEDULER_PERSIST is off: the filter is gone, and a new crawl fetches the site again.
    assert any("deleted the filter" in line for line in our_lines(r.stderr, "INFO"))
    left = redis.Redis.from_url(redis_server.url).keys("*")
    assert [k for k in left if b":ans:" not in k] == []  # (checks' kept answers expire by their TTL)


def test_persist_keeps_the_filter_and_says_so(site: Site, tmp_path: Path, redis_server: RedisServer) -> None:
    settings = (OURS, f"REDIS_URL={redis_server.url}", "SCHEDULER_PERSIST=True", "CLOSESPIDER_PAGECOUNT=300")
    r = crawl(tmp_path, site, *settings)
    assert r.returncode == 0, r.stderr[-3000:]
    first = sum(site.pages().values())
    assert any("kept the filter at Redis key 'site:dupefilter'" in line for line in our_lines(r.stderr, "INFO"))
    # (Scrapy's scheduler without a JOBDIR: the queue is not kept, and the crawl says so)
    assert any("requests still queued when this crawl stops are skipped by the next crawl" in line
               for line in our_lines(r.stderr, "WARNING"))
    r2 = crawl(tmp_path, site, *settings[:-1])
    assert r2.returncode == 0, r2.stderr[-3000:]
    attached = [line for line in our_lines(r2.stderr, "INFO") if "attached to the filter" in line]
    assert len(attached) == 1
    found = re.search(r"about ([\d,]+) requests seen", attached[0])
    count = int(found.group(1).replace(",", ""))  # type: ignore[union-attr]
    assert count >= first
    # The second crawl's start page was seen by the first: nothing fetched again.
    assert max(site.pages().values()) == 1


def test_flush_on_start_deletes_the_filter_and_the_crawl_starts_over(tmp_path: Path,
                                                                     redis_server: RedisServer) -> None:
    """SCHEDULER_FLUSH_ON_START: scrapy-redis's flush at open deleted the
    chain in Redis while the filter's chain still counted its stages, so the
    first check raised IndexError, and the crawl stopped with
    bloomline_redis_unavailable having fetched nothing. The chain is now
    read again, or made, at the first check after the flush: the crawl
    starts over and fetches every page again."""
    site = Site(300, twelve_links(300))
    try:
        settings = (*SCRAPY_REDIS, f"REDIS_URL={redis_server.url}", "SCHEDULER_PERSIST=True")
        r = crawl(tmp_path, site, *settings)
        assert r.returncode == 0, r.stderr[-3000:]
        assert len(site.pages()) == 300
        r = crawl(tmp_path, site, *settings, "SCHEDULER_FLUSH_ON_START=True")
        assert r.returncode == 0 and finish_reason(r.stderr) == "finished", r.stderr[-3000:]
        assert set(site.pages().values()) == {2}  # every page again, once
        r = crawl(tmp_path, site, *settings)  # and the filter it made is the one the next crawl resumes
        assert r.returncode == 0 and set(site.pages().values()) == {2}, r.stderr[-3000:]
    finally:
        site.stop()


def test_a_filter_left_by_a_killed_crawl_stops_the_next_crawl_without_persist(site: Site, tmp_path: Path,
                                                                              redis_server: RedisServer) -> None:
    """Scrapy's scheduler keeps its queue in memory: a crawl killed with
    SIGKILL leaves its filter (SCHEDULER_PERSIST off: deleted only at
    close) holding requests it queued and never fetched. The next crawl
    must not skip them and finish "done": it stops before its first
    request, naming the key and what to do, and leaves the filter as it
    was."""
    settings = (OURS, f"REDIS_URL={redis_server.url}")
    killed = start_crawl(tmp_path, site, *settings)
    deadline = time.monotonic() + 60
    while len(site.pages()) < 100 and time.monotonic() < deadline and killed.poll() is None:
        time.sleep(0.05)
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)
    fetched = site.pages()
    assert 100 <= len(fetched) < PAGES
    client = redis.Redis.from_url(redis_server.url)
    def stored() -> dict[bytes, bytes]:  # (checks' kept answers, which expire by their TTL, left out)
        return {k: client.dump(k) for k in client.keys("*") if b":ans:" not in k}

    before = stored()
    assert before  # the filter the killed crawl left
    r = crawl(tmp_path, site, *settings)
    assert r.returncode == 1
    (error,) = our_lines(r.stderr, "ERROR")
    assert "the filter at Redis key 'site:dupefilter' holds about" in error, error
    assert "left by a crawl that did not close" in error and "JOBDIR" in error, error
    assert finish_reason(r.stderr) == "bloomline_left_over_filter"
    assert_clean(r.stderr)
    assert site.pages() == fetched  # nothing fetched
    assert stored() == before  # nor deleted


def test_reads_scrapy_redis_connection_settings_and_key(site: Site, tmp_path: Path,
                                                        redis_server: RedisServer) -> None:
    r = crawl(tmp_path, site, OURS, "REDIS_HOST=127.0.0.1", f"REDIS_PORT={redis_server.port}",
              'REDIS_PARAMS={"socket_timeout": 3, "decode_responses": true}',
              "SCHEDULER_DUPEFILTER_KEY=crawls:%(spider)s:seen", "SCHEDULER_PERSIST=True",
              "CLOSESPIDER_PAGECOUNT=50")
    assert r.returncode == 0, r.stderr[-3000:]
    keys = sorted(k.decode() for k in redis.Redis(port=redis_server.port).keys("*"))
    assert keys and all(k.startswith("{crawls:site:seen}:") for k in keys), keys


def test_bloomline_settings_override_scrapy_redis_ones(site: Site, tmp_path: Path, redis_server: RedisServer) -> None:
    r = crawl(tmp_path, site, OURS, "REDIS_URL=redis://127.0.0.1:1/0", f"BLOOMLINE_REDIS_URL={redis_server.url}",
              "SCHEDULER_DUPEFILTER_KEY=ignored:%(spider)s", "BLOOMLINE_REDIS_KEY=mine", "SCHEDULER_PERSIST=True",
              "CLOSESPIDER_PAGECOUNT=50")
    assert r.returncode == 0, r.stderr[-3000:]
    keys = sorted(k.decode() for k in redis.Redis.from_url(redis_server.url).keys("*"))
    assert keys and all(k.startswith("{mine}:") for k in keys), keys


@pytest.mark.parametrize(
    ("setting", "shown"),
    [
        ("BLOOMLINE_CAPACITY=abc", "BLOOMLINE_CAPACITY must be an integer >= 1, got 'abc'"),
        ("BLOOMLINE_ERROR_RATE=1.5", "BLOOMLINE_ERROR_RATE must be in (0, 1), got '1.5'"),
        ("BLOOMLINE_REDIS_KEY=crawl:100%", "BLOOMLINE_REDIS_KEY must be a %-format"),
        ("BLOOMLINE_LAYOUT=wide", "BLOOMLINE_LAYOUT must be 'blocked' or 'standard', got 'wide'"),
        ("BLOOMLINE_REDIS_RETRY_TIMEOUT=-1", "BLOOMLINE_REDIS_RETRY_TIMEOUT must be in [0, 86400], got '-1'"),
        ("SCHEDULER_PERSIST=maybe", "SCHEDULER_PERSIST must be a boolean, got 'maybe'"),
    ],
)
def test_a_bad_setting_stops_the_crawl_before_its_first_request(site: Site, tmp_path: Path, redis_server: RedisServer,
                                                                setting: str, shown: str) -> None:
    r = crawl(tmp_path, site, OURS, f"REDIS_URL={redis_server.url}", setting)
    assert r.returncode == 1
    errors = our_lines(r.stderr, "ERROR")
    assert len(errors) == 1 and shown in errors[0], r.stderr[-3000:]
    assert finish_reason(r.stderr) == "bloomline_bad_settings"
    assert_clean(r.stderr)
    assert not site.pages()


def test_resuming_with_other_settings_names_them_as_written(site: Site, tmp_path: Path,
                                                            redis_server: RedisServer) -> None:
    base = (OURS, f"REDIS_URL={redis_server.url}", "SCHEDULER_PERSIST=True", "CLOSESPIDER_PAGECOUNT=20")
    assert crawl(tmp_path, site, *base, "BLOOMLINE_ERROR_RATE=1e-4", "BLOOMLINE_CAPACITY=1000").returncode == 0
    r = crawl(tmp_path, site, *base, "BLOOMLINE_ERROR_RATE=0.001", "BLOOMLINE_CAPACITY=1000")
    assert r.returncode == 1
    (error,) = our_lines(r.stderr, "ERROR")
    assert "was made with BLOOMLINE_CAPACITY=1000, BLOOMLINE_ERROR_RATE=0.0001" in error, error
    assert "this crawl has BLOOMLINE_CAPACITY='1000', BLOOMLINE_ERROR_RATE='0.001'" in error, error
    assert_clean(r.stderr)


@pytest.mark.parametrize("reactor", ["", "twisted.internet.epollreactor.EPollReactor"])
def test_unreachable_redis_at_start_fails_the_crawl(site: Site, tmp_path: Path, reactor: str) -> None:
    """Exit status 1 also under a Twisted reactor other than asyncio's, where
    the engine stops before the close's own callback has run."""
    from conftest import free_port

    r = crawl(tmp_path, site, OURS, f"REDIS_URL=redis://127.0.0.1:{free_port()}/0",
              "BLOOMLINE_REDIS_RETRY_TIMEOUT=1", *([f"TWISTED_REACTOR={reactor}"] if reactor else []))
    assert r.returncode == 1
    assert finish_reason(r.stderr) == "bloomline_redis_unavailable"
    assert len(our_lines(r.stderr, "ERROR")) == 1
    assert_clean(r.stderr)
    assert not site.pages()


# ---- Redis killed mid-crawl -----------------------------------------------------------------


def durable_redis(tmp: Path, port: int | None = None) -> RedisServer:
    """A redis-server that writes every command to its append-only file
    before answering, so a restart after SIGKILL has all of it."""
    tmp.mkdir(exist_ok=True)
    return RedisServer(tmp, "--appendonly", "yes", "--appendfsync", "always", port=port)


# Pages fetched before Redis is killed: early enough that many of the site's
# pages are still to be found (checks the front filter cannot answer go to
# Redis). After 1,000 of 2,000 pages, twelve links a page had found all but a
# few, and a fast run found the last of them before the kill showed: no check
# went to Redis, and the crawl finished as if nothing had happened.
KILL_AFTER_PAGES = 300


def kill_redis_mid_crawl(site: Site, tmp: Path, server: RedisServer, settings: tuple[str, ...]) -> str:
    """Start a crawl, SIGKILL Redis after KILL_AFTER_PAGES pages, wait for
    the crawl to end (bounded), return its log."""
    log = tmp / "crawl.log"
    proc = start_crawl(tmp, site, *settings, log=log)
    deadline = time.monotonic() + 120
    while sum(site.pages().values()) < KILL_AFTER_PAGES and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.005)
    assert proc.poll() is None, log.read_text()[-3000:]
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait(timeout=10)
    try:
        code = proc.wait(timeout=120)  # a hang fails here
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    text = log.read_text()
    assert code == 1, text[-3000:]
    return text


@pytest.mark.parametrize("scheduler", ["scrapy", "scrapy-redis"])
def test_redis_killed_mid_crawl_stops_it_loudly_and_a_restart_finishes_the_site(
        site: Site, tmp_path: Path, scheduler: str) -> None:
    server = durable_redis(tmp_path / "redis")
    try:
        settings = (f"REDIS_URL={server.url}", "BLOOMLINE_REDIS_RETRY_TIMEOUT=2", "SCHEDULER_PERSIST=True",
                    f"JOBDIR={tmp_path / 'job'}")
        settings += SCRAPY_REDIS if scheduler == "scrapy-redis" else (OURS,)
        log = kill_redis_mid_crawl(site, tmp_path, server, settings)
        assert finish_reason(log) == "bloomline_redis_unavailable"
        (error,) = our_lines(log, "ERROR")
        assert "unreachable" in error and "bloomline_redis_unavailable" in error
        assert "Task exception was never retrieved" not in log
        if scheduler == "scrapy":
            assert "Traceback" not in log, log[-3000:]
        before = site.pages()
        assert KILL_AFTER_PAGES <= len(before) < PAGES and max(before.values()) == 1
        server = durable_redis(tmp_path / "redis", port=server.port)
        r = crawl(tmp_path, site, *settings)
        assert r.returncode == 0, r.stderr[-3000:]
        pages = site.pages()
        missing = sorted(set(f"/page/{i}" for i in range(PAGES)) - set(pages))
        # scrapy-redis's pop removes the request before its reply: one the
        # server popped in the instant it was killed never reaches the crawl
        # (its queue is at most once), nor do the pages only it links to; our
        # filter's part, including the push that follows a check, is kept.
        # Scrapy's scheduler with a JOBDIR misses nothing.
        assert len(site.lost()) <= 1 and (scheduler == "scrapy-redis" or not missing), missing
        # Fetched twice only where a check was sent and not answered (at most
        # a few) or a resumed request was in flight at the kill.
        assert sum(n - 1 for n in pages.values()) <= 20, [p for p, n in pages.items() if n > 1]
    finally:
        server.stop()


# ---- moving in from scrapy-redis ------------------------------------------------------------------


def test_a_crawl_switches_from_scrapy_redis_own_dupefilter_mid_way(site: Site, tmp_path: Path,
                                                                   redis_server: RedisServer) -> None:
    """scrapy-redis's own dupefilter (a SET of fingerprints) on
    part of the site, its queue and set kept; `bloomline redis import-set`;
    the crawl goes on with DUPEFILTER_CLASS set to ours. Every page fetched,
    none twice."""
    pytest.importorskip("scrapy_redis")
    persist = ("SCHEDULER=scrapy_redis.scheduler.Scheduler", f"REDIS_URL={redis_server.url}",
               "SCHEDULER_PERSIST=True")
    first = crawl(tmp_path, site, *persist, "DUPEFILTER_CLASS=scrapy_redis.dupefilter.RFPDupeFilter",
                  "CLOSESPIDER_PAGECOUNT=1000")
    assert first.returncode == 0, first.stderr[-3000:]
    assert finish_reason(first.stderr) == "closespider_pagecount"
    before = site.pages()
    assert 1000 <= len(before) < PAGES and max(before.values()) == 1
    client = redis.Redis.from_url(redis_server.url)
    assert client.type("site:dupefilter") == b"set"
    assert client.zcard("site:requests") > 0  # its frontier waits in Redis (a priority queue: a sorted set)
    members = client.scard("site:dupefilter")
    moved = subprocess.run([sys.executable, "-m", "bloomline", "redis", "import-set", redis_server.url,
                            "site:dupefilter"], capture_output=True, text=True, timeout=300)
    assert moved.returncode == 0, moved.stderr
    assert f"imported {members:,} fingerprints" in moved.stdout and "every fingerprint" in moved.stdout
    second = crawl(tmp_path, site, *persist, OURS)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "Traceback" not in second.stderr  # (scrapy-redis's scheduler warns of Scrapy's deprecations itself)
    attached = [line for line in our_lines(second.stderr, "INFO") if "attached" in line]
    assert attached and "imported from the set 'site:dupefilter'" in attached[0], second.stderr[-3000:]
    pages = site.pages()
    # The switched crawl fetched only pages the first had not: its start
    # page and every queued request already seen were recognised by
    # scrapy-redis's fingerprint rule. (A new page is dropped with
    # probability under 1e-4 a check: at most 2 of the ~1,000 left.)
    assert max(pages.values()) == 1, [p for p, n in pages.items() if n > 1]
    assert len(pages) >= PAGES - 2
    assert stat(second.stderr, "downloader/response_count") == len(pages) - len(before)


# ---- many processes -----------------------------------------------------------------------------


def test_two_processes_with_scrapy_redis_fetch_every_page_exactly_once(site: Site, tmp_path: Path,
                                                                        redis_server: RedisServer) -> None:
    # A small first stage, so that the chain grows while both crawl; a rate
    # of 1e-7, so that "every page" is a fair claim: at the default 1e-4 a
    # crawl of 5,000 pages through 3 stages drops one page to a false
    # positive in about 8% of runs (a simulation of this chain: 0.077
    # false positives a crawl; fewer for this site's 2,000), which a Bloom
    # filter is allowed to do.
    settings = (*SCRAPY_REDIS, f"REDIS_URL={redis_server.url}", "SCHEDULER_PERSIST=True",
                "SCHEDULER_IDLE_BEFORE_CLOSE=1", "BLOOMLINE_CAPACITY=1000", "BLOOMLINE_ERROR_RATE=1e-7")
    logs = [tmp_path / f"crawl{i}.log" for i in range(2)]
    dirs = [tmp_path / f"p{i}" for i in range(2)]
    procs = []
    for d, log in zip(dirs, logs):
        d.mkdir()
        procs.append(start_crawl(d, site, *settings, log=log))
        # The second starts once the shared queue is busy, so that both crawl.
        deadline = time.monotonic() + 60
        while len(procs) == 1 and sum(site.pages().values()) < 200 and time.monotonic() < deadline:
            time.sleep(0.01)
    for p, log in zip(procs, logs):
        try:
            assert p.wait(timeout=300) == 0, log.read_text()[-3000:]
        except subprocess.TimeoutExpired:
            p.kill()
            raise
        assert "cannot watch the pushes" not in log.read_text()  # the filter found scrapy-redis's queue
    pages = site.pages()
    missing = sorted(set(range(PAGES)) - {int(p.rsplit("/", 1)[1]) for p in pages})
    assert not missing and max(pages.values()) == 1, (missing, [p for p, n in pages.items() if n > 1])
    # Both processes crawled (the shared queue fed both).
    assert all(stat(log.read_text(), "downloader/response_count") > 0 for log in logs)


# ---- the filter object --------------------------------------------------------------------------


def test_the_scrapy_redis_interface(redis_server: RedisServer, tmp_path: Path) -> None:
    import logging

    from scrapy import Request, Spider
    from scrapy.utils.test import get_crawler

    from bloomline.scrapy import RedisBloomDupeFilter
    from bloomline.scrapy.dupefilter import logger

    class S(Spider):
        name = "iface"

    crawler = get_crawler(S, {"REDIS_URL": redis_server.url, "JOBDIR": str(tmp_path)})
    crawler.spider = S.from_crawler(crawler)
    df = RedisBloomDupeFilter.from_spider(crawler.spider)
    assert df.key == "iface:dupefilter"
    assert logger.name == "scrapy.dupefilters" and isinstance(logger, logging.Logger)
    req = Request("http://127.0.0.1/a")
    fp = crawler.request_fingerprinter.fingerprint(req)
    assert df.request_fingerprint(req) == fp.hex()
    assert df.request_seen(req) is False and df.request_seen(req) is True
    assert df.request_seen(Request("http://127.0.0.1/b")) is False
    # The front filter answered the repeat: two checks went to Redis, not three.
    assert df.redis_checks == 2
    r = redis.Redis.from_url(redis_server.url)
    assert any(b":ans:" not in k for k in r.keys("*"))
    df.clear()
    assert all(b":ans:" in k for k in r.keys("*"))


# ---- recrawls (BLOOMLINE_RECRAWL_AFTER) through Redis ----------------------------------------------

RECRAWL = 24.0  # seconds: a whole crawl of the small site and the start of the next fit well inside it (5 s here, 2x that under CI's load)
SPAN = RECRAWL / 4  # a generation (RECRAWL_GENERATIONS = 4)


def server_time(client: object) -> float:
    seconds, micros = client.time()  # type: ignore[attr-defined]
    return float(seconds) + micros / 1e6


def wait_for_server_time(client: object, when: float) -> None:
    """Sleep until the server's clock (the one the window follows) passes `when`."""
    while (left := when - server_time(client)) > 0:
        time.sleep(min(left, 0.5) + 0.01)


def test_recrawl_after_two_crawls_share_the_window_by_the_servers_clock(tmp_path: Path,
                                                                        redis_server: RedisServer) -> None:
    """Three crawls of a 100-page site sharing one recrawl filter in Redis
    (SCHEDULER_PERSIST): the second, at once and with its own clock a day
    ahead, fetches nothing again (the server's clock decides); the third,
    once every generation the first wrote to has left the window, fetches
    every page again, once."""
    site = Site(100, twelve_links(100))
    client = redis.Redis.from_url(redis_server.url)
    try:
        common = (OURS, f"REDIS_URL={redis_server.url}", "SCHEDULER_PERSIST=True", f"BLOOMLINE_RECRAWL_AFTER={RECRAWL}",
                  "BLOOMLINE_CAPACITY=1000")
        began = server_time(client)
        r1 = crawl(tmp_path, site, *common)
        assert r1.returncode == 0, r1.stderr[-3000:]
        assert_clean(r1.stderr)
        first = site.pages()
        assert len(first) == 100 and max(first.values()) == 1
        ended = server_time(client)
        keys = {k.decode() for k in client.keys("*")}
        assert keys and all(k.startswith("{site:dupefilter:recrawl}:") for k in keys), keys  # no chain made
        assert any("kept the recrawl filter at Redis key 'site:dupefilter:recrawl'" in line
                   for line in our_lines(r1.stderr, "INFO"))
        assert stat(r1.stderr, "bloomline/stages") >= 1  # live generations (the summary counts them)
        assert abs(stat(r1.stderr, "bloomline/approx_count") - 100) <= 5
        # No front filter: every check, new or not, went to Redis.
        assert stat(r1.stderr, "bloomline/redis_checks") == stat(r1.stderr, "dupefilter/filtered") + 100

        r2 = crawl(tmp_path, site, *common, time_shift=86400.0)
        assert r2.returncode == 0, r2.stderr[-3000:]
        # The start page was first let through after `began`: still inside its window.
        assert server_time(client) < began + RECRAWL, "the machine was too slow for this window"
        assert site.pages() == first  # nothing fetched again, a day ahead by the crawl's own clock
        assert any("attached to the recrawl filter" in line for line in our_lines(r2.stderr, "INFO"))

        # Every page was first let through by `ended`, in a generation at
        # most floor(ended / SPAN); it has left the window once 5 later ones began.
        wait_for_server_time(client, (int(ended // SPAN) + 5) * SPAN + 0.05)
        r3 = crawl(tmp_path, site, *common)
        assert r3.returncode == 0, r3.stderr[-3000:]
        pages = site.pages()
        assert len(pages) == 100 and set(pages.values()) == {2}, pages  # every page again, once
    finally:
        site.stop()


def test_recrawl_after_refuses_a_key_of_the_other_kind(tmp_path: Path, redis_server: RedisServer) -> None:
    """A dupefilter key with a chain (a crawl without the setting) is
    refused by a crawl with BLOOMLINE_RECRAWL_AFTER, and a recrawl filter
    by one without it: one ERROR line naming the setting and its value,
    nothing fetched, the other filter left as it was."""
    site = Site(50, twelve_links(50))
    client = redis.Redis.from_url(redis_server.url)
    try:
        base = (OURS, f"REDIS_URL={redis_server.url}", "SCHEDULER_PERSIST=True", "CLOSESPIDER_PAGECOUNT=5")
        assert crawl(tmp_path, site, *base, "BLOOMLINE_REDIS_KEY=once").returncode == 0
        assert crawl(tmp_path, site, *base, "BLOOMLINE_REDIS_KEY=again", "BLOOMLINE_RECRAWL_AFTER=600").returncode == 0
        # A windowed filter made by hand where a crawl's recrawl filter would be, with the crawl's settings
        # but its own number of generations.
        RedisWindowedFilter(client, "odd:recrawl", 100_000, 1e-4, window=600, generations=2)
        before, stored = site.pages(), sorted(client.keys("*"))
        for key, recrawl, shown in (
                ("once", ("BLOOMLINE_RECRAWL_AFTER=600",),
                 "BLOOMLINE_RECRAWL_AFTER=600.0, but Redis key 'once' holds a filter made by a crawl without it"),
                ("again", (), "Redis key 'again' has a recrawl filter at 'again:recrawl', made by a crawl with "
                              "BLOOMLINE_RECRAWL_AFTER=600.0; this crawl has none"),
                ("odd", ("BLOOMLINE_RECRAWL_AFTER=600",),
                 "Redis key 'odd:recrawl' holds a windowed filter of 2 generations, not a crawl's recrawl filter"),
                ("long", ("BLOOMLINE_RECRAWL_AFTER=1e13",),
                 "BLOOMLINE_RECRAWL_AFTER must be at most 1e+12 seconds for a recrawl filter in Redis")):
            r = crawl(tmp_path, site, *base, f"BLOOMLINE_REDIS_KEY={key}", *recrawl)
            assert r.returncode == 1, r.stderr[-3000:]
            errors = our_lines(r.stderr, "ERROR")
            assert len(errors) == 1 and shown in errors[0], r.stderr[-3000:]
            assert finish_reason(r.stderr) == "bloomline_bad_settings"
            assert_clean(r.stderr)
        assert site.pages() == before
        assert sorted(k for k in client.keys("*") if b":ans:" not in k) == \
            [k for k in stored if b":ans:" not in k]  # neither filter touched
    finally:
        site.stop()


def test_recrawl_after_on_the_module_backend(module_server: RedisServer) -> None:
    """BLOOMLINE_REDIS_BACKEND=module (and 'auto' where the module is
    loaded) keeps the recrawl filter on the module's commands."""
    from scrapy.settings import Settings

    from bloomline.scrapy import RedisBloomDupeFilter

    base = {"REDIS_URL": module_server.url, "BLOOMLINE_RECRAWL_AFTER": 60, "SCHEDULER_PERSIST": True}
    for backend, key in (("module", "m"), ("auto", "a")):
        df = RedisBloomDupeFilter.from_settings(Settings({**base, "BLOOMLINE_REDIS_BACKEND": backend,
                                                          "BLOOMLINE_REDIS_KEY": key}))
        assert df.seen.backend == "module"  # type: ignore[union-attr]
        assert df.request_seen(Request("http://example.com/")) is False
        assert df.request_seen(Request("http://example.com/")) is True
        df.close()


def test_recrawl_after_settings_the_redis_filter_cannot_honour_are_refused(redis_server: RedisServer) -> None:
    """A recrawl filter made with another window, and a filter imported
    from scrapy-redis's set (its fingerprints have no times): each a
    ValueError naming the setting and the value."""
    from scrapy.settings import Settings

    from bloomline import ScalableBloomFilter
    from bloomline.redis import RedisStages
    from bloomline.scrapy import RedisBloomDupeFilter

    base = {"REDIS_URL": redis_server.url, "BLOOMLINE_RECRAWL_AFTER": 60, "SCHEDULER_PERSIST": True}
    df = RedisBloomDupeFilter.from_settings(Settings({**base, "BLOOMLINE_REDIS_KEY": "w"}))
    assert df.request_seen(Request("http://example.com/")) is False
    df.close()
    with pytest.raises(ValueError, match=re.escape("the recrawl filter at Redis key 'w:recrawl' was made with "
                                                   "BLOOMLINE_RECRAWL_AFTER=60.0, this crawl has 90.0")):
        RedisBloomDupeFilter.from_settings(Settings({**base, "BLOOMLINE_REDIS_KEY": "w",
                                                     "BLOOMLINE_RECRAWL_AFTER": 90}))
    # As `bloomline redis import-set` leaves a chain (redis/_travel's import_set writes these fields).
    stages = RedisStages(redis_server.url, "imported")
    ScalableBloomFilter(1000, 0.001, store=stages).add(b"x" * 20)
    stages.set_info(fingerprints="scrapy-redis", imported_from="site:dupefilter")
    with pytest.raises(ValueError, match=re.escape("BLOOMLINE_RECRAWL_AFTER=60.0, but Redis key 'imported' holds "
                                                   "fingerprints imported from scrapy-redis's set 'site:dupefilter'")):
        RedisBloomDupeFilter.from_settings(Settings({**base, "BLOOMLINE_REDIS_KEY": "imported"}))


def test_recrawl_after_a_request_spilled_in_an_outage_is_rechecked_in_the_window(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The outage machine on a recrawl filter, Redis killed and restarted
    (append-only, so it keeps the window): a request whose check met the
    outage is fetched once Redis is back and recorded by the filter's own
    add, which does not refresh it (its window still runs from its first
    add, so it is new again then); a request spilled before its check is
    checked against the window when it comes back."""
    from types import SimpleNamespace

    from scrapy import Spider

    from bloomline.scrapy import RedisBloomDupeFilter

    server = durable_redis(tmp_path / "redis")
    window = 4.0  # (the outage and the restart, about 0.2 s, must end inside the window less the sleep)
    crawled: list[Request] = []
    engine = SimpleNamespace(pause=lambda: None, unpause=lambda: None, crawl=crawled.append)
    try:
        client = redis.Redis.from_url(server.url)
        df = RedisBloomDupeFilter(server.url, "out:dupefilter", spill_dir=str(tmp_path / "spill"), recrawl_after=window,
                                  capacity=1000, retry_timeout_s=60)
        df.crawler = SimpleNamespace(engine=engine, stats=None)
        monkeypatch.setattr(df._outages, "_schedule", lambda delay: None)  # the probe is run by hand below
        df._opened(Spider(name="out"))
        early, late = Request("http://example.com/early"), Request("http://example.com/late")
        assert df.request_seen(early) is False
        first = server_time(client)  # `early` sits in generation floor(first / span) or an earlier one
        time.sleep(1.5)  # more than a generation (1 s): a refresh now would keep it past the check below
        server.stop()
        assert df.request_seen(early) is True and df._outages.active  # spilled: its check met the outage
        assert df.request_seen(late) is True  # spilled unchecked
        server = durable_redis(tmp_path / "redis", port=server.port)
        df._outages._probe()  # Redis is back: the spill is rechecked
        assert not df._outages.active
        assert [(r.url, r.dont_filter) for r in crawled] == [(early.url, True), (late.url, False)]
        assert df.request_seen(late) is False and df.request_seen(late) is True  # checked in the window
        assert df.request_seen(early) is True  # recorded, still inside its window
        wait_for_server_time(client, (int(first // (window / 4)) + 5) * (window / 4) + 0.05)
        assert df.request_seen(early) is False  # new again: the recheck did not restart its window
        assert all(k.startswith(b"{out:dupefilter:recrawl}:") for k in client.keys("*"))
        df.close()
    finally:
        server.stop()


def test_a_crawl_killed_while_it_hands_on_its_spill_loses_no_request(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests kept in the spill journal during an outage are handed to the
    engine when Redis is back. A process that dies at that moment (here:
    the engine's crawl raises, as a kill would stop it) must leave the
    request in the journal, so that the next crawl of the spider hands it
    on; it used to be marked done first, and lost."""
    from types import SimpleNamespace

    from scrapy import Spider

    from bloomline.scrapy import RedisBloomDupeFilter

    class Killed(BaseException):
        pass

    def dies(request: Request) -> None:
        raise Killed

    def opened(crawl: Any) -> RedisBloomDupeFilter:
        df = RedisBloomDupeFilter(server.url, "kill:dupefilter", spill_dir=str(tmp_path / "spill"), capacity=1000,
                                  retry_timeout_s=60)
        df.crawler = SimpleNamespace(engine=SimpleNamespace(pause=lambda: None, unpause=lambda: None, crawl=crawl),
                                     stats=None)
        monkeypatch.setattr(df._outages, "_schedule", lambda delay: None)  # the probe is run by hand below
        df._opened(Spider(name="kill"))
        return df

    server = durable_redis(tmp_path / "redis")
    try:
        first = opened(dies)
        server.stop()
        kept = Request("http://example.com/kept")
        assert first.request_seen(kept) is True and first._outages.active  # spilled
        server = durable_redis(tmp_path / "redis", port=server.port)
        with pytest.raises(Killed):
            first._outages._probe()  # Redis is back: handing the request on, the process dies
        from bloomline.scrapy._owners import OPEN

        spill = first._outages._spill
        assert spill is not None
        spill.release()  # (what the death lets go of: its file, as it is, and this process's hold on it)
        OPEN.discard(spill.path.resolve())
        crawled: list[Request] = []
        opened(crawled.append)  # the next crawl of the spider
        assert [r.url for r in crawled] == [kept.url]
    finally:
        server.stop()


def test_recrawl_after_with_scrapy_redis_scheduler_deletes_the_window_at_close(redis_server: RedisServer) -> None:
    """SCHEDULER_PERSIST off: scrapy-redis's scheduler calls clear() at
    close, which deletes the recrawl filter (meta, ring, kept answers)."""
    pytest.importorskip("scrapy_redis")
    from scrapy import Spider
    from scrapy.utils.test import get_crawler
    from scrapy_redis.scheduler import Scheduler as RedisScheduler

    from bloomline.scrapy import RedisBloomDupeFilter

    class S(Spider):
        name = "sr"

    crawler = get_crawler(S, {"DUPEFILTER_CLASS": "bloomline.scrapy.RedisBloomDupeFilter",
                              "REDIS_URL": redis_server.url, "SCHEDULER_PERSIST": False,
                              "BLOOMLINE_RECRAWL_AFTER": 600})
    spider = S.from_crawler(crawler)
    scheduler = RedisScheduler.from_crawler(crawler)
    scheduler.open(spider)
    assert isinstance(scheduler.df, RedisBloomDupeFilter) and scheduler.df.recrawl_key == "sr:dupefilter:recrawl"
    assert not scheduler.df.request_seen(Request("http://example.com")) and scheduler.df.request_seen(
        Request("http://example.com"))
    client = redis.Redis.from_url(redis_server.url)
    assert client.keys("{sr:dupefilter:recrawl}:w:*")
    scheduler.close("finished")
    assert not client.keys("{sr:dupefilter:recrawl}:*")


def test_recrawl_after_a_generation_gone_from_redis_fails_the_crawl(redis_server: RedisServer, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    """A live generation's bits deleted (as eviction would): the next check
    is refused (MissingKeyError), never answered from an empty generation;
    the request is spilled, not dropped, and the crawl fails loudly, as the
    chain's does."""
    from scrapy import Spider

    from bloomline.scrapy import RedisBloomDupeFilter

    df = RedisBloomDupeFilter(redis_server.url, "gone:dupefilter", spill_dir=str(tmp_path), recrawl_after=600.0,
                              capacity=1000)
    monkeypatch.setattr(df._outages, "_schedule", lambda delay: None)
    df._opened(Spider(name="gone"))
    assert df.request_seen(Request("http://example.com/a")) is False
    client = redis.Redis.from_url(redis_server.url)
    (bits,) = client.keys("{gone:dupefilter:recrawl}:w:bits:*")
    client.delete(bits)
    with caplog.at_level("ERROR", logger="scrapy.dupefilters"):
        assert df.request_seen(Request("http://example.com/a")) is True  # kept to check later, not fetched now
    assert df.failed
    (error,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert "refused a check" in error and bits.decode() in error and "is gone" in error, error
    assert list(tmp_path.glob("gone_dupefilter-*.unchecked.journal"))
    df.close()


def test_a_project_without_scrapy_cfg_spills_under_dot_scrapy(redis_server: Any, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """SCRAPY_SETTINGS_MODULE set by hand and no scrapy.cfg: Scrapy's
    data_path has no project data dir and raises NotConfigured; the filter
    starts, its spill directory where Scrapy puts data outside a project."""
    from scrapy.settings import Settings

    from bloomline.scrapy import RedisBloomDupeFilter

    (tmp_path / "someproject").mkdir()
    (tmp_path / "someproject" / "__init__.py").write_text("")
    (tmp_path / "someproject" / "settings.py").write_text("BOT_NAME = 'someproject'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SCRAPY_SETTINGS_MODULE", "someproject.settings")
    df = RedisBloomDupeFilter.from_settings(Settings({"REDIS_URL": redis_server.url, "BLOOMLINE_REDIS_KEY": "nocfg"}))
    try:
        assert df._outages.spill_dir == Path(".scrapy", "bloomline")
    finally:
        df.close("finished")
