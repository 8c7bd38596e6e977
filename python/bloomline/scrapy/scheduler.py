"""JournalScheduler and JournalDoneMiddleware: Scrapy's scheduler with a
JOBDIR queue that survives kill -9 (the journal: journal.py)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import Any, Optional

from scrapy.core.scheduler import Scheduler
from scrapy.http import Request, Response

import logging

from .dupefilter import REASON_JOBDIR, BloomDupeFilter, _CrawlStop, _Refused
from .journal import JOURNAL_META_ID, JOURNAL_NAME, JournalError, RequestJournal

__all__ = ["JournalDoneMiddleware", "JournalScheduler", "request_done"]

logger = logging.getLogger(__name__)

#: Signal sent by JournalDoneMiddleware: the response to the request with
#: journal id ``request_id`` has been handled, its new requests scheduled.
request_done = object()

_MIDDLEWARE = "bloomline.scrapy.JournalDoneMiddleware"


class JournalScheduler(Scheduler):
    """Scrapy's scheduler with a JOBDIR queue that survives kill -9.

    Enable it with::

        SCHEDULER = "bloomline.scrapy.JournalScheduler"
        SPIDER_MIDDLEWARES = {"bloomline.scrapy.JournalDoneMiddleware": 0}

    Without ``JOBDIR`` it is Scrapy's scheduler. With it, the disk queue is
    ``JOBDIR/requests.journal`` (journal.py, docs/FORMAT.md): every request pushed
    is on disk before ``enqueue_request`` returns, and a request the engine
    took stays in the journal until JournalDoneMiddleware reports its
    response handled (its callback's requests scheduled). A crawl killed at
    any moment resumes with every request it had not finished: none is
    lost; the few that were in flight at the kill (at most about
    ``CONCURRENT_REQUESTS``) are fetched again.

    With BloomDupeFilter, a request is journaled before its fingerprint is
    recorded, and on resume the fingerprints of the journaled requests are
    recorded again, so no kill between the two can lose or repeat a request.
    Order: highest priority first; LIFO within a priority (Scrapy's
    default), FIFO if ``SCHEDULER_DISK_QUEUE`` names a FIFO queue.
    """

    @classmethod
    def from_crawler(cls, crawler: Any) -> JournalScheduler:
        middlewares = crawler.settings.getwithbase("SPIDER_MIDDLEWARES")
        if not any(_is_middleware(k) and v is not None for k, v in middlewares.items()):
            raise ValueError(
                f"JournalScheduler needs its spider middleware: add SPIDER_MIDDLEWARES = {{{_MIDDLEWARE!r}: 0}}"
                " (it tells the scheduler when a request is finished)"
            )
        scheduler = super().from_crawler(crawler)
        scheduler.fifo = "fifo" in str(crawler.settings.get("SCHEDULER_DISK_QUEUE", "")).lower()
        return scheduler

    fifo = False
    _refusal: Optional[_CrawlStop] = None  # the journal cannot be read: the crawl stops at its start

    def _dqdir(self, jobdir: str | None) -> str | None:
        if jobdir:
            os.makedirs(jobdir, exist_ok=True)
        return jobdir or None

    def open(self, spider: Any) -> Any:
        self.spider = spider
        self.mqs = self._mq()
        self.dqs = None
        result = self.df.open()
        # (A refused dupefilter stops the crawl at spider_opened; its journal
        # is left as it is for the crawl that resumes.)
        if self.dqdir and getattr(self.df, "refused", None) is None:
            df = self.df
            fingerprint_of = on_fingerprint = None
            if isinstance(df, BloomDupeFilter):
                fingerprint_of, on_fingerprint = df.fingerprinter.fingerprint, df.record_fingerprint
            path = Path(self.dqdir, JOURNAL_NAME)
            try:
                journal = RequestJournal(path, spider, fifo=self.fifo, fingerprint_of=fingerprint_of,
                                          on_fingerprint=on_fingerprint)
            except (JournalError, OSError) as e:
                # One ERROR line and a finish reason, as a damaged JOBDIR
                # filter gives; the file is left as it is.
                self._refusal = _JournalRefusal(self.crawler, _Refused(
                    REASON_JOBDIR, f"JournalScheduler cannot resume from JOBDIR {self.dqdir!r}: {e}"))
                return result
            self.dqs = journal  # type: ignore[assignment]
            assert self.crawler is not None
            self.crawler.signals.connect(self._request_done, signal=request_done)
            if journal.recovered:
                logger.info("Resuming crawl (%(queuesize)d requests scheduled)", {"queuesize": journal.recovered},
                            extra={"spider": spider})
        return result

    def close(self, reason: str) -> Any:
        if self.dqs is not None:
            self.dqs.close()
        return self.df.close(reason)

    def enqueue_request(self, request: Request) -> bool:
        if self._refusal is not None:
            return False  # never fetched, never recorded: the crawl is stopping
        df = self.df
        if self.dqs is None or request.dont_filter or not isinstance(df, BloomDupeFilter):
            return super().enqueue_request(request)
        # Journal first, record second: a kill between the two leaves the
        # request queued and its fingerprint re-recorded on resume.
        fp = df.fingerprint(request)
        if df.has_fingerprint(fp):
            df.log(request, self.spider)
            return False
        assert self.stats is not None
        if self._dqpush(request):  # the journal keeps fp (the fingerprinter caches it per request)
            self.stats.inc_value("scheduler/enqueued/disk")
        else:  # unserializable: Scrapy's memory queue, logged and counted by _dqpush
            self._mqpush(request)
            self.stats.inc_value("scheduler/enqueued/memory")
        df.record_fingerprint(fp)
        self.stats.inc_value("scheduler/enqueued")
        return True

    def _request_done(self, request_id: int) -> None:
        if self.dqs is not None:
            self.dqs.done(request_id)  # type: ignore[attr-defined]


class _JournalRefusal(_CrawlStop):
    """Stops the crawl whose journal cannot be read (dupefilter.py, _CrawlStop)."""

    label = "JournalScheduler"
    error_log = logger

    def __init__(self, crawler: Any, refused: _Refused) -> None:
        self._init_stop()
        self.refused = refused
        self._watch(crawler)


def _is_middleware(key: Any) -> bool:
    return key is JournalDoneMiddleware or key == _MIDDLEWARE


class JournalDoneMiddleware:
    """Spider middleware for JournalScheduler: once a response's output has
    all been handed to the engine (so its new requests are in the journal),
    or its callback failed, the request is finished. Give it the lowest
    order (0), so that it wraps every other middleware's output."""

    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Any) -> JournalDoneMiddleware:
        return cls(crawler)

    def _finished(self, response: Response) -> None:
        request = getattr(response, "request", None)
        rid = request.meta.get(JOURNAL_META_ID) if request is not None else None
        if rid is not None:
            self.crawler.signals.send_catch_log(signal=request_done, request_id=rid)

    def process_spider_output(self, response: Response, result: Iterable[Any], spider: Any = None) -> Iterator[Any]:
        try:
            yield from result
        finally:
            self._finished(response)

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        try:
            async for item in result:
                yield item
        finally:
            self._finished(response)

    def process_spider_exception(self, response: Response, exception: BaseException, spider: Any = None) -> None:
        self._finished(response)
