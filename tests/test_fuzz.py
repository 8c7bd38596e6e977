"""Hostile bytes: mutated and truncated encodings of every kind go through
from_bytes. Each must raise ValueError, or load a filter whose own bytes load
again to an equal filter; never a crash, hang or huge allocation (the reader
allocates only after checking sizes against the input's real length).

A seeded mutator, 200,000 inputs per kind; about 10-20 s in all. Some
mutations also re-sign the header (fix its checksum) so that they reach the
checks behind it.
"""

from __future__ import annotations

import random
import struct
import time

import pytest

import bloomline
from bloomline import BloomFilter, CountingBloomFilter, ScalableBloomFilter, murmur3_128

pytestmark = pytest.mark.core  # run by CI's wheel, clang/flock and sanitizer jobs (.ci/run)

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
    return {"bloom": b.to_bytes(), "bloom-standard": s.to_bytes(), "counting": c.to_bytes(), "scalable": sc.to_bytes()}


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


@pytest.mark.parametrize("kind", ["bloom", "bloom-standard", "counting", "scalable"])
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


def journal_seed(tmp_path: object) -> bytes:
    from pathlib import Path

    from scrapy.http import Request

    from bloomline.scrapy.journal import RequestJournal

    path = Path(str(tmp_path)) / "seed.journal"
    j = RequestJournal(path, None, fifo=False, fingerprint_of=lambda r: r.url.encode()[-6:])
    for i in range(12):
        j.push(Request(f"http://127.0.0.1/{i}", priority=i % 3, dont_filter=i % 4 == 0))
    taken = j.pop()
    assert taken is not None
    j.done(taken.meta["bloomline_journal_id"])
    data = path.read_bytes()  # one record marked done, the rest pending
    j.close()
    return data


def mutate_journal(rng: random.Random, good: bytes) -> bytes:
    import zlib

    buf = bytearray(good)
    op = rng.randrange(5)
    if op == 0:  # truncate anywhere, the magic included
        return bytes(buf[: rng.randrange(len(buf))])
    if op == 1:  # flip bits anywhere (a record then fails its CRC)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
        return bytes(buf)
    if op == 2:  # random garbage, with or without the magic
        junk = rng.randbytes(rng.choice([0, 5, 8, 27, 28, 200]))
        return (b"BLMJRNL1" + junk) if rng.random() < 0.5 else junk
    # a header field of the first record set to an interesting value, its CRC
    # made right again, so that the checks behind the CRC are reached
    off = 8 + rng.choice([0, 1, 2, 4, 8])
    width = {8: 1, 9: 1, 10: 2, 12: 4, 16: 8}[off]
    v = rng.choice(INTERESTING) % (1 << (8 * width))
    buf[off : off + width] = v.to_bytes(width, "little")
    fp_len, payload_len = struct.unpack_from("<HI", buf, 10)
    body = bytes(buf[28 : 28 + fp_len + payload_len])
    crc = zlib.crc32(body, zlib.crc32(bytes(buf[10:24])))
    buf[24:28] = struct.pack("<I", crc)
    if op == 4:  # and the rest cut short
        return bytes(buf[: rng.randrange(28, len(buf))])
    return bytes(buf)


def test_mutated_journals_open_or_raise_valueerror(tmp_path: object, caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("scrapy")
    from pathlib import Path

    from bloomline.scrapy.journal import RequestJournal

    good = journal_seed(tmp_path)
    rng = random.Random("fuzz-journal")
    path = Path(str(tmp_path)) / "requests.journal"
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
            assert popped <= 11
        j.close()
        # what a reader wrote back is a clean journal again
        again = RequestJournal(path, None, fifo=False)
        assert len(again) == 0  # popped and finished before the close
        again.close()
    assert rejected > 0 and opened > JOURNAL_INPUTS // 2
    assert time.monotonic() - start < 120
