"""Filters that travel and crawls that move in: a Redis filter or
chain dumped to a file and restored on the same server or another, and a
scrapy-redis fingerprint set imported into the chain RedisBloomDupeFilter
attaches to. Real redis-servers on loopback; the CLI run as a subprocess."""

from __future__ import annotations

import hashlib
import io
import math
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

redis = pytest.importorskip("redis")
pytest.importorskip("scrapy")  # (the fingerprint rules of an import are Scrapy's requests')

import bloomline  # noqa: E402
from bloomline import ScalableBloomFilter  # noqa: E402
from bloomline.redis import RedisBloomFilter, RedisStages, dump, restore  # noqa: E402
from conftest import FaultProxy, RedisServer, module_args  # noqa: E402

pytestmark = pytest.mark.slow  # (real servers and probes on the plain backend's scripts)

# Random absent keys: at the filters' rates about 20 to 200 of them are
# false positives, each of which every copy must answer alike.
PROBES = 200_000


@pytest.fixture
def two_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RedisServer, RedisServer]]:
    """One server with bloomline's module, one without: a filter moves
    between backends as it moves between servers."""
    a = RedisServer(tmp_path_factory.mktemp("a"), *module_args("module"))
    b = RedisServer(tmp_path_factory.mktemp("b"))
    yield a, b
    a.stop()
    b.stop()


def _client(server: RedisServer) -> object:
    return redis.Redis(port=server.port)


def _probes() -> np.ndarray:
    return np.random.default_rng(29).integers(0, 2**63, PROBES, dtype=np.uint64)


# ---- dump and restore -----------------------------------------------------------------


def _ends(two_servers: tuple[RedisServer, RedisServer], direction: str) -> tuple[RedisServer, RedisServer]:
    """(from, to): "module->plain" from the server with the module to the one
    without, "plain->module" the other way."""
    a, b = two_servers
    return (a, b) if direction == "module->plain" else (b, a)


DIRECTIONS = ["module->plain", "plain->module"]


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_a_chain_travels_to_a_file_and_another_server_answering_the_same(
        two_servers: tuple[RedisServer, RedisServer], tmp_path: Path, direction: str) -> None:
    a, b = _ends(two_servers, direction)
    chain = ScalableBloomFilter(5_000, 1e-4, store=RedisStages(_client(a), "crawl"))
    keys = np.arange(60_000, dtype=np.uint64)
    chain.add_many(keys)
    assert chain.num_stages >= 4
    local = dump(_client(a), "crawl", tmp_path / "crawl.blf")
    assert isinstance(local, ScalableBloomFilter) and local.num_stages == chain.num_stages
    loaded = ScalableBloomFilter.load(tmp_path / "crawl.blf")  # the dump is a local file like any other
    moved = restore(tmp_path / "crawl.blf", _client(b), "crawl")
    assert isinstance(moved, ScalableBloomFilter)
    probes = np.concatenate([keys, _probes()])
    want = chain.contains_many(probes)
    assert want[: len(keys)].all() and want[len(keys):].any()  # (some false positives to answer alike)
    for other in (local, loaded, moved):
        np.testing.assert_array_equal(other.contains_many(probes), want)
    assert moved.insert_count == chain.insert_count
    # The restored chain is a live one: it grows on, and a second process attaches to it.
    more = np.arange(60_000, 90_000, dtype=np.uint64)
    assert moved.add_many(more).sum() >= len(more) - 2
    again = ScalableBloomFilter(5_000, 1e-4, store=RedisStages(_client(b), "crawl"))
    assert again.contains_many(more).all() and again.num_stages == moved.num_stages


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_a_fixed_filter_travels_between_servers_and_backends(two_servers: tuple[RedisServer, RedisServer],
                                                             direction: str) -> None:
    a, b = _ends(two_servers, direction)
    f = RedisBloomFilter(_client(a), "fx", 40_000, 1e-3, shards=3)
    assert f.backend == direction.split("->")[0]
    f.add_many(np.arange(40_000, dtype=np.uint64))
    buf = io.BytesIO()
    dump(_client(a), "fx", buf)  # a file object works as a path does
    moved = restore(buf.getvalue(), _client(b), "fx")
    assert isinstance(moved, RedisBloomFilter) and moved.backend == direction.split("->")[1]
    probes = _probes()
    want = f.contains_many(probes)
    assert want.any()  # (some false positives to answer alike)
    np.testing.assert_array_equal(moved.contains_many(probes), want)
    assert moved.contains_many(np.arange(40_000, dtype=np.uint64)).all()
    assert abs(moved.insert_count - f.insert_count) <= 3  # (shared out among the shards by their bits)


