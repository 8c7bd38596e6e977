"""Scrapy dupefilters backed by bloomline.

``DUPEFILTER_CLASS = "bloomline.scrapy.BloomDupeFilter"``
    A local filter: a scalable chain (bloomline.scalable) whose first stage
    holds ``BLOOMLINE_CAPACITY`` fingerprints; it grows past that by adding
    stages, logging each one. With ``JOBDIR`` its stages are files in the
    job directory, mapped for writing and verified once when a crawl
    resumes, so a paused crawl resumes from them and a crawl killed with
    SIGKILL loses none of the requests it recorded.

``DUPEFILTER_CLASS = "bloomline.scrapy.RedisBloomDupeFilter"``
    One growing filter in Redis (a chain on ``RedisStages``) shared by every
    crawl process, and a drop-in for scrapy-redis's dupefilter
    (its scheduler reads ``DUPEFILTER_CLASS`` too): it reads scrapy-redis's connection
    settings and key. Redis decides what is new, so among processes a page
    is fetched once; a small local front filter answers for fingerprints
    this process has already asked about, so only a first sighting costs a
    round trip.

What "new" means when Redis fails: a request whose check could not be
made is never dropped as a duplicate. It is kept in a local spill journal
(``<key>.<pid>-<random>.unchecked.journal`` in JOBDIR, or in Scrapy's
``.scrapy/bloomline`` data directory) and the engine is paused while the filter retries Redis
with backoff for ``BLOOMLINE_REDIS_RETRY_TIMEOUT`` seconds. If Redis comes
back, the spilled requests are checked again and scheduled; if not, the
spider closes with reason ``bloomline_redis_unavailable``, one ERROR line,
and ``scrapy crawl`` exits 1. The next crawl of the spider checks the
spilled requests first. A request whose check was sent but not answered
may or may not be recorded: it is scheduled again without the check, so it
is fetched at least once (perhaps twice across processes), never lost.

Recrawls (``BLOOMLINE_RECRAWL_AFTER``, seconds; both filters): a
request whose fingerprint was first let through longer ago than that is
new again, so its page is fetched again. The local filter is then a
``WindowedBloomFilter`` (bloomline.windowed) with a window of that many
seconds in 4 generations: a page is fetched again between
``BLOOMLINE_RECRAWL_AFTER`` and 1.25 times it after it was first let
through (seeing it again meanwhile does not postpone that: adds use
``refresh=False``, or a page linked from everywhere would never be fetched
again). ``BLOOMLINE_CAPACITY`` is then the distinct requests per window
(every generation holds that many; memory is 5 filters). With ``JOBDIR``
the filter is the file ``bloomline-recrawl.blf`` there, loaded when a crawl
starts (generations that expired meanwhile are dropped) and saved
atomically at close and at most every minute while crawling: a crawl
killed with SIGKILL forgets at most the last minute's requests, whose
pages are then fetched again (a duplicate, never a page lost).
The Redis filter keeps the window for the whole fleet in a
``bloomline.redis.RedisWindowedFilter`` at the key ``<key>:recrawl``
(the same window, generations, capacity and error rate; refresh=False;
plain backend), the Redis server's clock deciding the generations. Every
check goes to Redis: it has no front filter (a local cache could answer
"seen" after the server's window let the page go). ``SCHEDULER_PERSIST``
keeps the window between crawls (off: deleted at close); the outage spill
rechecks with the same add. Crawls sharing a key must agree on the
setting: a chain at the key is refused with it, a recrawl filter at
``<key>:recrawl`` without it (one ERROR line each), as are
``BLOOMLINE_REDIS_BACKEND = "module"`` and a chain imported from
scrapy-redis's set. ``BLOOMLINE_REDIS_REPLICAS`` works as for the chain.

Settings: ``BLOOMLINE_CAPACITY`` (100,000: the first stage; later stages
are 2x larger), ``BLOOMLINE_ERROR_RATE`` (0.0001: the chance a new page is
dropped, for the whole chain; the Redis filter gives a tenth of it to its
front filter), ``BLOOMLINE_LAYOUT`` ("blocked"); for Redis ``REDIS_URL`` or
``REDIS_HOST``/``REDIS_PORT``/``REDIS_DB``, ``REDIS_PARAMS`` (as
scrapy-redis reads them; ``BLOOMLINE_REDIS_URL``, ``BLOOMLINE_REDIS_HOST``,
``BLOOMLINE_REDIS_PORT``, ``BLOOMLINE_REDIS_PARAMS`` override them),
``SCHEDULER_DUPEFILTER_KEY`` ("%(spider)s:dupefilter";
``BLOOMLINE_REDIS_KEY`` overrides it), ``SCHEDULER_PERSIST`` (False: the
filter is deleted when the crawl closes), ``BLOOMLINE_REDIS_RETRY_TIMEOUT``
(30 seconds), ``BLOOMLINE_REDIS_BACKEND`` ("auto"),
``BLOOMLINE_REDIS_REPLICAS`` (0) and ``BLOOMLINE_REDIS_REPLICAS_TIMEOUT``
(1 second); and Scrapy's own ``DUPEFILTER_DEBUG`` and ``JOBDIR``.

Durability: with ``BLOOMLINE_REDIS_REPLICAS = n`` each check that records
a fingerprint waits (Redis's WAIT) until n replicas have it. A check that
times out is answered by the primary all the same (a new page is
fetched), logged as a WARNING (once a minute at most) and counted in
``bloomline/not_durable``: those fingerprints are lost if the primary fails
before a replica has them, and their pages fetched again (a duplicate,
never a page lost). Without it (0) a failover or a restart from an older
RDB may forget recent fingerprints the same way.

A bad setting stops the crawl before its first request with one ERROR line
naming the setting and the value (reason ``bloomline_bad_settings``; a
damaged JOBDIR filter, ``bloomline_damaged_jobdir``); a JOBDIR filter that
cannot be written while crawling (a full disk) stops it the same way
(``bloomline_filter_unwritable``), keeping the request it could not
record. ``scrapy crawl`` then exits 1. Both filters log to ``scrapy.dupefilters`` and set the stats
``bloomline/stages``, ``bloomline/fill``, ``bloomline/expected_fp_rate`` and
``bloomline/approx_count`` at close.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Optional, Union, cast

from scrapy.http import Request
from scrapy.utils.job import job_dir

from .._layouts import setting_layout
from .._stores import DirectoryLock
from ..scalable import ChainMismatch, DirectoryStages, ScalableBloomFilter, StagesInUse
from ..windowed import WindowedBloomFilter
from ._base import _DupeFilter
from ._crawl import REASON_IN_USE, _Refused
from ._redis_filter import RedisBloomDupeFilter
from ._settings import _Config, _keeps_journal, _mismatch
from .fingerprints import as_key
from .journal import JOURNAL_HEAD_BYTES, JOURNAL_NAME

# Names this module held before the package was split, still importable from here.
from ._crawl import REASON_JOBDIR as REASON_JOBDIR, REASON_REDIS as REASON_REDIS
from ._crawl import REASON_UNWRITABLE as REASON_UNWRITABLE
from ._crawl import REASON_SETTINGS as REASON_SETTINGS, logger as logger
from ._settings import DEFAULT_CAPACITY as DEFAULT_CAPACITY, DEFAULT_ERROR_RATE as DEFAULT_ERROR_RATE
from ._settings import DEFAULT_RETRY_TIMEOUT_S as DEFAULT_RETRY_TIMEOUT_S, FRONT_SHARE as FRONT_SHARE
from ._settings import GROWTH as GROWTH, TIGHTENING as TIGHTENING
from ._settings import RECRAWL_GENERATIONS as RECRAWL_GENERATIONS  # shared with the Redis filter

if TYPE_CHECKING:
    from .._core import Layout

__all__ = ["BloomDupeFilter", "RedisBloomDupeFilter"]

RECRAWL_FILE = "bloomline-recrawl.blf"
# Scrapy's RFPDupeFilter's record in JOBDIR (rfp_fingerprints reads both its forms), imported when found.
RFP_SEEN = "requests.seen"
RFP_LINE_MAX = 4096
# Seconds between saves of a recrawl filter to JOBDIR while crawling: what a
# killed crawl forgets (and fetches again) is at most this much.
RECRAWL_SAVE_EVERY = 60.0


class RfpImportRefused(ValueError):
    """JOBDIR's requests.seen (Scrapy's RFPDupeFilter's) cannot be taken in (why, naming it, in the message)."""


