"""The dupefilter contracts Scrapy 2.19 and scrapy-redis 0.9 document, held by
both of bloomline's dupefilters: built by Scrapy's scheduler (from_crawler),
by scrapy-redis's (from_spider, and its older from_settings), filtering,
JOBDIR or SCHEDULER_PERSIST resume, REQUEST_FINGERPRINTER_CLASS, a
subclass's request_fingerprint override (deprecated but honoured, the
scrapy-splash recipe), the log contract and its stat, and `.logger`. The
checks follow those projects' own tests (tests/test_dupefilters.py of
Scrapy's sdist, tests/test_dupefilter.py of scrapy-redis's)."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("scrapy")
redis = pytest.importorskip("redis")

from scrapy import Spider  # noqa: E402
from scrapy.core.scheduler import Scheduler  # noqa: E402
from scrapy.exceptions import ScrapyDeprecationWarning  # noqa: E402
from scrapy.http import Request  # noqa: E402
from scrapy.settings import Settings  # noqa: E402
from scrapy.utils.misc import build_from_crawler  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402

from bloomline.scrapy import BloomDupeFilter, RedisBloomDupeFilter  # noqa: E402
from conftest import RedisServer, fill_disk  # noqa: E402

KINDS = ["local", "redis"]


class SimpleSpider(Spider):
    name = "simple"


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Settings for one of our dupefilters (Redis: a fresh server)."""
    if request.param == "local":
        yield {"DUPEFILTER_CLASS": BloomDupeFilter}
        return
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield {"DUPEFILTER_CLASS": RedisBloomDupeFilter, "BLOOMLINE_REDIS_URL": server.url,
           "SCHEDULER_PERSIST": True}
    server.stop()


def _subclass(base: type, **attrs: Any) -> type:
    return type(f"My{base.__name__}", (base,), attrs)


def _dupefilter(settings: dict[str, Any], *, crawler: Any = None) -> Any:
    """As Scrapy's tests make one: through Scheduler, from a crawler."""
    crawler = crawler or get_crawler(SimpleSpider, settings_dict=settings)
    df = build_from_crawler(Scheduler, crawler).df
    df.open()
    return df


def test_filter(kind: dict[str, Any]) -> None:
    df = _dupefilter(kind)
    r1, r2, r3 = (Request(f"http://scrapytest.org/{p}") for p in ("1", "2", "2"))
    assert not df.request_seen(r1) and df.request_seen(r1)
    assert not df.request_seen(r2) and df.request_seen(r3)
    df.close("finished")


def test_from_crawler_is_how_scrapy_builds_it(kind: dict[str, Any]) -> None:
    class FromCrawler(kind["DUPEFILTER_CLASS"]):  # type: ignore[misc, name-defined]
        @classmethod
        def from_crawler(cls, crawler: Any) -> Any:
            df = super().from_crawler(crawler)
            df.method = "from_crawler"
            return df

    df = _dupefilter({**kind, "DUPEFILTER_CLASS": FromCrawler, "DUPEFILTER_DEBUG": True})
    assert df.debug and df.method == "from_crawler"
    df.close("finished")


def test_resume(kind: dict[str, Any], tmp_path: Path) -> None:
    """JOBDIR (the local filter), SCHEDULER_PERSIST (Redis): a second
    crawl remembers the first's requests."""
    settings = {**kind, "JOBDIR": str(tmp_path)}
    r1, r2 = Request("http://scrapytest.org/1"), Request("http://scrapytest.org/2")
    df = _dupefilter(settings)
    assert not df.request_seen(r1) and df.request_seen(r1)
    df.close("finished")
    df2 = _dupefilter(settings)
    assert df2 is not df
    assert df2.request_seen(r1) and not df2.request_seen(r2) and df2.request_seen(r2)
    df2.close("finished")


def test_request_fingerprinter_class_decides(kind: dict[str, Any]) -> None:
    r1, r2 = Request("http://scrapytest.org/index.html"), Request("http://scrapytest.org/INDEX.html")
    df = _dupefilter(kind)
    assert not df.request_seen(r1) and not df.request_seen(r2)
    df.close("finished")

    class CaseInsensitive:
        def fingerprint(self, request: Request) -> bytes:
            return hashlib.sha1(request.url.lower().encode()).digest()

    df = _dupefilter({**kind, "REQUEST_FINGERPRINTER_CLASS": CaseInsensitive, "BLOOMLINE_REDIS_KEY": "other"})
    assert not df.request_seen(r1) and df.request_seen(r2)
    df.close("finished")


