"""Scrapy dupefilters backed by bloomline.

``DUPEFILTER_CLASS = "bloomline.scrapy.BloomDupeFilter"``
    A local filter: about 2.4 bytes per request at the default 1e-4 error
    rate, instead of Scrapy's set of fingerprints. With ``JOBDIR`` its
    stages are files in the job directory, mapped for writing, so a paused
    crawl resumes from them and a crawl killed with SIGKILL loses none of
    the requests it recorded (the kernel writes the mapped pages back). It
    grows past ``BLOOMLINE_CAPACITY`` by adding stages (a scalable filter)
    instead of degrading, and logs when it grows.

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

import itertools
import logging
import os
import pickle
import struct
import zlib
from array import array
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from scrapy.core.scheduler import Scheduler
from scrapy.dupefilters import BaseDupeFilter
from scrapy.http import Request, Response
from scrapy.utils.job import job_dir
from scrapy.utils.request import referer_str, request_from_dict

from ._core import BloomFilter
from .scalable import ScalableBloomFilter, stage_params

if TYPE_CHECKING:
    from ._core import Layout

__all__ = ["BloomDupeFilter", "JournalDoneMiddleware", "JournalScheduler", "RedisBloomDupeFilter"]

logger = logging.getLogger(__name__)

DEFAULT_CAPACITY = 10_000_000
DEFAULT_ERROR_RATE = 1e-4
GROWTH = 2
TIGHTENING = 0.9


class _MappedChain:
    """A scalable chain whose stages are mapped files in a directory
    (``bloomline-seen.{i}.blf``): the same stage sizes as
    ScalableBloomFilter, but every add goes straight to a file."""

    def __init__(self, directory: str, capacity: int, error_rate: float, layout: Layout) -> None:
        self.dir = Path(directory)
        self.capacity, self.error_rate, self.layout = capacity, error_rate, layout
        self.stages: list[BloomFilter] = []
        i = 0
        while (self.dir / f"bloomline-seen.{i}.blf").exists():
            self.stages.append(self._open(i))
            i += 1
        if not self.stages:
            self._grow()

    def _path(self, i: int) -> Path:
        return self.dir / f"bloomline-seen.{i}.blf"

    def _open(self, i: int) -> BloomFilter:
        stage = BloomFilter.open(self._path(i), "r+")
        cap, rate = stage_params(self.capacity, self.error_rate, GROWTH, TIGHTENING, i)
        if (stage.capacity, stage.error_rate, stage.layout) != (cap, rate, self.layout):
            stage.close()
            raise ValueError(
                f"{self._path(i)} was made with other settings (capacity {stage.capacity}, error rate "
                f"{stage.error_rate}, layout {stage.layout!r}); use the same BLOOMLINE_* settings to resume"
            )
        return stage

    def _grow(self) -> None:
        i = len(self.stages)
        cap, rate = stage_params(self.capacity, self.error_rate, GROWTH, TIGHTENING, i)
        BloomFilter(cap, rate, layout=self.layout).save(self._path(i))
        self.stages.append(self._open(i))
        if i:
            logger.info("BloomDupeFilter: grew to %d stages (next holds %d requests at error rate %.2g)", i + 1, cap, rate)

    def add(self, key: bytes) -> bool:
        for stage in self.stages[:-1]:
            if key in stage:
                return False
        current = self.stages[-1]
        assert current.capacity is not None
        if current.approx_count >= current.capacity:
            if key in current:
                return False
            self._grow()
            current = self.stages[-1]
        return current.add(key)

    def __contains__(self, key: bytes) -> bool:
        return any(key in s for s in self.stages)

    @property
    def approx_count(self) -> float:
        return float(sum(s.approx_count for s in self.stages))

    def close(self) -> None:
        for s in self.stages:
            s.close()


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
        if path:
            os.makedirs(path, exist_ok=True)
            self.seen: _MappedChain | ScalableBloomFilter = _MappedChain(path, capacity, error_rate, layout)
        else:
            self.seen = ScalableBloomFilter(capacity, error_rate, growth=GROWTH, tightening=TIGHTENING, layout=layout)
        self._stages = self._num_stages()

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

    def _num_stages(self) -> int:
        return len(self.seen.stages) if isinstance(self.seen, _MappedChain) else self.seen.num_stages

    def request_seen(self, request: Request) -> bool:
        return not self.record_fingerprint(self.fingerprinter.fingerprint(request))

    def has_fingerprint(self, fp: bytes) -> bool:
        """Was this fingerprint recorded (or is it a false positive)? Records nothing."""
        return fp in self.seen

    def record_fingerprint(self, fp: bytes) -> bool:
        """Record a fingerprint; True when it was new."""
        new = self.seen.add(fp)
        if not isinstance(self.seen, _MappedChain):
            stages = self.seen.num_stages
            if stages != self._stages:
                self._stages = stages
                logger.info("BloomDupeFilter: grew to %d stages (about %d requests seen)", stages, self.seen.approx_count)
        return new

    def close(self, reason: str) -> None:
        if isinstance(self.seen, _MappedChain):
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
        from .redis import RedisBloomFilter

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


# ---- a JOBDIR request queue that survives kill -9 -----------------------------
#
# Scrapy's JOBDIR queue (queuelib disk queues plus an active.json written on
# close) loses every pending request when the process is killed: the crawl
# resumes with whatever active.json said at the last clean stop. Our
# scheduler keeps its disk queue in one append-only journal instead.

JOURNAL_NAME = "requests.journal"
_JOURNAL_MAGIC = b"BLMJRNL1"
# state u8, reserved u8, fingerprint length u16, payload length u32,
# priority i64, crc32 u32 (over bytes 2..15, the fingerprint and the payload)
_REC = struct.Struct("<BBHIqI")
_PENDING, _DONE = 0, 1
_META_ID = "bloomline_journal_id"
_COMPACT_MIN_BYTES = 64 << 20

#: Signal sent by JournalDoneMiddleware: the response to the request with
#: journal id ``request_id`` has been handled, its new requests scheduled.
request_done = object()


class _RequestJournal:
    """The disk queue of a JOBDIR crawl: one append-only file of records.

    Layout (little-endian), documented here next to the code that writes it:
    8 magic bytes ``BLMJRNL1``, then records of a 20-byte header
    (state u8: 0 pending, 1 done; reserved u8 = 0; fingerprint length u16;
    payload length u32; priority i64; CRC-32 u32 of header bytes 2..15, the
    fingerprint and the payload, i.e. of everything but the state byte),
    the dupefilter's fingerprint of the request (empty for dont_filter
    requests) and the payload, a pickled ``Request.to_dict()``.

    A push is one ``pwrite`` at the end of the file; a request is finished
    by a one-byte ``pwrite`` of its state. Both are in the kernel when the
    call returns, so killing the process at any moment leaves only whole
    records (a tail torn by a machine crash fails its CRC and is cut off
    when the journal is opened). On open every record still pending is
    queued again, including the requests the engine had taken but not
    finished: a request is delivered at least once, never lost.

    Memory: 8 bytes per pending request (its offset), by priority. The file
    is rewritten with only the pending records when it is opened, when it
    is closed, and when it is over 64 MiB and three quarters dead.
    """

    def __init__(
        self, path: Path, spider: Any, *, fifo: bool, fingerprint_of: Any = None, on_fingerprint: Any = None
    ) -> None:
        """fingerprint_of(request) -> bytes: the dupefilter's fingerprint,
        kept with each filtered request (none if None); on_fingerprint(fp)
        is called for each pending record's fingerprint on open."""
        self.path, self.spider, self.fifo = path, spider, fifo
        self._fingerprint_of = fingerprint_of
        self._queues: dict[int, array[int]] = {}  # priority -> offsets of pending records, in file order
        self._heads: dict[int, int] = {}  # FIFO: index of the next offset in each queue
        self._pending = 0
        self._handed: dict[int, tuple[int, int, list[int]]] = {}  # id -> (offset, length, ids finished with it)
        self._chained: dict[int, list[int]] = {}  # offset of a queued retry/redirect -> ids it finishes
        self._ids = itertools.count(1)
        self._fd = -1
        self._size = 0
        self._live_bytes = 0
        self.recovered = self._rewrite(on_fingerprint)

    # -- writing -------------------------------------------------------------
    def push(self, request: Request) -> None:
        """Queue a request (ValueError if it cannot be serialized)."""
        fingerprint = b""
        if self._fingerprint_of is not None and not request.dont_filter:
            fingerprint = self._fingerprint_of(request)
        parent = request.meta.pop(_META_ID, None)  # a retry or redirect of a request we handed out
        try:
            payload = pickle.dumps(request.to_dict(spider=self.spider), protocol=4)
        except Exception as e:  # unpicklable callback, meta or body: Scrapy's memory queue takes it
            if parent is not None:
                request.meta[_META_ID] = parent
            raise ValueError(f"cannot serialize {request}: {e}") from e
        if len(fingerprint) > 0xFFFF:
            raise ValueError(f"fingerprint must be at most 65535 bytes, got {len(fingerprint)}")
        if not -(2**63) <= request.priority < 2**63 or len(payload) >= 2**32:
            raise ValueError(f"request priority must fit in 64 bits and its pickle in 4 GiB, got priority "
                             f"{request.priority} and {len(payload)} bytes")
        body = fingerprint + payload
        head = _REC.pack(_PENDING, 0, len(fingerprint), len(payload), request.priority, 0)
        rec = head[:-4] + struct.pack("<I", _record_crc(head, body)) + body
        offset = self._size
        os.pwrite(self._fd, rec, offset)
        self._size += len(rec)
        self._live_bytes += len(rec)
        self._enqueue(request.priority, offset)
        if parent is not None and parent in self._handed:
            self._chained.setdefault(offset, []).append(parent)

    def pop(self) -> Request | None:
        """The next request (highest priority; LIFO or FIFO within one), or None."""
        while self._queues:
            priority = max(self._queues)
            queue = self._queues[priority]
            if self.fifo:
                head = self._heads[priority]
                offset = queue[head]
                head += 1
                if head == len(queue):
                    del self._queues[priority], self._heads[priority]
                elif head >= 4096 and head * 2 >= len(queue):
                    del queue[:head]
                    head = 0
                if priority in self._heads:
                    self._heads[priority] = head
            else:
                offset = queue.pop()
                if not queue:
                    del self._queues[priority]
            self._pending -= 1
            rid = next(self._ids)
            try:
                _, payload, length = self._read(offset)
                request = request_from_dict(pickle.loads(payload), spider=self.spider)
            except Exception as e:  # damaged on disk, or the spider changed (a callback renamed)
                logger.error("%s: dropped the request at offset %d, it cannot be read back: %s", self.path, offset, e)
                self._handed[rid] = (offset, _REC.size, self._chained.pop(offset, []))
                self.done(rid)
                continue
            request.meta[_META_ID] = rid
            self._handed[rid] = (offset, length, self._chained.pop(offset, []))
            return request
        return None

    def done(self, rid: int) -> None:
        """The request with this id is finished: mark its record (and the
        records of the requests it retried or redirected) done."""
        entry = self._handed.pop(rid, None)
        if entry is None:
            return
        offset, length, parents = entry
        os.pwrite(self._fd, bytes((_DONE,)), offset)
        self._live_bytes -= length
        for p in parents:
            self.done(p)
        if self._size > _COMPACT_MIN_BYTES and self._live_bytes * 4 < self._size:
            self._rewrite(None)

    def close(self) -> None:
        """A clean stop: the engine has finished every request it took."""
        for rid in list(self._handed):
            self.done(rid)
        self._rewrite(None)
        os.close(self._fd)
        self._fd = -1

    def __len__(self) -> int:
        return self._pending

    # -- reading and rewriting -------------------------------------------------
    def _enqueue(self, priority: int, offset: int) -> None:
        queue = self._queues.get(priority)
        if queue is None:
            queue = self._queues[priority] = array("q")
            self._heads[priority] = 0
        queue.append(offset)
        self._pending += 1

    def _read(self, offset: int) -> tuple[int, bytes, int]:
        head = os.pread(self._fd, _REC.size, offset)
        _, _, fp_len, payload_len, _, crc = _REC.unpack(head)
        body = os.pread(self._fd, fp_len + payload_len, offset + _REC.size)
        if len(body) != fp_len + payload_len or _record_crc(head, body) != crc:
            raise ValueError(f"{self.path}: the record at offset {offset} is damaged")
        return fp_len, body[fp_len:], _REC.size + len(body)

    def _rewrite(self, on_fingerprint: Any) -> int:
        """Copy the records still pending into a new file and queue them
        again (those handed out stay handed out, at their new offsets).
        Returns how many records are queued."""
        old: Iterator[tuple[int, bytes, bytes]] = iter(())
        src = None
        if self.path.exists():
            src = open(self.path, "rb")  # noqa: SIM115 - closed below
            magic = src.read(len(_JOURNAL_MAGIC))
            if magic != _JOURNAL_MAGIC:
                src.close()
                raise ValueError(f"{self.path} is not a bloomline request journal (starts {magic[:8]!r})")
            old = _records(src, self.path)
        handed_at = {entry[0]: rid for rid, entry in self._handed.items()}
        chained, self._chained = self._chained, {}
        self._queues, self._heads, self._pending, self._live_bytes = {}, {}, 0, 0
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as out:
            out.write(_JOURNAL_MAGIC)
            pos = len(_JOURNAL_MAGIC)
            for offset, head, body in old:
                out.write(head)
                out.write(body)
                length = len(head) + len(body)
                rid = handed_at.get(offset)
                if rid is not None:
                    _, _, parents = self._handed[rid]
                    self._handed[rid] = (pos, length, parents)
                else:
                    priority = _REC.unpack(head)[4]
                    self._enqueue(priority, pos)
                    if offset in chained:
                        self._chained[pos] = chained[offset]
                    if on_fingerprint is not None:
                        fp_len = head[2] | head[3] << 8
                        if fp_len:
                            on_fingerprint(body[:fp_len])
                self._live_bytes += length
                pos += length
            out.flush()
            os.fsync(out.fileno())
        if src is not None:
            src.close()
        os.replace(tmp, self.path)
        _fsync_dir(self.path.parent)
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = os.open(self.path, os.O_RDWR)
        self._size = pos
        return self._pending


