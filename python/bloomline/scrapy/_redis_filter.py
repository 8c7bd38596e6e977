"""The Redis dupefilter: one growing filter in Redis shared by every crawl
process (a chain on ``RedisStages``), a drop-in for scrapy-redis's, with a
local front filter for the fingerprints this process has already asked
about. With ``BLOOMLINE_RECRAWL_AFTER`` the fingerprints are kept in a
``RedisWindowedFilter`` at a key of its own (``<key>:recrawl``) and there
is no front filter: the server's clock decides the window for the fleet,
and a local cache could go on saying "seen" after the server would say
"new" (docs/design/scrapy.md, "Recrawl windows").
What happens when Redis fails is the outage machine's
(``_outage.Outages``); the settings and the behaviour are documented in
``dupefilter.py``, where users name this class."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Union, cast

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.http import Request
from scrapy.utils.job import job_dir
from scrapy.utils.project import data_path

from .._facts import facts
from .._units import about, noun
from ..scalable import ChainMismatch, ScalableBloomFilter
from ._base import _DupeFilter
from ._crawl import REASON_LEFT_OVER, REASON_REDIS, REASON_SETTINGS, _Refused, logger
from ._outage import Outages, guard_flush
from ._settings import (
    DEFAULT_CAPACITY,
    DEFAULT_ERROR_RATE,
    DEFAULT_RETRY_TIMEOUT_S,
    FRONT_SHARE,
    GROWTH,
    MAX_WAIT_TIMEOUT,
    RECRAWL_GENERATIONS,
    REDIS_DEFAULTS,
    TIGHTENING,
    _bool_setting,
    _Config,
    _float_setting,
    _int_setting,
    _keeps_journal,
    _mismatch,
    _redis_client,
    _redis_key,
    _safe_url,
    _server_where,
)
from .fingerprints import rule as fingerprint_rule

if TYPE_CHECKING:
    from .._core import Layout
    from ..redis import RedisWindowedFilter

__all__ = ["RedisBloomDupeFilter"]

FRONT_SEED = 0x9E3779B97F4A7C15  # not the Redis chain's seed: their false positives are independent
# The recrawl filter's key: the dupefilter key and this (its own hash tag),
# so that a chain and a windowed filter made for one key never share keys,
# and deleting one (RedisStages.reset) never deletes the other.
RECRAWL_SUFFIX = ":recrawl"



def _answered_then_raised(df: RedisBloomDupeFilter, error: Exception) -> bool:
    """A check answered, then raised (NotDurable: answered by the primary,
    not yet on enough replicas; or a capacity warning made an error): said,
    and True where its request is new, fetched all the same (checking again
    would answer "seen"), as it is where the check has no answer."""
    from ..redis import NotDurable

    if not isinstance(error, NotDurable):
        logger.warning("%s: %s", df.label, error)
    else:
        df.not_durable += 1
        df._inc("bloomline/not_durable")
        if time.monotonic() - df._durable_warned >= 60:
            df._durable_warned = time.monotonic()
            logger.warning("%s: a check at %s is not on BLOOMLINE_REDIS_REPLICAS replicas yet (%s); the crawl goes "
                           "on, and %d such %s so far may be fetched again after a failover", df.label, df.where,
                           error, df.not_durable, noun(df.not_durable, "check"))
    new, unknown = facts(error)
    return new is None or bool(new[0]) or bool(unknown is not None and unknown[0])


def _default_spill_dir() -> Path:
    """Scrapy's project data dir (.scrapy/bloomline beside scrapy.cfg). A
    project run without a scrapy.cfg (SCRAPY_SETTINGS_MODULE set by hand)
    has none: Scrapy's own fallback outside a project, .scrapy/ here."""
    try:
        return Path(data_path("bloomline"))
    except NotConfigured:
        return Path(".scrapy", "bloomline")

class KindMismatch(ValueError):
    """The dupefilter key holds the other kind of filter (a chain where a
    recrawl filter is asked for, or the reverse); the message says which
    and what to do."""


class RecrawlMismatch(ValueError):
    """The recrawl filter in Redis was made with other settings (which, in the message)."""


