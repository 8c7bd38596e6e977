"""A generated site served from loopback, counting fetches on the server
side, and real Scrapy crawls of it (``scrapy runspider`` in a subprocess):
shared by the Scrapy tests and benchmarks/scrapy_bench.py."""

from __future__ import annotations

import collections
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PAGES = 1500  # (2,500 until CI passed 50 minutes: every claim holds at this size)


def links(i: int) -> list[int]:
    """Cycles and repeats: every page is reachable from 0 in several ways."""
    return sorted({(i + 1) % PAGES, (2 * i + 1) % PAGES, (7 * i + 3) % PAGES, 0, i})


def twelve_links(pages: int) -> Callable[[int], list[int]]:
    """12 links a page: the next page (so every page is reachable from 0)
    and 11 spread over the site."""
    pairs = ((3, 7), (5, 11), (7, 13), (11, 17), (13, 19), (17, 23), (19, 29), (23, 31), (29, 37), (31, 41), (37, 43))
    return lambda i: [(i + 1) % pages] + [(i * a + b) % pages for a, b in pairs]


def tree(pages: int, branching: int = 4) -> Callable[[int], list[int]]:
    """A tree: page i links only to its children branching*i+1 ..
    branching*i+branching (those under `pages`), so each page but 0 has one
    way in, and a page whose parent's links were lost is never found."""
    return lambda i: [c for c in range(branching * i + 1, branching * i + branching + 1) if c < pages]


class Site:
    """A page counts as fetched when its response is sent. Closing the gate
    holds every new request unanswered (and uncounted) until it opens;
    requests held across an epoch change are dropped unanswered, and so is
    a request whose client is gone (a killed crawler's, handled late: its
    handler may start after the epoch changed)."""

    def __init__(self, pages: int = PAGES, links_of: Callable[[int], list[int]] | None = None) -> None:
        self.num_pages = pages
        self.links_of = links_of or links
        self.hits: collections.Counter[str] = collections.Counter()
        self.lock = threading.Lock()
        self.gate = threading.Event()
        self.gate.set()
        self.epoch = 0
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                epoch = site.epoch
                while True:  # counted only with the gate open under the lock (close_gate takes it)
                    if not site.gate.wait(timeout=60) or site.epoch != epoch:
                        return  # held, and its crawler was killed meanwhile: never answered
                    if self.client_gone():
                        return  # sent by a crawler killed since: never answered, never counted
                    with site.lock:
                        if site.gate.is_set():
                            site.hits[self.path] += 1
                            break
                if self.path.startswith("/page/"):
                    i = int(self.path.rsplit("/", 1)[1])
                    body = "".join(f'<a href="/page/{j}">p{j}</a> ' for j in site.links_of(i))
                    data = f"<html><body><h1>{i}</h1>{body}</body></html>".encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                elif self.path.startswith("/redirect/"):  # to the page of that number
                    self.send_response(301)
                    self.send_header("Location", "/page/" + self.path.rsplit("/", 1)[1])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                else:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()

            def client_gone(self) -> bool:
                """Whether the client closed its end: a crawler sends nothing
                more while it waits for the answer, so a readable socket with
                nothing to read is one whose process is gone."""
                try:
                    readable, _, _ = select.select([self.connection], [], [], 0)
                    return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
                except OSError:
                    return True

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

    def close_gate(self) -> None:
        """Hold every request not yet counted: once this returns, no page
        is counted until the gate opens (gate.set())."""
        with self.lock:
            self.gate.clear()

    def lost(self) -> set[int]:
        """The pages lost on their own: never fetched, though page 0 or a
        fetched page links to them. Other missing pages were only never
        found (each lost page takes with it those only it links to)."""
        fetched = {int(p.rsplit("/", 1)[1]) for p in self.pages()}
        found = {0}.union(*(self.links_of(i) for i in fetched))
        return found - fetched

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