def test_restore_refuses_a_taken_key_unless_told_to_replace(two_servers: tuple[RedisServer, RedisServer],
                                                             tmp_path: Path) -> None:
    a, _ = two_servers
    r = _client(a)
    small = bloomline.BloomFilter(1000, 0.01)
    small.add_many(["a", "b"])
    small.save(tmp_path / "small.blf")
    restore(tmp_path / "small.blf", r, "k")
    with pytest.raises(ValueError, match="a filter already exists at key 'k'"):
        restore(tmp_path / "small.blf", r, "k")
    chain = ScalableBloomFilter(100, 0.01, store=RedisStages(r, "c"))
    chain.add_many([f"x{i}" for i in range(500)])
    with pytest.raises(ValueError, match="a chain already exists at key 'c'"):
        restore(tmp_path / "small.blf", r, "c")
    replaced = restore(tmp_path / "small.blf", r, "c", replace=True)  # the chain is dropped, a filter put there
    assert isinstance(replaced, RedisBloomFilter) and "a" in replaced and "x1" not in replaced
    assert RedisStages(r, "c").stage_count() == 0


def test_dump_names_what_it_cannot_move(two_servers: tuple[RedisServer, RedisServer], tmp_path: Path) -> None:
    a, _ = two_servers
    with pytest.raises(ValueError, match="no filter or chain at key 'nothing'"):
        dump(_client(a), "nothing", tmp_path / "x.blf")
    assert not (tmp_path / "x.blf").exists()
    counting = bloomline.CountingBloomFilter(100, 0.01)
    with pytest.raises(ValueError, match="holds a CountingBloomFilter"):
        restore(counting.to_bytes(), _client(a), "cf")
    with pytest.raises(ValueError):
        restore(b"BLOOMLINE but not really", _client(a), "junk")


def test_a_windowed_filter_travels_with_its_live_generations(two_servers: tuple[RedisServer, RedisServer],
                                                             tmp_path: Path) -> None:
    """dump writes the generations live by the server's clock (read in one
    step) as a kind-4 file that loads locally with the same answers;
    restore on another server makes a windowed filter that answers as the
    first did, each generation in its slot with its count, and that its
    writers go on adding to (a key seen stays seen, a new one is new)."""
    import time

    from bloomline.redis import RedisWindowedFilter

    a, b = two_servers
    ra, rb = _client(a), _client(b)
    w = RedisWindowedFilter(ra, "win", 20_000, 0.01, window=3600, generations=3)
    keys = [f"https://example.com/{i}" for i in range(5000)]
    w.add_many(keys)
    absent = [f"https://other.example/{i}" for i in range(20_000)]
    before = w.contains_many(keys + absent)
    local = dump(ra, "win", tmp_path / "w.blf")
    assert isinstance(local, bloomline.WindowedBloomFilter)
    loaded = bloomline.WindowedBloomFilter.load(tmp_path / "w.blf")
    assert loaded.current_generation == math.floor(time.time() / 1200)
    np.testing.assert_array_equal(loaded.contains_many(keys + absent), before)
    assert [(n, g.insert_count) for n, g in loaded.live_generations] == list(w.live_generations)
    assert w.to_filter() == loaded
    moved = restore(tmp_path / "w.blf", rb, "win")
    assert isinstance(moved, RedisWindowedFilter)
    assert (w.backend, moved.backend) == ("module", "plain")  # (each server's: the ring's keys are the same)
    np.testing.assert_array_equal(moved.contains_many(keys + absent), before)
    assert moved.live_generations == w.live_generations
    assert all(rb.pttl(k) > 3_600_000 for k in moved.redis_keys() if rb.exists(k))  # each expires with its generation
    assert moved.add_many(keys[:10] + ["fresh"]).tolist() == [False] * 10 + [True]
    # a key that holds one is refused unless replace=True, which drops it whole
    with pytest.raises(ValueError, match="a windowed filter already exists at key 'win'"):
        restore(tmp_path / "w.blf", rb, "win")
    small = bloomline.BloomFilter(1000, 0.01)
    small.add("a")
    plain = restore(small.to_bytes(), rb, "win", replace=True)
    assert isinstance(plain, RedisBloomFilter) and "a" in plain
    assert not [k for k in redis.Redis(port=b.port).keys("*") if k.startswith(b"{win}")]
    with pytest.raises(ValueError, match="a filter already exists"):
        restore(tmp_path / "w.blf", rb, "win")
    assert isinstance(restore(tmp_path / "w.blf", rb, "win", replace=True), RedisWindowedFilter)


