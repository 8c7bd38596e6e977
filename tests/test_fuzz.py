"""Hostile bytes: mutated and truncated encodings of every kind go through
from_bytes. Each must raise ValueError, or load a filter whose own bytes load
again to an equal filter; never a crash, hang or huge allocation (the reader
allocates only after checking sizes against the input's real length).

A seeded mutator, 200,000 inputs per kind; about 10-20 s in all. Some
mutations also re-sign the header (fix its checksum) so that they reach the
checks behind it.
"""

from __future__ import annotations

import os
import random
import struct
import time
from collections.abc import Iterator

import pytest

import bloomline
from bloomline import BloomFilter, CountingBloomFilter, ScalableBloomFilter, WindowedBloomFilter, murmur3_128

pytestmark = pytest.mark.core  # run by CI's wheel and sanitizer (clang, flock) jobs (.ci/run)

PER_KIND = 200_000


def seeds() -> dict[str, bytes]:
    b = BloomFilter(200, 0.01, seed=1)
    b.update(range(150))
    s = BloomFilter.from_params(1000, 3, layout="standard")
    s.update(range(50))
    c = CountingBloomFilter(100, 0.01, counter_bits=4)
    c.update(range(80))
    sc = ScalableBloomFilter(20, 0.05)
    sc.update(range(100))
    # Three live generations by the system clock (from_bytes reads it), a
    # day's window: none expires while the test runs.
    back = [2 * 21600.0]
    w = WindowedBloomFilter(30, 0.05, window=86400, clock=lambda: time.time() - back[0])
    for i in range(3):
        back[0] = (2 - i) * 21600.0
        w.update(range(10 * i, 10 * i + 15))
    return {"bloom": b.to_bytes(), "bloom-standard": s.to_bytes(), "counting": c.to_bytes(), "scalable": sc.to_bytes(),
            "windowed": w.to_bytes()}


def resign(buf: bytearray) -> None:
    if len(buf) >= 128:
        buf[120:128] = struct.pack("<Q", murmur3_128(bytes(buf[:120])) & (2**64 - 1))


INTERESTING = [0, 1, 2, 3, 4, 7, 8, 15, 16, 63, 64, 255, 256, 511, 512, 2**31 - 1, 2**32 - 1, 2**32,
               2**48, 2**48 + 1, 2**63, 2**64 - 1]


def mutate(rng: random.Random, good: bytes) -> bytes:
    buf = bytearray(good)
    op = rng.randrange(7)
    if op == 0:  # truncate
        return bytes(buf[: rng.randrange(len(buf))])
    if op == 1:  # flip bits anywhere
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
        return bytes(buf)
    if op == 2:  # a header field set to an interesting value, header re-signed
        off = rng.choice([8, 10, 11, 12, 13, 14, 16, 24, 32, 36, 40, 48, 56, 64, 72, 80, 88])
        width = {8: 2, 10: 1, 11: 1, 12: 1, 13: 1, 14: 2, 32: 4, 36: 4}.get(off, 8)
        v = rng.choice(INTERESTING) % (1 << (8 * width))
        buf[off : off + width] = v.to_bytes(width, "little")
        resign(buf)
        return bytes(buf)
    if op == 3:  # random header bytes, re-signed
        for _ in range(rng.randint(1, 6)):
            buf[rng.randrange(8, 120)] = rng.randrange(256)
        resign(buf)
        return bytes(buf)
    if op == 4:  # extra or missing bytes at the end
        return bytes(buf + bytes(rng.randrange(1, 80))) if rng.random() < 0.5 else bytes(buf[: -rng.randint(1, 9)])
    if op == 5:  # random garbage of a plausible size
        return rng.randbytes(rng.choice([0, 1, 100, 135, 136, 137, 200, len(buf)]))
    # a payload byte changed and the payload checksum fixed: a valid file that
    # holds different bits (or, for a container, a corrupt stage)
    if len(buf) > 137:
        i = rng.randrange(128, len(buf) - 8)
        buf[i] ^= 0xFF
        payload = bytes(buf[128:-8])
        buf[-8:] = struct.pack("<Q", murmur3_128(payload) & (2**64 - 1))
    return bytes(buf)


