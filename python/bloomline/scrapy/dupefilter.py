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
(``<key>.<pid>.unchecked.journal`` in JOBDIR, or in Scrapy's
``.scrapy/bloomline`` data directory) and the engine is paused while the filter retries Redis
with backoff for ``BLOOMLINE_REDIS_RETRY_TIMEOUT`` seconds. If Redis comes
back, the spilled requests are checked again and scheduled; if not, the
spider closes with reason ``bloomline_redis_unavailable``, one ERROR line,
and ``scrapy crawl`` exits 1. The next crawl of the spider checks the
spilled requests first. A request whose check was sent but not answered
may or may not be recorded: it is scheduled again without the check, so it
is fetched at least once (perhaps twice across processes), never lost.

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
damaged JOBDIR filter, ``bloomline_damaged_jobdir``); ``scrapy crawl`` then
exits 1. Both filters log to ``scrapy.dupefilters`` and set the stats
``bloomline/stages``, ``bloomline/fill``, ``bloomline/expected_fp_rate`` and
``bloomline/approx_count`` at close.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, cast

from scrapy import signals
from scrapy.dupefilters import BaseDupeFilter
from scrapy.http import Request
from scrapy.utils.job import job_dir
from scrapy.exceptions import ScrapyDeprecationWarning
from scrapy.utils.deprecate import method_is_overridden
from scrapy.utils.misc import load_object
from scrapy.utils.project import data_path
from scrapy.utils.request import referer_str

from .._core import ChainRule
from .._units import noun
from ..scalable import ChainMismatch, DirectoryStages, ScalableBloomFilter
from .fingerprints import as_key
from .fingerprints import rule as fingerprint_rule
from .journal import JOURNAL_META_ID, JOURNAL_NAME, JournalUnwritable, RequestJournal

if TYPE_CHECKING:
    from .._core import Layout

__all__ = ["BloomDupeFilter", "RedisBloomDupeFilter"]

logger = logging.getLogger("scrapy.dupefilters")

DEFAULT_CAPACITY = 100_000
DEFAULT_ERROR_RATE = 1e-4
DEFAULT_RETRY_TIMEOUT = 30.0
GROWTH = 2
TIGHTENING = 0.9
FRONT_SHARE = 0.1  # of the error budget, for the Redis filter's local front filter
FRONT_SEED = 0x9E3779B97F4A7C15  # not the Redis chain's seed: their false positives are independent
# Redis's own socket timeouts: short, since a check runs on the reactor
# (scrapy-redis uses 30 s; REDIS_PARAMS may set others).
REDIS_DEFAULTS: dict[str, Any] = {"socket_timeout": 5, "socket_connect_timeout": 5, "retry_on_timeout": True}
MAX_WAIT_TIMEOUT = 4.0  # BLOOMLINE_REDIS_REPLICAS_TIMEOUT: WAIT must end within the 5 s socket timeout
HEALTH_INTERVAL = 5.0  # seconds between PINGs while Redis is well (scrapy-redis's queue may fail first)

REASON_REDIS = "bloomline_redis_unavailable"
REASON_SETTINGS = "bloomline_bad_settings"
REASON_JOBDIR = "bloomline_damaged_jobdir"
_UNCHECKED = "bloomline_unchecked"  # request.meta key of a spilled request whose check was sent, unanswered


