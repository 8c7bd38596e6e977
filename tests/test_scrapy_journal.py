"""The JOBDIR request journal of bloomline.scrapy.JournalScheduler, driven
directly (the crawls that kill it are in test_scrapy.py)."""

from __future__ import annotations

import errno
import logging
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("scrapy")

from scrapy.http import Request  # noqa: E402

from conftest import fill_disk  # noqa: E402
from scrapy_site import journal_records, pending_urls  # noqa: E402

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


def test_a_torn_tail_is_set_aside_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "requests.journal"
    j = journal(path)
    for i in range(3):
        j.push(Request(f"http://127.0.0.1/{i}"))
    size = path.stat().st_size
    with open(path, "ab") as f:
        f.write(b"\xb1JR")  # a record cut short by a machine crash
    with caplog.at_level(logging.WARNING, logger="bloomline.scrapy"):
        j2 = journal(path)
    assert j2.recovered == 3
    assert "kept 3 intact records (3 pending); set aside 3 damaged bytes in 1 place" in caplog.text
    assert path.stat().st_size == size
    damaged = (tmp_path / "requests.journal.damaged").read_bytes()
    assert damaged == b"BLMJDMG1" + size.to_bytes(8, "little") + (3).to_bytes(8, "little") + b"\xb1JR"


@pytest.mark.parametrize("damage", ["flipped payload byte", "type byte 2", "huge length", "200 zeroed bytes",
                                    "damaged magic"])