@pytest.mark.parametrize("kind", ["bloom", "bloom-standard", "counting", "scalable", "windowed"])
@pytest.mark.slow
def test_mutated_inputs_raise_valueerror_or_load_consistently(kind: str) -> None:
    good = seeds()[kind]
    rng = random.Random(f"fuzz-{kind}")
    loaded = rejected = 0
    start = time.monotonic()
    count = PER_KIND
    for _ in range(count):
        data = mutate(rng, good)
        try:
            f = bloomline.from_bytes(data)
        except ValueError:
            rejected += 1
            continue
        loaded += 1
        again = bloomline.from_bytes(f.to_bytes())
        assert type(again) is type(f) and again == f
    assert rejected > count // 2 and loaded > 0
    assert time.monotonic() - start < 120


# ---- the Scrapy request journal ---------------------------------------------------------

JOURNAL_INPUTS = 3_000


@pytest.fixture
def fast_dir(tmp_path: object) -> Iterator[object]:
    """A directory in memory (/dev/shm) where there is one: every journal
    opened is rewritten and fsynced, and these tests are about reading, not
    about the disk (test_scrapy.py kills crawls on a real one)."""
    import shutil
    import tempfile
    from pathlib import Path

    if not os.path.isdir("/dev/shm"):
        yield tmp_path
        return
    path = Path(tempfile.mkdtemp(dir="/dev/shm", prefix="bloomline-fuzz-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def journal_seed(tmp_path: object, name: str = "seed.journal", requests: int = 12, finished: int = 1,
                 taken: int = 0) -> bytes:
    """A journal as a killed crawl leaves it: `requests` pushed, `finished`
    of them taken and finished (done records), `taken` more taken and not."""
    from pathlib import Path

    from scrapy.http import Request

    from bloomline.scrapy.journal import RequestJournal

    path = Path(str(tmp_path)) / name
    j = RequestJournal(path, None, fifo=False, fingerprint_of=lambda r: r.url.encode()[-6:])
    for i in range(requests):
        j.push(Request(f"http://127.0.0.1/{name}/{i}", priority=i % 3, dont_filter=i % 4 == 0))
    for _ in range(finished):
        r = j.pop()
        assert r is not None
        j.done(r.meta["bloomline_journal_id"])
    for _ in range(taken):
        j.pop()
    data = path.read_bytes()
    j.close()
    return data


def mutate_journal(rng: random.Random, good: bytes) -> bytes:
    import zlib

    buf = bytearray(good)
    op = rng.randrange(5)
    if op == 0:  # truncate anywhere, the magic included
        return bytes(buf[: rng.randrange(len(buf))])
    if op == 1:  # flip bits anywhere (a record then fails a CRC)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
        return bytes(buf)
    if op == 2:  # random garbage, with or without the magic
        junk = rng.randbytes(rng.choice([0, 5, 8, 27, 28, 36, 200]))
        return (b"BLMJRNL2" + junk) if rng.random() < 0.5 else junk
    # a header field of the first record set to an interesting value, both
    # CRCs made right again, so that the checks behind them are reached
    off = 8 + rng.choice([4, 5, 6, 8, 16, 24])
    width = {12: 1, 13: 1, 14: 2, 16: 4, 24: 8, 32: 8}[off]
    v = rng.choice(INTERESTING) % (1 << (8 * width))
    buf[off : off + width] = v.to_bytes(width, "little")
    fp_len, payload_len = struct.unpack_from("<HI", buf, 14)
    buf[20:24] = struct.pack("<I", zlib.crc32(bytes(buf[44 : 44 + fp_len + payload_len])))
    buf[40:44] = struct.pack("<I", zlib.crc32(bytes(buf[8:40])))
    if op == 4:  # and the rest cut short
        return bytes(buf[: rng.randrange(44, len(buf))])
    return bytes(buf)


@pytest.mark.slow
def test_mutated_journals_open_or_raise_valueerror(fast_dir: object, caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("scrapy")
    from pathlib import Path

    from bloomline.scrapy.journal import RequestJournal

    good = journal_seed(fast_dir)
    rng = random.Random("fuzz-journal")
    path = Path(str(fast_dir)) / "requests.journal"
    opened = rejected = 0
    start = time.monotonic()
    for _ in range(JOURNAL_INPUTS):
        path.write_bytes(mutate_journal(rng, good))
        try:
            j = RequestJournal(path, None, fifo=bool(rng.getrandbits(1)))
        except ValueError:
            rejected += 1
            continue
        opened += 1
        popped = 0
        while j.pop() is not None:
            popped += 1
            assert popped <= 12  # 11 pending, and the finished one if its done record was hit
        j.close()
        # what a reader wrote back is a clean journal again
        again = RequestJournal(path, None, fifo=False)
        assert len(again) == 0  # popped and finished before the close
        again.close()
    assert rejected > 0 and opened > JOURNAL_INPUTS // 2
    assert time.monotonic() - start < 120


DAMAGED_JOURNALS = 1_000


def damage(rng: random.Random, data: bytes) -> bytes:
    """One to three damages at random offsets: bits flipped, a run zeroed,
    a run of random bytes, one byte set, or the tail cut off."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(buf))
        op = rng.randrange(5)
        if op == 0:
            buf[at] ^= 1 << rng.randrange(8)
        elif op == 1:
            n = rng.randint(1, 300)
            buf[at : at + n] = bytes(len(buf[at : at + n]))
        elif op == 2:
            n = rng.randint(1, 64)
            buf[at : at + n] = rng.randbytes(len(buf[at : at + n]))
        elif op == 3:
            buf[at] = rng.randrange(256)
        else:
            del buf[at:]
        if not buf:
            break
    return bytes(buf)


@pytest.mark.slow
def test_1000_damaged_journals_keep_every_record_the_damage_missed(
        fast_dir: object, caplog: pytest.LogCaptureFixture) -> None:
    """Journals of 10 to 60 records (requests, done records,
    requests taken and not finished) damaged at random offsets. Every request
    whose record is untouched comes back (unless an untouched done record
    finished it), no other does, the counts of records kept and bytes set
    aside are exact, and nothing raises but a JournalError for a file left
    with no journal at all."""
    pytest.importorskip("scrapy")
    import logging
    from pathlib import Path

    from scrapy_site import journal_records

    from bloomline.scrapy.journal import JournalError, RequestJournal

    base = Path(str(fast_dir))
    seeds = [journal_seed(base, f"s{i}.journal", requests=n, finished=n // 3, taken=n // 5)
             for i, n in enumerate((10, 25, 40, 60))]
    rng = random.Random("issue-26-journal-damage")
    path = base / "requests.journal"
    totals = dict(records=0, untouched=0, kept=0, recovered=0, refused=0, set_aside=0)
    start = time.monotonic()
    caplog.set_level(logging.ERROR, logger="bloomline.scrapy")  # the warnings are counted below, not logged
    for n in range(DAMAGED_JOURNALS):
        good = seeds[n % len(seeds)]
        bad = damage(rng, good)
        changed = {i for i, (a, b) in enumerate(zip(good, bad)) if a != b} | set(range(len(bad), len(good)))
        recs = journal_records(good)
        untouched = [r for r in recs if not any(r[0] <= c < r[1] for c in changed)]
        finished = {r[3] for r in untouched if r[2] == 2}
        expected = sorted(r[4] for r in untouched if r[2] == 1 and r[3] not in finished)
        path.write_bytes(bad)
        (base / "requests.journal.damaged").unlink(missing_ok=True)
        totals["records"] += len(recs)
        totals["untouched"] += len(untouched)
        try:
            j = RequestJournal(path, None, fifo=bool(n % 2))
        except JournalError:
            assert not untouched and bad[:8] != b"BLMJRNL2", n  # refused only when nothing can be read
            totals["refused"] += 1
            continue
        # set aside: every byte but the untouched records (and the magic, if intact)
        kept_bytes = sum(r[1] - r[0] for r in untouched) + (8 if bad[:8] == b"BLMJRNL2" else 0)
        assert (j.intact_records, j.damaged_bytes) == (len(untouched), len(bad) - kept_bytes), n
        got = sorted(r.url for r in iter(j.pop, None))
        assert got == expected, n
        totals["kept"] += j.intact_records
        totals["recovered"] += len(got)
        totals["set_aside"] += j.damaged_bytes
        j.close()
    took = time.monotonic() - start
    print(f"{DAMAGED_JOURNALS} damaged journals, {totals['records']} records: {totals['untouched']} untouched, "
          f"{totals['kept']} kept, {totals['recovered']} requests queued again, {totals['set_aside']} bytes set "
          f"aside, {totals['refused']} refused (no journal left in them); {took:.1f} s")
    assert totals["kept"] == totals["untouched"] and took < 60