class _Refused(Exception):
    """Why the filter cannot run: a finish reason and one line for the log."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


# ---- settings -------------------------------------------------------------------


def _int_setting(settings: Any, name: str, default: int, minimum: int) -> int:
    raw = settings.get(name, default)
    value: Optional[int] = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, (str, float)) and not isinstance(raw, bool):
        try:
            value = int(raw) if isinstance(raw, str) and raw.strip().lstrip("+-").isdigit() else None
            if value is None:
                f = float(raw)
                value = int(f) if f.is_integer() else None
        except (ValueError, OverflowError):
            value = None
    if value is None or value < minimum:
        raise _Refused(REASON_SETTINGS, f"{name} must be an integer >= {minimum}, got {raw!r}")
    return value


def _float_setting(settings: Any, name: str, default: float, low: float, high: float, closed: bool = False) -> float:
    raw = settings.get(name, default)
    try:
        value = float(raw) if not isinstance(raw, bool) else float("nan")
    except (TypeError, ValueError):
        value = float("nan")
    inside = (low <= value <= high) if closed else (low < value < high)
    if not inside:
        span = f"[{low:g}, {high:g}]" if closed else f"({low:g}, {high:g})"
        raise _Refused(REASON_SETTINGS, f"{name} must be in {span}, got {raw!r}")
    return value


class _Config:
    """The settings both filters read, checked (each error names its setting)."""

    def __init__(self, settings: Any) -> None:
        self.capacity = _int_setting(settings, "BLOOMLINE_CAPACITY", DEFAULT_CAPACITY, 1)
        self.error_rate = _float_setting(settings, "BLOOMLINE_ERROR_RATE", DEFAULT_ERROR_RATE, 0.0, 1.0)
        layout = settings.get("BLOOMLINE_LAYOUT", "blocked")
        if layout not in ("blocked", "standard"):
            raise _Refused(REASON_SETTINGS, f"BLOOMLINE_LAYOUT must be 'blocked' or 'standard', got {layout!r}")
        self.layout = cast("Layout", layout)
        self.debug = _bool_setting(settings, "DUPEFILTER_DEBUG", False)


def _bool_setting(settings: Any, name: str, default: bool) -> bool:
    try:
        return bool(settings.getbool(name, default))
    except ValueError:
        raise _Refused(REASON_SETTINGS, f"{name} must be a boolean, got {settings.get(name)!r}") from None


def _redis_key(settings: Any, spider_name: str) -> str:
    name = "BLOOMLINE_REDIS_KEY" if settings.get("BLOOMLINE_REDIS_KEY") else "SCHEDULER_DUPEFILTER_KEY"
    template = settings.get(name) or "%(spider)s:dupefilter"
    try:
        key = str(template) % {"spider": spider_name}
    except (ValueError, KeyError, TypeError) as e:
        raise _Refused(REASON_SETTINGS, f"{name} must be a %-format with only %(spider)s (write %% for a "
                                        f"literal %), got {template!r}: {e}") from None
    if not key:
        raise _Refused(REASON_SETTINGS, f"{name} must give a non-empty key, got {template!r}")
    return key


def _redis_client(settings: Any) -> Any:
    """A redis-py client from scrapy-redis's settings (BLOOMLINE_REDIS_*
    first)."""
    params = dict(REDIS_DEFAULTS)
    for name in ("REDIS_PARAMS", "BLOOMLINE_REDIS_PARAMS"):
        try:
            params.update(settings.getdict(name))
        except (ValueError, TypeError):
            raise _Refused(REASON_SETTINGS, f"{name} must be a dict, got {settings.get(name)!r}") from None
    params.pop("decode_responses", None)  # the filter reads bytes
    params.pop("encoding", None)
    cls: Any = params.pop("redis_cls", None)
    try:
        if cls is None:
            import redis

            cls = redis.Redis
        elif isinstance(cls, str):
            cls = load_object(cls)
    except (ImportError, NameError, ValueError) as e:
        raise _Refused(REASON_SETTINGS, f"REDIS_PARAMS['redis_cls'] cannot be loaded, got {cls!r}: {e}") from None
    url = settings.get("BLOOMLINE_REDIS_URL") or settings.get("REDIS_URL")
    try:
        if url:
            return cls.from_url(url, **params)
        host = settings.get("BLOOMLINE_REDIS_HOST") or settings.get("REDIS_HOST") or "localhost"
        port = _int_setting(settings, "BLOOMLINE_REDIS_PORT" if settings.get("BLOOMLINE_REDIS_PORT") else "REDIS_PORT",
                            6379, 1)
        db = settings.get("REDIS_DB")
        if db is not None:
            params["db"] = db
        return cls(host=host, port=port, **params)
    except _Refused:
        raise
    except (TypeError, ValueError) as e:
        where = "BLOOMLINE_REDIS_URL or REDIS_URL" if url else "REDIS_HOST, REDIS_PORT or REDIS_PARAMS"
        shown = _safe_url(str(url)) if url else repr(params)
        raise _Refused(REASON_SETTINGS, f"{where} cannot make a Redis client ({shown}): {e}") from None


def _safe_url(url: str) -> str:
    """A URL without its password, for the log."""
    return re.sub(r"//([^:@/]*):[^@/]*@", r"//\1:***@", url)


def _mismatch(where: str, error: ChainMismatch, settings: Any, share: float) -> _Refused:
    """A stored chain made with other settings: which, as the settings read
    (the earlier rate recovered from stage 0's and printed with %g)."""
    stage = error.stage
    per_rate = ChainRule(1000, 0.01, GROWTH, TIGHTENING).stage_error_rate(0) / 0.01  # stage 0's share of the rate
    if error.index == 0 and stage is not None and stage.capacity is not None and stage.error_rate is not None:
        made = (f"BLOOMLINE_CAPACITY={stage.capacity}, BLOOMLINE_ERROR_RATE={stage.error_rate / per_rate / share:g}, "
                f"BLOOMLINE_LAYOUT={stage.layout!r}")
    elif error.chain is not None and {"initial_capacity", "error_rate", "layout"} <= error.chain.keys():
        # the chain's own parameters, as Redis keeps them (the chain's rate: the settings' share)
        made = (f"BLOOMLINE_CAPACITY={error.chain['initial_capacity']}, "
                f"BLOOMLINE_ERROR_RATE={float(error.chain['error_rate']) / share:g}, "
                f"BLOOMLINE_LAYOUT={error.chain['layout']!r}")
    else:  # pragma: no cover - stage 0 matched, a later one did not: a chain made by other code
        made = f"other parameters ({error})"
    now = (f"BLOOMLINE_CAPACITY={settings.get('BLOOMLINE_CAPACITY', DEFAULT_CAPACITY)!r}, BLOOMLINE_ERROR_RATE="
           f"{settings.get('BLOOMLINE_ERROR_RATE', DEFAULT_ERROR_RATE)!r}, "
           f"BLOOMLINE_LAYOUT={settings.get('BLOOMLINE_LAYOUT', 'blocked')!r}")
    return _Refused(REASON_SETTINGS, f"{where} was made with {made}; this crawl has {now}: set them as that crawl "
                                     "did, or start anew")


# ---- stopping a crawl -------------------------------------------------------------


class _CrawlStop:
    """How a bloomline component that cannot run stops the crawl: one ERROR
    line, a finish reason, and exit status 1 (the dupefilters when refused
    or failed; JournalScheduler when its journal cannot be read)."""

    label = "bloomline"
    error_log = logger  # where the one ERROR line goes

    def _init_stop(self) -> None:
        self.crawler: Any = None
        self.refused: Optional[_Refused] = None
        self.failed = False  # the crawl must end with a non-zero exit
        self._closed = False

    def _watch(self, crawler: Any) -> None:
        self.crawler = crawler
        if crawler is None:
            return
        # weak=False: the filter may be gone (its scheduler closed) when the engine stops.
        crawler.signals.connect(self._spider_opened, signal=signals.spider_opened, weak=False)
        crawler.signals.connect(self._note_closed, signal=signals.spider_closed, weak=False)
        crawler.signals.connect(self._engine_started, signal=signals.engine_started, weak=False)
        crawler.signals.connect(self._mark_failed_crawl, signal=signals.engine_stopped, weak=False)

    def _spider_opened(self, spider: Any) -> None:
        # A refused filter stops the crawl from here, not by raising where it
        # is made or opened: Scrapy 2.13 to 2.19 each follow such an
        # exception with tracebacks of their own. Paused, the engine fetches
        # nothing meanwhile.
        if self.refused is not None:
            self.error_log.error("%s", self.refused)
            self.failed = True
            self.crawler.engine.pause()  # closed once the engine runs (_engine_started)
            return
        self._opened(spider)

    def _opened(self, spider: Any) -> None:
        pass

    def _close_spider(self, reason: str) -> None:
        """Close the spider with this reason, and make the crawl exit 1."""
        self.failed = True
        engine = getattr(self.crawler, "engine", None)
        if engine is None:
            return
        engine.pause()
        if hasattr(engine, "close_spider_async"):  # Scrapy 2.14+
            from scrapy.utils.defer import deferred_from_coro

            done = deferred_from_coro(engine.close_spider_async(reason=reason))
        else:  # pragma: no cover - Scrapy 2.13
            done = engine.close_spider(engine.spider, reason)
        done.addErrback(lambda f: logger.error("%s: closing the spider failed: %s", self.label, f.value))

    def _note_closed(self, spider: Any = None, reason: str = "") -> None:
        self._closed = True
        if self.failed:
            # (engine_stopped does not follow every close: Scrapy 2.19 sends
            # none when the spider closed as the engine started)
            from twisted.internet import reactor

            cast(Any, reactor).callLater(0, self._mark_failed_crawl)

    def _engine_started(self) -> None:
        # A spider closed before the engine starts gets no engine_stopped
        # (Scrapy 2.19): a refused filter closes it only now.
        if self.refused is not None:
            from twisted.internet import reactor

            cast(Any, reactor).callLater(0, self._close_spider, self.refused.reason)

    def _mark_failed_crawl(self) -> None:
        # Scrapy's crawl command exits 1 when a crawler has no spider after
        # its crawl (crawler_process.bootstrap_failed); that is the one way a
        # component can set the exit status (Scrapy 2.13 to 2.19). Done once
        # the spider has closed and the engine is done with its signals (it
        # keeps its own reference to the spider to finish closing).
        if self.failed and self._closed and self.crawler is not None:
            self.crawler.spider = None


# ---- what both filters share --------------------------------------------------------


class _DupeFilter(_CrawlStop, BaseDupeFilter):
    """The fingerprinter, Scrapy's logging and stats for filtered requests,
    the close summary, and the way a refused filter stops the crawl."""

    seen: Any  # the filter whose facts the summary reports

    logger = logger  # Scrapy's and scrapy-redis's dupefilters have one

    def _init_common(self, fingerprinter: Any, debug: bool, stats: Any) -> None:
        if fingerprinter is None:
            from scrapy.utils.request import RequestFingerprinter

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
        for key, value in (("bloomline/stages", chain.num_stages), ("bloomline/fill", round(fill, 6)),
                           ("bloomline/expected_fp_rate", rate), ("bloomline/approx_count", int(count)),
                           *self._more_stats()):
            self._set(key, value)
        logger.info("%s: about %d %s seen, in %d %s %.1f%% full (%d bytes); expected false-positive rate %.3g "
                    "(target %g)", self.label, count, noun(round(count), "request"), chain.num_stages,
                    noun(chain.num_stages, "stage"), 100 * fill, chain.nbytes, rate, self._target)
        self._warn_if_over(chain)


# ---- the local filter -------------------------------------------------------------------


class BloomDupeFilter(_DupeFilter):
    """Scrapy's duplicate filter on a growing Bloom filter (see the module doc)."""

    label = "BloomDupeFilter"

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
    ) -> None:
        """path: a directory for the stage files (JOBDIR); verify: check each
        stage file's payload once when resuming (O(size), once a crawl)."""
        self._init_common(fingerprinter, debug, stats)
        self._target = error_rate
        self.path = path
        store = DirectoryStages(path, verify=verify) if path else None
        self.seen = ScalableBloomFilter(capacity, error_rate, growth=GROWTH, tightening=TIGHTENING, layout=layout,
                                        store=store, on_grow=self._grew)

    @classmethod
    def from_crawler(cls, crawler: Any) -> BloomDupeFilter:
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
            try:
                config = _Config(settings)
                self = cls(path, config.debug, fingerprinter=getattr(crawler, "request_fingerprinter", None),
                           capacity=config.capacity, error_rate=config.error_rate, layout=config.layout,
                           stats=getattr(crawler, "stats", None))
            except ChainMismatch as e:
                raise _mismatch(f"the filter in JOBDIR {path!r}", e, settings, 1.0) from None
            except (ValueError, OSError) as e:
                raise _jobdir_refusal(path, e) from None
        except _Refused as e:
            if crawler is None:  # no crawl to stop: the caller hears it
                raise ValueError(str(e)) from None
            return cast("BloomDupeFilter", cls._refused_filter(crawler, e))
        self._watch(crawler)
        return self

    def request_seen(self, request: Request) -> bool:
        if self.refused is not None:
            return False  # queued, never fetched: the crawl is closing
        return not self.record_fingerprint(self.fingerprint(request))

    def has_fingerprint(self, fp: bytes) -> bool:
        """Was this fingerprint recorded (or is it a false positive)? Records nothing."""
        return fp in self.seen

    def record_fingerprint(self, fp: bytes) -> bool:
        """Record a fingerprint; True when it was new."""
        return bool(self.seen.add(fp))

    def close(self, reason: str = "") -> None:
        if getattr(self, "seen", None) is not None:
            self._summary()
            self.seen.close()


