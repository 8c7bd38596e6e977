"""The crash-safe request journal behind JournalScheduler.

Scrapy's JOBDIR queue (queuelib disk queues plus an ``active.json`` written
on close) loses every pending request when the process is killed: the crawl
resumes with whatever ``active.json`` said at the last clean stop. This
journal keeps the queue in one append-only file, ``JOBDIR/requests.journal``,
whose format is documented byte by byte in docs/FORMAT.md:

- 8 magic bytes ``BLMJRNL2``;
- records, each framed so that a reader can find the next whole one after
  any damage: a 4-byte marker, a 36-byte header (type, lengths, the CRC-32
  of the body, a serial number, the priority) closed by the CRC-32 of the
  header itself, then the body. A request record's body is the dupefilter's
  fingerprint of the request (empty for ``dont_filter`` requests) and
  ``pickle.dumps(request.to_dict(spider=spider), protocol=4)``; a request is
  finished by appending a "done" record naming its serial, so no byte of
  the file is ever rewritten in place and every byte is under a CRC.

Reading keeps every intact record, wherever damage lies (a flipped byte, a
zeroed run, a torn tail, a damaged magic): the bytes between intact records
are set aside in ``<journal>.damaged`` (never dropped) and one WARNING says
how many records were kept and how many bytes set aside. A file that holds
no journal at all (empty, or neither magic nor any intact record) raises
JournalError, a ValueError. Journals of the first format (``BLMJRNL1``) are
still read, and rewritten in this one.

Writing that fails (a full disk, a quota, an I/O error) raises
JournalUnwritable, an OSError, and from then on the journal refuses every
write, done records included: a request whose new requests may not all have
been kept is never recorded as finished, so a resumed crawl fetches it
again. A record cut short by the failure is cut off the file. A rewrite
that fails leaves the old file as it was.

Like Scrapy's own JOBDIR queue it holds pickles: open only journals you
wrote. No input makes it crash or hang (tests/test_fuzz.py).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import mmap
import os
import pickle
import struct
import zlib
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Optional

from scrapy.http import Request
from scrapy.utils.request import request_from_dict

from .. import _core
from .._units import count

__all__ = ["JOURNAL_META_ID", "JOURNAL_NAME", "JournalError", "JournalUnwritable", "RequestJournal"]

logger = logging.getLogger(__name__)

JOURNAL_NAME = "requests.journal"
JOURNAL_META_ID = "bloomline_journal_id"  # request.meta key of a request handed out by pop()
_MAGIC = b"BLMJRNL2"
JOURNAL_HEAD_BYTES = len(_MAGIC)  # a journal of this size holds no request
_MARKER = b"\xb1JRN"
# marker, type u8, reserved u8, fingerprint length u16, payload length u32,
# CRC-32 of the body u32, serial u64, priority i64, CRC-32 of bytes 0..31 u32
_HEAD = struct.Struct("<4sBBHIIQqI")
_REQUEST, _DONE = 1, 2
# The first format: state u8 (0 pending, 1 done), reserved u8, fingerprint
# length u16, payload length u32, priority i64, CRC-32 u32 (of bytes 2..15
# and the body: the state was outside it)
_MAGIC_V1 = b"BLMJRNL1"
_HEAD_V1 = struct.Struct("<BBHIqI")
_DAMAGED_MAGIC = b"BLMJDMG1"  # <journal>.damaged: this, then (offset u64, length u64, bytes) per span
_SPAN = struct.Struct("<QQ")
_COMPACT_MIN_BYTES = 64 << 20
_WRITE_BLOCK = 1 << 20  # bytes per write while rewriting


class JournalError(ValueError):
    """The file holds no request journal at all: it is empty, or has neither
    the magic nor any intact record. It is left as it is."""


class JournalUnwritable(OSError):
    """The journal could not be written (its errno is the write's: ENOSPC
    for a full disk). The file holds every record written before, whole;
    the journal refuses every later write."""


# (type, fingerprint length, payload length, serial, priority, end) of a record
_Record = tuple[int, int, int, int, int, int]


def _parse(view: memoryview, off: int, size: int) -> Optional[_Record]:
    """The intact record at off, or None."""
    if off + _HEAD.size > size or view[off : off + 4] != _MARKER:
        return None
    _, kind, reserved, fp_len, payload_len, body_crc, serial, priority, head_crc = _HEAD.unpack_from(view, off)
    if zlib.crc32(view[off : off + _HEAD.size - 4]) != head_crc or reserved != 0:
        return None
    end = off + _HEAD.size + fp_len + payload_len
    if kind not in (_REQUEST, _DONE) or (kind == _DONE and end != off + _HEAD.size) or end > size:
        return None
    if zlib.crc32(view[off + _HEAD.size : end]) != body_crc:
        return None
    return kind, fp_len, payload_len, serial, priority, end


def _parse_v1(view: memoryview, off: int, size: int) -> Optional[_Record]:
    """The intact record of the first format at off (its serial: its offset)."""
    if off + _HEAD_V1.size > size:
        return None
    state, reserved, fp_len, payload_len, priority, crc = _HEAD_V1.unpack_from(view, off)
    end = off + _HEAD_V1.size + fp_len + payload_len
    if state > 1 or reserved != 0 or end > size:
        return None
    if zlib.crc32(view[off + _HEAD_V1.size : end], zlib.crc32(view[off + 2 : off + _HEAD_V1.size - 4])) != crc:
        return None
    return (_DONE if state else _REQUEST), fp_len, payload_len, off, priority, end


def _scan(view: memoryview, start: int, parse: Callable[[memoryview, int, int], Optional[_Record]],
          candidate: Callable[[int], int]) -> Iterator[tuple[int, Optional[_Record], int]]:
    """(offset, record, end) of every intact record from start, and (offset,
    None, end) of each damaged span between them. After damage, the next
    record is looked for at each candidate(offset) (the next marker; every
    byte in the first format) until one is intact."""
    size = len(view)
    off = start
    while off < size:
        rec = parse(view, off, size)
        if rec is not None:
            yield off, rec, rec[-1]
            off = rec[-1]
            continue
        nxt = candidate(off + 1)
        while nxt != -1 and nxt < size and parse(view, nxt, size) is None:
            nxt = candidate(nxt + 1)
        end = size if nxt == -1 or nxt >= size else nxt
        yield off, None, end
        off = end


class _Contents:
    """A journal file as its readers see it: which format, where its
    records start, and which requests are finished."""

    def __init__(self, path: Path, view: memoryview, mm: Any) -> None:
        if len(view) == 0:
            raise JournalError(f"{path} is empty (0 bytes): it holds no request journal; remove it to crawl "
                               "without the requests it held, or restore it")
        self.view = view
        head = bytes(view[: len(_MAGIC)])
        self.v1 = head == _MAGIC_V1
        self.parse = _parse_v1 if self.v1 else _parse
        # After damage: the next marker, or (the first format has none) every byte.
        self.candidate: Callable[[int], int] = (lambda o: o) if self.v1 else (lambda o: mm.find(_MARKER, o))
        # A damaged magic is one more damaged span: the records after it are read all the same.
        self.start = len(_MAGIC) if head in (_MAGIC, _MAGIC_V1) else 0
        # One pass for what is finished and what is damaged; the copy is a second.
        done = array("Q")
        self.records = self.damaged_bytes = 0
        self.spans: list[tuple[int, int]] = []
        for off, rec, end in _scan(view, self.start, self.parse, self.candidate):
            if rec is None:
                self.spans.append((off, end))
                self.damaged_bytes += end - off
                continue
            self.records += 1
            if rec[0] == _DONE:
                done.append(rec[3])  # (the first format: a record marked done, its offset as serial)
        if self.start == 0 and self.records == 0:
            raise JournalError(f"{path} is not a bloomline request journal (it starts {head!r} and holds no "
                               "intact record); remove it to crawl without it, or restore it")
        self.done = array("Q", sorted(done))

    def finished(self, serial: int) -> bool:
        i = bisect_left(self.done, serial)
        return i < len(self.done) and self.done[i] == serial

    def pending(self) -> Iterator[tuple[int, _Record]]:
        """(offset, record) of each request not finished, in file order."""
        for off, rec, _ in _scan(self.view, self.start, self.parse, self.candidate):
            if rec is not None and rec[0] == _REQUEST and not self.finished(rec[3]):
                yield off, rec


class RequestJournal:
    """The disk queue of a JOBDIR crawl: one append-only file of records
    (the format above).

    A push is one ``pwrite`` at the end of the file, and so is finishing a
    request (a done record). Both are in the kernel when the call returns,
    so killing the process at any moment leaves whole records; anything else
    (a torn tail after a machine crash, a damaged disk block) is set aside
    when the journal is opened, and every intact record is kept. On open
    every record still pending is queued again, including the requests the
    engine had taken but not finished: a request is delivered at least once,
    never lost while its record is intact.

    Memory: 8 bytes per pending request (its offset), by priority, and 8
    per finished one while the file is read. The file is rewritten with only
    the pending records when it is opened, when it is closed, and when it is
    over 64 MiB and three quarters dead.
    """

    def __init__(
        self, path: Path, spider: Any, *, fifo: bool, fingerprint_of: Any = None, on_fingerprint: Any = None
    ) -> None:
        """fingerprint_of(request) -> bytes: the dupefilter's fingerprint,
        kept with each filtered request (none if None); on_fingerprint(fp)
        is called for each pending record's fingerprint on open. JournalError
        (a ValueError) if the file holds no journal at all."""
        self.path, self.spider, self.fifo = path, spider, fifo
        self._fingerprint_of = fingerprint_of
        self._queues: dict[int, array[int]] = {}  # priority -> offsets of pending records, in file order
        self._heads: dict[int, int] = {}  # FIFO: index of the next offset in each queue
        self._pending = 0
        self._handed: dict[int, tuple[int, int, list[int]]] = {}  # id -> (serial, length, ids finished with it)
        self._chained: dict[int, list[int]] = {}  # offset of a queued retry/redirect -> ids it finishes
        self._ids = itertools.count(1)
        self._fd = -1
        self._size = 0
        self._live_bytes = 0
        self._next_serial = 1
        #: What the last read of the file found: its intact records (requests
        #: and done records) and the damaged bytes set aside.
        self.intact_records = self.damaged_bytes = 0
        #: The first write that failed (JournalUnwritable), or None.
        self.unwritable: Optional[JournalUnwritable] = None
        self.recovered = self._rewrite(on_fingerprint)

    # -- writing -------------------------------------------------------------
    def push(self, request: Request) -> None:
        """Queue a request (ValueError if it cannot be serialized)."""
        parent = request.meta.pop(JOURNAL_META_ID, None)  # a retry or redirect of a request we handed out
        offset, _ = self._write_request(request, parent)
        self._enqueue(request.priority, offset)
        if parent is not None and parent in self._handed:
            self._chained.setdefault(offset, []).append(parent)

    def take(self, request: Request) -> int:
        """Journal a request that is handed out at once, not queued (one that
        scrapy-redis's scheduler took from Redis): its id, also set as
        ``request.meta[JOURNAL_META_ID]``, for done(). It stays pending in
        the file until then. ValueError if it cannot be serialized."""
        request.meta.pop(JOURNAL_META_ID, None)  # (another journal's id: it does not travel)
        rid = self.intend(request)
        request.meta[JOURNAL_META_ID] = rid
        return rid

    def intend(self, request: Request) -> int:
        """Journal a request about to go where a kill could lose it (past a
        dupefilter that records it as seen, into a queue elsewhere): its id
        for done(), once it is kept or dropped as a duplicate. Until then it
        is pending in the file, queued again if the process dies (at least
        once). Its meta is left as it is. ValueError if it cannot be
        serialized."""
        offset, serial = self._write_request(request, None)
        rid = next(self._ids)
        self._handed[rid] = (serial, self._size - offset, [])
        return rid

    def _write_request(self, request: Request, parent: Optional[int]) -> tuple[int, int]:
        """Append a request record: (its offset, its serial). On an error
        the request's meta is as it was (parent put back)."""
        self._check_writable()
        fingerprint = b""
        if self._fingerprint_of is not None and not request.dont_filter:
            fingerprint = self._fingerprint_of(request)
        try:
            payload = pickle.dumps(request.to_dict(spider=self.spider), protocol=4)
        except Exception as e:  # unpicklable callback, meta or body: Scrapy's memory queue takes it
            if parent is not None:
                request.meta[JOURNAL_META_ID] = parent
            raise ValueError(f"cannot serialize {request}: {e}") from e
        if len(fingerprint) > 0xFFFF:
            raise ValueError(f"fingerprint must be at most 65535 bytes, got {len(fingerprint)}")
        if not -(2**63) <= request.priority < 2**63 or len(payload) >= 2**32:
            raise ValueError(f"request priority must fit in 64 bits and its pickle in 4 GiB, got priority "
                             f"{request.priority} and {len(payload)} bytes")
        serial = self._next_serial
        try:
            offset = self._append(_record(_REQUEST, fingerprint, payload, serial, request.priority))
        except JournalUnwritable:
            if parent is not None:
                request.meta[JOURNAL_META_ID] = parent
            raise
        self._next_serial += 1
        self._live_bytes += self._size - offset
        return offset, serial

    def _append(self, rec: bytes) -> int:
        """Write a record at the end; its offset. JournalUnwritable if it
        cannot be written whole (and for every write after that)."""
        self._check_writable()
        offset = self._size
        written = 0
        try:
            # A short write (a full disk) raises on the next try; each try writes
            # at least a byte, so this ends within len(rec) tries.
            while written < len(rec):
                n = os.pwrite(self._fd, memoryview(rec)[written:], offset + written)
                if n <= 0:
                    raise OSError(errno.EIO, "write made no progress")
                written += n
        except OSError as e:
            if written:
                # Cut the torn record off, so no reader meets it; should that fail
                # too, the reader sets a torn tail aside (docs/FORMAT.md).
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, offset)
            raise self._unwritable(e) from e
        self._size += len(rec)
        return offset

    def _check_writable(self) -> None:
        if self.unwritable is not None:
            raise JournalUnwritable(self.unwritable.errno, "the request journal refuses writes since one failed "
                                    f"({self.unwritable.strerror})", str(self.path))

    def _unwritable(self, error: OSError) -> JournalUnwritable:
        """Note the first failed write; every later write is refused."""
        if self.unwritable is None:
            self.unwritable = JournalUnwritable(error.errno, error.strerror or str(error), str(self.path))
            return self.unwritable
        return JournalUnwritable(error.errno, error.strerror or str(error), str(self.path))

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
            whole = self._read(offset)
            if whole is None:  # damaged since the journal was read: set aside at the next rewrite
                logger.error("%s: the request at offset %d is damaged; its bytes are set aside when the journal "
                             "is next rewritten", self.path, offset)
                continue
            _, _, _, fp_len, _, _, serial, _, _ = _HEAD.unpack_from(whole)
            length = len(whole)
            try:
                request = request_from_dict(pickle.loads(whole[_HEAD.size + fp_len :]), spider=self.spider)
            except Exception as e:  # intact, but the spider changed (a callback renamed)
                self._check_writable()
                try:
                    _set_aside(self.path, [(offset, whole)])
                except OSError as error:
                    raise self._unwritable(error) from error
                logger.error("%s: the request at offset %d cannot be made again (%s); its record is set aside in "
                             "%s", self.path, offset, e, _damaged_path(self.path))
                self._handed[rid] = (serial, length, self._chained.pop(offset, []))
                self.done(rid)
                continue
            request.meta[JOURNAL_META_ID] = rid
            self._handed[rid] = (serial, length, self._chained.pop(offset, []))
            return request
        return None

    def done(self, rid: int) -> None:
        """The request with this id is finished: append a done record for it
        (and for the requests it retried or redirected)."""
        self._check_writable()
        entry = self._handed.pop(rid, None)
        if entry is None:
            return
        serial, length, parents = entry
        self._append(_record(_DONE, b"", b"", serial, 0))
        self._live_bytes -= length
        for p in parents:
            self.done(p)
        if self._size > _COMPACT_MIN_BYTES and self._live_bytes * 4 < self._size:
            self._rewrite(None)

    def release(self) -> None:
        """Close the file as it is: the requests handed out and not finished
        stay pending in it (for a crawl that hands them on, not a clean
        stop)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def close(self) -> None:
        """A clean stop: the engine has finished every request it took. A
        journal that could not be written is closed as it is (what was not
        finished stays pending); JournalUnwritable if the close's own writes
        fail (the file is then as the last whole write left it)."""
        try:
            if self.unwritable is None:
                for rid in list(self._handed):
                    self.done(rid)
                self._rewrite(None)
        finally:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __len__(self) -> int:
        return self._pending

    @property
    def handed_out(self) -> int:
        """Requests handed out (pop, take) and not yet done."""
        return len(self._handed)

    # -- reading and rewriting -------------------------------------------------
    def _enqueue(self, priority: int, offset: int) -> None:
        queue = self._queues.get(priority)
        if queue is None:
            queue = self._queues[priority] = array("q")
            self._heads[priority] = 0
        queue.append(offset)
        self._pending += 1

    def _read(self, offset: int) -> Optional[bytes]:
        """The intact record at offset, or None."""
        head = os.pread(self._fd, _HEAD.size, offset)
        if len(head) < _HEAD.size or head[:4] != _MARKER:
            return None
        fp_len, payload_len = _HEAD.unpack(head)[3:5]
        whole = head + os.pread(self._fd, fp_len + payload_len, offset + _HEAD.size)
        return whole if _parse(memoryview(whole), 0, len(whole)) is not None else None

    def _rewrite(self, on_fingerprint: Any) -> int:
        """Copy the records still pending into a new file and queue them
        again (those handed out stay handed out); set aside what is damaged.
        Returns how many records are queued. If writing fails the old file
        and this journal's state are left as they were, and the journal
        refuses writes from then on (JournalUnwritable)."""
        self._check_writable()
        failed: Optional[OSError] = None
        with contextlib.ExitStack() as stack:
            contents: Optional[_Contents] = None
            try:
                src = stack.enter_context(open(self.path, "rb"))
            except FileNotFoundError:
                src = None
            if src is not None:
                size = os.fstat(src.fileno()).st_size
                mm = stack.enter_context(mmap.mmap(src.fileno(), size, access=mmap.ACCESS_READ)) if size else None
                view = stack.enter_context(memoryview(mm if mm is not None else b""))
                contents = _Contents(self.path, view, mm)
            try:
                self._copy_pending(contents, on_fingerprint)
            except OSError as e:
                # Raised only once the map is closed: the traceback's frames hold
                # slices of it, and closing it under them would raise BufferError.
                failed = OSError(e.errno, e.strerror or str(e))
        if failed is not None:
            raise self._unwritable(failed)
        return self._pending

    def _copy_pending(self, contents: Optional[_Contents], on_fingerprint: Any) -> None:
        """Write the pending records of contents to a new journal at our path
        (atomically), set its damaged bytes aside, and only then take up the
        new file and its queues."""
        handed_at = {serial: rid for rid, (serial, _, _) in self._handed.items()}
        queues: dict[int, array[int]] = {}
        chained: dict[int, list[int]] = {}
        handed: dict[int, tuple[int, int, list[int]]] = {}  # the entries of self._handed renumbered
        live_bytes = 0
        if contents is not None and contents.spans:
            _set_aside(self.path, [(a, contents.view[a:b]) for a, b in contents.spans])
        # The records copied are numbered again from 1 (a done record names a
        # serial of its own file only), so serials never run out.
        serials = itertools.count(1)
        pending = bytearray(_MAGIC)
        pos = len(_MAGIC)
        queued = 0
        with _core.AtomicWriter(self.path) as out:
            for offset, (_, fp_len, payload_len, serial, priority, end) in (contents.pending() if contents else ()):
                body_at = end - fp_len - payload_len
                fingerprint = contents.view[body_at : body_at + fp_len]  # type: ignore[union-attr]
                new_serial = next(serials)
                rec = _record(_REQUEST, fingerprint, contents.view[body_at + fp_len : end],  # type: ignore[union-attr]
                              new_serial, priority)
                pending += rec
                rid = handed_at.get(serial)
                if rid is not None:  # taken and not finished: it stays taken
                    _, length, parents = self._handed[rid]
                    handed[rid] = (new_serial, length, parents)
                else:
                    queues.setdefault(priority, array("q")).append(pos)
                    queued += 1
                    if offset in self._chained:
                        chained[pos] = self._chained[offset]
                    if on_fingerprint is not None and fp_len:
                        on_fingerprint(bytes(fingerprint))
                live_bytes += len(rec)
                pos += len(rec)
                if len(pending) >= _WRITE_BLOCK:
                    out.write(pending)
                    pending.clear()
            out.write(pending)
            out.commit()
        # The new file is in place: from here on nothing is written.
        fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = fd
        self._queues, self._heads, self._chained = queues, {p: 0 for p in queues}, chained
        self._handed.update(handed)
        self._pending, self._live_bytes, self._size = queued, live_bytes, pos
        self._next_serial = next(serials)
        if contents is not None:
            self.intact_records, self.damaged_bytes = contents.records, contents.damaged_bytes
            if contents.spans:
                first = contents.spans[0][0]
                logger.warning("%s: damaged: kept %s (%d pending); set aside %s in %s (first at offset %d) to %s",
                               self.path, count(contents.records, "intact record"), queued,
                               count(contents.damaged_bytes, "damaged byte"), count(len(contents.spans), "place"),
                               first, _damaged_path(self.path))


def _record(kind: int, fingerprint: Any, payload: Any, serial: int, priority: int) -> bytes:
    head = _HEAD.pack(_MARKER, kind, 0, len(fingerprint), len(payload),
                      zlib.crc32(payload, zlib.crc32(fingerprint)), serial, priority, 0)
    return head[:-4] + struct.pack("<I", zlib.crc32(head[:-4])) + bytes(fingerprint) + bytes(payload)


def _damaged_path(path: Path) -> Path:
    return path.with_name(path.name + ".damaged")


def _set_aside(path: Path, spans: list[tuple[int, Any]]) -> None:
    """Append damaged bytes (with the offset each came from) to
    <journal>.damaged, synced before the journal is rewritten without them."""
    target = _damaged_path(path)
    with open(target, "ab") as f:
        if f.tell() == 0:
            f.write(_DAMAGED_MAGIC)
        for offset, data in spans:
            f.write(_SPAN.pack(offset, len(data)))
            f.write(data)
        f.flush()
        os.fsync(f.fileno())


RESERVE_BYTES = 64 << 10  # (room for what Scrapy writes to JOBDIR at a crawl's stop: spider.state)


class _Reserve:
    """Room kept for a crawl's stop: RESERVE_BYTES held in a file beside
    its journal, given up when the journal cannot be written (a full disk)
    and at the close, so that what Scrapy writes to JOBDIR as the crawl
    stops (spider.state) still has room, and the next crawl resumes."""

    _reserve: Optional[Path] = None

    def _keep_reserve(self, path: Path) -> None:
        """Hold RESERVE_BYTES at path (random bytes, so that no file system
        stores them compressed or sparse). JournalUnwritable if there is no
        room for it."""
        with contextlib.suppress(OSError):
            if path.stat().st_size == RESERVE_BYTES:
                self._reserve = path
                return
        try:
            with open(path, "wb") as f:
                f.write(os.urandom(RESERVE_BYTES))
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            with contextlib.suppress(OSError):
                os.unlink(path)
            raise JournalUnwritable(e.errno, f"no room for the {RESERVE_BYTES >> 10} KiB the crawl keeps in "
                                             f"reserve ({e.strerror})", str(path)) from None
        self._reserve = path

    def _release_reserve(self) -> None:
        reserve, self._reserve = self._reserve, None
        if reserve is not None:
            with contextlib.suppress(OSError):
                os.unlink(reserve)
