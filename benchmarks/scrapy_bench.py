"""Scrapy dupefilters side by side.

    python benchmarks/scrapy_bench.py [memory|crawl|all]

memory: Scrapy's RFPDupeFilter beside bloomline's BloomDupeFilter
at 1M and 10M fingerprints, each in its own process.

crawl: real crawls (``scrapy runspider``) of one local site of
5,000 pages with 12 links each (tests/scrapy_site.py), by Scrapy's
RFPDupeFilter, BloomDupeFilter, scrapy-redis (its scheduler and its
RFPDupeFilter), and RedisBloomDupeFilter under Scrapy's scheduler and under
scrapy-redis's, against one redis-server on loopback. Per crawl: Redis round
trips per request made inside the dupefilter, time per request in
request_seen, the crawl process's peak RSS, and the memory of the
dupefilter's keys in Redis (MEMORY USAGE, after the crawl, kept by
SCHEDULER_PERSIST).

RFPDupeFilter keeps every fingerprint as a 20-byte bytes object in a set; the
fingerprints are fed to its set directly (building 10M Request objects would
measure Scrapy's Request, not the filter). BloomDupeFilter gets the same
fingerprints through its seen-set, at the default 1e-4 error rate and a
capacity equal to the count (its first stage is sized for 1e-5, so that the
chain stays under 1e-4 if it grows).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _sections import write_section  # noqa: E402

CHILD = r"""
import gc, json, sys, time, tracemalloc
import numpy as np

kind, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(7)
chunk = 1_000_000
if kind == "rfp":
    from scrapy.dupefilters import RFPDupeFilter
    df = RFPDupeFilter()
    tracemalloc.start()
    t = time.perf_counter()
    for start in range(0, n, chunk):
        raw = rng.bytes(20 * min(chunk, n - start))
        df._fingerprints.update(raw[i:i + 20] for i in range(0, len(raw), 20))
        del raw
    elapsed = time.perf_counter() - t
    gc.collect()
    held = tracemalloc.get_traced_memory()[0]  # the set and its bytes objects
else:
    from bloomline.scrapy import BloomDupeFilter
    # "bloom": sized for n up front; "grown": the default first stage, grown to n
    df = BloomDupeFilter(capacity=n, error_rate=1e-4) if kind == "bloom" else BloomDupeFilter()
    t = time.perf_counter()
    for start in range(0, n, chunk):
        raw = rng.bytes(20 * min(chunk, n - start))
        df.seen.add_many(np.frombuffer(raw, dtype="S20"))
    elapsed = time.perf_counter() - t
    held = df.seen.nbytes  # the filter's bits (C++ memory, exact)
    assert df.seen.contains_many(np.frombuffer(raw, dtype="S20")).all()