def test_damage_loses_only_the_records_it_touches(tmp_path: Path, damage: str,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    """One damage in the first quarter used to drop every later
    record, for good; a type (state) byte set to 'done' lost its request
    silently. Now every record the damage did not touch is kept."""
    path = tmp_path / "requests.journal"
    j = journal(path)
    for i in range(40):
        j.push(Request(f"http://127.0.0.1/{i}", meta={"i": i}))
    data = bytearray(path.read_bytes())
    recs = journal_records(bytes(data))
    off, end, _, _, _ = recs[5]  # in the first quarter
    if damage == "flipped payload byte":
        data[end - 10] ^= 0x01
    elif damage == "type byte 2":
        data[off + 4] = 2  # "done": refused by the header's CRC, not believed
    elif damage == "huge length":
        data[off + 8 : off + 12] = (2**31).to_bytes(4, "little")
    elif damage == "200 zeroed bytes":
        data[off + 10 : off + 210] = bytes(200)
    else:
        data[0:8] = b"XXXXXXXX"
    changed = {i for i, (a, b) in enumerate(zip(path.read_bytes(), data)) if a != b}
    path.write_bytes(bytes(data))
    touched = {i for i, (o, e, _, _, _) in enumerate(recs) if any(o <= c < e for c in changed)}
    with caplog.at_level(logging.WARNING, logger="bloomline.scrapy"):
        j2 = journal(path)
    assert j2.recovered == 40 - len(touched)
    assert {r.meta["i"] for r in iter(j2.pop, None)} == set(range(40)) - touched
    assert "set aside" in caplog.text and (tmp_path / "requests.journal.damaged").exists()


def test_done_records_finish_requests_and_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "requests.journal"
    j = journal(path)
    for i in range(6):
        j.push(Request(f"http://127.0.0.1/{i}", meta={"i": i}))
    first = j.pop()
    assert first is not None
    j.done(first.meta[bs.JOURNAL_META_ID])
    kinds = [k for _, _, k, _, _ in journal_records(path.read_bytes())]
    assert kinds == [1] * 6 + [2]  # the request records, then one done record appended
    assert {r.meta["i"] for r in iter(journal(path).pop, None)} == set(range(5))


def test_a_damaged_done_record_brings_its_request_back(tmp_path: Path) -> None:
    path = tmp_path / "requests.journal"
    j = journal(path)
    for i in range(4):
        j.push(Request(f"http://127.0.0.1/{i}", meta={"i": i}))
    r = j.pop()
    assert r is not None
    j.done(r.meta[bs.JOURNAL_META_ID])
    data = bytearray(path.read_bytes())
    data[-5] ^= 0x40  # in the done record: at least once, never lost
    path.write_bytes(bytes(data))
    assert journal(path).recovered == 4


def test_journals_of_the_first_format_still_load() -> None:
    """tests/data/v1_requests.journal: written by bloomline in the first
    journal format (BLMJRNL1, state bytes in place); 12 requests, 3 finished, 1 taken and
    not finished (the crawl was killed)."""
    import shutil
    import tempfile

    src = Path(__file__).resolve().parent / "data" / "v1_requests.journal"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "requests.journal"
        shutil.copyfile(src, path)
        seen: list[bytes] = []
        j = journal(path, fifo=True, seen=seen)
        assert j.recovered == 9
        got = [r.meta["i"] for r in iter(j.pop, None)]
        assert sorted(got) == [0, 1, 3, 4, 6, 7, 9, 10, 11]
        assert got[0] == 11  # priority 2 first
        assert len(seen) == 7  # the fingerprints of the filtered ones (0 and 10 were dont_filter)
        assert path.read_bytes()[:8] == b"BLMJRNL2"  # rewritten in the new format


@pytest.mark.parametrize("content", [b"", b"hello, world", b"BLMJR"])
def test_a_file_with_no_journal_at_all_is_refused_and_left_alone(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "requests.journal"
    path.write_bytes(content)
    with pytest.raises(bs.JournalError, match="is empty|is not a bloomline request journal"):
        journal(path)
    assert path.read_bytes() == content and not (tmp_path / "requests.journal.damaged").exists()


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


# ---- a full disk -----------------------------------------------------------------


U = "http://127.0.0.1"


def test_a_failed_push_refuses_every_later_write_and_its_parent_stays_pending(small_fs: Any) -> None:
    """The issue: after a push failed for lack of space the parent's small
    done record still fitted, so the parent counted as finished while its
    children were never journaled. Now nothing more is written."""
    d = small_fs("256k")
    path = d / "requests.journal"
    j = journal(path)
    j.push(Request(f"{U}/parent"))
    parent = j.pop()
    assert parent is not None
    filler = fill_disk(d, leave=8 << 10)
    pushed = 0
    with pytest.raises(bs.JournalUnwritable) as failed:
        for i in range(1000):  # 8 KiB holds far fewer than 1000 of these
            j.push(Request(f"{U}/child/{i}", body=b"x" * 500))
            pushed += 1
    assert failed.value.errno == errno.ENOSPC and str(path) in str(failed.value)
    assert 0 < pushed < 1000
    size = path.stat().st_size
    with pytest.raises(bs.JournalUnwritable, match="refuses writes"):
        j.done(parent.meta[bs.JOURNAL_META_ID])
    with pytest.raises(bs.JournalUnwritable, match="refuses writes"):
        j.push(Request(f"{U}/later"))
    j.close()  # writes nothing: what was not finished stays pending
    assert path.stat().st_size == size
    children = {f"{U}/child/{i}" for i in range(pushed)}
    assert pending_urls(journal_records(path.read_bytes())) == {f"{U}/parent"} | children  # whole records only
    filler.unlink()
    again = journal(path)
    assert again.recovered == 1 + pushed
    assert set(urls(again)) == {f"{U}/parent"} | children  # the parent is fetched again on resume
    again.close()


def test_a_push_cut_short_by_a_full_disk_leaves_no_torn_record(small_fs: Any,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    """A record larger than the room left is written in part before the
    write fails; that part is cut off, so a resume reads a whole journal."""
    d = small_fs("256k")
    path = d / "requests.journal"
    j = journal(path)
    for i in range(3):
        j.push(Request(f"{U}/{i}"))
    size = path.stat().st_size
    filler = fill_disk(d, leave=16 << 10)
    with pytest.raises(bs.JournalUnwritable):
        j.push(Request(f"{U}/big", body=b"y" * (128 << 10)))
    assert path.stat().st_size == size
    j.close()
    filler.unlink()
    with caplog.at_level(logging.WARNING, logger="bloomline.scrapy"):
        again = journal(path)
    assert again.recovered == 3 and again.damaged_bytes == 0
    assert "set aside" not in caplog.text and not (d / "requests.journal.damaged").exists()
    again.close()


def test_a_record_torn_inside_its_body_is_set_aside_and_the_rest_kept(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    """Should the cut fail too (or the machine stop mid-write), a record
    whose header is whole and body is not is read as a torn tail: set
    aside, every record before it kept."""
    path = tmp_path / "requests.journal"
    j = journal(path)
    for i in range(3):
        j.push(Request(f"{U}/{i}"))
    one = journal(tmp_path / "one")
    one.push(Request(f"{U}/torn", body=b"t" * 300))
    record = (tmp_path / "one").read_bytes()[8:]
    with open(path, "ab") as f:
        f.write(record[: len(record) // 2])
    with caplog.at_level(logging.WARNING, logger="bloomline.scrapy"):
        again = journal(path)
    assert again.recovered == 3 and again.damaged_bytes == len(record) // 2
    assert set(urls(again)) == {f"{U}/{i}" for i in range(3)}
    assert "set aside" in caplog.text


def test_a_compaction_with_no_room_leaves_the_old_journal_whole(small_fs: Any,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bs, "_COMPACT_MIN_BYTES", 1000)
    d = small_fs("512k")
    path = d / "requests.journal"
    j = journal(path, fifo=True)
    for i in range(200):
        j.push(Request(f"{U}/{i}", body=b"z" * 900))
    taken = [j.pop() for _ in range(200)]
    filler = fill_disk(d, leave=16 << 10)
    finished = 0
    before = b""
    with pytest.raises(bs.JournalUnwritable) as failed:
        for r in taken:  # three quarters finished, the journal is rewritten: the copy has no room
            before = path.read_bytes()
            j.done(r.meta[bs.JOURNAL_META_ID])  # type: ignore[union-attr]
            finished += 1
    assert failed.value.errno == errno.ENOSPC and 100 < finished < 199
    after = path.read_bytes()
    # Nothing rewritten: the old file, and the done record appended before the rewrite.
    assert after[: len(before)] == before and len(after) == len(before) + 36
    assert sorted(p.name for p in d.iterdir()) == ["filler", "requests.journal"]  # no temporary file left
    with pytest.raises(bs.JournalUnwritable, match="refuses writes"):
        j.done(taken[-1].meta[bs.JOURNAL_META_ID])  # type: ignore[union-attr]
    j.close()
    assert path.read_bytes() == after
    rest = {f"{U}/{i}" for i in range(finished + 1, 200)}
    assert pending_urls(journal_records(after)) == rest
    filler.unlink()
    again = journal(path)
    assert again.recovered == len(rest) and set(urls(again)) == rest
    again.close()


def test_the_journal_keeps_the_key_the_filter_records_under_a_fingerprint_override(tmp_path: Path) -> None:
    """JournalScheduler kept the fingerprinter's fingerprint with each
    request, while a dupefilter overriding request_fingerprint records its
    own key: a resume re-recorded the wrong keys, so an equivalent link was
    queued again. The journal keeps the filter's key."""
    from scrapy import Spider
    from scrapy.exceptions import ScrapyDeprecationWarning
    from scrapy.utils.test import get_crawler

    from bloomline.scrapy import BloomDupeFilter, JournalScheduler
    from scrapy_site import journal_fingerprints

    class NoQuery(BloomDupeFilter):
        def request_fingerprint(self, request: Request) -> str:
            return request.url.split("?")[0]

    class S(Spider):
        name = "override"

    crawler = get_crawler(S, {"JOBDIR": str(tmp_path / "job"), "DUPEFILTER_CLASS": NoQuery,
                              "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue",  # (no engine here)
                              "SPIDER_MIDDLEWARES": {"bloomline.scrapy.JournalDoneMiddleware": 0}})
    with pytest.warns(ScrapyDeprecationWarning, match="request_fingerprint"):
        scheduler = JournalScheduler.from_crawler(crawler)
    scheduler.open(S.from_crawler(crawler))
    try:
        request = Request(f"{U}/page?session=1")
        assert scheduler.enqueue_request(request)
        assert not scheduler.enqueue_request(Request(f"{U}/page?session=2"))  # the same key: dropped
        kept = journal_fingerprints((tmp_path / "job" / bs.JOURNAL_NAME).read_bytes())
        assert kept == {request.url: scheduler.df.fingerprint(request)} and kept[request.url] == f"{U}/page".encode()
    finally:
        scheduler.close("finished")


@pytest.mark.parametrize("orders", [{"bloomline.scrapy.JournalDoneMiddleware": 10, "my.Outer": 5},
                                    {"bloomline.scrapy.JournalDoneMiddleware": 5, "my.Outer": 5},
                                    {"bloomline.scrapy.JournalDoneMiddleware": 100}])
def test_the_done_middleware_must_be_outside_every_other_one(orders: dict[str, int]) -> None:
    """JournalDoneMiddleware at an order above another spider middleware's
    (a user's, or Scrapy's own from 50 up) finished a page before that one's
    added requests were journaled: a kill between lost them. Refused,
    naming both orders."""
    from scrapy import Spider
    from scrapy.utils.test import get_crawler

    from bloomline.scrapy.scheduler import require_middleware

    class S(Spider):
        name = "orders"

    crawler = get_crawler(S, {"SPIDER_MIDDLEWARES": orders})
    with pytest.raises(ValueError, match=r"has order \d+ and 'bloomline.scrapy.JournalDoneMiddleware' has \d+"):
        require_middleware(crawler, "JournalScheduler")
    require_middleware(get_crawler(S, {"SPIDER_MIDDLEWARES": {**orders, "bloomline.scrapy.JournalDoneMiddleware": 0,
                                                              "my.Outer": 1}}), "JournalScheduler")
