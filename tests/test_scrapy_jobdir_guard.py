"""A JOBDIR kept by JournalScheduler is used by one crawl at a time and
resumed only by the scheduler that made it: each case that would have
recorded pages as seen and never fetched them is refused at the start (one
ERROR line, exit status 1), and the crawl then resumed as it should be
fetches every page once. Real crawls against the local test site."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("scrapy")

pytestmark = pytest.mark.slow  # real crawls in subprocesses: left out of the fast subset (pytest -m "not slow")

from scrapy_site import JOURNAL, PAGES, Site, crawl, kill_9, start_crawl, wait_for_pages  # noqa: E402

STOCK = ("DUPEFILTER_CLASS=bloomline.scrapy.BloomDupeFilter",)


@pytest.fixture
def site() -> Iterator[Site]:
    s = Site()
    yield s
    s.stop()


def test_a_second_crawl_on_a_jobdir_in_use_is_refused_and_the_first_loses_nothing(site: Site,
                                                                                  tmp_path: Path) -> None:
    job = tmp_path / "job"
    first = start_crawl(tmp_path, site, *JOURNAL, f"JOBDIR={job}")
    try:
        wait_for_pages(site, first, 200)
        site.close_gate()  # the first crawl waits on its requests, however slow the second is to start
        second = crawl(tmp_path, site, *JOURNAL, f"JOBDIR={job}")
        assert second.returncode == 1, second.stderr[-3000:]
        assert "is in use by another crawl" in second.stderr and "bloomline_jobdir_in_use" in second.stderr
        assert first.poll() is None
    finally:
        kill_9(first)
        site.epoch += 1  # (the requests held at the gate are dropped unanswered)
        site.gate.set()
    resumed = crawl(tmp_path, site, *JOURNAL, f"JOBDIR={job}")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert len(site.pages()) == PAGES  # nothing the refused crawl touched was lost


@pytest.mark.parametrize("recrawl", [(), ("BLOOMLINE_RECRAWL_AFTER=3600",)], ids=["chain", "recrawl window"])
def test_a_second_crawl_on_a_jobdir_under_scrapys_own_scheduler_is_refused(site: Site, tmp_path: Path,
                                                                          recrawl: tuple[str, ...]) -> None:
    """Under Scrapy's own scheduler nothing held JOBDIR: a second crawl's
    BloomDupeFilter opened the first's stage files and each counted its own
    adds, filling a stage past its capacity (with a recrawl window, the two
    saved it over each other, and the second emptied the first's disk
    queue). The filter's directory is now held by one crawl, and the second
    is refused as JournalScheduler's is."""
    job = tmp_path / "job"
    first = start_crawl(tmp_path, site, *STOCK, *recrawl, f"JOBDIR={job}")
    try:
        wait_for_pages(site, first, 200)
        site.close_gate()  # (as above)
        second = crawl(tmp_path, site, *STOCK, *recrawl, f"JOBDIR={job}")
        assert second.returncode == 1, second.stderr[-3000:]
        assert "is in use by another crawl" in second.stderr and "bloomline_jobdir_in_use" in second.stderr
        assert "bloomline-seen.lock" in second.stderr and "Traceback" not in second.stderr
        assert first.poll() is None
    finally:
        kill_9(first)
        site.epoch += 1
        site.gate.set()


def test_a_refused_second_crawl_leaves_the_first_ones_recrawl_window_alone(site: Site, tmp_path: Path) -> None:
    """The refused crawl's dupefilter loaded JOBDIR's recrawl window at its
    start; it saved it back at its close, over what the running crawl had
    saved since (or creating it, empty of the running crawl's pages)."""
    job = tmp_path / "job"
    recrawl = "BLOOMLINE_RECRAWL_AFTER=3600"
    window = job / "bloomline-recrawl.blf"
    first = start_crawl(tmp_path, site, *JOURNAL, f"JOBDIR={job}", recrawl)
    try:
        wait_for_pages(site, first, 200)
        site.close_gate()  # (as above)
        before = window.read_bytes() if window.exists() else None
        second = crawl(tmp_path, site, *JOURNAL, f"JOBDIR={job}", recrawl)
        assert second.returncode == 1 and "bloomline_jobdir_in_use" in second.stderr, second.stderr[-3000:]
        assert (window.read_bytes() if window.exists() else None) == before
        assert first.poll() is None
    finally:
        kill_9(first)
        site.epoch += 1
        site.gate.set()