def _jobdir_refusal(path: Optional[str], error: Exception) -> _Refused:
    journal = Path(path or ".") / JOURNAL_NAME
    what = (f"the request journal {journal} still holds the pending requests; " if journal.exists() else "")
    return _Refused(REASON_JOBDIR, f"BloomDupeFilter cannot resume from JOBDIR {path!r}: {error}; {what}"
                                   "remove the damaged bloomline-seen.*.blf files to resume without the record of "
                                   "what was seen (pages may be fetched again), or start with a new JOBDIR")


# ---- the Redis filter ---------------------------------------------------------------------


class RedisBloomDupeFilter(_DupeFilter):
    """Scrapy's (and scrapy-redis's) duplicate filter on a growing filter in
    Redis shared by many crawl processes (see the module doc)."""

    label = "RedisBloomDupeFilter"

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
        persist: bool = False,
        retry_timeout: float = DEFAULT_RETRY_TIMEOUT,
        backend: str = "auto",
        spill_dir: Optional[str] = None,
        wait_replicas: int = 0,
        wait_timeout: float = 1.0,
    ) -> None:
        """server: a redis-py client or URL; key: the chain's name in Redis;
        persist: keep the filter when the crawl closes (else deleted);
        retry_timeout: seconds of retrying an unreachable Redis before the
        crawl stops; spill_dir: where requests that could not be checked
        are kept (default: Scrapy's .scrapy/bloomline); wait_replicas,
        wait_timeout: WAIT for that many replicas, that many seconds, after
        each check that records a fingerprint."""
        from ..redis import RedisStages

        self._init_common(fingerprinter, debug, stats)
        if isinstance(server, str):
            import redis

            self.where = _safe_url(server)
            server = redis.Redis.from_url(server, **REDIS_DEFAULTS)
        else:
            kw = getattr(getattr(server, "connection_pool", None), "connection_kwargs", {})
            self.where = (f"{kw.get('host', '?')}:{kw.get('port', '?')}/{kw.get('db', 0)}" if "host" in kw
                          else kw.get("path") or type(server).__name__)
        self.server = server
        self.key = key
        self.persist = persist
        self.retry_timeout = float(retry_timeout)
        self.delete_on_close = not persist
        self._target = error_rate
        self._spill_dir = Path(spill_dir) if spill_dir else Path(data_path("bloomline"))
        self._spill: Optional[RequestJournal] = None
        self._outage: Optional[float] = None  # monotonic time the current outage began
        self._probe_delay = 0.0
        self._timer: Any = None
        self._just_spilled: Optional[Request] = None
        self._spider: Any = None
        self._queue_in_redis = False  # scrapy-redis: the scheduler pushes a new request to Redis after the check
        self._last_new: Optional[Request] = None
        self.redis_checks = 0  # checks the front filter could not answer: they went to Redis
        # Two re-sends of a check whose reply was lost, then it is spilled;
        # each answer is kept for twice the time those tries may take (the
        # socket timeout's), so a re-send always finds it (answer_ttl_ms
        # derived: 31 s with the 5 s default timeout).
        self._stages = RedisStages(server, key, backend=backend, retries=2, wait_replicas=wait_replicas,
                                   wait_timeout_ms=max(1, round(wait_timeout * 1000)))
        self.not_durable = 0  # checks whose fingerprint too few replicas acknowledged in time
        self._durable_warned = -math.inf  # monotonic time of the last such WARNING
        # A filter imported from scrapy-redis's fingerprint set (bloomline
        # redis import-set) keeps the rule its fingerprints were made by,
        # and its first stage was sized for the set.
        info = self._retrying(self._stages.info) or {}
        imported = info.get("fingerprints")
        if imported:
            self._by_rule = fingerprint_rule(imported)
            capacity = int(info["initial_capacity"])
        # The chain and the front filter split the error budget, so that
        # together they stay under error_rate.
        self.seen = self._retrying(lambda: ScalableBloomFilter(
            capacity, error_rate * (1 - FRONT_SHARE), growth=GROWTH, tightening=TIGHTENING, layout=layout,
            store=self._stages, on_grow=self._grew))
        self.front = ScalableBloomFilter(capacity, error_rate * FRONT_SHARE, growth=GROWTH, tightening=TIGHTENING,
                                         layout=layout, seed=FRONT_SEED)
        if self.seen.insert_count:
            count, stages = self.seen.approx_count, self.seen.num_stages
            source = (f" (imported from the set {info.get('imported_from', '?')!r}: requests are fingerprinted by "
                      f"{imported}'s rule, as its fingerprints were)" if imported else "")
            logger.info("%s: attached to the filter at Redis key %r%s: about %d %s seen, in %d %s", self.label, key,
                        source, count, noun(round(count), "request"), stages, noun(stages, "stage"))

    def _retrying(self, make: Callable[[], Any]) -> Any:
        """make() retried with backoff for retry_timeout seconds while Redis
        is unreachable (at open, before the crawl runs)."""
        import redis

        deadline = time.monotonic() + self.retry_timeout
        delay = 0.1
        while True:
            try:
                return make()
            except (redis.ConnectionError, redis.TimeoutError) as e:
                if time.monotonic() + delay > deadline:
                    raise _Refused(REASON_REDIS, f"{self.label}: Redis at {self.where} unreachable for "
                                                 f"{self.retry_timeout:g} s: {e}") from None
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    # -- building -------------------------------------------------------------------------

    @classmethod
    def _build(cls, settings: Any, spider_name: str, *, scrapy_redis: bool, crawler: Any = None,
               key: Optional[str] = None) -> RedisBloomDupeFilter:
        s = settings
        jobdir = job_dir(s)
        try:
            config = _Config(s)
            key = key or _redis_key(s, spider_name)
            persist = _bool_setting(s, "SCHEDULER_PERSIST", False)
            retry = _float_setting(s, "BLOOMLINE_REDIS_RETRY_TIMEOUT", DEFAULT_RETRY_TIMEOUT, 0.0, 86400.0, closed=True)
            backend = s.get("BLOOMLINE_REDIS_BACKEND", "auto")
            if backend not in ("auto", "module", "plain"):
                raise _Refused(REASON_SETTINGS, f"BLOOMLINE_REDIS_BACKEND must be 'auto', 'module' or 'plain', "
                                                f"got {backend!r}")
            replicas = _int_setting(s, "BLOOMLINE_REDIS_REPLICAS", 0, 0)
            # (under the 5 s socket timeout, less a second: WAIT holds the connection)
            wait = _float_setting(s, "BLOOMLINE_REDIS_REPLICAS_TIMEOUT", 1.0, 0.0, MAX_WAIT_TIMEOUT, closed=False) \
                if replicas else 1.0
            server = _redis_client(s)
            try:
                self = cls(server, key, config.debug, fingerprinter=getattr(crawler, "request_fingerprinter", None),
                           capacity=config.capacity, error_rate=config.error_rate, layout=config.layout,
                           stats=getattr(crawler, "stats", None), persist=persist, retry_timeout=retry,
                           backend=backend, spill_dir=jobdir, wait_replicas=replicas, wait_timeout=wait)
            except ChainMismatch as e:
                raise _mismatch(f"the filter at Redis key {key!r}", e, s, 1 - FRONT_SHARE) from None
            except Exception as e:  # refused by the server (a key of another type, no memory, a bad backend)
                import redis

                if not isinstance(e, (redis.RedisError, ValueError)):
                    raise
                raise _Refused(REASON_REDIS, f"RedisBloomDupeFilter cannot open the filter at Redis key {key!r}: "
                                             f"{e}") from None
        except _Refused as e:
            if crawler is None:  # no crawl to stop: the caller hears it
                raise ValueError(str(e)) from None
            return cast("RedisBloomDupeFilter", cls._refused_filter(crawler, e))
        # With Scrapy's scheduler and a JOBDIR the crawl is meant to resume: keep the filter.
        self.delete_on_close = not persist and (scrapy_redis or not jobdir)
        self._queue_in_redis = scrapy_redis
        self._watch(crawler)
        if crawler is not None:
            crawler.signals.connect(self._spider_closed, signal=signals.spider_closed, weak=False)
        return self

    @classmethod
    def from_crawler(cls, crawler: Any) -> RedisBloomDupeFilter:
        """Scrapy's scheduler (``DUPEFILTER_CLASS``)."""
        spider = getattr(crawler, "spider", None)
        return cls._build(crawler.settings, spider.name if spider is not None else "scrapy", scrapy_redis=False,
                          crawler=crawler)

    @classmethod
    def from_spider(cls, spider: Any) -> RedisBloomDupeFilter:
        """scrapy-redis's scheduler."""
        return cls._build(spider.crawler.settings, spider.name, scrapy_redis=True, crawler=spider.crawler)

    @classmethod
    def from_settings(cls, settings: Any) -> RedisBloomDupeFilter:
        """scrapy-redis's older entry point: a filter from settings alone, at
        ``BLOOMLINE_REDIS_KEY`` (its %(spider)s is "scrapy"), else, as
        scrapy-redis does, a key of its own, ``dupefilter:<timestamp>``.
        Without a crawler there are no stats and no crawl to pause: a bad
        setting raises ValueError, and a Redis outage raises from
        request_seen."""
        key = None if settings.get("BLOOMLINE_REDIS_KEY") else f"dupefilter:{int(time.time())}"
        return cls._build(settings, "scrapy", scrapy_redis=False, key=key)

    # -- checks ----------------------------------------------------------------------------

    def request_seen(self, request: Request) -> bool:
        """True to drop the request. Answered by the front filter for
        fingerprints this process has asked Redis about, else by one add to
        the chain in Redis; while Redis is unreachable the request is
        spilled (kept to check later), never dropped."""
        import redis

        from ..redis import NotDurable  # (here, as redis: an extra the local filter does without)

        if self.refused is not None:
            return False  # queued, never fetched: the crawl is closing
        if self._outage is not None or self.failed:
            return self._keep(request, sent=False)
        fp = self.fingerprint(request)
        if fp in self.front:
            return True
        try:
            self.redis_checks += 1
            new = self.seen.add(fp)
        except NotDurable as e:
            # Answered by the primary, not yet on enough replicas: a new page
            # is fetched all the same (checking again would answer "seen").
            new = e.new is None or bool(e.new[0]) or bool(e.unknown is not None and e.unknown[0])
            self._not_durable(e)
        except (redis.ConnectionError, redis.TimeoutError) as e:
            self._begin_outage(e)
            return self._keep(request, sent=True)
        except redis.RedisError as e:  # refused by the server (out of memory, a key of another type)
            from ..redis import MissingKeyError

            hint = ("; when several crawl processes share a key, set SCHEDULER_PERSIST = True, or the first to "
                    "finish deletes the filter the others use") if isinstance(e, MissingKeyError) else ""
            self._fail(f"Redis at {self.where} refused a check: {e}{hint}")
            return self._keep(request, sent=True)
        self.front.add(fp)
        if new and self._queue_in_redis:
            self._last_new = request
        return not new

    def log(self, request: Request, spider: Any) -> None:
        if request is self._just_spilled:  # kept to check later: not a duplicate
            self._just_spilled = None
            return
        super().log(request, spider)

    def _more_stats(self) -> list[tuple[str, Any]]:
        return [("bloomline/redis_checks", self.redis_checks)]

    def _not_durable(self, error: Exception) -> None:
        self.not_durable += 1
        self._inc("bloomline/not_durable")
        if time.monotonic() - self._durable_warned >= 60:
            self._durable_warned = time.monotonic()
            logger.warning("%s: a check at %s is not on BLOOMLINE_REDIS_REPLICAS replicas yet (%s); the crawl goes "
                           "on, and %d such %s so far may be fetched again after a failover", self.label, self.where,
                           error, self.not_durable, noun(self.not_durable, "check"))

    # -- faults ------------------------------------------------------------------------------

    def _keep(self, request: Request, *, sent: bool) -> bool:
        """Spill the request to the local journal; True (the scheduler must
        not queue it: scrapy-redis's queue is in the unreachable Redis)."""
        if sent:
            request.meta[_UNCHECKED] = True
        try:
            self._spill_journal().push(request)
        except (ValueError, OSError) as e:
            request.meta.pop(_UNCHECKED, None)
            logger.warning("%s: cannot keep %s to check later (%s); queued unchecked", self.label, request, e)
            return False
        self._inc("bloomline/unchecked")
        self._just_spilled = request
        return True

    def _spill_journal(self) -> RequestJournal:
        if self._spill is None:
            self._spill_dir.mkdir(parents=True, exist_ok=True)
            path = self._spill_dir / f"{_file_safe(self.key)}.{os.getpid()}.unchecked.journal"
            self._spill = RequestJournal(path, self._spider, fifo=True)
        return self._spill

    def _begin_outage(self, error: Exception) -> None:
        if self._outage is not None:
            return
        self._outage = time.monotonic()
        if self._last_new is not None:
            # scrapy-redis pushes a new request right after its check; the
            # last one's push may have met the outage first. Recorded but
            # perhaps never queued: keep it to fetch again (at least once).
            last, self._last_new = self._last_new, None
            self._keep(last, sent=True)
            self._just_spilled = None
        logger.warning("%s: Redis at %s unreachable (%s); the crawl is paused while it is retried for up to %g s",
                       self.label, self.where, error, self.retry_timeout)
        engine = getattr(self.crawler, "engine", None)
        if engine is not None:
            engine.pause()
        self._probe_delay = 0.1
        self._schedule(self._probe_delay)

    def _schedule(self, delay: float) -> None:
        from twisted.internet import reactor

        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = cast(Any, reactor).callLater(delay, self._probe)

    def _probe(self) -> None:
        """PING Redis: every HEALTH_INTERVAL while it is well (scrapy-redis's
        queue may fail where no check does), with backoff in an outage."""
        import redis

        self._timer = None
        if self.failed or self._spider is None:
            return
        try:
            self.server.ping()
        except redis.RedisError as e:
            if self._outage is None:
                self._begin_outage(e)
                return
            waited = time.monotonic() - self._outage
            if waited >= self.retry_timeout:
                self._fail(f"Redis at {self.where} unreachable for {waited:.1f} s ({e})")
                return
            self._probe_delay = min(self._probe_delay * 2, 5.0)
            self._schedule(min(self._probe_delay, max(self.retry_timeout - waited, 0.01)))
            return
        if self._outage is not None:
            logger.info("%s: Redis at %s is back after %.1f s", self.label, self.where,
                        time.monotonic() - self._outage)
            self._outage = None
            engine = getattr(self.crawler, "engine", None)
            if engine is not None:
                engine.unpause()
            self._recheck_spilled()
        self._schedule(HEALTH_INTERVAL)

    def _fail(self, why: str) -> None:
        if self.failed:
            return
        self._set("bloomline/failed", why)
        kept = f"; the requests it could not check are kept in {self._spill_dir} and checked when this spider " \
               "crawls again" if self._spill is not None else ""
        logger.error("%s: %s: closing the spider (reason %r)%s", self.label, why, REASON_REDIS, kept)
        self._close_spider(REASON_REDIS)

    def _recheck_spilled(self) -> None:
        """Schedule the requests this process kept while Redis was away, and
        those an earlier crawl of this spider left (their files claimed by
        renaming, so one process takes each)."""
        journals: list[tuple[RequestJournal, Optional[Path]]] = []
        if self._spill is not None:
            journals.append((self._spill, None))
            self._spill = None
        if self._spill_dir.is_dir():
            for path in sorted(self._spill_dir.glob(f"{_file_safe(self.key)}.*.unchecked.journal")):
                if any(path == j.path for j, _ in journals):
                    continue
                claimed = path.with_name(f"{path.name}.{os.getpid()}.claimed")
                try:
                    os.rename(path, claimed)
                except OSError:
                    continue  # another process took it
                try:
                    journals.append((RequestJournal(claimed, self._spider, fifo=True), path))
                except (ValueError, OSError) as e:  # no journal in it at all: left for a person to look at
                    os.rename(claimed, path)
                    logger.error("%s: cannot read the requests kept in %s: %s", self.label, path, e)
        for journal, original in journals:
            count = 0
            while self._outage is None and not self.failed:
                try:
                    request = journal.pop()
                except JournalUnwritable:  # (a record it cannot make a request again, and cannot set aside)
                    break
                if request is None:
                    break
                rid = request.meta.pop(JOURNAL_META_ID)
                # A spill journal that could not be written refuses done records:
                # the request stays in it, checked again later (at least once).
                with contextlib.suppress(JournalUnwritable):
                    journal.done(rid)
                count += 1
                self._reschedule(request)
            journal.close()
            if len(journal) or self._outage is not None or self.failed:
                # Redis went away again: what is left stays for later.
                os.rename(journal.path, original or journal.path)
                continue
            os.unlink(journal.path)
            if count:
                logger.info("%s: %d %s kept while Redis was away checked again (%s)", self.label, count,
                            noun(count, "request"),
                            (original or journal.path).name)

    def _reschedule(self, request: Request) -> None:
        import redis

        engine = self.crawler.engine
        if request.meta.pop(_UNCHECKED, False):
            # Its check reached Redis unanswered: it may be recorded. Fetch it
            # regardless (at least once), and record it in case it was not.
            try:
                self.seen.add(self.fingerprint(request))
            except redis.RedisError:
                pass
            request = request.replace(dont_filter=True)
        engine.crawl(request)

    # -- the crawl's life ----------------------------------------------------------------------

    def _opened(self, spider: Any) -> None:
        self._spider = spider
        if self._spill is not None:
            self._spill.spider = spider
        self._recheck_spilled()
        self._schedule(HEALTH_INTERVAL)

    def _spider_closed(self, spider: Any, reason: str) -> None:
        self._stop()
        self._summary()

    def _stop(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        self._spider = None
        if self._spill is not None:
            self._spill.close()  # kept for the next crawl
            self._spill = None

    def clear(self) -> None:
        """Delete the filter from Redis (scrapy-redis calls this on close
        unless SCHEDULER_PERSIST); not after a Redis failure, whose crawl is
        meant to be resumed."""
        import redis

        if self.failed or self.refused is not None:
            return
        self._summary()
        try:
            self._stages.reset()
        except redis.RedisError as e:
            logger.warning("%s: could not delete the filter at Redis key %r: %s", self.label, self.key, e)
            return
        logger.info("%s: deleted the filter at Redis key %r (SCHEDULER_PERSIST is off)", self.label, self.key)

    def close(self, reason: str = "") -> None:
        """Scrapy's scheduler: summary, and the filter deleted unless it is
        kept (SCHEDULER_PERSIST, a JOBDIR to resume, or a failed crawl)."""
        if self.refused is not None:
            return
        self._stop()
        self._summary()
        if self.delete_on_close:
            self.clear()
        elif not self.failed:
            logger.info("%s: kept the filter at Redis key %r: a new crawl of this spider skips what it saw (delete "
                        "it with bloomline.redis.RedisStages(url, key).reset())", self.label, self.key)


def _file_safe(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", key)[:100]