def test_a_request_fingerprint_override_is_honoured_with_scrapys_warning(kind: dict[str, Any]) -> None:
    """The scrapy-splash recipe: subclass the dupefilter, override
    request_fingerprint (hex text, as Scrapy's and scrapy-redis's return)."""
    legacy = _subclass(kind["DUPEFILTER_CLASS"],
                       request_fingerprint=lambda self, request: hashlib.sha1(request.url.lower().encode()).hexdigest())
    with pytest.warns(ScrapyDeprecationWarning, match=r"Overriding My\w+DupeFilter\.request_fingerprint\(\) is "
                                                      r"deprecated, set the REQUEST_FINGERPRINTER_CLASS setting"):
        df = _dupefilter({**kind, "DUPEFILTER_CLASS": legacy})
    assert not df.request_seen(Request("http://scrapytest.org/index.html"))
    assert df.request_seen(Request("http://scrapytest.org/INDEX.html"))
    df.close("finished")


def test_an_override_returning_text_that_is_not_hex_still_decides(kind: dict[str, Any]) -> None:
    """scrapy-redis stored whatever the override returned (SADD): such text
    is a key too (its UTF-8), not an error."""
    lower = _subclass(kind["DUPEFILTER_CLASS"], request_fingerprint=lambda self, request: request.url.lower())
    with pytest.warns(ScrapyDeprecationWarning):
        df = _dupefilter({**kind, "DUPEFILTER_CLASS": lower})
    assert not df.request_seen(Request("http://scrapytest.org/A.html"))
    assert df.request_seen(Request("http://scrapytest.org/a.html"))
    df.close("finished")


def test_request_fingerprint_is_the_hex_of_what_is_recorded(kind: dict[str, Any]) -> None:
    """scrapy-redis's tests wrap request_fingerprint; its value is the hex of
    the fingerprint the crawler's fingerprinter gives."""
    crawler = get_crawler(SimpleSpider, settings_dict=kind)
    df = _dupefilter(kind, crawler=crawler)
    req = Request("http://example.com")
    assert df.request_fingerprint(req) == crawler.request_fingerprinter.fingerprint(req).hex()
    df.close("finished")


@pytest.mark.parametrize("debug", [False, True])
def test_the_log_contract_and_its_stat(kind: dict[str, Any], debug: bool, caplog: pytest.LogCaptureFixture) -> None:
    crawler = get_crawler(SimpleSpider, settings_dict={**kind, "DUPEFILTER_DEBUG": debug})
    spider = SimpleSpider.from_crawler(crawler)
    df = _dupefilter({}, crawler=crawler)
    r1 = Request("http://scrapytest.org/index.html")
    r2 = Request("http://scrapytest.org/index.html", headers={"Referer": "http://scrapytest.org/INDEX.html"})
    with caplog.at_level(logging.DEBUG):
        df.log(r1, spider)
        df.log(r2, spider)
    assert crawler.stats.get_value("dupefilter/filtered") == 2
    logged = [r for r in caplog.record_tuples if r[0] == "scrapy.dupefilters" and "Filtered duplicate" in r[2]]
    if debug:
        assert logged == [
            ("scrapy.dupefilters", logging.DEBUG,
             "Filtered duplicate request: <GET http://scrapytest.org/index.html> (referer: None)"),
            ("scrapy.dupefilters", logging.DEBUG,
             "Filtered duplicate request: <GET http://scrapytest.org/index.html> (referer: "
             "http://scrapytest.org/INDEX.html)")]
    else:  # the first only
        assert logged == [("scrapy.dupefilters", logging.DEBUG,
                           "Filtered duplicate request: <GET http://scrapytest.org/index.html> - no more duplicates "
                           "will be shown (see DUPEFILTER_DEBUG to show all duplicates)")]
    df.close("finished")


def test_logger_is_an_attribute(kind: dict[str, Any]) -> None:
    """scrapy-redis's test_log_dupes wraps df.logger.debug and counts calls."""
    from unittest import mock

    crawler = get_crawler(SimpleSpider, settings_dict=kind)
    df = _dupefilter({}, crawler=crawler)
    assert df.logger.name == "scrapy.dupefilters"
    spider = SimpleSpider.from_crawler(crawler)
    with mock.patch.object(df.logger, "debug", wraps=df.logger.debug) as debug:
        for _ in range(3):
            df.log(Request("http://example.com"), spider)
    assert debug.call_count == 1  # the first duplicate only, without DUPEFILTER_DEBUG
    df.close("finished")