@pytest.mark.parametrize(("made_by", "resumed_by", "message"), [
    (STOCK, JOURNAL, "holds the pending requests of Scrapy's own scheduler"),
    (JOURNAL, STOCK, "holds the pending requests of JournalScheduler"),
], ids=["stock-then-journal", "journal-then-stock"])
def test_a_jobdir_resumed_by_the_other_scheduler_is_refused(site: Site, tmp_path: Path, made_by: tuple[str, ...],
                                                            resumed_by: tuple[str, ...], message: str) -> None:
    job = tmp_path / "job"
    paused = crawl(tmp_path, site, *made_by, f"JOBDIR={job}", "CLOSESPIDER_PAGECOUNT=300")
    assert paused.returncode == 0, paused.stderr[-3000:]
    fetched = dict(site.pages())
    assert len(fetched) < PAGES
    other = crawl(tmp_path, site, *resumed_by, f"JOBDIR={job}")
    assert other.returncode == 1 and message in other.stderr, other.stderr[-3000:]
    assert "bloomline_bad_settings" in other.stderr
    assert dict(site.pages()) == fetched  # refused before any request
    resumed = crawl(tmp_path, site, *made_by, f"JOBDIR={job}")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert len(site.pages()) == PAGES


ODD_FILTER = '''
from bloomline.scrapy import BloomDupeFilter


class OddPagesSeen(BloomDupeFilter):
    def request_seen(self, request):
        return request.url.rstrip("/").rsplit("/", 1)[-1].isdigit() and int(request.url.rsplit("/", 1)[-1]) % 2 == 1
'''


def test_journal_scheduler_refuses_a_dupefilter_whose_request_seen_it_would_not_call(site: Site,
                                                                                     tmp_path: Path) -> None:
    (tmp_path / "odd_filter.py").write_text(ODD_FILTER)
    settings = [s for s in JOURNAL if not s.startswith("DUPEFILTER_CLASS=")]
    r = crawl(tmp_path, site, *settings, "DUPEFILTER_CLASS=odd_filter.OddPagesSeen", f"JOBDIR={tmp_path / 'job'}")
    assert r.returncode == 1, r.stderr[-3000:]
    assert "overrides request_seen, which it would not call" in r.stderr and "bloomline_bad_settings" in r.stderr
    assert not site.pages()


def test_the_redis_filter_under_scrapys_own_jobdir_queue_warns_that_a_kill_loses_requests(
        redis_server: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Scrapy's JOBDIR queue survives a pause, not a kill -9, and the
    requests it then loses stay recorded in Redis: said at the start, and
    not under JournalScheduler, which keeps them."""
    pytest.importorskip("redis")
    from scrapy.settings import Settings

    from bloomline.scrapy import RedisBloomDupeFilter

    base = {"REDIS_URL": redis_server.url, "JOBDIR": str(tmp_path / "job"), "BLOOMLINE_REDIS_KEY": "guard"}
    for scheduler, warned in ((None, True), ("bloomline.scrapy.JournalScheduler", False)):
        caplog.clear()
        with caplog.at_level("WARNING", logger="scrapy.dupefilters"):
            df = RedisBloomDupeFilter.from_settings(Settings({**base, **({"SCHEDULER": scheduler} if scheduler else {})}))
            df.close("finished")
        said = [r.getMessage() for r in caplog.records if "not over a kill" in r.getMessage()]
        assert bool(said) == warned, (scheduler, said)
        if warned:
            assert "'guard'" in said[0] and "JournalScheduler" in said[0]
