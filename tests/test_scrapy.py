"""Real Scrapy crawls (scrapy runspider, in a subprocess) of a generated site
served from loopback, counting fetches on the server side."""

from __future__ import annotations

import pickle
import shutil
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("scrapy")

pytestmark = pytest.mark.slow  # real crawls in subprocesses: left out of the fast subset (pytest -m "not slow")

from scrapy_site import (JOURNAL, PAGES, SPIDER, Site, crawl, journal_records, kill_9, pending_urls,  # noqa: E402
                         start_crawl, tree, twelve_links, wait_for_pages)


@pytest.fixture
def site() -> Iterator[Site]:
    s = Site()
    yield s
    s.stop()


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
    # (at 1e-6: at 1e-4 a crawl of 2,500 of these pages through 5 stages expects 0.04 false positives, and one on a
    # page that is the only way into another drops two pages, about 1 run in 1,300; fewer for 1,500 pages and 4)
    r = crawl(tmp_path, site, "DUPEFILTER_CLASS=bloomline.scrapy.BloomDupeFilter", "BLOOMLINE_CAPACITY=200",
              "BLOOMLINE_ERROR_RATE=0.000001")
    assert r.returncode == 0, r.stderr[-3000:]
    pages = site.pages()
    assert len(pages) >= PAGES - 1 and max(pages.values()) == 1  # growth keeps the rate under 1e-6
    assert "BloomDupeFilter: stage 1 added" in r.stderr and "bloomline/stages" in r.stderr
    grew = [line for line in r.stderr.splitlines() if "BloomDupeFilter: stage" in line and "added after" in line]
    numbers = [int(line.split("stage ", 1)[1].split()[0]) for line in grew]
    assert numbers == list(range(1, len(grew) + 1)), grew  # each stage logged once, in order


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


def wait_until_answers_handled(site: Site, job: Path, timeout: float = 60) -> None:
    """Until the journal has a done record for every page the site answered
    (the crawl has handled each response it got), read as docs/FORMAT.md
    says; a record being written as it is read is read again."""
    deadline = time.monotonic() + timeout
    while True:
        served = {site.url(p) for p in site.pages()}
        try:
            records = journal_records((job / "requests.journal").read_bytes())
        except (AssertionError, struct.error, EOFError, ValueError, pickle.UnpicklingError):
            records = None  # a record half written
        if records is not None and not (pending_urls(records) & served):
            return
        assert time.monotonic() < deadline, sorted(pending_urls(records or []) & served)
        time.sleep(0.01)


def test_jobdir_kill_9_with_requests_in_flight_fetches_none_twice(site: Site, tmp_path: Path) -> None:
    job = tmp_path / "job"
    proc = start_crawl(tmp_path, site, *JOURNAL, f"JOBDIR={job}")
    wait_for_pages(site, proc, 400)
    site.close_gate()  # requests now in flight get no answer ...
    wait_until_answers_handled(site, job)  # ... while every answered one is handled
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