@pytest.mark.parametrize("end", ["module", "plain"])
def test_a_windowed_restore_whose_reply_was_lost_is_kept(two_servers: tuple[RedisServer, RedisServer],
                                                         end: str) -> None:
    """The upload runs, its reply is lost, and the client sends it again:
    the re-send answers as the upload did (its token is in the meta). It
    had found the ring written, reported another writer, deleted the
    restored filter and raised."""
    from bloomline.redis import RedisWindowedFilter
    from bloomline.redis._plain import _WINDOW_UPLOAD

    a, b = two_servers
    server = a if end == "module" else b
    w = bloomline.WindowedBloomFilter(20_000, 0.01, window=3600, generations=3)
    keys = [f"https://example.com/{i}" for i in range(3000)]
    w.add_many(keys)
    redis.Redis(port=server.port).script_load(_WINDOW_UPLOAD.text)  # sent by its SHA: the proxy knows it
    proxy = FaultProxy(server.port, "cut_after", match=_WINDOW_UPLOAD.sha, limit=1)
    try:
        moved = restore(w.to_bytes(), redis.Redis(port=proxy.port, socket_timeout=5), "lost")
        assert proxy.faults == 1 and proxy.swallowed == 1  # the upload ran, and its reply was thrown away
    finally:
        proxy.close()
    assert isinstance(moved, RedisWindowedFilter) and moved.backend == end
    attached = RedisWindowedFilter(_client(server), "lost", 20_000, 0.01, window=3600, generations=3)
    assert attached.contains_many(keys).all()
    assert list(attached.live_generations) == [(n, g.insert_count) for n, g in w.live_generations]


def test_a_windowed_dump_taken_while_writers_add_is_one_moment(two_servers: tuple[RedisServer, RedisServer],
                                                               tmp_path: Path) -> None:
    """Dumps taken while two threads add: each loads, holds every key added
    before it began, and its generations' counts agree with their bits (one
    script reads the ring and the bits together)."""
    import threading

    from bloomline.redis import RedisWindowedFilter

    a, _ = two_servers
    w = RedisWindowedFilter(_client(a), "busy", 50_000, 0.01, window=3600, generations=2)
    w.add_many([f"first{i}" for i in range(1000)])
    stop = threading.Event()

    def writer(tag: str) -> None:
        i = 0
        while not stop.is_set() and i < 200:
            w.add_many([f"{tag}{i}.{j}" for j in range(100)])
            i += 1

    threads = [threading.Thread(target=writer, args=(t,)) for t in ("p", "q")]
    for t in threads:
        t.start()
    try:
        dumps = []
        for n in range(5):
            before = w.live_generations
            dumps.append((before, dump(_client(a), "busy", tmp_path / f"d{n}.blf")))
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    for before, local in dumps:
        loaded = bloomline.WindowedBloomFilter.from_bytes(local.to_bytes())
        assert loaded.contains_many([f"first{i}" for i in range(1000)]).all()
        for _, g in loaded.live_generations:
            assert g.approx_count == pytest.approx(g.insert_count, rel=0.05, abs=20)
        assert sum(c for _, c in before) <= sum(g.insert_count for _, g in loaded.live_generations)