class RecrawlMismatch(ValueError):
    """JOBDIR's recrawl filter was made with other settings (which, in the message)."""


class BloomDupeFilter(_DupeFilter):
    """Scrapy's duplicate filter on a growing Bloom filter (see the module doc)."""

    label = "BloomDupeFilter"
    """The name at the start of this filter's log lines."""
    unwritable: Optional[OSError] = None
    """The first write to JOBDIR's filter that failed (the crawl stopped), or None."""

    def __init__(
        self,
        path: str | None = None,
        debug: bool = False,
        *,
        fingerprinter: Any = None,
        capacity: int = DEFAULT_CAPACITY,
        error_rate: float = DEFAULT_ERROR_RATE,
        layout: Layout = "blocked",
        stats: Any = None,
        verify: bool = True,
        recrawl_after: Optional[float] = None,
    ) -> None:
        """path: a directory for the stage files (JOBDIR); verify: check each
        stage file's payload once when resuming (O(size), once a crawl).
        recrawl_after: seconds after which a request is new again (a
        WindowedBloomFilter, kept in path's RECRAWL_FILE)."""
        self._init_common(fingerprinter, debug, stats)
        self._target = error_rate
        self.path = path
        self.seen: Union[ScalableBloomFilter, WindowedBloomFilter]
        self._recrawl_file = Path(path) / RECRAWL_FILE if path and recrawl_after is not None else None
        self._saved_at = time.monotonic()
        if path:  # (JOBDIR holds one mode's record: the other's would make every request new again, silently)
            if recrawl_after is None and (Path(path) / RECRAWL_FILE).exists():
                raise RecrawlMismatch(f"{Path(path) / RECRAWL_FILE} was made with BLOOMLINE_RECRAWL_AFTER set, this "
                                      "crawl has none: set it as that crawl did, or remove the file to start anew")
            if recrawl_after is not None and DirectoryStages.indices_in(path):
                raise RecrawlMismatch(f"{path} holds the requests seen by a crawl without BLOOMLINE_RECRAWL_AFTER "
                                      f"({DirectoryStages.FILES}): unset it as that crawl did, or remove those files "
                                      "to start anew")
        self._jobdir_lock: Optional[DirectoryLock] = None
        if recrawl_after is not None:
            if path:  # (one crawl at a time, as a chain's DirectoryStages: two saved the window over each other)
                Path(path).mkdir(parents=True, exist_ok=True)
                self._jobdir_lock = DirectoryLock(Path(path) / DirectoryStages.LOCK, "the recrawl window in")
                self._jobdir_lock.take()
            try:
                self.seen = self._windowed(capacity, error_rate, layout, recrawl_after)
            except BaseException:
                self._let_go_of_jobdir()
                raise
        else:
            store = DirectoryStages(path, verify=verify) if path else None
            self.seen = ScalableBloomFilter(capacity, error_rate, growth=GROWTH, tightening=TIGHTENING,
                                            layout=layout, store=store, on_grow=self._grew)
        if path and (Path(path) / RFP_SEEN).exists():
            try:
                self._take_rfp_seen(Path(path) / RFP_SEEN)
            except BaseException:
                self._let_go_of_jobdir()  # (the crawl is refused)
                raise

    def _take_rfp_seen(self, source: Path) -> None:
        """JOBDIR of a crawl made with Scrapy's RFPDupeFilter (its
        requests.seen): every fingerprint is recorded here, then the file
        renamed requests.seen.imported, so a switch of DUPEFILTER_CLASS
        fetches no page again (a crawl killed before the rename imports it
        again: adding twice changes nothing). RfpImportRefused, naming the
        file, where it cannot be read or taken in."""
        try:
            count, chunk, fingerprints = 0, [], rfp_fingerprints(source)
            for fp in fingerprints:
                count += 1
                chunk.append(fp)
                if isinstance(self.seen, WindowedBloomFilter) and count > self.seen.capacity:
                    # (all go to the current generation: they must fit it; the filter, in memory, is dropped)
                    total = count + sum(1 for _ in fingerprints)
                    raise RfpImportRefused(
                        f"{source} holds {total:,} fingerprints of Scrapy's RFPDupeFilter, more than one recrawl "
                        f"generation holds (BLOOMLINE_CAPACITY={self.seen.capacity:,}): set BLOOMLINE_CAPACITY to at "
                        "least that, or move the file away to fetch those pages again now")
                if len(chunk) == 100_000:
                    self._record_all(chunk)
                    chunk = []
            self._record_all(chunk)
            if isinstance(self.seen, WindowedBloomFilter) and self._recrawl_file is not None:
                self._save_recrawl()
            kept, n = source.with_name(RFP_SEEN + ".imported"), 1
            while kept.exists():  # (an earlier switch's record stays)
                kept, n = source.with_name(f"{RFP_SEEN}.imported.{n}"), n + 1
            os.replace(source, kept)
        except (ValueError, OSError) as e:
            if isinstance(e, RfpImportRefused):
                raise
            raise RfpImportRefused(f"cannot take in {source} (Scrapy's RFPDupeFilter's record): {e}") from None
        logger.info("%s: recorded the %d fingerprints of Scrapy's RFPDupeFilter in %s (now %s)",
                    self.label, count, source, kept.name)

    def _record_all(self, keys: list[bytes]) -> None:
        if isinstance(self.seen, WindowedBloomFilter):
            self.seen.add_many(keys, refresh=False)
        elif keys:
            self.seen.add_many(keys)

    def _windowed(self, capacity: int, error_rate: float, layout: Layout, window: float) -> WindowedBloomFilter:
        """The recrawl filter: JOBDIR's (made with the same settings, or
        ValueError naming them), or a new one."""
        made = WindowedBloomFilter(capacity, error_rate, window=window, generations=RECRAWL_GENERATIONS, layout=layout)
        if self._recrawl_file is None or not self._recrawl_file.exists():
            return made
        kept = WindowedBloomFilter.load(self._recrawl_file)
        for setting, have, want in (("BLOOMLINE_RECRAWL_AFTER", kept.window, made.window),
                                    ("BLOOMLINE_CAPACITY", kept.capacity, made.capacity),
                                    ("BLOOMLINE_ERROR_RATE", kept.error_rate, made.error_rate),
                                    ("BLOOMLINE_LAYOUT", setting_layout(kept.layout), made.layout)):
            if have != want:  # (the layout as the setting names it: "standard" for either index)
                raise RecrawlMismatch(f"{self._recrawl_file} was made with {setting}={have!r}, this crawl has "
                                      f"{want!r}: set it as that crawl did, or remove the file to start anew")
        return kept

    def _parts(self) -> tuple[int, str]:
        if isinstance(self.seen, WindowedBloomFilter):
            return len(self.seen.live_generations), "generation"
        return self.seen.num_stages, "stage"

    @classmethod
    def from_crawler(cls, crawler: Any) -> BloomDupeFilter:
        """Scrapy's scheduler makes the filter from the crawl's settings (the BLOOMLINE settings, JOBDIR)."""
        return cls._build(crawler.settings, crawler)

    @classmethod
    def from_settings(cls, settings: Any) -> BloomDupeFilter:
        """The older entry point (scrapy-redis's scheduler, and Scrapy's
        before 2.14): a filter from settings alone, without stats; a bad
        setting or a damaged JOBDIR raises ValueError."""
        return cls._build(settings, None)

    @classmethod
    def _build(cls, settings: Any, crawler: Any) -> BloomDupeFilter:
        path = job_dir(settings)
        try:
            _check_journal_kept(path, settings)
            try:
                config = _Config(settings)
                config.check_local_sizes()
                self = cls(path, config.debug, fingerprinter=getattr(crawler, "request_fingerprinter", None),
                           capacity=config.capacity, error_rate=config.error_rate, layout=config.layout,
                           stats=getattr(crawler, "stats", None), recrawl_after=config.recrawl_after)
            except ChainMismatch as e:
                raise _mismatch(f"the filter in JOBDIR {path!r}", e, settings, 1.0) from None
            except StagesInUse:
                raise _Refused(REASON_IN_USE, f"JOBDIR {path!r} is in use by another crawl (it holds "
                                              f"{DirectoryStages.LOCK}): two crawls on one JOBDIR would each fill "
                                              "its filter's stages, past its error rate. Give each its own "
                                              "JOBDIR") from None
            except (RecrawlMismatch, RfpImportRefused) as e:
                raise _Refused(REASON_SETTINGS if isinstance(e, RecrawlMismatch) else REASON_JOBDIR, str(e)) from None
            except (ValueError, OSError) as e:
                raise _jobdir_refusal(path, e, recrawl=config.recrawl_after is not None) from None
        except _Refused as e:
            if crawler is None:  # no crawl to stop: the caller hears it
                raise ValueError(str(e)) from None
            return cast("BloomDupeFilter", cls._refused_filter(crawler, e))
        self._watch(crawler)
        return self

    def request_seen(self, request: Request) -> bool:
        """True to drop the request: its fingerprint was recorded before (or is a false positive); records it otherwise."""
        if self.refused is not None:
            return False  # queued, never fetched: the crawl is closing
        return not self.record_fingerprint(self.fingerprint(request))

    def has_fingerprint(self, fp: bytes) -> bool:
        """Was this fingerprint recorded (or is it a false positive)? Records nothing."""
        return fp in self.seen

    def record_fingerprint(self, fp: bytes) -> bool:
        """Record a fingerprint; True when it was new (with
        BLOOMLINE_RECRAWL_AFTER: when it was not let through within it).
        Where JOBDIR's files cannot be written (a full disk: a stage the
        chain cannot grow, a recrawl save) the crawl stops (_unwritable) and
        a request that could not be recorded is new: kept, never dropped."""
        if isinstance(self.seen, WindowedBloomFilter):
            try:
                new = self.seen.add(fp, refresh=False)  # (in memory: the save below is what may fail)
            except Warning as e:  # the capacity warning made an error, after the add took the key: its answer is
                logger.warning("%s: %s", self.label, e)  # lost, so the page is fetched (at least once, never lost)
                new = True
            if (self._recrawl_file is not None and self.unwritable is None
                    and time.monotonic() - self._saved_at > RECRAWL_SAVE_EVERY):
                try:
                    self._save_recrawl()
                except OSError as e:
                    self._unwritable(e)
            return new
        try:
            return bool(self.seen.add(fp))
        except OSError as e:  # (a stage the chain could not make: nothing recorded)
            self._unwritable(e)
            return True

    def _unwritable(self, error: OSError, closing: bool = False) -> None:
        """JOBDIR's filter cannot be written: stop the crawl (once; closing:
        it is closing already), one ERROR line, reason REASON_UNWRITABLE,
        exit 1. What it recorded since its last write is fetched again on
        resume (a duplicate, never a page lost)."""
        if self.unwritable is not None:
            return
        self.unwritable = error
        stop = ("the crawl stops (reason %r)" if getattr(self, "crawler", None) is not None else
                "made without a crawler (from_settings), it cannot stop the crawl (reason %r): stop it")
        self.error_log.error("%s cannot write its record of the requests seen in JOBDIR %r (%s): " + stop +
                             "; free some room and resume it: what was recorded since the last write is fetched "
                             "again, and requests it cannot record are let through meanwhile",
                             self.label, self.path, error, REASON_UNWRITABLE)
        if closing:
            self.failed = True  # (exit 1, marked when the spider has closed)
        else:
            self._close_spider(REASON_UNWRITABLE)

    def leave_jobdir(self) -> None:
        """Another crawl holds this JOBDIR (JournalScheduler refused it): this
        filter writes nothing there, its recrawl window included (a save
        would put back what it loaded over what that crawl saved since)."""
        self._recrawl_file = None

    def _save_recrawl(self) -> None:
        assert self._recrawl_file is not None and isinstance(self.seen, WindowedBloomFilter)
        self.seen.save(self._recrawl_file)
        self._saved_at = time.monotonic()

    def close(self, reason: str = "") -> None:
        """Scrapy's scheduler, at the end: logs the summary; the filter is saved (BLOOMLINE_RECRAWL_AFTER) or closed (a JOBDIR's file flushed)."""
        if getattr(self, "seen", None) is not None:
            try:
                self._summary()
            finally:  # (the state is kept whatever the summary met)
                try:
                    if isinstance(self.seen, WindowedBloomFilter) and self._recrawl_file is not None:
                        try:
                            self._save_recrawl()
                        except OSError as e:  # (the file saved last stays: what came since is fetched again)
                            self._unwritable(e, closing=True)
                finally:
                    self._let_go_of_jobdir()

    def _let_go_of_jobdir(self) -> None:
        """The chain's files closed, and JOBDIR's lock let go (a chain's, or the recrawl window's)."""
        if isinstance(getattr(self, "seen", None), ScalableBloomFilter):
            self.seen.close()
        if self._jobdir_lock is not None:
            self._jobdir_lock.close()


