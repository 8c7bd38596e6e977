"""JournalScheduler and JournalDoneMiddleware: Scrapy's scheduler with a
JOBDIR queue that survives kill -9 (the journal: journal.py)."""

from __future__ import annotations

import contextlib
import fcntl
import inspect
import json
import logging
import os
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Optional, cast

from scrapy import signals
from scrapy.core.scheduler import Scheduler
from scrapy.http import Request, Response
from scrapy.utils.misc import arg_to_iter
from twisted.python.failure import Failure

from ._crawl import REASON_JOBDIR, REASON_SETTINGS, _CrawlStop, _Refused, call_later
from ._crawl import REASON_IN_USE as REASON_IN_USE  # (the finish reason of a crawl whose JOBDIR another crawl uses)
from .dupefilter import BloomDupeFilter
from .journal import JOURNAL_META_ID, JOURNAL_NAME, JournalError, JournalUnwritable, RequestJournal, _Reserve

__all__ = ["REASON_JOURNAL", "Finishing", "JournalDoneMiddleware", "JournalScheduler", "request_done",
           "request_yielded", "require_middleware"]

logger = logging.getLogger(__name__)

#: Signal sent by JournalDoneMiddleware: the callback's output for the
#: request with journal id ``request_id`` has ended (it is finished once
#: every request it yielded has been through the scheduler).
request_done = object()
#: Signal sent by JournalDoneMiddleware for each ``request`` the callback for
#: the request with journal id ``request_id`` yields, before the engine sees it.
request_yielded = object()

#: The finish reason of a crawl whose request journal could not be written.
REASON_JOURNAL = "bloomline_journal_unwritable"
RESERVE_NAME = JOURNAL_NAME + ".reserve"
LOCK_NAME = JOURNAL_NAME + ".lock"

_MIDDLEWARE = "bloomline.scrapy.JournalDoneMiddleware"


