"""The JOBDIR request journal of bloomline.scrapy.JournalScheduler, driven
directly (the crawls that kill it are in test_scrapy.py)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

pytest.importorskip("scrapy")

from scrapy.http import Request  # noqa: E402

import bloomline.scrapy.journal as bs  # noqa: E402


def journal(path: Path, *, fifo: bool = False, seen: list[bytes] | None = None) -> bs.RequestJournal:
    return bs.RequestJournal(path, None, fifo=fifo, fingerprint_of=lambda r: r.meta.get("fp", b""),
                              on_fingerprint=None if seen is None else seen.append)


def urls(j: bs.RequestJournal) -> list[str]:
    out = []
    while (r := j.pop()) is not None:
        out.append(r.url)
    return out


def test_priority_first_then_lifo_or_fifo(tmp_path: Path) -> None:
    for fifo in (False, True):
        j = journal(tmp_path / f"j{fifo}", fifo=fifo)
        for i, prio in enumerate([0, 5, 0, 5, -1, 0]):
            j.push(Request(f"http://127.0.0.1/{i}", priority=prio))
        assert len(j) == 6
        got = [u.rsplit("/", 1)[1] for u in urls(j)]
        assert got == (["1", "3", "0", "2", "5", "4"] if fifo else ["3", "1", "5", "2", "0", "4"])
        j.close()


def test_unfinished_requests_survive_an_unclean_stop(tmp_path: Path) -> None:
    path = tmp_path / "requests.journal"
    j = journal(path)
    for i in range(10):
        j.push(Request(f"http://127.0.0.1/{i}", meta={"i": i, "fp": bytes([i]) * 20}))
    taken = [j.pop() for _ in range(4)]
    assert all(r is not None for r in taken)
    j.done(taken[0].meta[bs.JOURNAL_META_ID])  # type: ignore[union-attr]
    j.done(taken[1].meta[bs.JOURNAL_META_ID])  # type: ignore[union-attr]
    # no close(): the process died. Reopen: 6 queued + 2 taken but unfinished.
    seen: list[bytes] = []
    j2 = journal(path, seen=seen)
    assert j2.recovered == 8 and len(j2) == 8
    back = {r.meta["i"] for r in (j2.pop() for _ in range(8)) if r is not None}
    finished = {taken[0].meta["i"], taken[1].meta["i"]}  # type: ignore[union-attr]
    assert back == set(range(10)) - finished
    assert sorted(seen) == sorted(bytes([i]) * 20 for i in back)  # fingerprints handed back to re-record
    assert j2.pop() is None


def test_clean_close_finishes_what_was_taken(tmp_path: Path) -> None:
    path = tmp_path / "requests.journal"
    j = journal(path)
    for i in range(5):
        j.push(Request(f"http://127.0.0.1/{i}"))
    j.pop()
    j.close()
    assert journal(path).recovered == 4


def test_torn_tail_is_cut_off_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "requests.journal"
    j = journal(path)
    for i in range(3):
        j.push(Request(f"http://127.0.0.1/{i}"))
    size = path.stat().st_size
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x05")  # a record header cut short
    with caplog.at_level(logging.WARNING, logger="bloomline.scrapy"):
        j2 = journal(path)
    assert j2.recovered == 3 and "dropped 3 damaged bytes" in caplog.text
    assert path.stat().st_size == size
    # a flipped payload byte fails the CRC: that record and what follows are cut
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="bloomline.scrapy"):
        assert journal(path).recovered == 2


def test_not_a_journal_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "requests.journal"
    path.write_bytes(b"hello, world")
    with pytest.raises(ValueError, match="is not a bloomline request journal"):
        journal(path)


def test_unserializable_request_is_refused_unchanged(tmp_path: Path) -> None:
    j = journal(tmp_path / "j")
    r = Request("http://127.0.0.1/x", callback=lambda response: None)
    with pytest.raises(ValueError, match="cannot serialize"):
        j.push(r)
    assert len(j) == 0 and j.pop() is None


def test_priority_beyond_64_bits_is_refused(tmp_path: Path) -> None:
    j = journal(tmp_path / "j")
    with pytest.raises(ValueError, match="priority must fit in 64 bits"):
        j.push(Request("http://127.0.0.1/x", priority=2**70))
    assert len(j) == 0


def test_retry_finishes_its_original_when_it_finishes(tmp_path: Path) -> None:
    path = tmp_path / "requests.journal"
    j = journal(path)
    j.push(Request("http://127.0.0.1/a"))
    original = j.pop()
    assert original is not None
    j.push(original.replace(url="http://127.0.0.1/b"))  # a redirect keeps meta
    retry = j.pop()
    assert retry is not None and retry.url.endswith("/b")
    assert retry.meta[bs.JOURNAL_META_ID] != original.meta[bs.JOURNAL_META_ID]
    j.done(retry.meta[bs.JOURNAL_META_ID])
    assert journal(path).recovered == 0  # both finished, none queued again


def test_compaction_keeps_queued_and_taken_requests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bs, "_COMPACT_MIN_BYTES", 20_000)
    path = tmp_path / "requests.journal"
    j = journal(path, fifo=True)
    for i in range(400):
        j.push(Request(f"http://127.0.0.1/{i}", meta={"i": i}))
    held = j.pop()
    assert held is not None
    peak = path.stat().st_size
    for _ in range(350):
        r = j.pop()
        assert r is not None
        j.done(r.meta[bs.JOURNAL_META_ID])
    assert path.stat().st_size < peak / 2  # rewritten while running
    rest = urls(j)
    assert [int(u.rsplit("/", 1)[1]) for u in rest] == list(range(351, 400))
    j.done(held.meta[bs.JOURNAL_META_ID])  # taken before the rewrite, finished after it
    assert journal(path).recovered == 49  # the 49 popped above were never finished
