"""What RedisJournalScheduler's enqueue and take cost, build against build.

    python benchmarks/scrapy_enqueue.py [--rounds 3] [--requests 20000] [PKG_DIR ...]

Each PKG_DIR holds a ``bloomline`` package (an installed copy of a build,
put first on PYTHONPATH); none given: the installed one. In turns, each
build in its own process opens RedisJournalScheduler (as Scrapy's engine
opens it, journal in a temporary JOBDIR) against one redis-server started
here on loopback, and times ``enqueue_request`` over the same requests:
5,000 distinct URLs, each offered four times (most links a crawl yields
are seen), under scrapy-redis's RFPDupeFilter and under RedisBloomDupeFilter
(whose front filter answers the repeats without Redis), then
``next_request`` until the queue is empty (each request taken: popped and
journaled). Prints microseconds per call, a line per build, dupefilter and
round.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import sys, tempfile, time, warnings
from pathlib import Path
warnings.simplefilter("ignore")
from scrapy import Spider
from scrapy.http import Request
from scrapy.utils.test import get_crawler
from bloomline.scrapy import RedisJournalScheduler

url, dupefilter, n = sys.argv[1], sys.argv[2], int(sys.argv[3])

class S(Spider):
    name = "enqueue"

crawler = get_crawler(S, {"REDIS_URL": url, "SCHEDULER_PERSIST": False, "JOBDIR": tempfile.mkdtemp(),
                          "SCHEDULER_QUEUE_CLASS": "scrapy_redis.queue.FifoQueue", "DUPEFILTER_CLASS": dupefilter,
                          "SPIDER_MIDDLEWARES": {"bloomline.scrapy.JournalDoneMiddleware": 0}})
spider = S.from_crawler(crawler)
scheduler = RedisJournalScheduler.from_crawler(crawler)
scheduler.open(spider)
requests = [Request(f"http://example.com/{i % 5000}") for i in range(n)]
t = time.perf_counter()
for r in requests:
    scheduler.enqueue_request(r)
enqueue = (time.perf_counter() - t) / n * 1e6
t = time.perf_counter()
taken = 0
while scheduler.next_request() is not None:
    taken += 1
print(f"{enqueue:.1f} us per enqueue, {(time.perf_counter() - t) / max(taken, 1) * 1e6:.1f} us per next_request "
      f"({taken} taken)")
scheduler.server.flushall()
"""

DUPEFILTERS = ["scrapy_redis.dupefilter.RFPDupeFilter", "bloomline.scrapy.RedisBloomDupeFilter"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("packages", nargs="*", help="directories holding a bloomline package (default: the installed one)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=20_000)
    args = ap.parse_args()
    port = free_port()
    where = tempfile.mkdtemp()
    server = subprocess.Popen([shutil.which("redis-server") or "redis-server", "--port", str(port), "--bind",
                               "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", where],
                              stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        for rnd in range(args.rounds):
            for pkg in args.packages or [""]:
                env = {**os.environ, "PYTHONPATH": pkg} if pkg else dict(os.environ)
                for df in DUPEFILTERS:
                    out = subprocess.run([sys.executable, "-c", CHILD, f"redis://127.0.0.1:{port}/0", df,
                                          str(args.requests)], capture_output=True, text=True, env=env, timeout=600)
                    took = out.stdout.strip() or f"failed: {out.stderr[-300:]}"
                    print(f"round {rnd + 1}  {pkg or 'installed'}  {df.rsplit('.', 1)[1]}: {took}", flush=True)
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    main()