def test_the_site_counts_no_request_whose_client_is_gone(site: Site) -> None:
    """The kill tests count on it: a request a killed crawler sent, whose
    handler runs only after the epoch changed (so it reads the new one), is
    never counted. Here both requests wait at the closed gate; one client
    goes away; the gate opens in the same epoch: only the live one counts."""
    def request(page: int) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", site.port), timeout=10)
        s.sendall(b"GET /page/%d HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" % page)
        return s

    site.close_gate()
    live, gone = request(5), request(6)
    gone.close()
    site.gate.set()
    with live:
        assert live.recv(64).startswith(b"HTTP/1.0 200")  # answered once the gate opened
    deadline = time.monotonic() + 2  # the other handler was let go at the same moment
    while time.monotonic() < deadline and "/page/6" not in site.pages():
        time.sleep(0.01)
    assert site.pages() == {"/page/5": 1}


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
    # SCHEDULER_PERSIST: the first process to finish must not delete the
    # filter the other still uses (it would stop, its key gone).
    settings = ("DUPEFILTER_CLASS=bloomline.scrapy.RedisBloomDupeFilter", "SCHEDULER_PERSIST=True",
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


def test_a_small_crawl_keeps_a_small_jobdir_and_reports_its_fill(site: Site, tmp_path: Path) -> None:
    job = tmp_path / "job"
    r = crawl(tmp_path, site, "DUPEFILTER_CLASS=bloomline.scrapy.BloomDupeFilter", f"JOBDIR={job}")
    assert r.returncode == 0, r.stderr[-3000:]
    files = list(job.glob("bloomline-seen.*.blf"))
    assert files and sum(f.stat().st_size for f in files) < 2 * 2**20
    for name in ("bloomline/fill", "bloomline/expected_fp_rate", "bloomline/approx_count", "bloomline/stages"):
        assert f"'{name}'" in r.stderr
    summary = [line for line in r.stderr.splitlines() if "[scrapy.dupefilters] INFO: BloomDupeFilter: about" in line]
    assert len(summary) == 1 and "target 0.0001" in summary[0]
    assert " seen, in 1 stage " in summary[0]  # not "1 stages"
    assert "Deprecat" not in r.stderr and "Traceback" not in r.stderr


def test_a_damaged_jobdir_filter_stops_the_resume_naming_the_file(site: Site, tmp_path: Path) -> None:
    job = tmp_path / "job"
    common = (*JOURNAL, f"JOBDIR={job}")
    r1 = crawl(tmp_path, site, *common, "CLOSESPIDER_PAGECOUNT=300")
    assert r1.returncode == 0, r1.stderr[-3000:]
    first = sum(site.pages().values())
    stage = job / "bloomline-seen.0.blf"
    data = bytearray(stage.read_bytes())
    data[len(data) // 2] ^= 0x10  # one bit of the payload
    stage.write_bytes(bytes(data))
    r2 = crawl(tmp_path, site, *common)
    assert r2.returncode == 1
    errors = [line for line in r2.stderr.splitlines() if "[scrapy.dupefilters] ERROR:" in line]
    assert len(errors) == 1 and str(stage) in errors[0] and "requests.journal" in errors[0], r2.stderr[-3000:]
    assert "'finish_reason': 'bloomline_damaged_jobdir'" in r2.stderr
    assert "Traceback" not in r2.stderr
    assert sum(site.pages().values()) == first  # nothing fetched


@pytest.mark.parametrize(
    ("setting", "shown"),
    [("BLOOMLINE_CAPACITY=1e3.5", "BLOOMLINE_CAPACITY must be an integer >= 1, got '1e3.5'"),
     ("BLOOMLINE_ERROR_RATE=abc", "BLOOMLINE_ERROR_RATE must be in (0, 1), got 'abc'")],
)
def test_a_bad_setting_of_the_local_filter_is_one_error_line(site: Site, tmp_path: Path, setting: str,
                                                            shown: str) -> None:
    r = crawl(tmp_path, site, "DUPEFILTER_CLASS=bloomline.scrapy.BloomDupeFilter", setting)
    assert r.returncode == 1
    errors = [line for line in r.stderr.splitlines() if "[scrapy.dupefilters] ERROR:" in line]
    assert len(errors) == 1 and shown in errors[0], r.stderr[-3000:]
    assert "Traceback" not in r.stderr and not site.pages()


def test_a_bad_setting_with_a_feed_export_is_still_one_error_line(site: Site, tmp_path: Path) -> None:
    """With -O / FEEDS the feed is stored while the spider closes, and the
    engine still schedules the start request: OffsiteMiddleware's handler
    of request_scheduled read a crawler with no spider and logged a
    traceback, until the spider was taken away only once the close was done."""
    r = crawl(tmp_path, site, "DUPEFILTER_CLASS=bloomline.scrapy.BloomDupeFilter", "BLOOMLINE_ERROR_RATE=abc",
              'FEEDS={"out.jsonl": {"format": "jsonlines"}}')
    assert r.returncode == 1
    errors = [line for line in r.stderr.splitlines() if " ERROR: " in line]
    assert len(errors) == 1 and "BLOOMLINE_ERROR_RATE must be in (0, 1), got 'abc'" in errors[0], r.stderr[-3000:]
    assert "Traceback" not in r.stderr and (tmp_path / "out.jsonl").exists() and not site.pages()


def test_resuming_a_jobdir_with_another_rate_names_the_rate_as_written(site: Site, tmp_path: Path) -> None:
    job = tmp_path / "job"
    base = ("DUPEFILTER_CLASS=bloomline.scrapy.BloomDupeFilter", f"JOBDIR={job}", "CLOSESPIDER_PAGECOUNT=20")
    assert crawl(tmp_path, site, *base).returncode == 0
    r = crawl(tmp_path, site, *base, "BLOOMLINE_ERROR_RATE=1e-3")
    assert r.returncode == 1
    (error,) = [line for line in r.stderr.splitlines() if "[scrapy.dupefilters] ERROR:" in line]
    assert "BLOOMLINE_ERROR_RATE=0.0001" in error and "BLOOMLINE_ERROR_RATE='1e-3'" in error, error


def test_a_crawl_killed_and_resumed_over_a_damaged_journal_fetches_every_surviving_page(
        site: Site, tmp_path: Path) -> None:
    """A crawl killed after 400 pages, its journal damaged twice
    in its first half (200 bytes zeroed in one pending record, one payload
    byte flipped in another). The resumed crawl fetches every page whose
    record survived, sets the damaged bytes aside and says so, no traceback."""
    job = tmp_path / "job"
    proc = start_crawl(tmp_path, site, *JOURNAL, f"JOBDIR={job}")
    wait_for_pages(site, proc, 400)
    kill_9(proc)
    journal = job / "requests.journal"
    good = journal.read_bytes()
    records = journal_records(good)
    pending = [r for r in records if r[2] == 1 and r[4] in pending_urls(records)]
    assert len(pending) >= 20, len(pending)
    hit = [pending[len(pending) // 8], pending[len(pending) // 3]]
    data = bytearray(good)
    data[hit[0][0] + 20 : hit[0][0] + 220] = bytes(200)
    data[hit[1][1] - 7] ^= 0x20
    journal.write_bytes(bytes(data))
    changed = {i for i, (a, b) in enumerate(zip(good, data)) if a != b}
    survived = pending_urls([r for r in records if not any(r[0] <= c < r[1] for c in changed)])
    lost = pending_urls(records) - survived
    assert {hit[0][4], hit[1][4]} <= lost
    before = site.pages()
    r = crawl(tmp_path, site, *JOURNAL, f"JOBDIR={job}")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    warnings = [line for line in r.stderr.splitlines() if "set aside" in line and "WARNING" in line]
    assert len(warnings) == 1 and "damaged" in warnings[0], r.stderr[-3000:]
    assert (job / "requests.journal.damaged").exists()
    after = site.pages()
    fetched_on_resume = {p for p in after if after[p] > before.get(p, 0)}
    missing = {u for u in survived if u.split(str(site.port), 1)[1] not in fetched_on_resume}
    assert not missing, sorted(missing)[:10]
    print(f"{len(survived)} pending records survived the damage, {len(lost)} lost; all survivors fetched on resume; "
          f"{len(after)} of {PAGES} pages fetched in all")


@pytest.mark.parametrize("content", [b"", b"not a journal at all"], ids=["empty", "bad magic"])
def test_a_journal_with_nothing_to_read_stops_the_resume_with_one_error_line(
        site: Site, tmp_path: Path, content: bytes) -> None:
    job = tmp_path / "job"
    r1 = crawl(tmp_path, site, *JOURNAL, f"JOBDIR={job}", "CLOSESPIDER_PAGECOUNT=50")
    assert r1.returncode == 0, r1.stderr[-3000:]
    first = sum(site.pages().values())
    (job / "requests.journal").write_bytes(content)
    r2 = crawl(tmp_path, site, *JOURNAL, f"JOBDIR={job}")
    assert r2.returncode == 1
    errors = [line for line in r2.stderr.splitlines() if " ERROR: " in line]
    assert len(errors) == 1 and "requests.journal" in errors[0] and "JournalScheduler" in errors[0], r2.stderr[-3000:]
    assert "'finish_reason': 'bloomline_damaged_jobdir'" in r2.stderr
    assert "Traceback" not in r2.stderr
    assert sum(site.pages().values()) == first  # nothing fetched
    assert (job / "requests.journal").read_bytes() == content  # left for the user


TREE_PAGES = 1365  # a tree 4 wide and 6 deep: its journal (about 470 bytes a page) outgrows 256 KiB


@pytest.fixture
def tree_site() -> Iterator[Site]:
    s = Site(TREE_PAGES, tree(TREE_PAGES))
    yield s
    s.stop()


def test_a_crawl_on_a_full_disk_stops_with_one_error_and_its_resume_misses_nothing(
        tree_site: Site, tmp_path: Path, small_fs: object) -> None:
    """With JOBDIR on a full file system the crawl once finished
    "finished", and 21 pages of a tree were never fetched, even on resume:
    a parent counted as done although its children were never journaled.
    Now it stops with one ERROR line and a finish reason that says so, and
    a resume (the JOBDIR copied where there is room) fetches every page."""
    site = tree_site
    job = small_fs("256k") / "job"  # type: ignore[operator]
    settings = (*JOURNAL, "BLOOMLINE_CAPACITY=2000")  # a filter of 7 KiB: the journal is what fills the disk
    r1 = crawl(tmp_path, site, *settings, f"JOBDIR={job}")
    assert r1.returncode == 1, r1.stderr[-3000:]
    errors = [line for line in r1.stderr.splitlines() if " ERROR: " in line]
    assert len(errors) == 1, r1.stderr[-3000:]
    assert "cannot write the request journal" in errors[0] and "No space left on device" in errors[0]
    assert "'finish_reason': 'bloomline_journal_unwritable'" in r1.stderr
    assert "Traceback" not in r1.stderr
    first = site.pages()
    assert 0 < len(first) < TREE_PAGES
    roomy = tmp_path / "job"
    shutil.copytree(job, roomy)
    r2 = crawl(tmp_path, site, *settings, f"JOBDIR={roomy}")
    assert r2.returncode == 0, r2.stderr[-3000:]
    assert "Resuming crawl" in r2.stderr and " ERROR: " not in r2.stderr
    missing = {f"/page/{i}" for i in range(TREE_PAGES)} - set(site.pages())
    assert not missing, sorted(missing, key=lambda p: int(p.rsplit("/", 1)[1]))[:20]
    print(f"{len(first)} pages fetched before the disk filled; all {TREE_PAGES} after the resume")


def test_a_page_is_finished_only_after_the_pages_it_links_to_are_journaled(tree_site: Site,
                                                                             tmp_path: Path) -> None:
    """Scrapy reads a callback's output ahead of scheduling it, so the
    output used to end, and the page's done record be written, before any
    of its links was journaled: a kill (or a failed write) between the two
    lost them. In the journal of a crawl killed mid-way, read by
    docs/FORMAT.md alone, each done record follows its page's links."""
    site = tree_site
    job = tmp_path / "job"
    proc = start_crawl(tmp_path, site, *JOURNAL, f"JOBDIR={job}")
    wait_for_pages(site, proc, 300)
    kill_9(proc)
    records = journal_records((job / "requests.journal").read_bytes())
    journaled_at = {url: off for off, _, kind, _, url in records if kind == 1}
    url_of = {serial: url for _, _, kind, serial, url in records if kind == 1}
    links = tree(TREE_PAGES)
    checked, early = 0, []
    for off, _, kind, serial, _ in records:
        if kind != 2:
            continue
        page = int(url_of[serial].rsplit("/", 1)[1])
        checked += 1
        for child in links(page):
            if journaled_at.get(site.url(f"/page/{child}"), off) >= off:
                early.append((page, child))
    assert checked >= 100, checked
    assert not early, early[:10]


# ---- recrawls (BLOOMLINE_RECRAWL_AFTER) ------------------------------------------------------


def test_recrawl_after_refetches_a_page_only_once_it_is_older_than_that(tmp_path: Path) -> None:
    """Three crawls of one JOBDIR with BLOOMLINE_RECRAWL_AFTER one day, the
    later ones with their wall clock moved ahead: at half a day nothing is
    fetched again (the start page is filtered); at 1.3 days (past the
    window and its last quarter) every page is fetched again, once."""
    day = 86400.0
    site = Site(pages=300, links_of=twelve_links(300))
    try:
        job = tmp_path / "job"
        common = ("DUPEFILTER_CLASS=bloomline.scrapy.BloomDupeFilter", f"JOBDIR={job}",
                  f"BLOOMLINE_RECRAWL_AFTER={day}", "BLOOMLINE_CAPACITY=1000")
        r1 = crawl(tmp_path, site, *common)
        assert r1.returncode == 0, r1.stderr[-3000:]
        assert len(site.pages()) == 300 and max(site.pages().values()) == 1
        assert (job / "bloomline-recrawl.blf").exists() and not list(job.glob("bloomline-seen.*.blf"))
        summary = [line for line in r1.stderr.splitlines() if "BloomDupeFilter: about" in line]
        assert len(summary) == 1 and " seen, in 1 generation " in summary[0], summary
        r2 = crawl(tmp_path, site, *common, time_shift=0.5 * day)
        assert r2.returncode == 0, r2.stderr[-3000:]
        assert sum(site.pages().values()) == 300  # nothing fetched again
        r3 = crawl(tmp_path, site, *common, time_shift=1.3 * day)
        assert r3.returncode == 0, r3.stderr[-3000:]
        pages = site.pages()
        assert len(pages) == 300 and set(pages.values()) == {2}  # every page again, once
        r4 = crawl(tmp_path, site, *common, time_shift=1.6 * day)  # 0.3 days after the third: none again
        assert r4.returncode == 0 and site.pages() == pages
    finally:
        site.stop()


@pytest.mark.parametrize("dupefilter", ["BloomDupeFilter", "RedisBloomDupeFilter"])
def test_recrawl_after_is_checked_by_both_filters(tmp_path: Path, dupefilter: str) -> None:
    """A bad value stops the crawl with one ERROR line, before the Redis
    filter tries Redis (here unreachable: it would fail otherwise)."""
    site = Site(pages=5)
    try:
        r = crawl(tmp_path, site, f"DUPEFILTER_CLASS=bloomline.scrapy.{dupefilter}", "BLOOMLINE_RECRAWL_AFTER=-3",
                  "REDIS_URL=redis://127.0.0.1:1/0", "BLOOMLINE_REDIS_RETRY_TIMEOUT=0")
        assert r.returncode == 1
        errors = [line for line in r.stderr.splitlines() if "[scrapy.dupefilters] ERROR:" in line]
        assert len(errors) == 1 and "BLOOMLINE_RECRAWL_AFTER must be a number of seconds >= 0.001, got '-3'" in \
            errors[0], r.stderr[-3000:]
        assert "'finish_reason': 'bloomline_bad_settings'" in r.stderr
        assert not site.pages()
    finally:
        site.stop()


def test_recrawl_filter_saves_to_jobdir_resumes_and_names_a_changed_setting(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The real dupefilter class, without a crawl: the JOBDIR file is saved
    at close and every RECRAWL_SAVE_EVERY seconds while recording, read back
    by the next filter, and refused (naming the setting) when a setting
    changed; a damaged one names the file to remove."""
    from scrapy.settings import Settings

    from bloomline import WindowedBloomFilter
    from bloomline.scrapy import dupefilter as d

    job = tmp_path / "job"
    job.mkdir()
    f = d.BloomDupeFilter(str(job), recrawl_after=3600.0, capacity=1000)
    assert f.record_fingerprint(b"a") and not f.record_fingerprint(b"a")
    assert not (job / d.RECRAWL_FILE).exists()  # within the first minute: not saved yet
    monkeypatch.setattr(d, "RECRAWL_SAVE_EVERY", 0.0)
    assert f.record_fingerprint(b"b")
    saved = WindowedBloomFilter.load(job / d.RECRAWL_FILE)
    assert b"a" in saved and b"b" in saved and saved.window == 3600.0
    monkeypatch.setattr(d, "RECRAWL_SAVE_EVERY", 60.0)
    assert f.record_fingerprint(b"c")
    f.close()
    again = d.BloomDupeFilter(str(job), recrawl_after=3600.0, capacity=1000)
    assert again.has_fingerprint(b"c") and not again.record_fingerprint(b"a")
    again.close()
    settings = Settings({"JOBDIR": str(job), "BLOOMLINE_RECRAWL_AFTER": 7200, "BLOOMLINE_CAPACITY": 1000})
    with pytest.raises(ValueError, match=r"was made with BLOOMLINE_RECRAWL_AFTER=3600.0, this crawl has 7200.0"):
        d.BloomDupeFilter.from_settings(settings)
    (job / d.RECRAWL_FILE).write_bytes(b"damaged" * 40)
    settings.set("BLOOMLINE_RECRAWL_AFTER", 3600)
    with pytest.raises(ValueError, match=r"invalid bloomline data.*remove the damaged bloomline-recrawl.blf file"):
        d.BloomDupeFilter.from_settings(settings)


def test_a_jobdir_of_the_other_mode_is_refused(tmp_path: Path) -> None:
    """JOBDIR kept by a crawl with BLOOMLINE_RECRAWL_AFTER, resumed without
    it (or the other way round): the other mode's record would be ignored,
    every request new again; the filter refuses and names the files."""
    from bloomline.scrapy import dupefilter as d

    plain, recrawl = tmp_path / "plain", tmp_path / "recrawl"
    recrawl.mkdir()  # (Scrapy makes JOBDIR)
    f = d.BloomDupeFilter(str(plain), capacity=1000)
    assert f.record_fingerprint(b"a")
    f.close()
    with pytest.raises(d.RecrawlMismatch, match=r"holds the requests seen by a crawl without BLOOMLINE_RECRAWL_AFTER"):
        d.BloomDupeFilter(str(plain), recrawl_after=3600.0, capacity=1000)
    g = d.BloomDupeFilter(str(recrawl), recrawl_after=3600.0, capacity=1000)
    assert g.record_fingerprint(b"a")
    g.close()
    with pytest.raises(d.RecrawlMismatch, match=r"bloomline-recrawl.blf was made with BLOOMLINE_RECRAWL_AFTER set"):
        d.BloomDupeFilter(str(recrawl), capacity=1000)
    again = d.BloomDupeFilter(str(plain), capacity=1000)  # (each resumed in its own mode, as before)
    assert not again.record_fingerprint(b"a")
    again.close()