def _record_crc(head: bytes, body: bytes) -> int:
    return zlib.crc32(body, zlib.crc32(head[2 : _REC.size - 4]))


def _records(f: Any, path: Path) -> Iterator[tuple[int, bytes, bytes]]:
    """(offset, header, body) of every pending record of an open journal;
    stops, with a warning, at a torn or damaged tail."""
    offset = len(_JOURNAL_MAGIC)
    size = os.fstat(f.fileno()).st_size
    while offset < size:
        head = f.read(_REC.size)
        bad = len(head) < _REC.size
        if not bad:
            state, reserved, fp_len, payload_len, _, crc = _REC.unpack(head)
            n = fp_len + payload_len
            bad = state not in (_PENDING, _DONE) or reserved != 0 or offset + _REC.size + n > size
        if not bad:
            body = f.read(n)
            bad = len(body) != n or _record_crc(head, body) != crc
        if bad:
            logger.warning("%s: dropped %d damaged bytes at its end (offset %d)", path, size - offset, offset)
            return
        if state == _PENDING:
            yield offset, head, body
        offset += _REC.size + n


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_MIDDLEWARE = "bloomline.scrapy.JournalDoneMiddleware"


class JournalScheduler(Scheduler):
    """Scrapy's scheduler with a JOBDIR queue that survives kill -9.

    Enable it with::

        SCHEDULER = "bloomline.scrapy.JournalScheduler"
        SPIDER_MIDDLEWARES = {"bloomline.scrapy.JournalDoneMiddleware": 0}

    Without ``JOBDIR`` it is Scrapy's scheduler. With it, the disk queue is
    ``JOBDIR/requests.journal`` (see _RequestJournal): every request pushed
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

    def _dqdir(self, jobdir: str | None) -> str | None:
        if jobdir:
            os.makedirs(jobdir, exist_ok=True)
        return jobdir or None

    def open(self, spider: Any) -> Any:
        self.spider = spider
        self.mqs = self._mq()
        self.dqs = None
        result = self.df.open()
        if self.dqdir:
            df = self.df
            fingerprint_of = on_fingerprint = None
            if isinstance(df, BloomDupeFilter):
                fingerprint_of, on_fingerprint = df.fingerprinter.fingerprint, df.record_fingerprint
            journal = _RequestJournal(Path(self.dqdir, JOURNAL_NAME), spider, fifo=self.fifo,
                                      fingerprint_of=fingerprint_of, on_fingerprint=on_fingerprint)
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
        df = self.df
        if self.dqs is None or request.dont_filter or not isinstance(df, BloomDupeFilter):
            return super().enqueue_request(request)
        # Journal first, record second: a kill between the two leaves the
        # request queued and its fingerprint re-recorded on resume.
        fp = df.fingerprinter.fingerprint(request)
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
        rid = request.meta.get(_META_ID) if request is not None else None
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