def test_a_windowed_restore_keeps_only_what_the_servers_clock_still_has(two_servers: tuple[RedisServer, RedisServer],
                                                                        tmp_path: Path) -> None:
    """Generation numbers are the server's: a file's generations that the
    server's clock has left behind are not written (they would have expired),
    and a file whose generations are ahead of the server's clock is refused,
    leaving nothing at the key."""
    import time

    a, _ = two_servers
    r = _client(a)
    now = time.time()
    old = bloomline.WindowedBloomFilter(1000, 0.01, window=60, generations=2, clock=lambda: now - 3600)
    old.add("gone")
    stale = restore(old.to_bytes(), r, "stale")
    assert "gone" not in stale and stale.live_generations == ()
    ahead = bloomline.WindowedBloomFilter(1000, 0.01, window=60, generations=2, clock=lambda: now + 3600)
    ahead.add("later")
    with pytest.raises(ValueError, match="ahead of the server's clock"):
        restore(ahead.to_bytes(), r, "ahead")
    assert not [k for k in redis.Redis(port=a.port).keys("*") if k.startswith(b"{ahead}")]
    # A ring another writer added to since it was made is never merged into.
    from bloomline.redis import RedisWindowedFilter

    busy = RedisWindowedFilter(r, "busy", 1000, 0.01, window=60, generations=2)
    busy.add("x")
    fresh = bloomline.WindowedBloomFilter(1000, 0.01, window=60, generations=2)
    fresh.add("y")
    with pytest.raises(ValueError, match="written to by another writer"):
        busy._upload_generations(bloomline._core.decode_window(fresh.to_bytes())[-1])
    assert "x" in busy and "y" not in busy


def test_the_servers_own_bloom_filters_are_refused_with_the_way_to_move_them(tmp_path: Path) -> None:
    server = RedisServer(tmp_path, *module_args("bf"))
    try:
        f = RedisBloomFilter(_client(server), "rb", 1000, 0.01, backend="bf")
        f.add("a")
        with pytest.raises(ValueError, match="BF.SCANDUMP"):
            dump(_client(server), "rb", tmp_path / "rb.blf")
    finally:
        server.stop()


# ---- the CLI --------------------------------------------------------------------------


def cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "bloomline", *args], input=stdin, capture_output=True,
                          timeout=300, check=False)


def test_cli_dump_and_restore_through_a_pipe(two_servers: tuple[RedisServer, RedisServer], tmp_path: Path) -> None:
    a, b = two_servers
    chain = ScalableBloomFilter(1_000, 1e-3, store=RedisStages(_client(a), "site:dupefilter"))
    chain.add_many([f"https://e.example/{i}" for i in range(5_000)])
    out = cli("redis", "dump", a.url, "site:dupefilter", "-")
    assert out.returncode == 0, out.stderr
    assert b"wrote the chain at 'site:dupefilter'" in out.stderr
    back = cli("redis", "restore", "-", b.url, "site:dupefilter", stdin=out.stdout)
    assert back.returncode == 0, back.stderr
    moved = ScalableBloomFilter(1_000, 1e-3, store=RedisStages(_client(b), "site:dupefilter"))
    urls = [f"https://e.example/{i}" for i in range(10_000)]
    np.testing.assert_array_equal(moved.contains_many(urls), chain.contains_many(urls))
    again = cli("redis", "restore", "-", b.url, "site:dupefilter", stdin=out.stdout)
    assert again.returncode == 1 and b"--replace" in again.stderr and b"Traceback" not in again.stderr
    missing = cli("redis", "dump", a.url, "nope", str(tmp_path / "nope.blf"))
    assert missing.returncode == 1 and b"no filter or chain at key 'nope'" in missing.stderr
    down = cli("redis", "dump", "redis://127.0.0.1:1/0", "k", str(tmp_path / "k.blf"))
    assert down.returncode == 1 and b"redis:" in down.stderr and b"Traceback" not in down.stderr
    from bloomline.redis import RedisWindowedFilter

    RedisWindowedFilter(_client(a), "recent", 1000, 0.01, window=86400).add_many(["x", "y"])
    win = cli("redis", "dump", a.url, "recent", "-")
    assert win.returncode == 0 and b"wrote the windowed filter at 'recent' (1 live generation)" in win.stderr
    assert cli("redis", "restore", "-", b.url, "recent", stdin=win.stdout).returncode == 0
    assert RedisWindowedFilter(_client(b), "recent", 1000, 0.01, window=86400).contains_many(
        ["x", "y", "z"]).tolist() == [True, True, False]


