"""What both dupefilters share: the fingerprinter (a subclass's
``request_fingerprint`` override honoured, as in Scrapy), Scrapy's logging
and stats for filtered requests, the close summary, growth and the
false-positive warning, and the way a refused filter stops the crawl."""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable, Optional

from scrapy.dupefilters import BaseDupeFilter
from scrapy.exceptions import ScrapyDeprecationWarning
from scrapy.http import Request
from scrapy.utils.deprecate import method_is_overridden
from scrapy.utils.request import RequestFingerprinter, referer_str

from .._units import about, noun
from ..scalable import ScalableBloomFilter
from ._crawl import _CrawlStop, _Refused, logger
from ._settings import DEFAULT_ERROR_RATE
from .fingerprints import as_key


class _DupeFilter(_CrawlStop, BaseDupeFilter):
    """The fingerprinter, Scrapy's logging and stats for filtered requests,
    the close summary, and the way a refused filter stops the crawl."""

    seen: Any  # the filter whose facts the summary reports

    logger = logger  # Scrapy's and scrapy-redis's dupefilters have one
    """The dupefilters' logger, Scrapy's own ("scrapy.dupefilters")."""

    def _init_common(self, fingerprinter: Any, debug: bool, stats: Any) -> None:
        if fingerprinter is None:
            fingerprinter = RequestFingerprinter()
        self.fingerprinter = fingerprinter
        # A subclass overriding request_fingerprint (the recipe scrapy-splash
        # and many projects followed) is honoured, as Scrapy 2.19 does.
        self._override = method_is_overridden(type(self), _DupeFilter, "request_fingerprint")
        if self._override:
            warnings.warn(f"Overriding {type(self).__name__}.request_fingerprint() is deprecated, set the "
                          "REQUEST_FINGERPRINTER_CLASS setting instead.", ScrapyDeprecationWarning, stacklevel=4)
        self._by_rule: Optional[Callable[[Request], bytes]] = None  # a filter imported from another crawler
        self.debug = debug
        self.logdupes = True
        self.stats = stats
        self._init_stop()
        self._summarised = False
        self._target = DEFAULT_ERROR_RATE

    @classmethod
    def _refused_filter(cls, crawler: Any, refused: _Refused) -> Any:
        """A filter that only stops the crawl when it opens (Scrapy shows an
        exception raised here with a follow-on traceback)."""
        self = cls.__new__(cls)
        self._init_common(getattr(crawler, "request_fingerprinter", None), False, getattr(crawler, "stats", None))
        self.refused = refused
        self._watch(crawler)
        return self

    def request_fingerprint(self, request: Request) -> str:
        """The request's fingerprint as hex (scrapy-redis's method). A
        subclass may override it (deprecated, as in Scrapy): what it returns
        is then the key recorded (hex text as its bytes, other text as UTF-8)."""
        return self._by_rule_or_fingerprinter(request).hex()

    def _by_rule_or_fingerprinter(self, request: Request) -> bytes:
        return self._by_rule(request) if self._by_rule is not None else bytes(self.fingerprinter.fingerprint(request))

    def fingerprint(self, request: Request) -> bytes:
        """The key recorded for a request: by a subclass's request_fingerprint
        override, else by the rule an imported filter was made with, else by
        the crawler's fingerprinter."""
        if self._override:
            return as_key(self.request_fingerprint(request))
        return self._by_rule_or_fingerprinter(request)

    def log(self, request: Request, spider: Any) -> None:
        """A dropped request: logged at DEBUG (every one with DUPEFILTER_DEBUG, else the first) and counted in the stats."""
        if self.debug:
            self.logger.debug("Filtered duplicate request: %(request)s (referer: %(referer)s)",
                              {"request": request, "referer": referer_str(request)}, extra={"spider": spider})
        elif self.logdupes:
            self.logger.debug("Filtered duplicate request: %(request)s - no more duplicates will be shown"
                              " (see DUPEFILTER_DEBUG to show all duplicates)", {"request": request},
                              extra={"spider": spider})
            self.logdupes = False
        self._inc("dupefilter/filtered")

    def _inc(self, key: str) -> None:
        stats = self.stats if self.stats is not None else getattr(self.crawler, "stats", None)
        if stats is not None:
            stats.inc_value(key)

    def _set(self, key: str, value: Any) -> None:
        stats = self.stats if self.stats is not None else getattr(self.crawler, "stats", None)
        if stats is not None:
            stats.set_value(key, value)

    def _grew(self, chain: ScalableBloomFilter) -> None:
        i = chain.num_stages - 1
        older = chain.stages[-2]
        logger.info("%s: stage %d added after %d requests (stage %d is %.1f%% full); the next %d requests go to it "
                    "at error rate %.3g; the whole filter stays under %.3g (now %.3g)",
                    self.label, i, chain.insert_count, i - 1, 100 * older.fill_ratio, chain.rule.stage_capacity(i),
                    chain.rule.stage_error_rate(i), chain.error_rate, chain.expected_fp_rate)
        self._set("bloomline/stages", chain.num_stages)
        self._warn_if_over(chain)

    def _parts(self) -> tuple[int, str]:
        """How many filters the summary counts, and what each is called."""
        return self.seen.num_stages, "stage"

    def _more_stats(self) -> list[tuple[str, Any]]:
        return []

    def _warn_if_over(self, chain: Any) -> None:
        rate = chain.expected_fp_rate
        if rate > self._target:
            logger.warning("%s: the expected false-positive rate %.3g is past the target %g: new pages may be "
                           "dropped as duplicates that often", self.label, rate, self._target)

    def _summary(self) -> None:
        """The close stats and one INFO line (once)."""
        if self._summarised or self.refused is not None or self.failed or getattr(self, "seen", None) is None:
            return
        self._summarised = True
        chain = self.seen
        fill, rate, count = chain.fill_ratio, chain.expected_fp_rate, chain.approx_count
        parts, part = self._parts()
        told = math.isfinite(count)  # (inf: a filter, or a generation, with every bit set)
        for key, value in (("bloomline/stages", parts), ("bloomline/fill", round(fill, 6)),
                           ("bloomline/expected_fp_rate", rate),
                           ("bloomline/approx_count", int(count) if told else count), *self._more_stats()):
            self._set(key, value)
        logger.info("%s: %s seen, in %d %s %.1f%% full (%d bytes); expected false-positive rate %.3g "
                    "(target %g)", self.label, about(count, "request"), parts, noun(parts, part), 100 * fill,
                    chain.nbytes, rate, self._target)
        self._warn_if_over(chain)