class RedisBloomDupeFilter(_DupeFilter):
    """Scrapy's (and scrapy-redis's) duplicate filter on a growing filter in
    Redis shared by many crawl processes (see the module doc)."""

    label = "RedisBloomDupeFilter"
    """The name at the start of this filter's log lines."""

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
        retry_timeout_s: float = DEFAULT_RETRY_TIMEOUT_S,
        backend: str = "auto",
        spill_dir: Optional[str] = None,
        wait_replicas: int = 0,
        wait_timeout: float = 1.0,
        recrawl_after: Optional[float] = None,
    ) -> None:
        """server: a redis-py client or URL; key: the chain's name in Redis;
        persist: keep the filter when the crawl closes (else deleted);
        retry_timeout_s: seconds of retrying an unreachable Redis before the
        crawl stops; spill_dir: where requests that could not be checked
        are kept (default: Scrapy's .scrapy/bloomline); wait_replicas,
        wait_timeout: WAIT for that many replicas, that many seconds, after
        each check that records a fingerprint. recrawl_after: seconds after
        which a request is new again (a RedisWindowedFilter at
        key + RECRAWL_SUFFIX, on the same backend, no front filter)."""
        from ..redis import RedisStages  # here: redis is optional; the local filter does without it

        self._init_common(fingerprinter, debug, stats)
        if isinstance(server, str):
            import redis  # here: redis is optional; the local filter does without it

            self.where = _safe_url(server)
            server = redis.Redis.from_url(server, **REDIS_DEFAULTS)
        else:
            self.where = _server_where(server)
        self.server = server
        self.key = key
        self.persist = persist
        self.retry_timeout_s = float(retry_timeout_s)
        self.delete_on_close = not persist
        self._target = error_rate
        self._outages = Outages(self, Path(spill_dir) if spill_dir else _default_spill_dir())
        self._queue_in_redis = False  # scrapy-redis: the scheduler pushes a new request to Redis after the check
        self.redis_checks = 0  # checks the front filter could not answer (a recrawl window: all): sent to Redis
        self._read_again = False  # the chain was deleted (clear) and is read again, or made, at the next check
        # Two re-sends of a check whose reply was lost, then it is spilled;
        # each answer is kept for twice the time those tries may take (the
        # socket timeout's), so a re-send always finds it (answer_ttl_ms
        # derived: 31 s with the 5 s default timeout).
        self._stages = RedisStages(server, key, backend=backend, retries=2, wait_replicas=wait_replicas,
                                   wait_timeout_ms=max(1, round(wait_timeout * 1000)))
        self.not_durable = 0  # checks whose fingerprint too few replicas acknowledged in time
        self._durable_warned = -math.inf  # monotonic time of the last such WARNING
        self.recrawl_after = recrawl_after
        self.seen: Union[ScalableBloomFilter, RedisWindowedFilter]
        self.front: Optional[ScalableBloomFilter] = None
        if recrawl_after is not None:
            wait_ms = max(1, round(wait_timeout * 1000))
            self.seen = self._retrying(lambda: self._windowed(capacity, error_rate, layout, recrawl_after, backend,
                                                              wait_replicas, wait_ms))
            return
        self._retrying(self._refuse_a_recrawl_filter)
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
        chain: ScalableBloomFilter = self._retrying(lambda: ScalableBloomFilter(
            capacity, error_rate * (1 - FRONT_SHARE), growth=GROWTH, tightening=TIGHTENING, layout=layout,
            store=self._stages, on_grow=self._grew))
        self.seen = chain
        self.front = ScalableBloomFilter(capacity, error_rate * FRONT_SHARE, growth=GROWTH, tightening=TIGHTENING,
                                         layout=layout, seed=FRONT_SEED)
        if chain.insert_count:
            count, stages = chain.approx_count, chain.num_stages
            source = (f" (imported from the set {info.get('imported_from', '?')!r}: requests are fingerprinted by "
                      f"{imported}'s rule, as its fingerprints were)" if imported else "")
            logger.info("%s: attached to the filter at Redis key %r%s: %s seen, in %d %s", self.label, key,
                        source, about(count, "request"), stages, noun(stages, "stage"))

    @property
    def recrawl_key(self) -> str:
        """Where the recrawl filter is (or would be) in Redis."""
        return self.key + RECRAWL_SUFFIX

    def _refuse_a_recrawl_filter(self) -> None:
        """Without BLOOMLINE_RECRAWL_AFTER: KindMismatch if a recrawl filter
        lives at this key's recrawl key (crawls sharing a key must agree on
        the setting, or some would fetch a page once ever, others once a
        window, each unaware of the other's record)."""
        from ..redis._names import client_of, tag_of_chain

        window = client_of(self.server).hget(f"{tag_of_chain(self.recrawl_key)}:meta", "window")
        if window is not None:
            raise KindMismatch(
                f"Redis key {self.key!r} has a recrawl filter at {self.recrawl_key!r}, made by a crawl with "
                f"BLOOMLINE_RECRAWL_AFTER={float(window)!r}; this crawl has none (BLOOMLINE_RECRAWL_AFTER=None): "
                "crawls sharing a key must agree on it. Set it as that crawl did, or use another key "
                "(SCHEDULER_DUPEFILTER_KEY, BLOOMLINE_REDIS_KEY); the recrawl filter expires by itself at most "
                "1.25x its window, and a second, after its last add")

    def _windowed(self, capacity: int, error_rate: float, layout: Layout, window: float, backend: str,
                  wait_replicas: int, wait_timeout_ms: int) -> RedisWindowedFilter:
        """The recrawl filter at recrawl_key: attached (made with the same
        settings, or RecrawlMismatch naming them) or made; KindMismatch where
        the dupefilter key holds a chain (made without the setting, or
        imported from scrapy-redis's set)."""
        from ..redis import RedisWindowedFilter
        from ..redis._names import client_of

        client = client_of(self.server)  # (bytes replies, whatever the caller's client decodes)
        shown = f"BLOOMLINE_RECRAWL_AFTER={window!r}"
        info = self._stages.info()
        if info is not None or client.exists(self._stages.stages_key, self._stages.import_key):
            if info is not None and info.get("fingerprints"):
                # Its fingerprints have no times: read as seen now they would
                # all come due at once a window later, and read as old they
                # would all be fetched again now. Neither is what was seen.
                raise KindMismatch(
                    f"{shown}, but Redis key {self.key!r} holds fingerprints imported from scrapy-redis's set "
                    f"{info.get('imported_from', '?')!r} (bloomline redis import-set), which have no times to "
                    "start a recrawl window from: crawl without BLOOMLINE_RECRAWL_AFTER, or start the recrawl "
                    "filter anew with another key (SCHEDULER_DUPEFILTER_KEY, BLOOMLINE_REDIS_KEY)")
            raise KindMismatch(
                f"{shown}, but Redis key {self.key!r} holds a filter made by a crawl without it (every page "
                "fetched once ever); crawls sharing a key must agree on it. Set it as that crawl did, delete that "
                f"filter (bloomline.redis.RedisStages(url, {self.key!r}).reset()), or use another key "
                "(SCHEDULER_DUPEFILTER_KEY, BLOOMLINE_REDIS_KEY)")
        _check_recrawl_made(client, self.recrawl_key, window, capacity, error_rate, layout)
        # The whole error budget: there is no front filter to share it with.
        seen = RedisWindowedFilter(self.server, self.recrawl_key, capacity, error_rate, window=window,
                                   generations=RECRAWL_GENERATIONS, backend=backend, layout=layout, retries=2,
                                   wait_replicas=wait_replicas, wait_timeout_ms=wait_timeout_ms)
        live = seen.live_generations
        if live:
            count = seen.approx_count
            logger.info("%s: attached to the recrawl filter at Redis key %r (BLOOMLINE_RECRAWL_AFTER=%g s): %s "
                        "seen in %d live %s", self.label, self.recrawl_key, window, about(count, "request"),
                        len(live), noun(len(live), "generation"))
        return seen

    def _record(self, fp: bytes) -> bool:
        """One check in Redis: True when the fingerprint was new. A recrawl
        filter's add does not refresh a seen fingerprint (refresh=False, as
        the local filter's): a page's window runs from when it was first let
        through, or a page linked from everywhere would never be fetched
        again."""
        if self.recrawl_after is not None:
            return bool(cast("RedisWindowedFilter", self.seen).add(fp, refresh=False))
        if self._read_again:  # (its chain deleted by a flush: read again, or made)
            cast(ScalableBloomFilter, self.seen)._reload()
            self._read_again = False
        return bool(self.seen.add(fp))

    def _retrying(self, make: Callable[[], Any]) -> Any:
        """make() retried with backoff for retry_timeout_s seconds while Redis
        is unreachable (at open, before the crawl runs)."""
        import redis  # here: redis is optional; the local filter does without it

        deadline = time.monotonic() + self.retry_timeout_s
        delay = 0.1
        while True:
            try:
                return make()
            except (redis.ConnectionError, redis.TimeoutError) as e:
                if time.monotonic() + delay > deadline:
                    raise _Refused(REASON_REDIS, f"{self.label}: Redis at {self.where} unreachable for "
                                                 f"{self.retry_timeout_s:g} s: {e}") from None
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
            retry = _float_setting(s, "BLOOMLINE_REDIS_RETRY_TIMEOUT", DEFAULT_RETRY_TIMEOUT_S, 0.0, 86400.0, closed=True)
            backend = s.get("BLOOMLINE_REDIS_BACKEND", "auto")
            if backend not in ("auto", "module", "plain"):
                raise _Refused(REASON_SETTINGS, f"BLOOMLINE_REDIS_BACKEND must be 'auto', 'module' or 'plain', "
                                                f"got {backend!r}")
            recrawl = config.recrawl_after
            from ..redis._window_meta import MAX_WINDOW_S  # (here: redis is optional)

            if recrawl is not None and recrawl > MAX_WINDOW_S:
                raise _Refused(REASON_SETTINGS, f"BLOOMLINE_RECRAWL_AFTER must be at most {MAX_WINDOW_S:g} seconds "
                                                "for a recrawl filter in Redis (its generations' expiry times are "
                                                f"milliseconds below 2**53), got {s.get('BLOOMLINE_RECRAWL_AFTER')!r}")
            replicas = _int_setting(s, "BLOOMLINE_REDIS_REPLICAS", 0, 0)
            # (under the 5 s socket timeout, less a second: WAIT holds the connection)
            wait = _float_setting(s, "BLOOMLINE_REDIS_REPLICAS_TIMEOUT", 1.0, 0.0, MAX_WAIT_TIMEOUT, closed=False) \
                if replicas else 1.0
            server = _redis_client(s)
            try:
                self = cls(server, key, config.debug, fingerprinter=getattr(crawler, "request_fingerprinter", None),
                           capacity=config.capacity, error_rate=config.error_rate, layout=config.layout,
                           stats=getattr(crawler, "stats", None), persist=persist, retry_timeout_s=retry,
                           backend=backend, spill_dir=jobdir, wait_replicas=replicas, wait_timeout=wait,
                           recrawl_after=recrawl)
            except ChainMismatch as e:
                raise _mismatch(f"the filter at Redis key {key!r}", e, s, 1 - FRONT_SHARE) from None
            except (KindMismatch, RecrawlMismatch) as e:
                raise _Refused(REASON_SETTINGS, f"{cls.label}: {e}") from None
            except Exception as e:  # refused by the server (a key of another type, no memory, a bad backend)
                import redis  # here: redis is optional; the local filter does without it

                if not isinstance(e, (redis.RedisError, ValueError)):
                    raise
                raise _Refused(REASON_REDIS, f"RedisBloomDupeFilter cannot open the filter at Redis key {key!r}: "
                                             f"{e}") from None
            if not scrapy_redis and not jobdir:  # (Scrapy's own scheduler keeps its queue in this process only)
                _check_queue_kept(self, key, persist)
            elif not scrapy_redis and not _keeps_journal(s):
                logger.warning("%s: Scrapy's own JOBDIR queue keeps its requests over a pause, not over a kill: "
                               "requests it loses stay recorded at Redis key %r and are never fetched. SCHEDULER = "
                               "'bloomline.scrapy.JournalScheduler' keeps them", self.label, key)
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
        import redis  # here: redis is optional; the local filter does without it

        from ..redis import MissingKeyError, NotDurable

        if self.refused is not None:
            return False  # queued, never fetched: the crawl is closing
        if self._outages.active or self.failed:
            return self._outages.keep(request, sent=False)
        fp = self.fingerprint(request)
        if self.front is not None and fp in self.front:
            return True
        try:
            self.redis_checks += 1
            new = self._record(fp)
        except (NotDurable, Warning) as e:  # answered, then raised
            new = _answered_then_raised(self, e)
        except (redis.ConnectionError, redis.TimeoutError) as e:
            self._outages.begin(e)
            return self._outages.keep(request, sent=True)
        except redis.RedisError as e:  # refused by the server (out of memory, a key of another type)
            hint = ("; when several crawl processes share a key, set SCHEDULER_PERSIST = True, or the first to "
                    "finish deletes the filter the others use") if isinstance(e, MissingKeyError) else ""
            self._outages.fail(f"Redis at {self.where} refused a check: {e}{hint}")
            return self._outages.keep(request, sent=True)
        except Exception as e:  # not Redis's (the filter made again with other settings): the crawl stops, loudly
            self._outages.fail(f"a check at {self.where} raised {e!r}", e)
            return self._outages.keep(request, sent=True)
        if self.front is not None:
            self.front.add(fp)
        if new and self._queue_in_redis:
            self._outages.last_new = request
        return not new

    def log(self, request: Request, spider: Any) -> None:
        """A dropped request, logged and counted as BloomDupeFilter's are; one kept aside during a Redis outage is no duplicate and is not logged."""
        if self._outages.was_just_spilled(request):  # kept to check later: not a duplicate
            return
        super().log(request, spider)

    def _more_stats(self) -> list[tuple[str, Any]]:
        return [("bloomline/redis_checks", self.redis_checks)]

    def _parts(self) -> tuple[int, str]:
        if self.recrawl_after is not None:
            return len(cast("RedisWindowedFilter", self.seen).live_generations), "generation"
        return super()._parts()

    def _summary(self) -> None:
        import redis  # here: redis is optional; the local filter does without it

        try:
            super()._summary()
        except redis.RedisError as e:  # (the facts are read from Redis; the crawl is over all the same)
            logger.warning("%s: could not read the filter's facts from Redis at %s for the summary: %s", self.label,
                           self.where, e)

    # -- the crawl's life ----------------------------------------------------------------------

    def _opened(self, spider: Any) -> None:
        if self._queue_in_redis:  # before open(), whose recheck pushes what an earlier crawl spilled
            self._outages.guard_pushes(_scheduler_of(self.crawler))
        self._outages.open(spider)

    def _refused_opened(self) -> None:
        # (scrapy-redis's flush would delete the queue of the filter a refusal keeps)
        guard_flush(_scheduler_of(self.crawler), self)

    def _spider_closed(self, spider: Any, reason: str) -> None:
        self._outages.stop()
        self._summary()

    def clear(self) -> None:
        """Delete the filter from Redis (scrapy-redis calls this on close
        unless SCHEDULER_PERSIST); not after a Redis failure, whose crawl is
        meant to be resumed."""
        import redis  # here: redis is optional; the local filter does without it

        if self.failed or self.refused is not None:
            return
        self._summary()
        key = self.key if self.recrawl_after is None else self.recrawl_key
        try:
            if self.recrawl_after is not None:
                cast("RedisWindowedFilter", self.seen).delete()
            else:
                self._stages.reset()
                self._read_again = True  # (a flush at open, SCHEDULER_FLUSH_ON_START: the crawl goes on)
            if self.front is not None:
                self.front.clear()
        except redis.RedisError as e:
            logger.warning("%s: could not delete the filter at Redis key %r: %s", self.label, key, e)
            return
        logger.info("%s: deleted the filter at Redis key %r (SCHEDULER_PERSIST is off)", self.label, key)

    def close(self, reason: str = "") -> None:
        """Scrapy's scheduler: summary, and the filter deleted unless it is
        kept (SCHEDULER_PERSIST, a JOBDIR to resume, or a failed crawl)."""
        if self.refused is not None:
            return
        self._outages.stop()
        self._summary()
        if self.delete_on_close:
            self.clear()
        elif not self.failed and self.recrawl_after is not None:
            logger.info("%s: kept the recrawl filter at Redis key %r: a new crawl of this spider skips what it saw "
                        "within BLOOMLINE_RECRAWL_AFTER (it expires by itself at most 1.25x that, and a second, "
                        "after its last add)", self.label, self.recrawl_key)
        elif not self.failed:
            logger.info("%s: kept the filter at Redis key %r: a new crawl of this spider skips what it saw (delete "
                        "it with bloomline.redis.RedisStages(url, key).reset())", self.label, self.key)


