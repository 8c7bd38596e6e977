"""RedisJournalScheduler: scrapy-redis's scheduler, with a local journal of
the requests this process took from Redis and has not finished.

scrapy-redis's pop removes a request from Redis as the crawler takes it,
and the dupefilter has already recorded it: a crawler killed with SIGKILL
(the OOM killer, a container stopped without grace) loses every request it
had taken and not finished, and the pages only they link to, for every
later crawl. Here each request taken is written to a journal on local disk
(journal.py, docs/FORMAT.md) before the engine gets it, and finished there
once its callback's output has ended and every request it yielded is in
Redis (or filtered, or spilled by RedisBloomDupeFilter), as JournalScheduler
finishes its own. A crawl that opens hands the journals of dead processes
on this machine back to the queue.

Invariants:
- A request taken is in the journal before the engine sees it; it leaves
  the journal (a done record) only after what its page yielded is kept.
- A dead process's journal is handed back whole, to a crawl of its own
  queue on its own Redis (_owners.py): each pending request is pushed to
  the queue, then marked done (killed in between, it is pushed again by
  the next crawl: at least once). Only one process takes a file (it is
  renamed first); a live process's journal (its owner lock held) is never taken.
- Handed back, a request is not checked again: its fingerprint is recorded.
- A request yielded is in the journal (an intent) before the dupefilter
  records it, and leaves it once pushed or dropped: a kill between the
  record and the push hands it back, never leaves it seen in no queue.
- A clean close removes the journal when every request taken is finished.
  One still unfinished (its page's link could not be queued) is kept for
  the next crawl to queue again, with SCHEDULER_PERSIST; without it the
  crawl's queue and filter are gone, and so is the journal, unless the
  crawl failed on Redis or its flush did (the queue and filter are kept).
- A request popped is parked in Redis (``<queue key>:taking:<journal
  name>``, moved there by the pop itself) until the journal has it, and let
  go of then. A dead process's parked request, popped and never journaled,
  is pushed back with its journal.
What it cannot keep: a request popped by a blocking pop
(SCHEDULER_IDLE_BEFORE_CLOSE) from a Redis without BLMOVE (before 6.2), or
from a queue class other than scrapy-redis's three, whose reply never
reached the crawler (its Redis died, or the crawler was killed, between
the two); journals, and parked requests, of a machine that is gone.
Requests in flight at a kill are fetched again (at least once)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Optional

from redis import exceptions as redis_errors
from scrapy.http import Request
from scrapy.utils.job import job_dir
from scrapy_redis import queue as _queues  # type: ignore[import-untyped]
from scrapy_redis.scheduler import Scheduler  # type: ignore[import-untyped]

from .._units import noun
from ._crawl import _CrawlStop, _Refused
from ._owners import OPEN as _OPEN  # (the journals this process's open crawls write: a second crawl leaves them)
from ._owners import claim, journal_stems, left_journals, own_journal_path, reserve_path
from ._redis_filter import _default_spill_dir
from .journal import JOURNAL_META_ID, JournalUnwritable, RequestJournal, _Reserve
from .scheduler import REASON_JOURNAL, Finishing, journal_intent, request_done, require_middleware

__all__ = ["RedisJournalScheduler"]

logger = logging.getLogger(__name__)

_KIND = "taken"  # journals named <queue key>-<hash>.<pid>-<random>.o<owner token>.taken.journal (_owners.py)

# The pop: the next request moved from scrapy-redis's queue (its three
# classes, popped as each pops) to the parked key, in one step, where it
# stays until the journal has it (_unpark); a crawler killed before leaves
# it there, for the crawl that hands its journal back. (The DEL: one left
# by an _unpark that Redis refused.) KEYS: queue, parked. ARGV: the
# queue's kind.
_POP_PARKED = """
redis.call('DEL', KEYS[2])
local item
if ARGV[1] == 'priority' then
  item = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
  if item then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, 0) end
elseif ARGV[1] == 'fifo' then
  item = redis.call('RPOP', KEYS[1])
else
  item = redis.call('LPOP', KEYS[1])
