"""Real Scrapy crawls (scrapy runspider, in a subprocess) of a generated site
served from loopback, counting fetches on the server side."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("scrapy")

PAGES = 2500


def links(i: int) -> list[int]:
    """Cycles and repeats: every page is reachable from 0 in several ways."""
    return sorted({(i + 1) % PAGES, (2 * i + 1) % PAGES, (7 * i + 3) % PAGES, 0, i})


class Site:
    """A page counts as fetched when its response is sent. Closing the gate
    holds every new request unanswered (and uncounted) until it opens;
    requests held across an epoch change are dropped unanswered."""

    def __init__(self) -> None:
        self.hits: collections.Counter[str] = collections.Counter()
        self.lock = threading.Lock()
        self.gate = threading.Event()
        self.gate.set()
        self.epoch = 0
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                epoch = site.epoch
                if not site.gate.wait(timeout=60) or site.epoch != epoch:
                    return  # held, and its crawler was killed meanwhile: never answered
                with site.lock:
                    site.hits[self.path] += 1
                if self.path.startswith("/page/"):
                    i = int(self.path.rsplit("/", 1)[1])
                    body = "".join(f'<a href="/page/{j}">p{j}</a> ' for j in links(i))
                    data = f"<html><body><h1>{i}</h1>{body}</body></html>".encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                else:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str = "/page/0") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def pages(self) -> collections.Counter[str]:
        with self.lock:
            return collections.Counter({k: v for k, v in self.hits.items() if k.startswith("/page/")})

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def site() -> Iterator[Site]:
    s = Site()
    yield s
    s.stop()


SPIDER = '''
import scrapy

class SiteSpider(scrapy.Spider):
    name = "site"

    def __init__(self, start_url=None, mode="crawl", **kw):
        super().__init__(**kw)
        self.start_url = start_url
        self.mode = mode

    async def start(self):
        # A filtered start request (Scrapy's start_urls default to
        # dont_filter=True), so that the start page counts like any other.
        yield scrapy.Request(self.start_url)

    def parse(self, response):
        if self.mode == "dont_filter":
            # the same page twice with dont_filter, then once normally
            if response.meta.get("step") is None:
                for step in ("a", "b"):
                    yield response.request.replace(dont_filter=True, meta={"step": step})
            elif response.meta["step"] == "b":
                yield scrapy.Request(response.url, meta={"step": "c"})
            return
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, self.parse)
'''


def crawl(tmp: Path, site: Site, *settings: str, mode: str = "crawl", timeout: float = 600) -> subprocess.CompletedProcess[str]:
    spider = tmp / "site_spider.py"
    spider.write_text(SPIDER)
    cmd = [sys.executable, "-m", "scrapy", "runspider", str(spider), "-a", f"start_url={site.url()}", "-a", f"mode={mode}",
           "-s", "LOG_LEVEL=INFO", "-s", "TELNETCONSOLE_ENABLED=False", "-s", "ROBOTSTXT_OBEY=False",
           "-s", "CONCURRENT_REQUESTS=16", "-s", "RETRY_ENABLED=False"]
    for s in settings:
        cmd += ["-s", s]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=tmp, env=os.environ.copy())


def test_bloom_dupefilter_fetches_every_page_once_like_rfp(site: Site, tmp_path: Path) -> None:
    r = crawl(tmp_path, site, "DUPEFILTER_CLASS=bloomline.scrapy.BloomDupeFilter")
    assert r.returncode == 0, r.stderr[-3000:]
    ours = site.pages()
    assert len(ours) == PAGES and max(ours.values()) == 1
    assert "'dupefilter/filtered'" in r.stderr
    site.hits.clear()
    r2 = crawl(tmp_path, site, "DUPEFILTER_CLASS=scrapy.dupefilters.RFPDupeFilter")
    assert r2.returncode == 0, r2.stderr[-3000:]
    assert set(site.pages()) == set(ours)


def test_small_capacity_grows_and_logs(site: Site, tmp_path: Path) -> None:
    r = crawl(tmp_path, site, "DUPEFILTER_CLASS=bloomline.scrapy.BloomDupeFilter", "BLOOMLINE_CAPACITY=200",
              "BLOOMLINE_ERROR_RATE=0.0001")
    assert r.returncode == 0, r.stderr[-3000:]
    pages = site.pages()
    assert len(pages) >= PAGES - 1 and max(pages.values()) == 1  # growth keeps the rate under 1e-4
    assert "BloomDupeFilter: grew to" in r.stderr


def test_dont_filter_requests_are_neither_checked_nor_recorded(site: Site, tmp_path: Path) -> None:
    r = crawl(tmp_path, site, "DUPEFILTER_CLASS=bloomline.scrapy.BloomDupeFilter", mode="dont_filter")
    assert r.returncode == 0, r.stderr[-3000:]
    # start (recorded), a and b (dont_filter: fetched although seen), c (a
    # normal request for the start page: filtered, since it was recorded by
    # the start request, not by a or b)
    assert site.pages()["/page/0"] == 3


def test_jobdir_pause_and_resume(site: Site, tmp_path: Path) -> None:
    job = tmp_path / "job"
    common = ("DUPEFILTER_CLASS=bloomline.scrapy.BloomDupeFilter", f"JOBDIR={job}")
    r1 = crawl(tmp_path, site, *common, "CLOSESPIDER_PAGECOUNT=600")
    assert r1.returncode == 0, r1.stderr[-3000:]
    first = site.pages()
    assert 600 <= sum(first.values()) < PAGES
    assert list(job.glob("bloomline-seen.*.blf"))
    r2 = crawl(tmp_path, site, *common)
    assert r2.returncode == 0, r2.stderr[-3000:]
    total = site.pages()
    assert max(total.values()) == 1  # no page fetched twice across the runs
    assert len(total) == PAGES  # none missed


JOURNAL = ("DUPEFILTER_CLASS=bloomline.scrapy.BloomDupeFilter", "SCHEDULER=bloomline.scrapy.JournalScheduler",
           'SPIDER_MIDDLEWARES={"bloomline.scrapy.JournalDoneMiddleware": 0}')


def start_crawl(tmp: Path, site: Site, *settings: str) -> subprocess.Popen[bytes]:
    spider = tmp / "site_spider.py"
    spider.write_text(SPIDER)
    cmd = [sys.executable, "-m", "scrapy", "runspider", str(spider), "-a", f"start_url={site.url()}",
           "-s", "LOG_LEVEL=INFO", "-s", "TELNETCONSOLE_ENABLED=False", "-s", "CONCURRENT_REQUESTS=8",
           "-s", "RETRY_ENABLED=False"]
    for s in settings:
        cmd += ["-s", s]
    return subprocess.Popen(cmd, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_for_pages(site: Site, proc: subprocess.Popen[bytes], count: int) -> None:
    deadline = time.monotonic() + 120
    while sum(site.pages().values()) < count and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.005)
    assert proc.poll() is None, "the crawl ended before it could be killed"
    assert sum(site.pages().values()) >= count


def kill_9(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


def test_jobdir_kill_9_at_a_random_moment_misses_nothing(site: Site, tmp_path: Path) -> None:
    import bloomline

    job = tmp_path / "job"
    proc = start_crawl(tmp_path, site, *JOURNAL, f"JOBDIR={job}")
    wait_for_pages(site, proc, 400)
    kill_9(proc)
    fetched = set(site.pages())
    # Every page fetched before the kill is in the mapped filter on disk.
    from scrapy.http import Request
    from scrapy.utils.request import RequestFingerprinter

    fp = RequestFingerprinter()
    stages = [bloomline.BloomFilter.load(p) for p in sorted(job.glob("bloomline-seen.*.blf"))]
    for path in fetched:
        key = fp.fingerprint(Request(site.url(path)))
        assert any(key in s for s in stages), path
    r = crawl(tmp_path, site, *JOURNAL, f"JOBDIR={job}")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Resuming crawl" in r.stderr
    pages = site.pages()
    assert len(pages) == PAGES  # none missed
    # Only requests in flight at the kill (8 downloading, plus responses
    # being handled) can be fetched again, once.
    again = [p for p, n in pages.items() if n > 1]
    assert max(pages.values()) <= 2 and len(again) <= 16, again


def test_jobdir_kill_9_with_requests_in_flight_fetches_none_twice(site: Site, tmp_path: Path) -> None:
    job = tmp_path / "job"
    proc = start_crawl(tmp_path, site, *JOURNAL, f"JOBDIR={job}")
    wait_for_pages(site, proc, 400)
    site.gate.clear()  # requests now in flight get no answer ...
    time.sleep(1.0)  # ... while every answered one is handled (milliseconds each)
    before = site.pages()
    kill_9(proc)
    site.epoch += 1
    site.gate.set()
    assert site.pages() == before
    r = crawl(tmp_path, site, *JOURNAL, f"JOBDIR={job}")
    assert r.returncode == 0, r.stderr[-3000:]
    pages = site.pages()
    assert len(pages) == PAGES  # none missed: the unanswered requests were fetched on resume
    assert max(pages.values()) == 1  # and none twice


def test_default_scrapy_queue_loses_requests_on_kill_9(site: Site, tmp_path: Path) -> None:
    """Why JournalScheduler exists: with Scrapy's own JOBDIR queue the same
    kill leaves a resumed crawl with pages missing."""
    job = tmp_path / "job"
    proc = start_crawl(tmp_path, site, "DUPEFILTER_CLASS=bloomline.scrapy.BloomDupeFilter", f"JOBDIR={job}")
    wait_for_pages(site, proc, 400)
    kill_9(proc)
    r = crawl(tmp_path, site, "DUPEFILTER_CLASS=bloomline.scrapy.BloomDupeFilter", f"JOBDIR={job}")
    assert r.returncode == 0, r.stderr[-3000:]
    assert len(site.pages()) < PAGES


def test_journal_scheduler_without_its_middleware_is_refused(site: Site, tmp_path: Path) -> None:
    r = crawl(tmp_path, site, "SCHEDULER=bloomline.scrapy.JournalScheduler", f"JOBDIR={tmp_path / 'job'}")
    assert r.returncode != 0 or "JournalScheduler needs its spider middleware" in r.stderr
    assert "SPIDER_MIDDLEWARES" in r.stderr and "JournalDoneMiddleware" in r.stderr
    assert not site.pages()


def test_two_processes_share_a_redis_filter(site: Site, tmp_path: Path, redis_server: object) -> None:
    pytest.importorskip("redis")
    settings = ("DUPEFILTER_CLASS=bloomline.scrapy.RedisBloomDupeFilter",
                f"BLOOMLINE_REDIS_URL={redis_server.url}", "BLOOMLINE_CAPACITY=100000")  # type: ignore[attr-defined]
    spider = tmp_path / "site_spider.py"
    spider.write_text(SPIDER)
    procs = []
    for _ in range(2):
        cmd = [sys.executable, "-m", "scrapy", "runspider", str(spider), "-a", f"start_url={site.url()}",
               "-s", "LOG_LEVEL=INFO", "-s", "TELNETCONSOLE_ENABLED=False", "-s", "CONCURRENT_REQUESTS=8"]
        for s in settings:
            cmd += ["-s", s]
        procs.append(subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
    pages = site.pages()
    assert max(pages.values()) == 1  # no page fetched twice across both processes
    assert len(pages) >= PAGES * 0.5