def test_from_settings_is_scrapy_redis_older_entry_point(kind: dict[str, Any], tmp_path: Path) -> None:
    settings = Settings({**kind, "JOBDIR": str(tmp_path / "job"), "DUPEFILTER_DEBUG": True})
    df = kind["DUPEFILTER_CLASS"].from_settings(settings)
    assert df.debug
    assert not df.request_seen(Request("http://example.com")) and df.request_seen(Request("http://example.com"))
    if kind["DUPEFILTER_CLASS"] is RedisBloomDupeFilter:
        assert df.key.startswith("dupefilter:")  # scrapy-redis's one-time key
    df.close("finished")
    with pytest.raises(ValueError, match="BLOOMLINE_CAPACITY must be an integer >= 1, got 'many'"):
        kind["DUPEFILTER_CLASS"].from_settings(Settings({**kind, "BLOOMLINE_CAPACITY": "many"}))


def test_scrapy_redis_scheduler_uses_from_spider(tmp_path_factory: pytest.TempPathFactory) -> None:
    """scrapy-redis's scheduler calls from_spider in open(), and clear() on
    close unless SCHEDULER_PERSIST."""
    pytest.importorskip("scrapy_redis")
    from scrapy_redis.scheduler import Scheduler as RedisScheduler

    server = RedisServer(tmp_path_factory.mktemp("redis"))
    try:
        settings = {"DUPEFILTER_CLASS": "bloomline.scrapy.RedisBloomDupeFilter", "REDIS_URL": server.url,
                    "SCHEDULER_PERSIST": False}
        crawler = get_crawler(SimpleSpider, settings_dict=settings)
        spider = SimpleSpider.from_crawler(crawler)
        scheduler = RedisScheduler.from_crawler(crawler)
        scheduler.open(spider)
        assert isinstance(scheduler.df, RedisBloomDupeFilter) and scheduler.df.key == "simple:dupefilter"
        assert not scheduler.df.request_seen(Request("http://example.com"))
        assert redis.Redis.from_url(server.url).keys("{simple:dupefilter}:*")
        scheduler.close("finished")
        assert not redis.Redis.from_url(server.url).keys("{simple:dupefilter}:*")  # cleared
    finally:
        server.stop()