def test_a_windowed_dump_through_a_symlink_and_onto_a_full_disk(two_servers: tuple[RedisServer, RedisServer],
                                                                tmp_path: Path) -> None:
    """A windowed filter's dump is written as every dump is (atomically):
    through a symlink it replaces the target and keeps the link; to stdout
    on /dev/full it is one error line, no traceback."""
    from bloomline.redis import RedisWindowedFilter

    a, _ = two_servers
    RedisWindowedFilter(_client(a), "recent", 1000, 0.01, window=86400).add_many(["x", "y"])
    (tmp_path / "data").mkdir()
    target = tmp_path / "data" / "recent.blf"
    target.write_bytes(b"old")
    link = tmp_path / "current.blf"
    link.symlink_to(target)
    assert cli("redis", "dump", a.url, "recent", str(link)).returncode == 0
    assert link.is_symlink() and bloomline.WindowedBloomFilter.load(target).contains_many(["x", "y"]).all()
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["recent.blf"]
    with open("/dev/full", "wb") as full:
        r = subprocess.run([sys.executable, "-m", "bloomline", "redis", "dump", a.url, "recent", "-"], stdout=full,
                           stderr=subprocess.PIPE, timeout=120, check=False)
    assert r.returncode == 1 and r.stderr == b"bloomline: error: cannot write the output: No space left on device\n"


# ---- importing a scrapy-redis fingerprint set ----------------------------------------------


def _requests(n: int, start: int = 0) -> list[object]:
    from scrapy import Request

    return [Request(f"https://shop.example/item/{i}?b=2&a=1") for i in range(start, start + n)]


def _scrapy_redis_fingerprints(requests: list[object]) -> list[str]:
    """The fingerprints as scrapy-redis writes them: by its own dupefilter class."""
    dupefilter = pytest.importorskip("scrapy_redis.dupefilter")
    own = dupefilter.RFPDupeFilter(server=None, key="unused")
    return [own.request_fingerprint(r) for r in requests]


def _scheduler(server: RedisServer) -> object:
    """scrapy-redis's scheduler with our dupefilter, as a switched crawl runs
    them, for a spider named "shop" (its key: shop:dupefilter)."""
    pytest.importorskip("scrapy_redis")
    from scrapy import Spider
    from scrapy.utils.test import get_crawler
    from scrapy_redis.scheduler import Scheduler

    class Shop(Spider):
        name = "shop"

    crawler = get_crawler(Shop, settings_dict={"DUPEFILTER_CLASS": "bloomline.scrapy.RedisBloomDupeFilter",
                                               "REDIS_URL": server.url, "SCHEDULER_PERSIST": True})
    scheduler = Scheduler.from_crawler(crawler)
    scheduler.open(Shop.from_crawler(crawler))
    return scheduler


def test_an_imported_request_is_seen_by_the_rule_it_was_fingerprinted_by(
        two_servers: tuple[RedisServer, RedisServer], caplog: pytest.LogCaptureFixture) -> None:
    from bloomline.scrapy.migrate import import_set

    a, _ = two_servers
    r = _client(a)
    old = _requests(5_000)
    r.sadd("shop:dupefilter", *_scrapy_redis_fingerprints(old))
    report = import_set(r, "shop:dupefilter", chunk=1_500)
    assert (report.members, report.imported, report.invalid, report.missing) == (5_000, 5_000, 0, 0)
    assert r.exists("shop:dupefilter") and not report.deleted  # left alone without delete_set
    assert report.filter_bytes * 10 < report.set_bytes
    with caplog.at_level("INFO"):
        scheduler = _scheduler(a)
    df = scheduler.df  # type: ignore[attr-defined]
    assert "imported from the set 'shop:dupefilter'" in caplog.text and "scrapy-redis's rule" in caplog.text
    try:
        assert all(df.request_seen(q) for q in old)
        fresh = _requests(5_000, start=5_000)
        assert sum(df.request_seen(q) for q in fresh) <= 2  # (the false-positive budget: 1e-4 a check)
        assert all(df.request_seen(q) for q in fresh[:100])  # and the new ones are remembered
    finally:
        scheduler.close("finished")  # type: ignore[attr-defined]
    # Scrapy's own fingerprint of the same request differs: the filter does
    # not answer by it (why the rule is recorded).
    from scrapy.utils.request import RequestFingerprinter

    ours = RequestFingerprinter().fingerprint(old[0]).hex()
    assert ours != _scrapy_redis_fingerprints(old[:1])[0]