class JournalScheduler(_Reserve, Scheduler):
    """Scrapy's scheduler with a JOBDIR queue that survives kill -9.

    Enable it with::

        SCHEDULER = "bloomline.scrapy.JournalScheduler"
        SPIDER_MIDDLEWARES = {"bloomline.scrapy.JournalDoneMiddleware": 0}

    Without ``JOBDIR`` it is Scrapy's scheduler. With it, the disk queue is
    ``JOBDIR/requests.journal`` (journal.py, docs/FORMAT.md): every request pushed
    is on disk before ``enqueue_request`` returns, and a request the engine
    took stays in the journal until JournalDoneMiddleware reports its
    response handled and every request its callback yielded has been
    through ``enqueue_request`` (journaled, or filtered). A crawl killed at
    any moment resumes with every request it had not finished: none is
    lost; the few that were in flight at the kill (at most about
    ``CONCURRENT_REQUESTS``) are fetched again.

    With BloomDupeFilter, a request is journaled before its fingerprint is
    recorded, and on resume the fingerprints of the journaled requests are
    recorded again, so no kill between the two can lose or repeat a request.
    Order: highest priority first; LIFO within a priority (Scrapy's
    default), FIFO if ``SCHEDULER_DISK_QUEUE`` names a FIFO queue.

    A journal that cannot be written (a full disk) stops the crawl: one
    ERROR line, finish reason ``bloomline_journal_unwritable``, exit status
    1. From the failed write on the journal writes nothing, so no request
    counts as finished whose links may not have been kept; the crawl resumes
    (with room) from where it was. ``JOBDIR/requests.journal.reserve``
    (64 KiB) is held while the crawl runs and given up then, so that the
    stop's own writes (Scrapy's ``spider.state``) have room.
    """

    @classmethod
    def from_crawler(cls, crawler: Any) -> JournalScheduler:
        """Scrapy's engine makes the scheduler; ValueError when JournalDoneMiddleware is not in SPIDER_MIDDLEWARES."""
        require_middleware(crawler, "JournalScheduler")
        scheduler = super().from_crawler(crawler)
        scheduler.fifo = "fifo" in str(crawler.settings.get("SCHEDULER_DISK_QUEUE", "")).lower()
        return scheduler

    fifo = False
    """True when SCHEDULER_DISK_QUEUE names a FIFO queue: requests of one priority leave in the order they came."""
    keeps_journal = True
    """This scheduler reads and keeps JOBDIR's request journal: the dupefilters ask (a JOBDIR's journal is resumed only by a scheduler that says so)."""
    _lock: Optional[int] = None  # JOBDIR's lock, held from open to close
    _warned_memory = False  # a request kept in memory only was logged
    _refusal: Optional[_CrawlStop] = None  # the journal cannot be read: the crawl stops at its start
    _failure: Optional[_CrawlStop] = None  # the journal could not be written: the crawl stops

    def _dqdir(self, jobdir: str | None) -> str | None:
        if jobdir:
            os.makedirs(jobdir, exist_ok=True)
        return jobdir or None

    def open(self, spider: Any) -> Any:
        """Scrapy's engine, at the start: opens the dupefilter and, with a JOBDIR, the request journal, resuming the requests it holds."""
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
                fingerprint_of, on_fingerprint = df.fingerprint, df.record_fingerprint  # (the key the filter records)
            path = Path(self.dqdir, JOURNAL_NAME)
            refused = self._hold_jobdir(df)
            if refused is not None:
                if isinstance(df, BloomDupeFilter):
                    df.leave_jobdir()
                self._refusal = _JournalRefusal(self.crawler, refused)
                return result
            try:
                self._keep_reserve(Path(self.dqdir, RESERVE_NAME))
                journal = RequestJournal(path, spider, fifo=self.fifo, fingerprint_of=fingerprint_of,
                                          on_fingerprint=on_fingerprint)
            except (JournalError, OSError) as e:
                # One ERROR line and a finish reason, as a damaged JOBDIR
                # filter gives; the file is left as it is.
                self._release_reserve()
                reason = REASON_JOURNAL if isinstance(e, JournalUnwritable) else REASON_JOBDIR
                self._refusal = _JournalRefusal(self.crawler, _Refused(
                    reason, f"JournalScheduler cannot resume from JOBDIR {self.dqdir!r}: {e}"))
                return result
            self.dqs = journal  # type: ignore[assignment]
            assert self.crawler is not None
            self._finishing = Finishing(self.crawler, self._finish)
            self.crawler.signals.connect(self._request_done, signal=request_done)
            if journal.recovered:
                logger.info("Resuming crawl (%(queuesize)d requests scheduled)", {"queuesize": journal.recovered},
                            extra={"spider": spider})
        return result

    def close(self, reason: str) -> Any:
        """Scrapy's engine, at the end: closes the journal (what is pending stays in JOBDIR for the next run), then the dupefilter."""
        if self.dqs is not None:
            try:
                self.dqs.close()
            except JournalUnwritable as e:
                self._journal_failed(e, closing=True)
        # (after the journal: its room is for what Scrapy writes to JOBDIR at close)
        self._release_reserve()
        try:
            return self.df.close(reason)
        finally:
            self._release_lock()

    def _hold_jobdir(self, df: Any) -> Optional[_Refused]:
        """Take JOBDIR for this crawl (flock on requests.journal.lock, held
        to close; the kernel lets go of it when the process dies), or the
        refusal that stops it. Two crawls on one JOBDIR would each rewrite
        the journal the other appends to, and record in one filter requests
        only one journal keeps: seen, never fetched. JOBDIR's pending
        requests of Scrapy's own scheduler are not read here, and a
        dupefilter's own request_seen would not be called: both refused."""
        assert self.dqdir is not None
        jobdir = self.dqdir
        if type(df).request_seen is not BloomDupeFilter.request_seen and isinstance(df, BloomDupeFilter):
            return _Refused(REASON_SETTINGS, f"JournalScheduler records fingerprints itself, after the journal: "
                                             f"DUPEFILTER_CLASS {type(df).__name__} overrides request_seen, which it "
                                             "would not call. Override request_fingerprint (or give a "
                                             "REQUEST_FINGERPRINTER_CLASS) instead, or use Scrapy's scheduler")
        queue_state = Path(jobdir, "requests.queue", "active.json")
        with contextlib.suppress(OSError, ValueError):
            if json.loads(queue_state.read_text()):
                return _Refused(REASON_SETTINGS, f"JOBDIR {jobdir!r} holds the pending requests of Scrapy's own "
                                                 f"scheduler ({queue_state.parent}), which JournalScheduler does "
                                                 "not read: resume it without SCHEDULER set until it finishes, or "
                                                 "start this crawl with a new JOBDIR")
        fd = os.open(Path(jobdir, LOCK_NAME), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return _Refused(REASON_IN_USE, f"JOBDIR {jobdir!r} is in use by another crawl (it holds {LOCK_NAME}): "
                                           "two crawls on one JOBDIR would lose requests. Give each its own JOBDIR")
        self._lock = fd
        return None

    def _release_lock(self) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def enqueue_request(self, request: Request) -> bool:
        """Schedule a request unless the dupefilter drops it; True when scheduled. With a JOBDIR it is journaled before its fingerprint is recorded."""
        if self.dqs is None:
            return self._enqueue(request)
        redirect = self._finishing.entering(request)
        replaced = request.meta.get(JOURNAL_META_ID)  # (a redirect's or retry's: taken off as it is journaled)
        kept = self._enqueue(request)
        # Reached only if the request was journaled, filtered or refused: an
        # exception leaves the request that yielded it unfinished (fetched again).
        self._finishing.scheduled(request)
        if redirect and not kept and replaced is not None:
            self._finish(replaced)  # (filtered: a redirect to a page seen; kept, it finishes the page when done)
        return kept

    def _enqueue(self, request: Request) -> bool:
        if self._refusal is not None or self._failure is not None:
            return False  # never fetched, never recorded: the crawl is stopping
        df = self.df
        if self.dqs is None or request.dont_filter or not isinstance(df, BloomDupeFilter):
            # Another dupefilter records as it answers (a Redis one, Scrapy's
            # own): the request is journaled first (an intent, queued again
            # on resume if the process dies before it is kept or dropped), or
            # a kill between its record and its push would leave it seen and
            # never fetched (the page that yielded it, fetched again, finds
            # it seen).
            try:
                intent = journal_intent(cast(Optional[RequestJournal], self.dqs), df, request)  # (ours, when set)
                kept: bool = super().enqueue_request(request)
            except JournalUnwritable as e:  # (the intent's: nothing recorded; the request that yielded it is fetched again)
                self._journal_failed(e)
                return False
            if intent is not None:
                self._finish(intent)
            return kept
        # Journal first, record second: a kill between the two leaves the
        # request queued and its fingerprint re-recorded on resume.
        fp = df.fingerprint(request)
        if df.has_fingerprint(fp):
            df.log(request, self.spider)
            return False
        assert self.stats is not None
        try:
            pushed = self._dqpush(request)
        except JournalUnwritable as e:  # not recorded: the request that yielded it is fetched again on resume
            self._journal_failed(e)
            return False
        if pushed:  # the journal keeps fp (the fingerprinter caches it per request)
            self.stats.inc_value("scheduler/enqueued/disk")
        else:  # unserializable: Scrapy's memory queue, logged and counted by _dqpush
            self._mqpush(request)
            self.stats.inc_value("scheduler/enqueued/memory")
            if not self._warned_memory:  # (said always, once: a kill loses it, and the journal cannot say so)
                self._warned_memory = True
                logger.warning("JournalScheduler: %(request)s cannot be serialized (a callback that is not a spider "
                               "method, or meta that pickle refuses), so it is kept in memory only: if the crawl is "
                               "killed before it is fetched, it is lost, as the page that yielded it is finished. "
                               "scheduler/enqueued/memory counts such requests", {"request": request},
                               extra={"spider": self.spider})
        df.record_fingerprint(fp)
        self.stats.inc_value("scheduler/enqueued")
        return True

    def _dqpop(self) -> Optional[Request]:
        try:
            request: Optional[Request] = super()._dqpop()
        except JournalUnwritable as e:  # (finishing a record that cannot be made a request again)
            self._journal_failed(e)
            return None
        if request is not None:
            self._finishing.watch_failure(request)
        return request

    def _request_done(self, request_id: int) -> None:
        if self.dqs is not None:
            self._finishing.ended(request_id)

    def _finish(self, request_id: int) -> None:
        if self._failure is not None:
            return  # the journal refuses writes: it stays pending, fetched again on resume
        try:
            self.dqs.done(request_id)  # type: ignore[union-attr]
        except JournalUnwritable as e:
            self._journal_failed(e)

    # -- a journal that cannot be written ----------------------------------------------

    def _journal_failed(self, error: OSError, closing: bool = False) -> None:
        """Stop the crawl (once): one ERROR line, reason REASON_JOURNAL, exit 1.
        The journal refuses writes from now on, so whatever was not finished
        is fetched again when the crawl is resumed."""
        if self._failure is not None:
            return
        self._release_reserve()  # room for the rest of the stop (Scrapy's spider.state)
        self._failure = _JournalFailure(self.crawler, error, self.dqdir, closing)



def journal_intent(journal: Optional[RequestJournal], df: Any, request: Request) -> Optional[int]:
    """Journal a request before a dupefilter that records what it lets
    through checks it (RequestJournal.intend): its id, for done() once the
    request is kept or dropped; None where nothing needs it: no journal, a
    dont_filter request (not checked), a fingerprint RedisBloomDupeFilter's
    front filter answers (recorded before, by this process), or a request
    pickle cannot write (it goes to Scrapy's memory queue, as the schedulers
    say). JournalUnwritable if the journal cannot be written."""
    if journal is None or request.dont_filter:
        return None
    front = getattr(df, "front", None)
    if front is not None and df.fingerprint(request) in front:
        return None
    try:
        return journal.intend(request)
    except ValueError:  # (JournalUnwritable, an OSError, goes to the caller)
        return None


class Finishing:
    """When a handed-out request is finished: its callback's output has
    ended (JournalDoneMiddleware's request_done) and every request that
    output yielded (request_yielded) has been through the scheduler's
    enqueue_request. Scrapy reads a callback's output ahead of scheduling
    it (a queue of up to 2 x CONCURRENT_ITEMS), so the output can end
    before its requests are kept: a done record written then would finish
    a page whose links are kept nowhere. finish(id) is called once each."""

    def __init__(self, crawler: Any, finish: Callable[[int], None]) -> None:
        self._finish = finish
        self._children: dict[int, int] = {}  # journal id -> requests its callback yielded, not yet scheduled
        self._parents: dict[int, tuple[Request, list[int]]] = {}  # id(request) -> (it, ids of who yielded it)
        self._ended: set[int] = set()  # journal ids whose callback output ended with children outstanding
        self._offered: dict[int, tuple[Request, int]] = {}  # id(request) -> (it, offers not yet entered)
        crawler.signals.connect(self._yielded, signal=request_yielded)
        crawler.signals.connect(self._on_request_scheduled, signal=signals.request_scheduled)

    # A request_scheduled handler may refuse a request (IgnoreRequest: Scrapy's
    # OffsiteMiddleware), and the engine then never calls enqueue_request. The
    # engine sends the signal and enqueues in one call, so a request offered
    # and not entered by the next turn of the event loop was refused: nothing
    # is left to keep, and the page that yielded it (or the request a redirect
    # or retry replaced) must not wait for it forever.

    def _on_request_scheduled(self, request: Request) -> None:
        if self.yielded_by_a_callback(request) or _copied_on_its_way(request):
            entry = self._offered.get(id(request))
            self._offered[id(request)] = (request, entry[1] + 1 if entry is not None else 1)
            call_later(0, self._refused_unless_entered, request)

    def entering(self, request: Request) -> bool:
        """enqueue_request begins with the request (first thing: what it
        does next, even raise, is the scheduler's to answer for). True for
        a retry or redirect of a handed-out request: a copy made on its way
        to the download, which carries the errback watch_failure gave it,
        and its journal id; a request a callback made with a copy of the
        response's meta carries only the id. The own errback (or none) is
        put back, so that only spider methods are serialized."""
        if self._offered:
            entry = self._offered.get(id(request))
            if entry is not None and entry[0] is request:
                self._take_offer(request, entry)
        copied = _copied_on_its_way(request) and not self.yielded_by_a_callback(request)
        unwatch(request)
        return copied

    def _take_offer(self, request: Request, entry: tuple[Request, int]) -> None:
        if entry[1] > 1:
            self._offered[id(request)] = (request, entry[1] - 1)
        else:
            del self._offered[id(request)]

    def _refused_unless_entered(self, request: Request) -> None:
        entry = self._offered.get(id(request))
        if entry is None or entry[0] is not request:
            return  # entered
        self._take_offer(request, entry)
        if self.yielded_by_a_callback(request):
            self.scheduled(request)
        elif _copied_on_its_way(request):
            self._finish(request.meta[JOURNAL_META_ID])

    # A download that fails reaches the request's errback, never the spider
    # middleware: without this, a failed request stayed pending until a clean
    # close (in a crawl that never closes, for good; fetched again after each
    # kill).

    def watch_failure(self, request: Request) -> None:
        """Give a handed-out request the errback that finishes it when its
        download fails: its own errback (if any) runs inside, and what it
        yields is tracked as a callback's output is."""
        if not isinstance(request.errback, _WatchedErrback):
            request.errback = _WatchedErrback(self, request.errback)

    def _output_of(self, request_id: int, items: Iterable[Any]) -> Iterator[Any]:
        try:
            for item in items:
                if isinstance(item, Request):
                    self._yielded(request_id, item)
                yield item
        finally:
            self.ended(request_id)

    def _yielded(self, request_id: int, request: Request) -> None:
        self._children[request_id] = self._children.get(request_id, 0) + 1
        entry = self._parents.get(id(request))
        if entry is None:
            self._parents[id(request)] = (request, [request_id])  # (the request: its id stays its own)
        else:
            entry[1].append(request_id)  # the same object yielded again

    def yielded_by_a_callback(self, request: Request) -> bool:
        """Is this request one a callback yielded, not yet scheduled?"""
        entry = self._parents.get(id(request))
        return entry is not None and entry[0] is request

    def scheduled(self, request: Request) -> None:
        """enqueue_request is done with the request (kept, or filtered)."""
        if not self.yielded_by_a_callback(request):
            return
        entry = self._parents[id(request)]
        parent = entry[1].pop(0)
        if not entry[1]:
            del self._parents[id(request)]
        left = self._children[parent] - 1
        if left:
            self._children[parent] = left
            return
        del self._children[parent]
        if parent in self._ended:
            self._ended.discard(parent)
            self._finish(parent)

    def ended(self, request_id: int) -> None:
        """The callback output for this request has ended."""
        if request_id in self._children:
            self._ended.add(request_id)  # finished when its last request is scheduled
            return
        self._finish(request_id)


class _WatchedErrback:
    """The errback Finishing.watch_failure gives a handed-out request. The
    request's own errback (or none) is put back first, so Scrapy sees what
    it would have: no errback, the failure returned (Scrapy raises it again
    and logs the download error as before); one that returns a Failure or
    raises, the same. Either way nothing was yielded, and the request is
    finished. Output is passed on with its requests tracked, and the request
    finished once it ends; an asynchronous errback's output is not tracked
    (finished at the close, as before)."""

    def __init__(self, finishing: Finishing, own: Any) -> None:
        self.finishing, self.own = finishing, own

    def __call__(self, failure: Any) -> Any:
        request = getattr(failure, "request", None)
        rid = None if request is None else request.meta.get(JOURNAL_META_ID)
        if request is not None:
            request.errback = self.own
        if rid is None:  # (not ours to finish)
            return failure if self.own is None else self.own(failure)
        if self.own is None:
            self.finishing.ended(rid)
            return failure
        try:
            output = self.own(failure)
        except BaseException:
            self.finishing.ended(rid)
            raise
        if inspect.isasyncgen(output) or inspect.isawaitable(output):
            return output
        if output is None or isinstance(output, Failure):
            self.finishing.ended(rid)
            return output
        return self.finishing._output_of(rid, arg_to_iter(output))


def _copied_on_its_way(request: Request) -> bool:
    """A retry or redirect of a handed-out request (see Finishing.entering)."""
    return isinstance(request.errback, _WatchedErrback) and JOURNAL_META_ID in request.meta


def unwatch(request: Request) -> None:
    """Put back the request's own errback in place of _WatchedErrback (a
    copy made by a retry or redirect; a response that goes to the spider
    middleware, where JournalDoneMiddleware finishes it)."""
    if isinstance(request.errback, _WatchedErrback):
        request.errback = request.errback.own


class _JournalFailure(_CrawlStop):
    """Stops the crawl whose journal could not be written (mid-crawl), or
    marks it failed (when the close's own writes failed)."""

    label = "JournalScheduler"
    error_log = logger

    def __init__(self, crawler: Any, error: OSError, jobdir: Any, closing: bool) -> None:
        self._init_stop()
        self._watch(crawler)
        self.failed = True
        kept = (f"every request it had not finished stays in it: free space and run the crawl again with "
                f"JOBDIR={jobdir} to resume")
        if closing:
            logger.error("JournalScheduler: cannot write the request journal at close (%s); it is left as its last "
                         "whole write left it, and %s", error, kept)
            return
        logger.error("JournalScheduler: cannot write the request journal (%s): closing the spider (reason %r); %s",
                     error, REASON_JOURNAL, kept)
        self._close_spider(REASON_JOURNAL)


class _JournalRefusal(_CrawlStop):
    """Stops the crawl whose journal cannot be read (_crawl.py, _CrawlStop)."""

    label = "JournalScheduler"
    error_log = logger

    def __init__(self, crawler: Any, refused: _Refused) -> None:
        self._init_stop()
        self.refused = refused
        self._watch(crawler)


def require_middleware(crawler: Any, scheduler: str) -> None:
    """ValueError unless JournalDoneMiddleware is in SPIDER_MIDDLEWARES,
    with an order lower than every other spider middleware's: it must see
    the whole output (one of a lower order could add requests after it
    finished the page, and a kill between the two would lose them)."""
    middlewares = crawler.settings.getwithbase("SPIDER_MIDDLEWARES")
    ours = [v for k, v in middlewares.items() if _is_middleware(k) and v is not None]
    if not ours:
        raise ValueError(f"{scheduler} needs its spider middleware: add SPIDER_MIDDLEWARES = {{{_MIDDLEWARE!r}: 0}}"
                         " (it tells the scheduler when a request is finished)")
    outer = {k: v for k, v in middlewares.items() if not _is_middleware(k) and v is not None and v <= min(ours)}
    if outer:
        name, order = min(outer.items(), key=lambda kv: kv[1])
        raise ValueError(f"{scheduler} needs its spider middleware outside every other one (the lowest order), but "
                         f"{name!r} has order {order} and {_MIDDLEWARE!r} has {min(ours)}: give it a lower order "
                         "(it must see all of a page's requests before it finishes the page)")


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
        """Scrapy makes the middleware for the crawl."""
        return cls(crawler)

    @staticmethod
    def _rid(response: Response) -> Optional[int]:
        request = getattr(response, "request", None)
        return request.meta.get(JOURNAL_META_ID) if request is not None else None

    def _finished(self, response: Response) -> None:
        rid = self._rid(response)
        if rid is not None:
            self.crawler.signals.send_catch_log(signal=request_done, request_id=rid)

    def _yielded(self, rid: Optional[int], item: Any) -> None:
        if rid is not None and isinstance(item, Request):
            self.crawler.signals.send_catch_log(signal=request_yielded, request_id=rid, request=item)

    def process_spider_input(self, response: Response, spider: Any = None) -> None:
        """First (order 0): the request's own errback is put back, so that an
        error from a later middleware's input (HttpErrorMiddleware's) meets
        it as it would have, and the page is finished here, after its output."""
        request = getattr(response, "request", None)
        if request is not None:
            unwatch(request)

    def process_spider_output(self, response: Response, result: Iterable[Any], spider: Any = None) -> Iterator[Any]:
        """Passes the callback's output through, telling the scheduler which requests it yielded and when it ended."""
        rid = self._rid(response)
        try:
            for item in result:
                self._yielded(rid, item)
                yield item
        finally:
            self._finished(response)

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        """The same for an asynchronous callback."""
        rid = self._rid(response)
        try:
            async for item in result:
                self._yielded(rid, item)
                yield item
        finally:
            self._finished(response)

    def process_spider_exception(self, response: Response, exception: BaseException, spider: Any = None) -> None:
        """A callback that raised has finished too: the scheduler marks its request done."""
        self._finished(response)