def _check_recrawl_made(client: Any, key: str, window: float, capacity: int, error_rate: float, layout: str) -> None:
    """A recrawl filter stored at key was made with these settings (and a
    crawl's generations), or RecrawlMismatch naming the setting
    (RedisWindowedFilter's own check names its fields)."""
    from ..redis._names import tag_of_chain  # (here: redis is optional)

    meta = {k.decode(): v.decode() for k, v in client.hgetall(f"{tag_of_chain(key)}:meta").items()}
    if meta.get("kind") != "windowed":
        return
    for setting, field, want in (("BLOOMLINE_RECRAWL_AFTER", "window", window),
                                 ("BLOOMLINE_CAPACITY", "capacity", capacity),
                                 ("BLOOMLINE_ERROR_RATE", "error_rate", error_rate),
                                 ("BLOOMLINE_LAYOUT", "layout", layout)):
        have: Any = meta.get(field, "")
        same = (have == str(want)) if field == "layout" else (bool(have) and float(have) == float(want))
        if not same:
            have = have if field == "layout" else float(have or "nan")
            raise RecrawlMismatch(
                f"the recrawl filter at Redis key {key!r} was made with {setting}={have!r}, this crawl has {want!r}: "
                "set it as that crawl did, or start anew (it expires by itself at most 1.25x its window, and a "
                "second, after its last add)")
    if meta.get("generations") != str(RECRAWL_GENERATIONS):
        raise RecrawlMismatch(
            f"Redis key {key!r} holds a windowed filter of {meta.get('generations', '?')} generations, not a crawl's "
            f"recrawl filter ({RECRAWL_GENERATIONS}): use another key (SCHEDULER_DUPEFILTER_KEY, "
            "BLOOMLINE_REDIS_KEY), or delete that filter")