def test_import_names_members_that_are_not_fingerprints(two_servers: tuple[RedisServer, RedisServer]) -> None:
    from bloomline.scrapy.migrate import import_set

    a, _ = two_servers
    r = _client(a)
    good = [hashlib.sha1(str(i).encode()).hexdigest() for i in range(1_000)]
    r.sadd("s:dupefilter", *good, "not-a-fingerprint", "z" * 40, "ab" * 21)
    report = import_set(r, "s:dupefilter", chunk=200)
    assert (report.imported, report.invalid, report.missing) == (1_000, 3, 0)
    assert sorted(report.invalid_examples) == sorted(["not-a-fingerprint", "z" * 40, "ab" * 21])
    with pytest.raises(ValueError, match="holds no set"):
        r.set("str", "x")
        import_set(r, "str")
    with pytest.raises(ValueError, match="rule"):
        import_set(r, "s:dupefilter", rule="md5")


def test_an_interrupted_import_resumes_and_the_set_goes_only_when_checked(
        two_servers: tuple[RedisServer, RedisServer]) -> None:
    from bloomline.scrapy.migrate import import_set

    a, _ = two_servers
    r = _client(a)
    fps = [hashlib.sha1(str(i).encode()).hexdigest() for i in range(30_000)]
    r.sadd("big:dupefilter", *fps)
    seen_chunks = []

    def stop_after_two(report: object) -> None:
        seen_chunks.append(report.imported)  # type: ignore[attr-defined]
        if len(seen_chunks) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        import_set(r, "big:dupefilter", chunk=2_000, progress=stop_after_two)
    stopped_at = seen_chunks[-1]
    assert 0 < stopped_at < 30_000
    report = import_set(r, "big:dupefilter", chunk=2_000, delete_set=True)
    assert report.resumed and report.missing == 0 and report.deleted
    # SSCAN may return a member twice; the resumed import did not start over.
    assert 30_000 <= report.imported < 30_000 + stopped_at
    assert not r.exists("big:dupefilter")
    info = RedisStages(r, "big:dupefilter").info()
    assert info is not None and info["fingerprints"] == "scrapy-redis" and info["imported_from"] == "big:dupefilter"
    assert int(info["initial_capacity"]) >= 30_000
    chain = ScalableBloomFilter(int(info["initial_capacity"]), float(info["error_rate"]), growth=int(info["growth"]),
                                tightening=float(info["tightening"]), store=RedisStages(r, "big:dupefilter"))
    assert chain.num_stages == 1  # sized from SCARD: the whole set fits the first stage
    assert chain.contains_many([bytes.fromhex(f) for f in fps]).all()


def test_import_refuses_to_mix_rules(two_servers: tuple[RedisServer, RedisServer]) -> None:
    from bloomline.scrapy.migrate import import_set

    a, _ = two_servers
    r = _client(a)
    r.sadd("m:dupefilter", hashlib.sha1(b"x").hexdigest())
    import_set(r, "m:dupefilter")
    with pytest.raises(ValueError, match="made by the rule 'scrapy-redis', not by 'scrapy-legacy'"):
        import_set(r, "m:dupefilter", rule="scrapy-legacy")


def test_cli_import_set(two_servers: tuple[RedisServer, RedisServer]) -> None:
    a, _ = two_servers
    r = _client(a)
    r.sadd("cli:dupefilter", *[hashlib.sha1(str(i).encode()).hexdigest() for i in range(5_000)], "bad")
    out = cli("redis", "import-set", a.url, "cli:dupefilter", "--into", "cli:bloom", "--delete-set")
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode()
    assert "imported 5,000 fingerprints from the set 'cli:dupefilter' into the filter at 'cli:bloom'" in text
    assert "1 member of the set is not a 40-character hex fingerprint" in text and "'bad'" in text
    assert "every fingerprint of the set is in the filter; the set was deleted" in text
    assert b"fingerprints (" in out.stderr and b"/s, ETA" in out.stderr  # progress with a rate and an ETA
    assert not r.exists("cli:dupefilter")
    # The set's memory is measured before --delete-set deletes it (it read 0 B).
    memory = next(line for line in text.splitlines() if line.startswith("memory: "))
    assert re.fullmatch(r"memory: the set [0-9.]+ KiB, the filter [0-9.]+ KiB \([0-9.]+x less\)", memory), memory


def test_import_set_memory_ratio_reads_both_ways() -> None:
    from bloomline.cli._redis import _ratio_words

    assert _ratio_words(120_000, 1_000) == " (120x less)"
    assert _ratio_words(3_500, 1_000) == " (3.5x less)"
    assert _ratio_words(1_000, 3_500) == " (3.5x more)"
    assert _ratio_words(232, 4_915) == " (21x more)"
    assert _ratio_words(0, 1_000) == ""