SPIDER = '''
import os
import time

import scrapy

if os.environ.get("SITE_TIME_SHIFT"):
    # Tests of time windows: this crawl's wall clock, moved forward by that
    # many seconds (a later crawl without waiting for it).
    _wall, _shift = time.time, float(os.environ["SITE_TIME_SHIFT"])
    time.time = lambda: _wall() + _shift

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


def crawl(tmp: Path, site: Site, *settings: str, mode: str = "crawl", timeout: float = 600,
          time_shift: float = 0.0) -> subprocess.CompletedProcess[str]:
    """A whole crawl; time_shift: seconds its wall clock (time.time) runs ahead."""
    spider = tmp / "site_spider.py"
    spider.write_text(SPIDER)
    cmd = [sys.executable, "-m", "scrapy", "runspider", str(spider), "-a", f"start_url={site.url()}", "-a", f"mode={mode}",
           "-s", "LOG_LEVEL=INFO", "-s", "TELNETCONSOLE_ENABLED=False", "-s", "ROBOTSTXT_OBEY=False",
           "-s", "CONCURRENT_REQUESTS=16", "-s", "RETRY_ENABLED=False"]
    for s in settings:
        cmd += ["-s", s]
    env = {**os.environ, "SITE_TIME_SHIFT": repr(time_shift)} if time_shift else os.environ.copy()
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=tmp, env=env)


JOURNAL = ("DUPEFILTER_CLASS=bloomline.scrapy.BloomDupeFilter", "SCHEDULER=bloomline.scrapy.JournalScheduler",
           'SPIDER_MIDDLEWARES={"bloomline.scrapy.JournalDoneMiddleware": 0}')


def start_crawl(tmp: Path, site: Site, *settings: str, log: Path | None = None) -> subprocess.Popen[bytes]:
    """A crawl in the background (8 requests at once); its log to `log`."""
    spider = tmp / "site_spider.py"
    spider.write_text(SPIDER)
    cmd = [sys.executable, "-m", "scrapy", "runspider", str(spider), "-a", f"start_url={site.url()}",
           "-s", "LOG_LEVEL=INFO", "-s", "TELNETCONSOLE_ENABLED=False", "-s", "CONCURRENT_REQUESTS=8",
           "-s", "RETRY_ENABLED=False"]
    for s in settings:
        cmd += ["-s", s]
    err = open(log, "wb") if log is not None else subprocess.DEVNULL  # noqa: SIM115 - the child keeps it
    try:
        return subprocess.Popen(cmd, cwd=tmp, stdout=subprocess.DEVNULL, stderr=err)
    finally:
        if log is not None:
            err.close()  # type: ignore[union-attr]


def wait_for_pages(site: Site, proc: subprocess.Popen[bytes], count: int) -> None:
    deadline = time.monotonic() + 120
    while sum(site.pages().values()) < count and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.005)
    assert proc.poll() is None, "the crawl ended before it could be killed"
    assert sum(site.pages().values()) >= count


def kill_9(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)




def journal_records(data: bytes) -> list[tuple[int, int, int, int, str]]:
    """(offset, end, type, serial, url) of each record of an undamaged
    request journal, read by docs/FORMAT.md alone (not by the code under
    test): type 1 a request (url from its pickle), 2 a done record."""
    import pickle
    import struct

    assert data[:8] == b"BLMJRNL2"
    out, off = [], 8
    while off < len(data):
        marker, kind, _, fp_len, payload_len, _, serial, _, _ = struct.unpack_from("<4sBBHIIQqI", data, off)
        assert marker == b"\xb1JRN", off
        end = off + 36 + fp_len + payload_len
        url = pickle.loads(data[off + 36 + fp_len : end])["url"] if kind == 1 else ""
        out.append((off, end, kind, serial, url))
        off = end
    return out


def journal_fingerprints(data: bytes) -> dict[str, bytes]:
    """url -> the fingerprint kept with its request record (docs/FORMAT.md),
    from journal_records' offsets."""
    import struct

    out = {}
    for off, _, kind, _, url in journal_records(data):
        if kind == 1:
            fp_len = struct.unpack_from("<H", data, off + 6)[0]
            out[url] = data[off + 36 : off + 36 + fp_len]
    return out


def pending_urls(records: list[tuple[int, int, int, int, str]]) -> set[str]:
    """The urls of the request records that no done record finishes."""
    done = {serial for _, _, kind, serial, _ in records if kind == 2}
    return {url for _, _, kind, serial, url in records if kind == 1 and serial not in done}