def rfp_fingerprints(source: Path) -> Iterator[bytes]:
    """The fingerprints in requests.seen, read a block at a time. Scrapy
    2.19 and later write each as a 2-byte big-endian length and its bytes
    (the file starts with a control byte: a length under 8,192 bytes);
    earlier ones a line of hex each (an override's other text as UTF-8,
    as as_key takes it). A record cut short by a kill ends it, as Scrapy reads it."""
    with open(source, "rb") as f:
        first = f.read(1)
        binary = first != b"" and first[0] < 0x20 and first not in b"\t\r\n"
        f.seek(0)
        buffer, line = b"", 0
        while block := f.read(1 << 20):
            buffer += block
            if binary:
                at = 0
                while at + 2 <= len(buffer) and at + 2 + int.from_bytes(buffer[at:at + 2], "big") <= len(buffer):
                    size = int.from_bytes(buffer[at:at + 2], "big")
                    if size:
                        yield buffer[at + 2:at + 2 + size]
                    at += 2 + size
                buffer = buffer[at:]
                continue
            *lines, buffer = buffer.split(b"\n")
            if len(buffer) > RFP_LINE_MAX:
                raise ValueError(f"{source}, line {line + len(lines) + 1}: longer than {RFP_LINE_MAX} bytes, "
                                 "not a fingerprint")
            for text in lines:
                line += 1
                if len(text) > RFP_LINE_MAX:
                    raise ValueError(f"{source}, line {line}: longer than {RFP_LINE_MAX} bytes, not a fingerprint")
                if text.strip():
                    yield _text_key(source, line, text)
        if not binary and buffer.strip():
            yield _text_key(source, line + 1, buffer)