def test_a_recrawl_filter_past_its_capacity_is_saved_at_close(tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    """A generation with every bit set (its approx_count inf): the close's
    summary says so in words, and the JOBDIR's recrawl file is saved all the
    same, every fingerprint seen by the next crawl's filter."""
    import warnings

    from bloomline import CapacityWarning

    settings = Settings({"JOBDIR": str(tmp_path), "BLOOMLINE_RECRAWL_AFTER": 86400, "BLOOMLINE_CAPACITY": 100})
    fps = [hashlib.sha1(str(i).encode()).digest() for i in range(30_000)]
    df = BloomDupeFilter.from_settings(settings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CapacityWarning)  # (past capacity on purpose)
        for fp in fps:
            df.record_fingerprint(fp)
    assert df.seen.approx_count == float("inf")
    with caplog.at_level(logging.INFO, logger="scrapy.dupefilters"):
        df.close("finished")
    assert any("more requests than can be told seen" in r.getMessage() for r in caplog.records), caplog.text
    again = BloomDupeFilter.from_settings(settings)
    try:
        assert all(again.has_fingerprint(fp) for fp in fps[::100])
    finally:
        again.close("finished")


def test_a_recrawl_filter_whose_clock_stepped_back_is_saved_at_close(tmp_path: Path) -> None:
    """The clock stepped back by more than the window after the crawl's
    checks (the filter then refuses to answer for a fingerprint): the close
    still saves the recrawl file, as of its newest generation, and the file
    holds every fingerprint on a clock that caught up."""
    from bloomline import WindowedBloomFilter

    settings = Settings({"JOBDIR": str(tmp_path), "BLOOMLINE_RECRAWL_AFTER": 60})
    fps = [hashlib.sha1(str(i).encode()).digest() for i in range(1000)]
    df = BloomDupeFilter.from_settings(settings)
    assert all(df.record_fingerprint(fp) for fp in fps)
    t0 = df.seen.clock()
    df.seen._clock = lambda: t0 - 3600  # (an hour back: 60 generations of 15 s)
    with pytest.raises(ValueError, match="behind generation"):
        df.has_fingerprint(fps[0])
    df.close("finished")
    saved = WindowedBloomFilter.load(tmp_path / "bloomline-recrawl.blf", clock=lambda: t0)
    assert all(saved.__contains__(fp) for fp in fps)


def test_a_recrawl_save_onto_a_full_disk_stops_the_crawl_and_drops_nothing_unrecorded(
        small_fs: Any, caplog: pytest.LogCaptureFixture) -> None:
    """The recrawl filter's save every minute once raised from request_seen
    on a full disk, after the fingerprint was recorded: the request was
    never scheduled, and was seen from then on (a page never fetched); every
    later new request did the same. Now the failed save stops the crawl
    (one ERROR line, reason bloomline_filter_unwritable), each request gets
    its answer, and the close saves what it can once there is room."""
    from bloomline import WindowedBloomFilter
    from bloomline.scrapy.dupefilter import REASON_UNWRITABLE

    job = small_fs("256k")
    settings = Settings({"JOBDIR": str(job), "BLOOMLINE_RECRAWL_AFTER": 86400, "BLOOMLINE_CAPACITY": 1000})
    fps = [hashlib.sha1(str(i).encode()).digest() for i in range(100)]
    df = BloomDupeFilter.from_settings(settings)
    filler = fill_disk(job, 0)
    df._saved_at -= 3600  # (the minute between saves is up)
    with caplog.at_level(logging.ERROR, logger="scrapy.dupefilters"):
        assert [df.request_seen(Request(f"http://x/{i}")) for i in range(3)] == [False] * 3
        assert all(df.record_fingerprint(fp) for fp in fps)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and REASON_UNWRITABLE in errors[0] and "No space left" in errors[0], errors
    assert isinstance(df.unwritable, OSError) and df.failed
    assert df.request_seen(Request("http://x/0"))  # (let through once: a duplicate now)
    filler.unlink()
    df.close("finished")
    saved = WindowedBloomFilter.load(job / "bloomline-recrawl.blf")
    assert all(saved.__contains__(fp) for fp in fps)


def test_a_stage_the_chain_cannot_grow_on_a_full_disk_stops_the_crawl_and_drops_nothing_unrecorded(
        small_fs: Any, caplog: pytest.LogCaptureFixture) -> None:
    """A JOBDIR chain that must grow on a full disk once raised from
    request_seen for every new request (nothing recorded; under
    JournalScheduler each link was queued again, a loop). Now the crawl
    stops (one ERROR line, reason bloomline_filter_unwritable) and each
    request that could not be recorded is new: kept, never dropped."""
    from bloomline.scrapy.dupefilter import REASON_UNWRITABLE

    job = small_fs("256k")
    df = BloomDupeFilter.from_settings(Settings({"JOBDIR": str(job), "BLOOMLINE_CAPACITY": 100}))
    fill_disk(job, 0)
    fps = [hashlib.sha1(str(i).encode()).digest() for i in range(300)]  # (past the first stage)
    with caplog.at_level(logging.ERROR, logger="scrapy.dupefilters"):
        answers = [df.record_fingerprint(fp) for fp in fps]
    assert all(answers)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and REASON_UNWRITABLE in errors[0] and "No space left" in errors[0], errors
    assert df.seen.num_stages == 1 and isinstance(df.unwritable, OSError) and df.failed
    unrecorded = [fp for fp in fps if not df.has_fingerprint(fp)]
    assert unrecorded and all(df.record_fingerprint(fp) for fp in unrecorded)  # never dropped
    df.close("finished")


@pytest.mark.parametrize("recrawl", [None, 86400])
@pytest.mark.parametrize("sizes", [{"BLOOMLINE_CAPACITY": 10**13}, {"BLOOMLINE_CAPACITY": 10**18},
                                   {"BLOOMLINE_ERROR_RATE": 1e-300}])
def test_sizes_no_filter_can_have_are_a_bad_setting_not_a_damaged_jobdir(tmp_path: Path, sizes: dict[str, Any],
                                                                       recrawl: Any) -> None:
    """A capacity or error rate out of range was reported as a JOBDIR that
    cannot be resumed, telling the user to remove its (sound) filter files.
    It is a bad setting, named with its value, and JOBDIR is left as it was."""
    base = {"JOBDIR": str(tmp_path), "BLOOMLINE_RECRAWL_AFTER": recrawl}
    df = BloomDupeFilter.from_settings(Settings(base))
    df.record_fingerprint(b"kept")
    df.close("finished")
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(ValueError) as e:
        BloomDupeFilter.from_settings(Settings({**base, **sizes}))
    message = str(e.value)
    name, value = next(iter(sizes.items()))
    assert f"{name}={value!r}" in message and "makes no filter" in message and "JOBDIR" not in message, message
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == files


@pytest.mark.parametrize("recrawl", [None, 86400])
def test_a_jobdir_of_scrapys_own_dupefilter_is_taken_in_not_started_afresh(tmp_path: Path, recrawl: Any) -> None:
    """A JOBDIR whose crawl ran with Scrapy's RFPDupeFilter (requests.seen)
    was read as a fresh start after DUPEFILTER_CLASS changed to ours: every
    page fetched again, silently. Its fingerprints are recorded, the file
    renamed requests.seen.imported, and the next resume keeps them."""
    from scrapy.dupefilters import RFPDupeFilter

    requests = [Request(f"http://127.0.0.1/page/{i}") for i in range(2000)]
    crawler = get_crawler(SimpleSpider, settings_dict={"JOBDIR": str(tmp_path)})
    theirs = RFPDupeFilter.from_crawler(crawler)
    assert not any(theirs.request_seen(r) for r in requests)
    theirs.close("finished")
    assert (tmp_path / "requests.seen").stat().st_size > 0
    settings = {"JOBDIR": str(tmp_path), "BLOOMLINE_RECRAWL_AFTER": recrawl, "BLOOMLINE_CAPACITY": 5000}
    for run in range(2):  # (taken in, then resumed from our own files)
        ours = _dupefilter({**settings, "DUPEFILTER_CLASS": BloomDupeFilter}, crawler=get_crawler(
            SimpleSpider, settings_dict={**settings, "DUPEFILTER_CLASS": BloomDupeFilter}))
        assert all(ours.request_seen(r) for r in requests)
        assert not ours.request_seen(Request(f"http://127.0.0.1/new/{run}"))
        ours.close("finished")
        assert not (tmp_path / "requests.seen").exists() and (tmp_path / "requests.seen.imported").exists()


def test_requests_seen_of_scrapy_before_2_19_is_read_as_hex_lines(tmp_path: Path) -> None:
    """Scrapy before 2.19 wrote requests.seen as a hex fingerprint a line
    (an override's other text as it was): those are the keys recorded."""
    request = Request("http://127.0.0.1/old")
    fp = get_crawler(SimpleSpider).request_fingerprinter.fingerprint(request)
    (tmp_path / "requests.seen").write_text(f"{fp.hex()}\n\nnot-hex-text\n")
    df = BloomDupeFilter.from_settings(Settings({"JOBDIR": str(tmp_path)}))
    assert df.request_seen(request) and df.has_fingerprint(b"not-hex-text")
    assert not df.request_seen(Request("http://127.0.0.1/new"))
    df.close("finished")


def test_a_requests_seen_that_holds_no_fingerprints_is_refused_naming_the_line(tmp_path: Path) -> None:
    (tmp_path / "requests.seen").write_bytes(b"ab" * 20 + b"\n" + b"\xff\xfe\n")
    with pytest.raises(ValueError, match=r"requests.seen, line 2: not UTF-8") as e:
        BloomDupeFilter.from_settings(Settings({"JOBDIR": str(tmp_path)}))
    assert "remove the damaged" not in str(e.value)  # (the filter's files are sound: the import is refused)
    (tmp_path / "requests.seen").write_bytes(b"x" * 10_000)
    with pytest.raises(ValueError, match=r"requests.seen, line 1: longer than 4096 bytes"):
        BloomDupeFilter.from_settings(Settings({"JOBDIR": str(tmp_path)}))
    assert (tmp_path / "requests.seen").exists()


def test_requests_seen_with_long_fingerprints_in_scrapys_binary_form_is_read(tmp_path: Path) -> None:
    """A fingerprinter of its own may give keys of 256 bytes or more: the
    binary form's first byte is then not zero, and is still read as binary."""
    keys = [b"k" * 300, bytes(range(20)), b"x" * 5000]
    (tmp_path / "requests.seen").write_bytes(b"".join(len(k).to_bytes(2, "big") + k for k in keys))
    df = BloomDupeFilter.from_settings(Settings({"JOBDIR": str(tmp_path)}))
    assert all(df.has_fingerprint(k) for k in keys) and not df.has_fingerprint(b"k" * 299)
    df.close("finished")


def test_a_requests_seen_larger_than_a_recrawl_generation_is_refused_not_taken_in(tmp_path: Path) -> None:
    """Imported with BLOOMLINE_RECRAWL_AFTER, every fingerprint goes to the
    current generation: past its capacity it would call most new pages
    seen for a whole window. Refused, naming the count and the setting; the
    file is left where it was."""
    (tmp_path / "requests.seen").write_bytes(b"".join(b"\0\x14" + hashlib.sha1(str(i).encode()).digest()
                                                      for i in range(3000)))
    with pytest.raises(ValueError, match=r"holds 3,000 fingerprints .* \(BLOOMLINE_CAPACITY=1,000\)"):
        BloomDupeFilter.from_settings(Settings({"JOBDIR": str(tmp_path), "BLOOMLINE_RECRAWL_AFTER": 3600,
                                                "BLOOMLINE_CAPACITY": 1000}))
    assert (tmp_path / "requests.seen").exists() and not (tmp_path / "requests.seen.imported").exists()


def test_a_capacity_warning_made_an_error_drops_no_request_in_recrawl_mode(kind: dict[str, Any]) -> None:
    """With warnings as errors, a recrawl generation past its capacity
    raises its warning after the fingerprint was recorded: the request is
    kept (fetched), never dropped as seen, and the crawl goes on."""
    import warnings

    from bloomline import CapacityWarning

    df = _dupefilter({**kind, "BLOOMLINE_RECRAWL_AFTER": 86400, "BLOOMLINE_CAPACITY": 3})
    requests = [Request(f"http://scrapytest.org/{i}") for i in range(10)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", CapacityWarning)
        assert [df.request_seen(r) for r in requests] == [False] * 10
        assert [df.request_seen(r) for r in requests] == [True] * 10  # each was recorded
    assert not getattr(df, "failed", None)
    df.close("finished")


def test_a_recrawl_filter_made_again_with_other_settings_under_a_crawl_stops_it_and_drops_nothing(
        redis_server: RedisServer, caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    """Another crawl deleted the shared recrawl filter (SCHEDULER_PERSIST off)
    and a third made it again with another BLOOMLINE_RECRAWL_AFTER: this
    crawl's next check is refused. The request is kept to check later (not
    dropped, not raised out of the scheduler) and the crawl stops, failed."""
    from bloomline.redis import RedisWindowedFilter, delete_windowed

    df = _dupefilter({"DUPEFILTER_CLASS": RedisBloomDupeFilter, "BLOOMLINE_REDIS_URL": redis_server.url,
                      "BLOOMLINE_RECRAWL_AFTER": 3600, "SCHEDULER_PERSIST": True,
                      "JOBDIR": str(tmp_path)})  # (where the kept request is spilled)
    assert df.request_seen(Request("http://scrapytest.org/a")) is False
    key = df.seen.key
    delete_windowed(redis_server.url, key)
    RedisWindowedFilter(redis_server.url, key, 1000, 0.01, window=7200).add("x")
    late = Request("http://scrapytest.org/b")
    with caplog.at_level(logging.ERROR, logger="scrapy.dupefilters"):
        assert df.request_seen(late) is True and df._outages.was_just_spilled(late)  # kept to check later
    assert df.failed and "made again with other parameters" in caplog.text and "closing the spider" in caplog.text
    df.close("finished")


def test_an_unexpected_error_of_a_check_stops_the_crawl_with_its_traceback(
        redis_server: RedisServer, caplog: pytest.LogCaptureFixture, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An error of a check that is not Redis's (a defect: here injected into
    the check) keeps the request to check later and stops the crawl with
    one ERROR line that carries the error's traceback, not its repr only."""
    df = _dupefilter({"DUPEFILTER_CLASS": RedisBloomDupeFilter, "BLOOMLINE_REDIS_URL": redis_server.url,
                      "SCHEDULER_PERSIST": True, "JOBDIR": str(tmp_path)})

    def broken(fp: bytes) -> bool:
        raise ZeroDivisionError("a defect inside a check")

    monkeypatch.setattr(df, "_record", broken)
    late = Request("http://scrapytest.org/late")
    with caplog.at_level(logging.ERROR, logger="scrapy.dupefilters"):
        assert df.request_seen(late) is True and df._outages.was_just_spilled(late)  # kept to check later
    assert df.failed
    closing = [r for r in caplog.records if "closing the spider" in r.getMessage()]
    assert len(closing) == 1 and closing[0].exc_info is not None and closing[0].exc_info[0] is ZeroDivisionError
    assert "Traceback" in caplog.text and "in broken" in caplog.text
    df.close("finished")