print(json.dumps({"held": held, "seconds": elapsed}))
"""


def measure(kind: str, n: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, kind, str(n)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def memory_section() -> None:
    import scrapy

    lines = ["## Scrapy dupefilter memory\n",
             f"`python benchmarks/scrapy_bench.py`, Scrapy {scrapy.__version__}, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. Memory the seen-set holds once full: "
             "RFPDupeFilter's set and its fingerprint objects (tracemalloc), BloomDupeFilter's bits (exact).\n",
             "BloomDupeFilter at the default error rate 1e-4, sized for the count (BLOOMLINE_CAPACITY = count) and "
             "grown from the default first stage of 100,000.\n",
             "| fingerprints | RFPDupeFilter | BloomDupeFilter sized | bytes / fingerprint | ratio "
             "| BloomDupeFilter grown | bytes / fingerprint |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for n in (1_000_000, 10_000_000):
        rfp, ours, grown = measure("rfp", n), measure("bloom", n), measure("grown", n)
        lines.append(f"| {n:,} | {rfp['held'] / 2**20:,.0f} MiB | {ours['held'] / 2**20:,.1f} MiB | "
                     f"{ours['held'] / n:.2f} | {rfp['held'] / max(ours['held'], 1):,.0f}x "
                     f"| {grown['held'] / 2**20:,.1f} MiB | {grown['held'] / n:.2f} |")
    write_section("scrapy", "\n".join(lines))
    print("\n".join(lines))


CRAWL_PAGES = 5000
SCRAPY_REDIS = ("SCHEDULER=scrapy_redis.scheduler.Scheduler", "SCHEDULER_PERSIST=True")


def crawl_once(name: str, settings: tuple[str, ...], redis_url: str, tmp: Path) -> dict[str, Any]:
    import redis

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from scrapy_site import Site, crawl, twelve_links

    r = redis.Redis.from_url(redis_url)
    r.flushall()
    site = Site(CRAWL_PAGES, twelve_links(CRAWL_PAGES))
    out = tmp / f"{name}.json"
    env_extra = {"BLOOMLINE_PROBE_OUT": str(out),
                 "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parent), os.environ.get("PYTHONPATH", "")])}
    old = {k: os.environ.get(k) for k in env_extra}
    os.environ.update(env_extra)
    try:
        t = time.perf_counter()
        done = crawl(tmp, site, *settings, f"REDIS_URL={redis_url}", "LOG_LEVEL=WARNING")
        wall = time.perf_counter() - t
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        site.stop()
    if done.returncode != 0:
        raise RuntimeError(f"{name}: the crawl failed:\n{done.stderr[-3000:]}")
    probe = json.loads(out.read_text())
    time.sleep(2.5)  # bloomline's answer keys (2 s) expire
    keys = [k for k in r.keys("*") if b"queue" not in k and b"requests" not in k]
    probe["redis_bytes"] = sum(int(r.memory_usage(k) or 0) for k in keys)
    probe["pages"] = len(site.pages())
    probe["fetched"] = sum(site.pages().values())
    probe["wall"] = wall
    return probe


def crawl_section() -> None:
    import tempfile

    import redis
    import scrapy
    import scrapy_redis

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from conftest import RedisServer

    runs = [
        ("Scrapy RFPDupeFilter", ("DUPEFILTER_CLASS=_scrapy_probe.TimedRFP",)),
        ("bloomline BloomDupeFilter", ("DUPEFILTER_CLASS=_scrapy_probe.TimedBloom",)),
        ("scrapy-redis (its scheduler, RFPDupeFilter)", (*SCRAPY_REDIS, "DUPEFILTER_CLASS=_scrapy_probe.TimedScrapyRedis")),
        ("bloomline RedisBloomDupeFilter, scrapy-redis's scheduler",
         (*SCRAPY_REDIS, "DUPEFILTER_CLASS=_scrapy_probe.TimedRedisBloom")),
        ("bloomline RedisBloomDupeFilter, Scrapy's scheduler",
         ("DUPEFILTER_CLASS=_scrapy_probe.TimedRedisBloom", "SCHEDULER_PERSIST=True")),
    ]
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "redis").mkdir()
        server = RedisServer(tmp / "redis")
        try:
            version = redis.Redis.from_url(server.url).info()["redis_version"]
            results = [(name, crawl_once(f"run{i}", settings, server.url, tmp)) for i, (name, settings) in
                       enumerate(runs)]
        finally:
            server.stop()
    base = dict(results)["scrapy-redis (its scheduler, RFPDupeFilter)"]
    lines = ["## Scrapy crawls through each dupefilter\n",
             f"`python benchmarks/scrapy_bench.py crawl`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
             f"Scrapy {scrapy.__version__}, scrapy-redis {scrapy_redis.__version__}, Redis {version} on loopback, "
             f"one site of {CRAWL_PAGES:,} pages with 12 links each, 16 requests at once, default settings of each "
             "filter (bloomline: first stage 100,000 fingerprints, error rate 1e-4). Round trips and time are counted "
             "inside request_seen only (a wrapper class, benchmarks/_scrapy_probe.py); peak RSS is the crawl "
             "process's; Redis memory is MEMORY USAGE of the dupefilter's keys after the crawl.\n",
             "| dupefilter | pages | checks | Redis round trips / request | µs / request in the dupefilter "
             "| vs scrapy-redis | peak RSS | Redis memory |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, p in results:
        per = p["seconds"] / max(p["calls"], 1) * 1e6
        base_per = base["seconds"] / max(base["calls"], 1) * 1e6
        lines.append(f"| {name} | {p['pages']:,} | {p['calls']:,} | {p['round_trips'] / max(p['calls'], 1):.3f} "
                     f"| {per:,.1f} | {per / base_per:.2f}x | {p['peak_rss'] / 2**20:,.0f} MiB "
                     f"| {p['redis_bytes'] / 2**10:,.0f} KiB |")
    write_section("scrapy-crawl", "\n".join(lines))
    print("\n".join(lines))


def main() -> int:
    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    if what not in ("memory", "crawl", "all"):
        print("usage: scrapy_bench.py [memory|crawl|all]", file=sys.stderr)
        return 2
    if what in ("memory", "all"):
        memory_section()
    if what in ("crawl", "all"):
        crawl_section()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
