"""The crash-safe request journal behind JournalScheduler.

Scrapy's JOBDIR queue (queuelib disk queues plus an ``active.json`` written
on close) loses every pending request when the process is killed: the crawl
resumes with whatever ``active.json`` said at the last clean stop. This
journal keeps the queue in one append-only file, ``JOBDIR/requests.journal``,
whose format is documented byte by byte in docs/FORMAT.md:

- 8 magic bytes ``BLMJRNL1``;
- records, each a 20-byte header (state u8: 0 pending, 1 done; reserved u8,
  0; fingerprint length u16; payload length u32; priority i64; CRC-32 u32 of
  header bytes 2..15, the fingerprint and the payload), the dupefilter's
  fingerprint of the request (empty for ``dont_filter`` requests), and the
  payload: ``pickle.dumps(request.to_dict(spider=spider), protocol=4)``.

Like Scrapy's own JOBDIR queue it holds pickles: open only journals you
wrote. Any other bytes make it raise ValueError (a file that is not a
journal) or drop a damaged tail with a warning, never crash or hang
(tests/test_fuzz.py).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import pickle
import struct
import zlib
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scrapy.http import Request
from scrapy.utils.request import request_from_dict

from .. import _core

__all__ = ["JOURNAL_META_ID", "JOURNAL_NAME", "RequestJournal"]

logger = logging.getLogger(__name__)

JOURNAL_NAME = "requests.journal"
_JOURNAL_MAGIC = b"BLMJRNL1"
# state u8, reserved u8, fingerprint length u16, payload length u32,
# priority i64, crc32 u32 (over bytes 2..15, the fingerprint and the payload)
_REC = struct.Struct("<BBHIqI")
_PENDING, _DONE = 0, 1
JOURNAL_META_ID = "bloomline_journal_id"  # request.meta key of a request handed out by pop()
_COMPACT_MIN_BYTES = 64 << 20
_WRITE_BLOCK = 1 << 20  # bytes per write while rewriting


class RequestJournal:
    """The disk queue of a JOBDIR crawl: one append-only file of records
    (the format above).

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
        parent = request.meta.pop(JOURNAL_META_ID, None)  # a retry or redirect of a request we handed out
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
            request.meta[JOURNAL_META_ID] = rid
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
        with contextlib.ExitStack() as stack:
            old: Iterator[tuple[int, bytes, bytes]] = iter(())
            if self.path.exists():
                src = stack.enter_context(open(self.path, "rb"))
                magic = src.read(len(_JOURNAL_MAGIC))
                if magic != _JOURNAL_MAGIC:
                    raise ValueError(f"{self.path} is not a bloomline request journal (starts {magic[:8]!r})")
                old = _records(src, self.path)
            pos = self._copy_pending(old, on_fingerprint)
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = os.open(self.path, os.O_RDWR)
        self._size = pos
        return self._pending

    def _copy_pending(self, old: Iterator[tuple[int, bytes, bytes]], on_fingerprint: Any) -> int:
        """Write the pending records of `old` to a new journal at our path
        (atomically) and queue them; returns the new file's size."""
        handed_at = {entry[0]: rid for rid, entry in self._handed.items()}
        chained, self._chained = self._chained, {}
        self._queues, self._heads, self._pending, self._live_bytes = {}, {}, 0, 0
        pending = bytearray()
        with _core.AtomicWriter(self.path) as out:
            pending += _JOURNAL_MAGIC
            pos = len(_JOURNAL_MAGIC)
            for offset, head, body in old:
                pending += head
                pending += body
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
                if len(pending) >= _WRITE_BLOCK:
                    out.write(pending)
                    pending.clear()
            out.write(pending)
            out.commit()
        return pos


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