def _scheduler_of(crawler: Any) -> Any:
    """The crawl's scheduler: ``engine.scheduler`` (Scrapy 2.19+), else the
    engine's slot's (2.13 to 2.18); None before the engine opened it."""
    engine = getattr(crawler, "engine", None)
    scheduler = getattr(engine, "scheduler", None)
    if scheduler is None:
        scheduler = getattr(getattr(engine, "_slot", None), "scheduler", None)
    return scheduler


def _check_queue_kept(f: RedisBloomDupeFilter, key: str, persist: bool) -> None:
    """Under Scrapy's own scheduler without a JOBDIR the queue lives in the
    crawling process only, so the requests a crawl recorded but had not
    fetched when it stopped are fetched by no one. SCHEDULER_PERSIST off
    (the filter is the crawl's, deleted at close): a filter that holds
    requests already was left by a crawl that did not close (killed), or
    is another running crawl's; this crawl would skip its requests, so it
    is refused. On: said once, as a warning."""
    import redis

    try:
        held = float(f.seen.insert_count) if isinstance(f.seen, ScalableBloomFilter) else f.seen.approx_count
    except redis.RedisError as e:
        raise _Refused(REASON_REDIS, f"{f.label}: cannot read the filter at Redis key {key!r}: {e}") from None
    if persist:
        logger.warning("%s: SCHEDULER_PERSIST keeps the filter at Redis key %r, but Scrapy's scheduler keeps its "
                       "queue in memory: requests still queued when this crawl stops are skipped by the next crawl, "
                       "never fetched (set JOBDIR, with JournalScheduler, to keep the queue too)", f.label, key)
    elif held >= 1:
        what = "filter" if isinstance(f.seen, ScalableBloomFilter) else "recrawl window"
        raise _Refused(REASON_LEFT_OVER, f"{f.label}: the {what} at Redis key {key!r} holds about {round(held)} "
                       "requests already, left by a crawl that did not close (killed?) or in use by another crawl "
                       "now. With SCHEDULER_PERSIST off and Scrapy's own scheduler (its queue in memory, no "
                       "JOBDIR), this crawl would skip them though nothing will fetch them. Delete it to crawl from "
                       "the start (bloomline.redis.RedisStages(url, key).reset(), or the RedisWindowedFilter's "
                       "delete()), give each crawl its own key, or set JOBDIR with JournalScheduler to keep a crawl's "
                       "queue")
