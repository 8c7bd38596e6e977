"""Stopping a crawl that a bloomline component cannot run: why (``_Refused``:
a finish reason and one line), and how (``_CrawlStop``: one ERROR line, the
finish reason, and exit status 1). The dupefilters and JournalScheduler
stop a crawl this way."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Optional, cast

from scrapy import signals
from scrapy.utils.defer import deferred_from_coro

logger = logging.getLogger("scrapy.dupefilters")  # the dupefilters' log, as Scrapy's own

REASON_REDIS = "bloomline_redis_unavailable"
REASON_SETTINGS = "bloomline_bad_settings"
REASON_JOBDIR = "bloomline_damaged_jobdir"
REASON_LEFT_OVER = "bloomline_left_over_filter"
REASON_UNWRITABLE = "bloomline_filter_unwritable"
REASON_IN_USE = "bloomline_jobdir_in_use"  # (another crawl holds JOBDIR)


def call_later(delay: float, func: Callable[..., Any], *args: Any) -> Any:
    """func(*args) after delay seconds on Scrapy's event loop: asyncio's, or
    Twisted's reactor (Scrapy 2.13 has only that). The handle's cancel()
    stops it. Importing the reactor is refused where Scrapy runs without
    one (TWISTED_REACTOR_ENABLED=False), so it is never imported here."""
    try:
        from scrapy.utils.asyncio import call_later as scrapy_call_later

        return scrapy_call_later(delay, func, *args)
    except (ImportError, RuntimeError):  # Scrapy 2.13; or no loop yet (a filter used outside a crawl)
        from twisted.internet import reactor  # importing it installs a reactor, Scrapy's to choose

        return cast(Any, reactor).callLater(delay, func, *args)


class _Refused(Exception):
    """Why the filter cannot run: a finish reason and one line for the log."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class _CrawlStop:
    """How a bloomline component that cannot run stops the crawl: one ERROR
    line, a finish reason, and exit status 1 (the dupefilters when refused
    or failed; JournalScheduler when its journal cannot be read)."""

    label = "bloomline"
    """The component's name at the start of its log lines."""
    error_log = logger  # where the one ERROR line goes
    """The logger of the one ERROR line that stops the crawl."""

    def _init_stop(self) -> None:
        self.crawler: Any = None
        self.refused: Optional[_Refused] = None
        self.failed = False  # the crawl must end with a non-zero exit
        self._closed = False
        self._closing = False  # _close_spider started the close: it marks the crawl failed when the close is done
        self._close_at_start: Optional[str] = None  # a stop found before the engine ran: its reason

    def _watch(self, crawler: Any) -> None:
        self.crawler = crawler
        if crawler is None:
            return
        # weak=False: the filter may be gone (its scheduler closed) when the engine stops.
        crawler.signals.connect(self._spider_opened, signal=signals.spider_opened, weak=False)
        crawler.signals.connect(self._note_closed, signal=signals.spider_closed, weak=False)
        crawler.signals.connect(self._engine_started, signal=signals.engine_started, weak=False)
        crawler.signals.connect(self._engine_stopped, signal=signals.engine_stopped, weak=False)

    def _spider_opened(self, spider: Any) -> None:
        # A refused filter stops the crawl from here, not by raising where it
        # is made or opened: Scrapy 2.13 to 2.19 each follow such an
        # exception with tracebacks of their own. Paused, the engine fetches
        # nothing meanwhile.
        if self.refused is not None:
            self.error_log.error("%s", self.refused)
            self.failed = True
            self.crawler.engine.pause()  # closed once the engine runs (_engine_started)
            self._refused_opened()
            return
        self._opened(spider)

    def _opened(self, spider: Any) -> None:
        pass

    def _refused_opened(self) -> None:
        """The spider opened under a filter that refused to open (a subclass's hook)."""
        pass

    def _close_spider(self, reason: str, started: bool = False) -> None:
        """Close the spider with this reason, and make the crawl exit 1
        (started: called at engine_started, when engine.running may not be
        set yet)."""
        self.failed = True
        try:
            engine = self.crawler.engine
        except (AttributeError, RuntimeError):  # (Scrapy 2.14+ raises RuntimeError before the crawl starts)
            engine = None
        if engine is None:
            return
        engine.pause()
        if not started and not getattr(engine, "running", True):
            # A stop found before the engine started (as the spider opens):
            # closing now would meet Scrapy half-open, as a refusal would;
            # it is closed once the engine starts, paused meanwhile.
            self._close_at_start = reason
            return
        self._closing = True
        if hasattr(engine, "close_spider_async"):  # Scrapy 2.14+
            done = deferred_from_coro(engine.close_spider_async(reason=reason))
        else:  # pragma: no cover - Scrapy 2.13
            done = engine.close_spider(engine.spider, reason)
        done.addErrback(lambda f: logger.error("%s: closing the spider failed: %s", self.label, f.value))
        done.addBoth(self._closed_by_us)

    def _closed_by_us(self, result: Any) -> Any:
        # Only now, with every spider_closed handler done, is the spider
        # taken away: a feed export stores its file meanwhile, and the
        # engine may still schedule a start request, whose request_scheduled
        # handlers (OffsiteMiddleware's) read crawler.spider.
        self._closed = True
        self._mark_failed_crawl()
        return result

    def _engine_stopped(self) -> None:
        # The engine stops only once the spider has closed, every
        # spider_closed handler done. Under a Twisted reactor other than
        # asyncio's that comes before _closed_by_us, and Scrapy reads
        # crawler.spider for the exit status right after: mark it now.
        if self._closing:
            self._closed = True
        self._mark_failed_crawl()

    def _note_closed(self, spider: Any = None, reason: str = "") -> None:
        if self._closing:
            return  # _closed_by_us marks it, once the whole close is done
        self._closed = True
        if self.failed:
            # (engine_stopped does not follow every close: Scrapy 2.19 sends
            # none when the spider closed as the engine started)
            call_later(0, self._mark_failed_crawl)

    def _engine_started(self) -> None:
        # A spider closed before the engine starts gets no engine_stopped
        # (Scrapy 2.19): a refused filter closes it only now.
        reason = self.refused.reason if self.refused is not None else self._close_at_start
        if reason is not None:
            call_later(0, self._close_spider, reason, True)

    def _mark_failed_crawl(self) -> None:
        # Scrapy's crawl command exits 1 when a crawler has no spider after
        # its crawl (crawler_process.bootstrap_failed); that is the one way a
        # component can set the exit status (Scrapy 2.13 to 2.19). Done once
        # the spider has closed and the engine is done with its signals (it
        # keeps its own reference to the spider to finish closing).
        if self.failed and self._closed and self.crawler is not None:
            self.crawler.spider = None