def _text_key(source: Path, line: int, text: bytes) -> bytes:
    try:
        return as_key(text.strip().decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError(f"{source}, line {line}: not UTF-8 text, not a fingerprint") from None


def _check_journal_kept(path: Optional[str], settings: Any) -> None:
    """JOBDIR's request journal, holding pending requests, is resumed only
    by JournalScheduler: under another scheduler they would be recorded as
    seen and never fetched (refused, naming the setting). A journal of a
    crawl that finished holds its magic only."""
    journal = Path(path or ".") / JOURNAL_NAME
    try:
        pending = path is not None and journal.stat().st_size > JOURNAL_HEAD_BYTES
    except OSError:
        return
    if pending and not _keeps_journal(settings):
        raise _Refused(REASON_SETTINGS, f"JOBDIR {path!r} holds the pending requests of JournalScheduler "
                                        f"({journal}), which SCHEDULER {settings.get('SCHEDULER')!r} does not read: set SCHEDULER = "
                                        "'bloomline.scrapy.JournalScheduler' as that crawl did until it finishes, or "
                                        "start this crawl with a new JOBDIR")


def _jobdir_refusal(path: Optional[str], error: Exception, recrawl: bool = False) -> _Refused:
    journal = Path(path or ".") / JOURNAL_NAME
    what = (f"the request journal {journal} still holds the pending requests; " if journal.exists() else "")
    files = f"{RECRAWL_FILE} file" if recrawl else f"{DirectoryStages.FILES} files and {DirectoryStages.MADE}"
    return _Refused(REASON_JOBDIR, f"BloomDupeFilter cannot resume from JOBDIR {path!r}: {error}; {what}"
                                   f"remove the damaged {files} to resume without the record of "
                                   "what was seen (pages may be fetched again), or start with a new JOBDIR")
