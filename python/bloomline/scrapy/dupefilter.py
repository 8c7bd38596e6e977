"""Scrapy dupefilters backed by bloomline.

``DUPEFILTER_CLASS = "bloomline.scrapy.BloomDupeFilter"``
    A local filter: a scalable chain (bloomline.scalable) whose first stage
    holds ``BLOOMLINE_CAPACITY`` fingerprints; it grows past that by adding
    stages instead of degrading, and logs when it grows. With ``JOBDIR`` its
    stages are files in the job directory, mapped for writing, so a paused
    crawl resumes from them and a crawl killed with SIGKILL loses none of
    the requests it recorded (the kernel writes the mapped pages back).

``DUPEFILTER_CLASS = "bloomline.scrapy.RedisBloomDupeFilter"``
    One filter in Redis shared by every crawl process (and usable as
    scrapy-redis's dupefilter): ``request_seen`` is one atomic add-if-new
    round trip, so two processes never both fetch a page.

Settings: ``BLOOMLINE_CAPACITY`` (10,000,000), ``BLOOMLINE_ERROR_RATE``
(0.0001: a false positive drops a page), ``BLOOMLINE_LAYOUT`` ("blocked"),
``BLOOMLINE_REDIS_URL`` (falls back to scrapy-redis's ``REDIS_URL``),
``BLOOMLINE_REDIS_KEY`` ("%(spider)s:bloomfilter"), and Scrapy's own
``DUPEFILTER_DEBUG`` and ``JOBDIR``. Fingerprints come from
``crawler.request_fingerprinter`` (bytes of any length).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, cast

from scrapy.dupefilters import BaseDupeFilter
from scrapy.http import Request
from scrapy.utils.job import job_dir
from scrapy.utils.request import referer_str

from ..scalable import DirectoryStages, ScalableBloomFilter

if TYPE_CHECKING:
    from .._core import Layout

__all__ = ["BloomDupeFilter", "RedisBloomDupeFilter"]

logger = logging.getLogger(__name__)

DEFAULT_CAPACITY = 10_000_000
DEFAULT_ERROR_RATE = 1e-4
GROWTH = 2
TIGHTENING = 0.9


def _log_growth(chain: ScalableBloomFilter) -> None:
    i = chain.num_stages - 1
    logger.info("BloomDupeFilter: grew to %d stages (about %d requests seen; the next holds %d at error rate %.2g)",
                chain.num_stages, chain.approx_count, chain.rule.stage_capacity(i), chain.rule.stage_error_rate(i))


class _LogMixin:
    """What both dupefilters share: the fingerprinter, and Scrapy's logging
    and stats for filtered requests."""

    debug: bool
    logdupes: bool
    stats: Any
    fingerprinter: Any

    def _init_common(self, fingerprinter: Any, debug: bool, stats: Any) -> None:
        if fingerprinter is None:
            from scrapy.utils.request import RequestFingerprinter

            fingerprinter = RequestFingerprinter()
        self.fingerprinter = fingerprinter
        self.debug = debug
        self.logdupes = True
        self.stats = stats

    def log(self, request: Request, spider: Any) -> None:
        if self.debug:
            logger.debug(
                "Filtered duplicate request: %(request)s (referer: %(referer)s)",
                {"request": request, "referer": referer_str(request)},
                extra={"spider": spider},
            )
        elif self.logdupes:
            logger.debug(
                "Filtered duplicate request: %(request)s - no more duplicates will be shown"
                " (see DUPEFILTER_DEBUG to show all duplicates)",
                {"request": request},
                extra={"spider": spider},
            )
            self.logdupes = False
        stats = self.stats if self.stats is not None else getattr(getattr(spider, "crawler", None), "stats", None)
        if stats is not None:
            stats.inc_value("dupefilter/filtered", spider=spider)


def _settings(settings: Any) -> tuple[int, float, Layout]:
    capacity = settings.getint("BLOOMLINE_CAPACITY", DEFAULT_CAPACITY)
    error_rate = settings.getfloat("BLOOMLINE_ERROR_RATE", DEFAULT_ERROR_RATE)
    layout = settings.get("BLOOMLINE_LAYOUT", "blocked")
    if capacity < 1:
        raise ValueError(f"BLOOMLINE_CAPACITY must be >= 1, got {capacity}")
    if not 0 < error_rate < 1:
        raise ValueError(f"BLOOMLINE_ERROR_RATE must be in (0, 1), got {error_rate}")
    if layout not in ("blocked", "standard"):
        raise ValueError(f"BLOOMLINE_LAYOUT must be 'blocked' or 'standard', got {layout!r}")
    return capacity, error_rate, cast("Layout", layout)


class BloomDupeFilter(_LogMixin, BaseDupeFilter):
    """Scrapy's duplicate filter on a growing Bloom filter (see the module doc)."""

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
    ) -> None:
        self._init_common(fingerprinter, debug, stats)
        self.path = path
        store = DirectoryStages(path) if path else None
        self.seen = ScalableBloomFilter(capacity, error_rate, growth=GROWTH, tightening=TIGHTENING, layout=layout,
                                        store=store, on_grow=_log_growth)

    @classmethod
    def from_crawler(cls, crawler: Any) -> BloomDupeFilter:
        capacity, error_rate, layout = _settings(crawler.settings)
        return cls(
            job_dir(crawler.settings),
            crawler.settings.getbool("DUPEFILTER_DEBUG"),
            fingerprinter=crawler.request_fingerprinter,
            capacity=capacity,
            error_rate=error_rate,
            layout=layout,
            stats=crawler.stats,
        )

    def request_seen(self, request: Request) -> bool:
        return not self.record_fingerprint(self.fingerprinter.fingerprint(request))

    def has_fingerprint(self, fp: bytes) -> bool:
        """Was this fingerprint recorded (or is it a false positive)? Records nothing."""
        return fp in self.seen

    def record_fingerprint(self, fp: bytes) -> bool:
        """Record a fingerprint; True when it was new."""
        return self.seen.add(fp)

    def close(self, reason: str) -> None:
        self.seen.close()


