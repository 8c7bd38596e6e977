"""The Redis dupefilter's outages, one state machine: a check or a health
PING that finds Redis unreachable begins an outage and pauses the engine;
each request that could not be checked is spilled to a local
RequestJournal, never dropped; Redis is PINGed with backoff until it
answers (the engine resumes and the spilled requests are checked again and
scheduled) or until ``BLOOMLINE_REDIS_RETRY_TIMEOUT`` has passed (the
spider closes with reason ``bloomline_redis_unavailable``, the spill kept
for the next crawl of the spider, which checks it first)."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any, Optional, Protocol

from scrapy.http import Request

from .._units import noun
from ._crawl import REASON_REDIS, call_later, logger
from ._owners import OPEN, claim, journal_stems, left_journals, own_journal_path
from ._settings import _server_where
from .journal import JOURNAL_META_ID, JournalUnwritable, RequestJournal

HEALTH_INTERVAL = 5.0  # seconds between PINGs while Redis is well (scrapy-redis's queue may fail first)
_UNCHECKED = "bloomline_unchecked"  # request.meta key of a spilled request whose check was sent, unanswered


class _Filter(Protocol):
    """What the outage machine reads and calls on its filter."""

    label: str
    where: str  # Redis, as the log names it
    key: str
    server: Any
    retry_timeout_s: float
    crawler: Any
    failed: bool
    seen: Any

    def fingerprint(self, request: Request) -> bytes: ...

    def _record(self, fp: bytes) -> bool: ...

    def _inc(self, key: str) -> None: ...

    def _set(self, key: str, value: Any) -> None: ...

    def _close_spider(self, reason: str) -> None: ...


class Outages:
    """Outage detection, the spill of unchecked requests, the health probe
    and the recheck, for one RedisBloomDupeFilter (see the module doc)."""

    def __init__(self, dupefilter: _Filter, spill_dir: Path) -> None:
        self.dupefilter = dupefilter
        self.spill_dir = spill_dir
        self.began: Optional[float] = None  # monotonic time the current outage began
        # scrapy-redis: the scheduler pushes a new request to Redis after its
        # check; the filter notes the last one here, until its push is done.
        self.last_new: Optional[Request] = None
        self._queue_server: Any = None  # scrapy-redis's queue's Redis, PINGed with the filter's
        self._queue_where = ""
        self._where = ""  # the Redis the current outage is about, for the log
        self._resuming: Optional[tuple[float, float]] = None  # (began, probe delay) of an outage while its spill is handed on
        self._spill: Optional[RequestJournal] = None
        self._probe_delay = 0.0
        self._timer: Any = None
        self._just_spilled: Optional[Request] = None
        self._spider: Any = None

    @property
    def active(self) -> bool:
        """Is Redis away now (an outage begun, not yet over)?"""
        return self.began is not None

    def was_just_spilled(self, request: Request) -> bool:
        """Was this request the last one kept to check later (so not a
        duplicate for Scrapy's log)? Asked once."""
        if request is self._just_spilled:
            self._just_spilled = None
            return True
        return False

    # -- the spill ---------------------------------------------------------------------------

    def keep(self, request: Request, *, sent: bool) -> bool:
        """Spill the request to the local journal; True (the scheduler must
        not queue it: scrapy-redis's queue is in the unreachable Redis)."""
        error = self._spill_request(request, sent=sent)
        if error is not None:
            logger.warning("%s: cannot keep %s to check later (%s); queued unchecked", self.dupefilter.label, request,
                           error)
            return False
        self._just_spilled = request
        return True

    def _spill_request(self, request: Request, *, sent: bool) -> Optional[Exception]:
        """Push the request to the spill journal; the error if it could not."""
        if sent:
            request.meta[_UNCHECKED] = True
        try:
            self._spill_journal().push(request)
        except (ValueError, OSError) as e:
            request.meta.pop(_UNCHECKED, None)
            return e
        self.dupefilter._inc("bloomline/unchecked")
        return None

    # -- scrapy-redis's pushes ---------------------------------------------------------------

    def guard_pushes(self, scheduler: Any) -> None:
        """scrapy-redis pushes a request to its queue in Redis right after
        the check recorded it. A push that fails (the connection lost, a
        timeout) would lose a request recorded as seen, and a Redis back
        before the next check would begin no outage: the push is wrapped so
        that such a request is spilled, to be fetched once Redis is back (it
        is recorded: it is not checked again), and the outage begins. The
        queue's Redis is PINGed with the filter's from then on."""
        import redis  # here: redis is optional; the local filter does without it

        queue: Any = getattr(scheduler, "queue", None)
        push = getattr(queue, "push", None)
        if push is None or getattr(push, "_bloomline_guard", False):
            if push is None:
                logger.warning("%s: cannot watch the pushes of scheduler %r (no queue.push); a push that fails "
                               "after a check may lose its request", self.dupefilter.label, type(scheduler).__name__)
            return

        def push_or_spill(request: Request) -> Any:
            try:
                pushed = push(request)
            except (redis.ConnectionError, redis.TimeoutError) as e:
                self._push_failed(request, e)
                return None
            except redis.RedisError as e:  # refused by the server (out of memory, read-only, too large)
                self._push_failed(request, e, refused=True)
                return None
            if self.last_new is request:
                self.last_new = None
            return pushed

        push_or_spill._bloomline_guard = True  # type: ignore[attr-defined]
        queue.push = push_or_spill
        guard_flush(scheduler, self.dupefilter)
        self._queue_server = getattr(scheduler, "server", None)
        self._queue_where = f"{_server_where(self._queue_server)} (scrapy-redis's queue)"

    def _push_failed(self, request: Request, error: Exception, *, refused: bool = False) -> None:
        """A request's push to scrapy-redis's queue failed: spilled (as one
        whose check was sent: fetched without another check; a dont_filter
        request, never checked, is handed on as it was, and not recorded),
        and the outage begins, or the crawl stops where the server refused
        the push (as for a refused check); raises the push's error if the
        request cannot be spilled either."""
        if self.last_new is request:
            self.last_new = None
        spill_error = self._spill_request(request, sent=not request.dont_filter)
        if spill_error is not None:
            logger.error("%s: %s was recorded as seen, and neither queued in Redis (%s) nor kept to fetch later "
                         "(%s): it is lost to this crawl", self.dupefilter.label, request, error, spill_error)
            raise error
        if refused:
            self.fail(f"Redis at {self._queue_where} refused a push: {error}")
        else:
            self.begin(error, self._queue_where)

    def _spill_journal(self) -> RequestJournal:
        if self._spill is None:
            stem, _ = journal_stems(self.dupefilter.key, self.dupefilter.server, legacy_hashed=False)
            path = own_journal_path(self.spill_dir, stem, "unchecked")
            self._spill = RequestJournal(path, self._spider, fifo=True)
            OPEN.add(path.resolve())  # (another crawl of this process, of the same key, leaves it)
        return self._spill

    # -- outages -----------------------------------------------------------------------------

    def begin(self, error: Exception, where: Optional[str] = None) -> None:
        """Redis is unreachable (the filter's, or `where`): pause the engine
        and probe it with backoff."""
        df = self.dupefilter
        if self.began is not None:
            return
        self.began = time.monotonic()
        self._where = where or df.where
        if self.last_new is not None:
            # scrapy-redis pushes a new request right after its check; the
            # last one's push may have met the outage first. Recorded but
            # perhaps never queued: keep it to fetch again (at least once).
            last, self.last_new = self.last_new, None
            self.keep(last, sent=True)
            self._just_spilled = None
        if self._resuming is None:
            logger.warning("%s: Redis at %s unreachable (%s); the crawl is paused while it is retried for up to %g s",
                           df.label, self._where, error, df.retry_timeout_s)
        else:
            logger.info("%s: Redis at %s unreachable again as the kept requests are handed on (%s)", df.label,
                        self._where, error)
        engine = getattr(df.crawler, "engine", None)
        if engine is not None:
            engine.pause()
        self._probe_delay = 0.1
        self._schedule(self._probe_delay)

    def _schedule(self, delay: float) -> None:
        self._cancel_probe()
        self._timer = call_later(delay, self._probe)

    def _cancel_probe(self) -> None:
        # (a timer that has run is None: _probe clears it first)
        if self._timer is not None:
            with contextlib.suppress(Exception):  # (Twisted's AlreadyCalled/AlreadyCancelled)
                self._timer.cancel()
            self._timer = None

    def _probe(self) -> None:
        """PING Redis: every HEALTH_INTERVAL while it is well (scrapy-redis's
        queue may fail where no check does), with backoff in an outage."""
        import redis  # here: redis is optional; the local filter does without it

        self._timer = None
        df = self.dupefilter
        if df.failed or self._spider is None:
            return
        where = df.where
        try:
            df.server.ping()
            if self._queue_server is not None:
                where = self._queue_where
                self._queue_server.ping()
        except redis.RedisError as e:
            if self.began is None:
                self.begin(e, where)
                return
            self._where = where
            self._retry_later(e)
            return
        if self.began is not None:
            outage = (self.began, self._probe_delay)
            logger.info("%s: Redis at %s is back after %.1f s", df.label, self._where, time.monotonic() - self.began)
            self.began = None
            engine = getattr(df.crawler, "engine", None)
            if engine is not None:
                engine.unpause()
            self._resuming = outage
            try:
                self._recheck_spilled()
            except Exception as e:  # (a spill that cannot be rewritten, say): loud, the spill kept
                self.fail(f"handing on the requests kept while Redis was away failed: {e!r}")
                return
            finally:
                self._resuming = None
            if self.began is not None:
                # Gone again while the spill was handed on (say a push Redis
                # drops each time while PINGs pass): the same outage, whose
                # clock and backoff go on, so the retry timeout still ends it.
                self.began, self._probe_delay = outage
                self._retry_later(None)
                return
        self._schedule(HEALTH_INTERVAL)

    def _retry_later(self, error: Optional[Exception]) -> None:
        """The outage goes on: probe again after the next backoff step, or
        fail the crawl once BLOOMLINE_REDIS_RETRY_TIMEOUT has passed."""
        df = self.dupefilter
        assert self.began is not None
        waited = time.monotonic() - self.began
        if waited >= df.retry_timeout_s:
            self.fail(f"Redis at {self._where} unreachable for {waited:.1f} s ({error or 'gone again each time'})")
            return
        self._probe_delay = min(self._probe_delay * 2, 5.0)
        self._schedule(min(self._probe_delay, max(df.retry_timeout_s - waited, 0.01)))

    def fail(self, why: str, error: Optional[BaseException] = None) -> None:
        """Redis is lost to this crawl: close the spider (reason
        bloomline_redis_unavailable), keeping the spill for the next crawl.
        error: an unexpected one, whose traceback the log line carries."""
        df = self.dupefilter
        if df.failed:
            return
        df._set("bloomline/failed", why)
        kept = f"; the requests it could not check are kept in {self.spill_dir} and checked when this spider " \
               "crawls again" if self._spill is not None else ""
        logger.error("%s: %s: closing the spider (reason %r)%s", df.label, why, REASON_REDIS, kept, exc_info=error)
        df._close_spider(REASON_REDIS)

    # -- the recheck -------------------------------------------------------------------------

    def _recheck_spilled(self) -> None:
        """Schedule the requests this process kept while Redis was away, and
        those an earlier crawl of this spider left (their files claimed by
        renaming, so one process takes each)."""
        df = self.dupefilter
        journals: list[tuple[RequestJournal, Optional[Path]]] = []
        if self._spill is not None:
            # Drained in place: a request spilled again meanwhile (Redis gone
            # again as it is handed on) joins it, where a second journal
            # opened on the same file would be overwritten when this one closes.
            journals.append((self._spill, None))
        for path, name in self._left_spills():
            if any(path == j.path for j, _ in journals):
                continue
            claimed = claim(path, name)
            if claimed is None:
                continue  # another process took it
            try:
                journals.append((RequestJournal(claimed, self._spider, fifo=True), name))
            except (ValueError, OSError) as e:  # no journal in it at all: left for a person to look at
                os.rename(claimed, name)
                logger.error("%s: cannot read the requests kept in %s: %s", df.label, name, e)
        for journal, original in journals:
            count = 0
            while self.began is None and not df.failed:
                try:
                    request = journal.pop()
                except JournalUnwritable:  # (a record it cannot make a request again, and cannot set aside)
                    break
                if request is None:
                    break
                rid = request.meta.pop(JOURNAL_META_ID)
                # Handed on first, marked done after: a process killed in
                # between checks it again in its next crawl (at least once),
                # where the other order lost it. A spill journal that could not
                # be written refuses done records: the request stays in it, too.
                unchecked = bool(request.meta.get(_UNCHECKED))
                try:
                    self._reschedule(request)
                except Exception as e:  # not handed on: back in the spill, and the crawl stops
                    self._put_back(journal, rid, request, unchecked, e)
                    break
                with contextlib.suppress(JournalUnwritable):
                    journal.done(rid)
                count += 1
            if len(journal) or self.began is not None or df.failed:
                # Redis went away again: what is left stays for later (this
                # process's own spill open, to take more).
                if original is not None:
                    journal.close()
                    os.rename(journal.path, original)
                continue
            journal.close()
            os.unlink(journal.path)
            if original is None:
                OPEN.discard(journal.path.resolve())
                self._spill = None
            if count:
                logger.info("%s: %d %s kept while Redis was away checked again (%s)", df.label, count,
                            noun(count, "request"),
                            (original or journal.path).name)

    def _left_spills(self) -> list[tuple[Path, Path]]:
        """(file, its spill name) of the spills of this key that this
        process may take (left_journals)."""
        df = self.dupefilter
        stem, older = journal_stems(df.key, df.server, legacy_hashed=False)
        return left_journals(self.spill_dir, [stem, *older], "unchecked", df.label)

    def _put_back(self, journal: RequestJournal, rid: int, request: Request, unchecked: bool,
                  error: Exception) -> None:
        """Handing a kept request on raised: it goes back into its journal
        (a new record; the handed-out one is marked done, as close() would),
        and the crawl stops, the spill kept for the next crawl."""
        df = self.dupefilter
        if unchecked:
            request.meta[_UNCHECKED] = True
        try:
            journal.push(request)
        except (ValueError, OSError) as e:  # (close() then marks it done: say so)
            logger.error("%s: %s, kept while Redis was away, could not be handed on (%r) nor kept again (%s): it is "
                         "lost to this crawl", df.label, request, error, e)
        else:
            with contextlib.suppress(JournalUnwritable):
                journal.done(rid)
        self.fail(f"handing on {request}, kept while Redis was away, raised {error!r}")

    def _reschedule(self, request: Request) -> None:
        import redis  # here: redis is optional; the local filter does without it

        df = self.dupefilter
        engine = df.crawler.engine
        if request.meta.pop(_UNCHECKED, False):
            # Its check reached Redis unanswered: it may be recorded. Fetch it
            # regardless (at least once), and record it in case it was not,
            # by the filter's own add (a recrawl filter's does not refresh:
            # a page's window still runs from when it was first let through).
            try:
                df._record(df.fingerprint(request))
            except redis.RedisError:
                pass
            request = request.replace(dont_filter=True)
        engine.crawl(request)

    # -- the crawl's life --------------------------------------------------------------------

    def open(self, spider: Any) -> None:
        """The spider opened: check what an earlier crawl spilled, then
        start the health probe."""
        self._spider = spider
        if self._spill is not None:
            self._spill.spider = spider
        try:
            self._recheck_spilled()
        except Exception as e:  # (a spill that cannot be rewritten, say): loud, the spill kept
            self.fail(f"handing on the requests an earlier crawl kept while Redis was away failed: {e!r}")
            return
        if self.began is None:  # (else the outage's own probe is scheduled)
            self._schedule(HEALTH_INTERVAL)

    def stop(self) -> None:
        """The crawl is closing: no more probes; the spill is closed, kept
        for the next crawl."""
        self._cancel_probe()
        self._spider = None
        if self._spill is not None:
            OPEN.discard(self._spill.path.resolve())
            self._spill.close()  # kept for the next crawl
            self._spill = None


def guard_flush(scheduler: Any, df: Any) -> None:
    """Without SCHEDULER_PERSIST scrapy-redis's close flushes the queue
    and the filter. After a Redis failure, or a refusal to open, the filter
    is kept for the next crawl to resume from (clear()); its queue, whose
    requests the filter records as seen, must be kept with it, or they are
    never fetched: the flush is skipped then (one WARNING line)."""
    flush = getattr(scheduler, "flush", None)
    if flush is None or getattr(flush, "_bloomline_guard", False):
        return

    def flush_unless_failed() -> Any:
        if df.failed or df.refused is not None:
            logger.warning("%s: the crawl failed, so scrapy-redis's queue is kept with the filter at %s "
                           "(SCHEDULER_PERSIST is off): the requests queued are recorded as seen, and the next "
                           "crawl of this spider fetches them", df.label, getattr(df, "where", "Redis"))
            return None
        return flush()

    flush_unless_failed._bloomline_guard = True  # type: ignore[attr-defined]
    scheduler.flush = flush_unless_failed