end
if item then redis.call('RPUSH', KEYS[2], item) end
return item
"""
_QUEUE_KINDS = {_queues.PriorityQueue: "priority", _queues.FifoQueue: "fifo", _queues.LifoQueue: "lifo"}


class RedisJournalScheduler(_Reserve, Scheduler):  # type: ignore[misc]
    """scrapy-redis's scheduler that loses no request to a crawler killed
    with SIGKILL (see the module doc). Enable it with::

        SCHEDULER = "bloomline.scrapy.RedisJournalScheduler"
        SPIDER_MIDDLEWARES = {"bloomline.scrapy.JournalDoneMiddleware": 0}

    and any dupefilter (RedisBloomDupeFilter, or scrapy-redis's own). The
    journals live in ``JOBDIR`` if set, else in the project's data dir
    (``.scrapy/bloomline``), one per process; every crawler of one machine
    must use the same directory, so that a restarted one finds what a dead
    one left. A journal's owner is told alive by a lock it holds (flock),
    so containers of one machine may share it; crawlers of other machines
    must not (a lock on a network file system may not hold). Crawlers name
    their Redis the same way (REDIS_URL): a journal is handed back only to
    a crawl of its own queue on its own Redis. With
    ``SCHEDULER_FLUSH_ON_START`` the dead processes' journals (and parked
    requests) are removed with the queue they came from. Each request
    popped is parked in Redis (``<queue key>:taking:<journal name>``, by
    the pop itself) until the journal has it.

    A journal that cannot be written (a full disk) stops the crawl, reason
    ``bloomline_journal_unwritable``: the request being taken is pushed back
    to the queue, and the unfinished ones stay in the journal for the next
    crawl to hand back.
    """

    crawler: Any = None
    """The crawl's Crawler (scrapy-redis's scheduler keeps none)."""
    journal_dir: Path = Path()
    """Where this crawl's journal is, and where it looks for dead processes' journals."""
    _taken: Optional[RequestJournal] = None
    _stop: Optional[_CrawlStop] = None
    _parked: Optional[str] = None  # this crawl's parked key (None: the queue's own pop)
    _pop_parked: Any = None

    @classmethod
    def from_crawler(cls, crawler: Any) -> RedisJournalScheduler:
        """Scrapy's engine makes the scheduler; ValueError when JournalDoneMiddleware is not in SPIDER_MIDDLEWARES."""
        require_middleware(crawler, cls.__name__)
        scheduler = super().from_crawler(crawler)
        scheduler.crawler = crawler
        scheduler.journal_dir = Path(job_dir(crawler.settings) or _default_spill_dir())
        return scheduler  # type: ignore[no-any-return]

    def open(self, spider: Any) -> Any:
        """Scrapy's engine, at the start: scrapy-redis's open (the queue, the
        dupefilter, the flush on start), then the journals of dead processes
        handed back to the queue, and this process's own journal."""
        result = super().open(spider)
        self._finishing = Finishing(self.crawler, self._finish)
        self.crawler.signals.connect(self._request_done, signal=request_done)
        # (two queues, or one queue's key on two Redis servers, never share journals)
        stem, older = journal_stems(self.queue.key, self.server, legacy_hashed=True)
        own: Optional[Path] = None
        try:
            for left, name in left_journals(self.journal_dir, [stem, *older], _KIND, "RedisJournalScheduler"):
                self._hand_back(left, name, spider)  # (not another crawl's of this process: left_journals)
            own = own_journal_path(self.journal_dir, stem, _KIND)
            _OPEN.add(own.resolve())  # (its reserve too: left_journals of another crawl of this process leaves it)
            self._keep_reserve(reserve_path(own))
            self._taken = RequestJournal(own, spider, fifo=True)
            if type(self.queue) in _QUEUE_KINDS:
                self._parked = self._parked_key(own)
                self._pop_parked = self.server.register_script(_POP_PARKED)
        except (ValueError, OSError) as e:
            self._release_reserve()
            if own is not None:
                _OPEN.discard(own.resolve())
            self._stop = _TakenStop(self.crawler, f"RedisJournalScheduler cannot keep the requests it takes in "
                                                  f"{self.journal_dir}: {e}", opening=True)
        return result

    def _hand_back(self, path: Path, name: Path, spider: Any) -> None:
        """Push the pending requests of a dead process's journal to the
        queue, or (flushed on start) remove it. A journal that holds no
        journal at all, or whose push fails, is left under its name for
        the next crawl (logged)."""
        claimed = claim(path, name)
        if claimed is None:
            return  # another process took it
        if self.flush_on_start:
            os.unlink(claimed)
            self.server.delete(self._parked_key(name))
            logger.info("RedisJournalScheduler: removed %s with the queue it came from (SCHEDULER_FLUSH_ON_START)",
                        name.name, extra={"spider": spider})
            return
        try:
            journal = RequestJournal(claimed, spider, fifo=True)
        except (ValueError, OSError) as e:
            os.rename(claimed, name)
            logger.error("RedisJournalScheduler: cannot read the requests taken by a crawler gone, in %s: %s", name, e,
                         extra={"spider": spider})
            return
        count = 0
        try:
            while (request := journal.pop()) is not None:
                rid = request.meta.pop(JOURNAL_META_ID)
                self.queue.push(request)  # pushed first, done after: killed between, pushed again (at least once)
                journal.done(rid)
                count += 1
            count += self._push_parked(name)  # (after the journal: killed before, the journal is handed back again)
            journal.close()
        except Exception as e:  # (Redis refused or went away; a full disk)
            journal.release()  # what was not marked done stays pending in it
            os.rename(claimed, name)
            logger.error("RedisJournalScheduler: handing back the requests a crawler gone had taken failed (%r) "
                         "after %d; the rest stay in %s for the next crawl", e, count, name,
                         extra={"spider": spider})
            return
        os.unlink(claimed)
        if count:
            logger.info("RedisJournalScheduler: %d %s taken and not finished by a crawler gone queued again (%s)",
                        count, noun(count, "request"), name.name, extra={"spider": spider})

    def close(self, reason: str) -> Any:
        """Scrapy's engine, at the end: scrapy-redis's close (the flush
        without SCHEDULER_PERSIST), then the journal: removed if nothing in
        it is unfinished (or, without SCHEDULER_PERSIST, with the queue),
        else kept for the next crawl to hand back (also one that could not
        be written). A crawl whose Redis failed keeps its queue and its
        journal as SCHEDULER_PERSIST does: the filter that records their
        requests as seen is kept for the next crawl to resume from."""
        flushed = False
        try:
            result = super().close(reason)  # (its flush may raise: Redis gone)
            flushed = True
            return result
        finally:
            self._close_journal(flushed)

    def flush(self) -> None:
        """scrapy-redis's flush (the filter and the queue), but not after the
        dupefilter failed on Redis (its filter is kept, and the queue with it)."""
        if self._redis_failed():
            logger.warning("RedisJournalScheduler: the crawl failed on Redis, so the queue at Redis key %r is kept "
                           "with the filter (SCHEDULER_PERSIST is off): its requests are recorded as seen, and the "
                           "next crawl of this spider fetches them", self.queue.key)
            return
        super().flush()

    flush._bloomline_guard = True  # type: ignore[attr-defined]  # (the dupefilter's own guard of it is not needed)

    def _redis_failed(self) -> bool:
        """Did the dupefilter fail on Redis, or refuse to open (its filter kept either way)?"""
        return bool(getattr(self.df, "failed", False)) or getattr(self.df, "refused", None) is not None

    def _close_journal(self, flushed: bool) -> None:
        try:
            self._settle_journal(flushed)
        finally:
            self._release_reserve()  # (after the journal: its room is for what Scrapy writes to JOBDIR at close)
            parked, self._parked = self._parked, None
            if parked is not None:
                try:  # (journaled by now, or pushed back as the journal failed)
                    self.server.delete(parked)
                except redis_errors.RedisError as e:  # Redis gone: the next crawl pushes it back (at least once)
                    logger.warning("RedisJournalScheduler: cannot let go of the request parked at %r (%s): the next "
                                   "crawl pushes it back to the queue", parked, e)

    def _settle_journal(self, flushed: bool) -> None:
        taken, self._taken = self._taken, None
        if taken is None:
            return
        _OPEN.discard(taken.path.resolve())
        if taken.unwritable is not None:
            taken.release()
            return
        if (self.persist or not flushed or self._redis_failed()) and taken.handed_out:
            # Unfinished at a clean close: a page whose link could not be
            # queued (its enqueue raised), say; or at a close whose flush
            # failed or was skipped (the queue and filter are still there).
            # Kept for the next crawl to queue again (at least once), never marked done.
            taken.release()
            logger.info("RedisJournalScheduler: %d %s taken and not finished kept in %s for the next crawl",
                        taken.handed_out, noun(taken.handed_out, "request"), taken.path)
            return
        try:
            taken.close()
            os.unlink(taken.path)
        except OSError as e:
            logger.error("RedisJournalScheduler: cannot finish the requests taken, in %s (%s): the next crawl "
                         "queues them again", taken.path, e)

    def _parked_key(self, journal: Path) -> str:
        """Where the crawl writing `journal` parks the request it pops until the journal has it."""
        return f"{self.queue.key}:taking:{journal.name}"

    def _push_parked(self, journal: Path) -> int:
        """Push back what the dead crawl of `journal` had parked (popped, and
        perhaps not journaled), then let go of it: how many requests."""
        key = self._parked_key(journal)
        items = self.server.lrange(key, 0, -1)
        for item in items:
            self.queue.push(self.queue._decode_request(item))
        self.server.delete(key)
        return len(items)

    def _pop(self) -> Optional[Request]:
        """scrapy-redis's pop, through the parked key where the queue is one
        of its three classes (see _POP_PARKED)."""
        if self._parked is None:
            return self.queue.pop(self.idle_before_close)  # type: ignore[no-any-return]
        kind = _QUEUE_KINDS[type(self.queue)]
        item = self._pop_parked(keys=[self.queue.key, self._parked], args=[kind])
        if item is None and self.idle_before_close > 0 and kind != "priority":
            # scrapy-redis's blocking pop, parked too (BLMOVE: Redis 6.2);
            # its priority queue does not block.
            try:
                item = self.server.blmove(self.queue.key, self._parked, self.idle_before_close,
                                          "RIGHT" if kind == "fifo" else "LEFT", "RIGHT")
            except redis_errors.ResponseError:  # (an older Redis: its own pop, unparked)
                return self.queue.pop(self.idle_before_close)  # type: ignore[no-any-return]
        return None if item is None else self.queue._decode_request(item)

    def next_request(self) -> Optional[Request]:
        """The next request from Redis, journaled before the engine gets it."""
        if self._stop is not None:
            return None
        if self._taken is None:
            return super().next_request()  # type: ignore[no-any-return]
        request = self._pop()
        if request is None:
            return None
        if self.stats:
            self.stats.inc_value("scheduler/dequeued/redis")
        try:
            self._taken.take(request)
        except JournalUnwritable as e:
            self._unwritable(e)  # the crawl stops
            request.meta.pop(JOURNAL_META_ID, None)
            try:
                self.queue.push(request)  # back where it was
            except Exception as error:  # (Redis gone too: parked, it is pushed back by the next crawl)
                logger.error("RedisJournalScheduler: %s, taken as the journal failed, could not be put back in the "
                             "queue (%r)%s", request, error, "; it stays parked for the next crawl to push back"
                             if self._parked is not None else ": it is lost to this crawl")
                self._parked = None  # (so the close leaves it parked: the crawl is stopping, and pops no more)
                return None
            self._unpark()
            return None
        except ValueError as e:  # (a request scrapy-redis's serializer could read and pickle cannot write)
            logger.warning("RedisJournalScheduler: cannot journal %s (%s); a crawler killed before it is finished "
                           "loses it", request, e)
        else:
            self._finishing.watch_failure(request)
        self._unpark()
        return request

    def _unpark(self) -> None:
        """The request parked is journaled (or back in the queue): let go of
        it, so that a dead crawl's parked request is one no journal has. A
        Redis error leaves it parked (the next pop lets go of it; a kill
        first, and it is fetched twice: at least once)."""
        if self._parked is not None:
            try:
                self.server.delete(self._parked)
            except redis_errors.RedisError:
                pass

    def enqueue_request(self, request: Request) -> bool:
        """scrapy-redis's enqueue (the dupefilter, then the push to Redis).
        A retry or redirect of a request taken (made by a downloader
        middleware, not yielded by a callback) finishes it once it is kept."""
        retried = self._finishing.entering(request)
        parent = request.meta.pop(JOURNAL_META_ID, None)  # a journal id never goes to Redis
        # Journaled first: scrapy-redis's enqueue records the request in the
        # dupefilter, then pushes it; a kill between the two left it seen
        # and in no queue, and the page that yielded it, fetched again,
        # found it seen. Pending, it is handed back with the journal.
        try:
            intent = journal_intent(self._taken if self._stop is None else None, self.df, request)
        except JournalUnwritable as e:  # not checked, so not recorded: the page that yielded it is fetched again
            self._unwritable(e)
            return False
        kept: bool = super().enqueue_request(request)
        if intent is not None:
            self._finish(intent)
        self._finishing.scheduled(request)
        if retried and parent is not None:
            self._finish(parent)
        return kept

    def _request_done(self, request_id: int) -> None:
        self._finishing.ended(request_id)

    def _finish(self, request_id: int) -> None:
        if self._taken is None or self._taken.unwritable is not None:
            return  # (stays pending: queued again by the next crawl)
        try:
            self._taken.done(request_id)
        except JournalUnwritable as e:
            self._unwritable(e)

    def _unwritable(self, error: OSError) -> None:
        """The journal cannot be written: the crawl stops (once)."""
        if self._stop is None:
            assert self._taken is not None
            self._release_reserve()  # room for the rest of the stop (Scrapy's spider.state)
            self._stop = _TakenStop(self.crawler, (
                f"RedisJournalScheduler cannot write the journal of the requests it takes ({error}): closing the "
                f"spider (reason {REASON_JOURNAL!r}); the requests it had not finished stay in {self._taken.path}, "
                "for the next crawl to queue again"), opening=False)


class _TakenStop(_CrawlStop):
    """Stops the crawl whose journal of taken requests cannot be made (as
    it opens: a refusal, _crawl.py) or written (mid-crawl: one ERROR line
    and the close), reason ``bloomline_journal_unwritable``, exit 1."""

    label = "RedisJournalScheduler"
    error_log = logger

    def __init__(self, crawler: Any, message: str, *, opening: bool) -> None:
        self._init_stop()
        self._watch(crawler)
        if opening:
            self.refused = _Refused(REASON_JOURNAL, message)
            return
        logger.error("%s", message)
        self._close_spider(REASON_JOURNAL)