class RedisBloomDupeFilter(_LogMixin, BaseDupeFilter):
    """Scrapy's duplicate filter on one RedisBloomFilter shared by many crawl
    processes; also works as scrapy-redis's dupefilter (from_spider, clear)."""

    def __init__(
        self,
        server: Any,
        key: str,
        debug: bool = False,
        *,
        fingerprinter: Any = None,
        capacity: int = DEFAULT_CAPACITY,
        error_rate: float = DEFAULT_ERROR_RATE,
        layout: Layout = "blocked",
        stats: Any = None,
    ) -> None:
        from ..redis import RedisBloomFilter

        self._init_common(fingerprinter, debug, stats)
        self.key = key
        self.filter = RedisBloomFilter(server, key, capacity, error_rate, layout=layout)

    @classmethod
    def _from(cls, crawler: Any, spider_name: str) -> RedisBloomDupeFilter:
        s = crawler.settings
        url = s.get("BLOOMLINE_REDIS_URL") or s.get("REDIS_URL")
        if not url:
            raise ValueError("RedisBloomDupeFilter needs BLOOMLINE_REDIS_URL (or scrapy-redis's REDIS_URL)")
        key = s.get("BLOOMLINE_REDIS_KEY", "%(spider)s:bloomfilter") % {"spider": spider_name}
        capacity, error_rate, layout = _settings(s)
        return cls(url, key, s.getbool("DUPEFILTER_DEBUG"), fingerprinter=crawler.request_fingerprinter,
                   capacity=capacity, error_rate=error_rate, layout=layout, stats=crawler.stats)

    @classmethod
    def from_crawler(cls, crawler: Any) -> RedisBloomDupeFilter:
        spider = getattr(crawler, "spider", None)
        return cls._from(crawler, spider.name if spider is not None else "scrapy")

    @classmethod
    def from_spider(cls, spider: Any) -> RedisBloomDupeFilter:
        """scrapy-redis's scheduler calls this when it opens."""
        return cls._from(spider.crawler, spider.name)

    def request_seen(self, request: Request) -> bool:
        fp = self.fingerprinter.fingerprint(request)
        return not self.filter.add(fp)  # one atomic round trip

    def clear(self) -> None:
        """scrapy-redis calls this on close unless SCHEDULER_PERSIST."""
        self.filter.delete()

    def close(self, reason: str = "") -> None:
        pass
