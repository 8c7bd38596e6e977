"""The Redis fault harness: four processes add the same keys (each in its
own order) to one filter in Redis (a fixed filter, a chain, or a windowed
filter whose window outlasts the run) while a fault strikes, and every key must
be reported new to exactly one of them, or be one that a call raised
without an answer for (an UnknownOutcome's or MissingKeyError's `unknown`;
the whole batch when the error says nothing). Keys a raising call did
answer (its `new`, and the rest "seen") are held to exactly once too.

Faults: a loopback proxy that stalls a reply past the socket timeout, drops
one, or cuts the connection before or after a request runs (conftest's
FaultProxy); SCRIPT FLUSH, again and again; DEL and EXPIRE of one of the
filter's keys; eviction under a small maxmemory (allkeys-lru); the filter
dropped and made again with the same parameters under the attached writers
("replace": they must be refused, MissingKeyError); a primary and a replica,
the workers behind a proxy (re-pointed as a failover moves an address) and
waiting for the replica (wait_replicas=1): a reply lost, then the replica
promoted and the old primary made its replica ("failover"; a batch that
raised NotDurable is exempt: not safe by the contract, docs/design/redis.md,
"Durability: failovers and restarts"); a replica without bloomline's module joined, then
promoted ("nomodule", module backend only: the adds must raise there); and,
on a 3-master cluster, the slot of one of the filter's keys moved to
another node while the adds run, or that node out of memory for half a
second (maxmemory just above its use, noeviction: "oom").

tests/test_redis_harness.py runs every case once at a small scale in CI.
The full runs (4 processes x 200,000 keys, 5 runs of each case) are

    python tests/redis_harness.py --keys 200000 --runs 5

whose table is recorded in benchmarks/RESULTS.md ("Redis under faults").
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import FaultProxy, RedisServer, module_args, need, wait_until  # noqa: E402
from forking import worker_context  # noqa: E402

PROXY_FAULTS = ("stall", "drop", "cut_before", "cut_after")
SERVER_FAULTS = ("script_flush", "del", "expire", "evict", "replace")
PAIR_FAULTS = ("failover", "nomodule")  # a primary and a second server, the workers behind a proxy
CLUSTER_FAULTS = ("migrate", "oom")
FAULTS = PROXY_FAULTS + SERVER_FAULTS + PAIR_FAULTS + CLUSTER_FAULTS
BACKENDS = ("module", "plain", "bf")
KINDS = ("fixed", "chain", "window")
# A windowed filter (plain and module backends) whose window outlasts the run: each key new exactly once, as for the
# others, "replace" included (its ident), a failover and a slot migrating on a cluster; on the module, a server
# without it after a failover ("nomodule") and "oom" too. Not "oom" on plain: its ring is made whole when a
# generation starts, and a run's kept answers (1 KB a batch) did not take the node past its limit as Redis counts
# it for refusals (measured: used 3,058,448 over maxmemory 2,999,680, and no write refused), so the case would
# test nothing. The module keeps its answers in memory Redis counts, and its WADD is refused (deny-oom).
WINDOW_FAULTS = PROXY_FAULTS + ("script_flush", "del", "expire", "evict", "replace", "failover", "migrate")
WINDOW_S, WINDOW_G = 3600.0, 4
SOCKET_TIMEOUT = 1.0  # the workers' clients; a stall is longer
WAIT_MS = 500  # a failover's WAIT timeout (the clients' socket timeout outlasts it by a second)
BATCH = 1_000
# A fault that takes its time (a slot moving, scripts flushed on a timer, a
# key expiring 50 ms on, a replica syncing, half a second out of memory)
# meets the adds while they run: they go at a set pace (else a small run's
# adds may all be done by then).
PACE_S = {"migrate": 0.01, "script_flush": 0.01, "del": 0.01, "expire": 0.01, "replace": 0.01, "oom": 0.05,
          "failover": 0.05, "nomodule": 0.05}
# The faults the adds must be seen to meet (the test asserts their errors):
# each worker holds its last HELD_BATCHES batches until the fault is in
# effect, so a slow strike on a loaded machine cannot come after them all.
HELD_FAULTS = ("del", "expire", "replace", "oom", "nomodule")
HELD_BATCHES = 3


def cases() -> list[tuple[str, str, str]]:
    """Every (backend, kind, fault) the harness drives: bf keeps no chain, and
    only the module backend's commands are unknown to a server without it."""
    window_faults = {"plain": WINDOW_FAULTS, "module": (*WINDOW_FAULTS, "nomodule", "oom")}
    return [(b, k, f) for f in FAULTS for b in BACKENDS for k in KINDS
            if not (b == "bf" and k == "chain") and (f != "nomodule" or b == "module")
            and (k != "window" or f in window_faults.get(b, ()))]


@dataclass
class Spec:
    backend: str
    kind: str
    fault: str
    keys: int
    port: int  # the server, or the proxy in front of it
    cluster: bool = False
    seed: int = 0


@dataclass
class Outcome:
    """One run: how many processes found each key new, and the batches whose
    call raised (the keys they had no answer for are exempt from "exactly
    once": the caller was told to treat them as new)."""

    case: tuple[str, str, str]
    keys: int
    new_twice: int = 0
    twice_by_facts: int = 0  # of those, keys one of whose "new" was a raising call's fact (a diagnosis)
    never_new: int = 0
    raised_batches: int = 0
    raised_keys: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    events: Counter[str] = field(default_factory=Counter)  # what the workers' Senders met
    faults: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.new_twice == 0 and self.never_new == 0


def _client(spec: Spec) -> Any:
    import redis
    from redis.cluster import RedisCluster

    # WAIT holds the connection: the socket timeout must outlast it by a second.
    timeout = SOCKET_TIMEOUT + WAIT_MS / 1000 if spec.fault == "failover" else SOCKET_TIMEOUT
    if spec.cluster:
        return RedisCluster(host="127.0.0.1", port=spec.port, socket_timeout=timeout)
    return redis.Redis(host="127.0.0.1", port=spec.port, socket_timeout=timeout)


def _make(spec: Spec, client: Any, create: bool) -> Any:
    """The filter every process adds to: a fixed filter far larger than the
    keys, or a chain that grows (stages of keys/8 doubling), so that false
    positives (under 1e-6 in all) cannot pass for a lost key. A failover's
    adds wait for the replica."""
    from bloomline import ScalableBloomFilter
    from bloomline.redis import RedisBloomFilter, RedisStages, RedisWindowedFilter

    waits: dict[str, Any] = {"wait_replicas": 1, "wait_timeout_ms": WAIT_MS} if spec.fault == "failover" else {}
    if spec.kind == "window":
        return RedisWindowedFilter(client, "fleet", 10 * spec.keys, 1e-7, window=WINDOW_S, generations=WINDOW_G,
                                   backend=spec.backend, **waits)
    if spec.kind == "fixed":
        if create:
            return RedisBloomFilter(client, "fleet", 10 * spec.keys, 1e-7, backend=spec.backend,
                                    shards=None if spec.backend == "bf" else 4, **waits)
        return RedisBloomFilter(client, "fleet", backend=spec.backend, **waits)
    return ScalableBloomFilter(max(1000, spec.keys // 8), 1e-8,
                               store=RedisStages(client, "fleet", backend=spec.backend, **waits))


def worker(spec: Spec, index: int, q: Any, progress: Any, start: Any, struck: Any) -> None:
    """Add every key, in an order of this process's own, in batches; report
    the keys found new (a raising call's `new` counts) and the keys that a
    raising call had no answer for (its `unknown`; the whole batch when it
    carries no facts, or raised NotDurable). The workers start adding
    together (`start`, a barrier) and count their batches in `progress` (a
    server fault strikes mid-run); with a held fault, the last batches
    wait for `struck`."""
    import redis

    from bloomline.redis import MissingKeyError, NotDurable, UnknownOutcome
    from bloomline.redis._errors import facts

    try:
        f = _make(spec, _client(spec), create=False)
        sender = {"fixed": lambda: f._h.sender, "chain": lambda: f._store._sender, "window": lambda: f._sender}[
            spec.kind]()
        pace = PACE_S.get(spec.fault, 0.0)
        start.wait(timeout=120)
        keys = np.random.default_rng(spec.seed * 100 + index).permutation(spec.keys).astype(np.uint64)
        new = np.zeros(spec.keys, dtype=bool)
        by_facts = np.zeros(spec.keys, dtype=bool)  # new by a raising call's facts
        raised = np.zeros(spec.keys, dtype=bool)
        errors: Counter[str] = Counter()
        deadline = time.monotonic() + 600
        held = spec.keys - HELD_BATCHES * BATCH if spec.fault in HELD_FAULTS else None
        for lo in range(0, spec.keys, BATCH):
            if held is not None and lo >= held:
                struck.wait(timeout=120)  # (at once when set)
            batch = keys[lo : lo + BATCH]
            try:
                flags = f.add_many(batch)
            except NotDurable:
                # Its keys are not safe by the contract: a failover may report
                # them new again (docs/design/redis.md, "Durability: failovers and restarts").
                errors["NotDurable"] += 1
                raised[batch.astype(np.int64)] = True
            except redis.RedisError as e:  # also out of memory, an unreachable node...: every add error has facts
                ours = isinstance(e, (UnknownOutcome, MissingKeyError))
                errors[type(e).__name__ if ours else f"{type(e).__name__}: {str(e)[:60]}"] += 1
                known, unknown = facts(e)
                if known is not None and unknown is not None:
                    # What the error says it knows is held to exactly once
                    # too: only the keys it has no answer for are exempt.
                    new[batch[known].astype(np.int64)] = True
                    by_facts[batch[known].astype(np.int64)] = True
                    raised[batch[unknown].astype(np.int64)] = True
                else:
                    raised[batch.astype(np.int64)] = True
            else:
                new[batch[flags].astype(np.int64)] = True
            with progress.get_lock():
                progress.value += 1
            time.sleep(pace)
            if time.monotonic() > deadline:
                raise TimeoutError("a worker ran past 600 s")
        q.put((index, np.nonzero(new)[0], np.nonzero(raised)[0], errors, sender.stats, np.nonzero(by_facts)[0]))
    except Exception:  # noqa: BLE001 - reported to the parent, not lost in a dead process
        q.put((index, traceback.format_exc(), None, None, None, None))


# ---- the faults -----------------------------------------------------------------------


def _redis_cli(port: int, *args: str) -> str:
    return subprocess.run([need("redis-cli"), "-p", str(port), *args], capture_output=True, text=True,
                          timeout=30).stdout


def _target_key(spec: Spec, client: Any) -> str:
    """The key a server fault strikes: a shard of the filter (the chain's
    first stage's; the windowed filter's current generation's bits, read
    when the fault strikes from the keys the server holds: a generation
    that began after the workers' last add has no key yet)."""
    if spec.kind == "window":
        held = sorted(k.decode() for k in client.keys("{fleet}:w:bits:*"))
        current = f"{{fleet}}:w:bits:{int(time.time() // (WINDOW_S / WINDOW_G)) % (WINDOW_G + 1)}"
        return current if current in held or not held else held[-1]
    return "fleet:bits:1" if spec.kind == "fixed" and spec.backend != "bf" else (
        "fleet:bf" if spec.kind == "fixed" else "{fleet}:s0:bits:0")


def slot_owner(ports: list[int], slot: int) -> int:
    for port in ports:
        for line in _redis_cli(port, "cluster", "nodes").splitlines():
            parts = line.split()
            if "myself" not in parts[2]:
                continue
            for r in parts[8:]:
                lo, _, hi = r.partition("-")
                if not r.startswith("[") and int(lo) <= slot <= int(hi or lo):
                    return port
    raise RuntimeError(f"no node owns slot {slot}")


def move_slot(ports: list[int], slot: int, pause: float = 0.0) -> tuple[int, int]:
    """Move one slot (and its keys, a few at a time) to another master, as
    `redis-cli --cluster reshard` does. Returns (from, to) ports."""
    src = slot_owner(ports, slot)
    dst = next(p for p in ports if p != src)
    src_id, dst_id = (_redis_cli(p, "cluster", "myid").strip() for p in (src, dst))
    _redis_cli(dst, "cluster", "setslot", str(slot), "importing", src_id)
    _redis_cli(src, "cluster", "setslot", str(slot), "migrating", dst_id)
    while True:
        keys = _redis_cli(src, "cluster", "getkeysinslot", str(slot), "5").split()
        if not keys:
            break
        _redis_cli(src, "migrate", "127.0.0.1", str(dst), "", "0", "5000", "replace", "keys", *keys)
        time.sleep(pause)
    for p in ports:
        _redis_cli(p, "cluster", "setslot", str(slot), "node", dst_id)
    return src, dst


class _Strike(threading.Thread):
    """A server fault, struck while the workers run. ports: the servers (a
    pair's primary first); proxy: the one in front of them, for a pair."""

    def __init__(self, spec: Spec, ports: list[int], progress: Any, batches: int, struck: Any,
                 proxy: Optional[FaultProxy] = None) -> None:
        super().__init__(daemon=True)
        self.spec, self.ports, self.progress, self.batches, self.proxy = spec, ports, progress, batches, proxy
        self.struck = struck  # set once the fault is in effect (or will never be): the held batches go on
        self.stop = threading.Event()
        self.count = 0

    def _due(self) -> bool:
        # Mid-run: a failover once the proxy has lost its reply, the rest once a quarter of the batches are done.
        if self.spec.fault == "failover":
            return self.proxy is not None and self.proxy.faults >= 1
        return bool(self.progress.value >= self.batches // 4)

    def run(self) -> None:
        import redis

        spec = self.spec
        while not self._due() and not self.stop.wait(0.005):
            pass
        clients = [redis.Redis(host="127.0.0.1", port=p) for p in self.ports]
        client = clients[0]
        key = _target_key(spec, client)
        try:
            if spec.fault == "script_flush":
                while True:
                    for c in clients:
                        c.script_flush()
                    self.count += 1
                    if self.stop.wait(0.1):
                        break
            elif spec.fault == "del":
                self.count += int(client.delete(key))
            elif spec.fault == "expire":
                self.count += int(client.pexpire(key, 50))
                wait_until(lambda: not client.exists(key))
            elif spec.fault == "evict":
                used = int(client.info("memory")["used_memory"])
                client.config_set("maxmemory-policy", "allkeys-lru")
                client.config_set("maxmemory", used + 50_000)
                self.count += 1
            elif spec.fault == "replace":
                self._replace(client)
            elif spec.fault == "failover":
                assert self.proxy is not None
                # As a Sentinel would, at once: the replica promoted, the
                # workers' address moved to it, the old primary its replica.
                clients[1].execute_command("REPLICAOF", "NO", "ONE")
                self.proxy.repoint(self.ports[1])
                client.execute_command("REPLICAOF", "127.0.0.1", self.ports[1])
                self.count += 1
            elif spec.fault == "nomodule":
                assert self.proxy is not None
                bare = clients[1]
                bare.execute_command("REPLICAOF", "127.0.0.1", self.ports[0])
                try:
                    wait_until(lambda: bare.info("replication").get("master_link_status") == "up"
                               and bare.info("persistence").get("loading") == 0)
                except AssertionError:
                    return  # never synced, never promoted: no fault struck, and the case fails
                self.stop.wait(0.2)  # adds replicated to it meanwhile, which it drops
                bare.execute_command("REPLICAOF", "NO", "ONE")
                self.proxy.repoint(self.ports[1])
                self.count += 1
            elif spec.fault == "oom":
                from redis.cluster import key_slot

                node = redis.Redis(host="127.0.0.1", port=slot_owner(self.ports, key_slot(key.encode())))
                clients.append(node)
                node.config_set("maxmemory-policy", "noeviction")
                # Just above its use: the next adds' kept answers pass it, and it refuses writes from then on.
                node.config_set("maxmemory", int(node.info("memory")["used_memory"]) + 1_000)
                self.count += 1
                self.struck.set()
                # Out of memory for half a second from its first refusal: the use read may have held buffers
                # the server has since freed, so the adds may take a moment to pass the limit.
                deadline = time.monotonic() + 5
                while ("errorstat_OOM" not in node.info("errorstats") and time.monotonic() < deadline
                       and not self.stop.wait(0.01)):
                    pass
                self.stop.wait(0.5)
                node.config_set("maxmemory", 0)
            elif spec.fault == "migrate":
                from redis.cluster import key_slot

                move_slot(self.ports, key_slot(key.encode()), pause=0.05)
                self.count += 1
        except redis.RedisError:
            pass
        finally:
            self.struck.set()
            for c in clients:
                c.close()

    def _replace(self, client: Any) -> None:
        """Drop the filter and make it again, the same parameters, under the
        attached workers (who must be refused from then on)."""
        import warnings

        from bloomline.redis import RedisBloomFilter, RedisStages

        if self.spec.kind == "fixed":
            RedisBloomFilter.drop(client, "fleet")
        elif self.spec.kind == "window":
            _make(self.spec, client, create=True).delete()
        else:
            RedisStages(client, "fleet").reset()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            made = _make(self.spec, client, create=True)
        if self.spec.kind == "chain":
            made.add(self.spec.keys)  # a chain's stage 0 is made by its first add: a key no worker adds
        self.count += 1


def run(spec: Spec, tmp: Path, procs: int = 4) -> Outcome:
    """One run of a case, its servers started and stopped here."""
    import warnings

    outcome = Outcome((spec.backend, spec.kind, spec.fault), spec.keys)
    servers: list[RedisServer] = []
    proxy: Optional[FaultProxy] = None
    start = time.monotonic()
    try:
        mods = [*module_args("module"), *(module_args("bf") if spec.backend == "bf" else [])]
        if spec.fault in CLUSTER_FAULTS:
            from conftest import start_cluster

            servers = start_cluster(tmp, mods)
            spec.cluster = True
        elif spec.fault == "failover":
            from conftest import start_pair

            servers = list(start_pair(tmp, mods, mods))
        elif spec.fault == "nomodule":
            # The replica-to-be has no module, and joins mid-run (the replica check at attaching cannot see it).
            for name, args in (("p", mods), ("r", [])):
                (tmp / name).mkdir()
                servers.append(RedisServer(tmp / name, *args))
        else:
            servers = [RedisServer(tmp, *mods)]
        ports = [s.port for s in servers]
        spec.port = ports[0]
        with _client(spec) as maker, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _make(spec, maker, create=True)
        batches = procs * -(-spec.keys // BATCH)
        if spec.fault in PROXY_FAULTS:
            proxy = FaultProxy(ports[0], spec.fault, every=7, limit=6, min_bytes=2_000,
                               stall_s=SOCKET_TIMEOUT * 1.5)
        elif spec.fault in PAIR_FAULTS:
            # The workers' one address, re-pointed to the promoted replica; a
            # failover's proxy first loses one batch's reply, a quarter in.
            proxy = FaultProxy(ports[0], "drop", every=max(1, batches // 4), limit=int(spec.fault == "failover"),
                               min_bytes=2_000)
        if proxy:
            spec.port = proxy.port
        ctx = worker_context()
        q = ctx.Queue()
        progress = ctx.Value("i", 0)
        struck = ctx.Event()
        strike = _Strike(spec, ports, progress, batches, struck, proxy)
        together = ctx.Barrier(procs)
        workers = [ctx.Process(target=worker, args=(spec, i, q, progress, together, struck)) for i in range(procs)]
        for w in workers:
            w.start()
        if spec.fault not in PROXY_FAULTS:
            strike.start()
        results = [q.get(timeout=900) for _ in workers]
        strike.stop.set()
        if strike.is_alive():
            strike.join(timeout=120)
        for w in workers:
            w.join(timeout=60)
        for _, new, raised, errors, events, _facts in results:
            if raised is None:
                raise RuntimeError(f"a worker failed in {outcome.case}:\n{new}")
            outcome.events.update(events)
        counts = np.zeros(spec.keys, dtype=np.int64)
        raised_any = np.zeros(spec.keys, dtype=bool)
        by_facts_any = np.zeros(spec.keys, dtype=bool)
        for _, new, raised, errors, events, by_facts in results:
            np.add.at(counts, new, 1)
            raised_any[raised] = True
            by_facts_any[by_facts] = True
            outcome.errors.update(errors)
        outcome.new_twice = int((counts > 1).sum())
        outcome.twice_by_facts = int(((counts > 1) & by_facts_any).sum())
        outcome.never_new = int(((counts == 0) & ~raised_any).sum())
        outcome.raised_keys = int(raised_any.sum())
        outcome.raised_batches = sum(outcome.errors.values())
        outcome.faults = (proxy.faults if proxy else 0) + strike.count
    finally:
        if proxy:
            proxy.close()
        for s in servers:
            s.stop()
    outcome.seconds = time.monotonic() - start
    return outcome


def describe(o: Outcome) -> str:
    errors = ", ".join(f"{n} {e}" for e, n in sorted(o.errors.items())) or "none"
    events = ", ".join(f"{n} {e}" for e, n in sorted(o.events.items())) or "none"
    twice = f" ({o.twice_by_facts} by a raising call's facts)" if o.new_twice else ""
    return (f"{'/'.join(o.case)}: {o.keys:,} keys x 4 processes, {o.faults} faults ({events}): {o.new_twice} "
            f"new twice{twice}, {o.never_new} never new; {o.raised_batches} batches raised ({o.raised_keys:,} keys "
            f"exempt: {errors}); {o.seconds:.1f} s")


def table_of(rows: list[list[Outcome]]) -> list[str]:
    table = ["| backend | kind | fault | runs | faults struck | new twice | never new | batches raised | keys exempt "
             "| errors |", "|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for outs in rows:
        errors: Counter[str] = Counter()
        for o in outs:
            errors.update(o.errors)
        shown = ", ".join(f"{n} {e.split(':')[0]}" for e, n in sorted(errors.items())) or "none"
        table.append(f"| {' | '.join(outs[0].case)} | {len(outs)} | {sum(o.faults for o in outs)} | "
                     f"{sum(o.new_twice for o in outs)} | {sum(o.never_new for o in outs)} | "
                     f"{sum(o.raised_batches for o in outs)} | {sum(o.raised_keys for o in outs):,} | {shown} |")
    return table


def write_results(rows: list[list[Outcome]], keys: int, total: int, minutes: float) -> None:
    """Write the "redis-faults" section of benchmarks/RESULTS.md; called after every case, so a run that is
    stopped part-way still records the cases it finished (and says how many of the total those are)."""
    import datetime
    import platform

    import redis

    import bloomline

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from _sections import write_section

    ok = all(o.ok for outs in rows for o in outs)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    version = subprocess.run([need("redis-server"), "--version"], capture_output=True, text=True).stdout.split()
    done = "" if len(rows) == total else f" **Part-way: {len(rows)} of {total} cases finished so far.**"
    head = [
        "## Redis under faults",
        "",
        f"`python tests/redis_harness.py {' '.join(sys.argv[1:])}`, {when}, "
        f"{minutes:.0f} minutes; {platform.machine()}, {os.cpu_count()} cores, "
        f"redis-server {version[2] if len(version) > 2 else '?'}, redis-py {redis.__version__}, "
        f"bloomline {bloomline.__version__}. Each run: four processes add the same {keys:,} keys, each in "
        "an order of its own, in batches, while the fault strikes; then every key must have been new to "
        "exactly one process, or be one that a raising call had no answer for (its `unknown`, or the whole batch "
        "when it says nothing: those keys are exempt, the caller was told to treat them as new); the keys a "
        "raising call did answer are held to exactly once too. "
        "The faults: a reply stalled past the socket timeout, dropped, the connection cut before or after the "
        "command ran (a loopback proxy); the scripts flushed; a key deleted, expired or evicted; the filter "
        "dropped and made again under the writers; a failover after a lost reply (wait_replicas=1; a batch that "
        "raised NotDurable is exempt); a replica without the module joined and promoted; a cluster slot migrated "
        "mid-run, or a master out of memory for half a second. "
        + ("Every run held." if ok else "**Some runs failed** (new twice or never new).")
        + done,
        "",
    ]
    write_section("redis-faults", "\n".join(head + table_of(rows)))


def main() -> int:
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description="Run the Redis fault harness at full scale.")
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--case", action="append", help="backend/kind/fault (default: every case)")
    parser.add_argument("--write", action="store_true",
                        help='write the table to benchmarks/RESULTS.md (section "redis-faults"), after each case')
    args = parser.parse_args()
    began = time.monotonic()
    chosen = [tuple(c.split("/")) for c in args.case] if args.case else cases()
    rows = []
    for backend, kind, fault in chosen:
        outs = []
        for r in range(args.runs):
            with tempfile.TemporaryDirectory() as tmp:
                o = run(Spec(backend, kind, fault, args.keys, 0, seed=r), Path(tmp))
            print(describe(o), flush=True)
            outs.append(o)
        rows.append(outs)
        if args.write:
            write_results(rows, args.keys, len(chosen), (time.monotonic() - began) / 60)
    print("\n" + "\n".join(table_of(rows)))
    return 0 if all(o.ok for outs in rows for o in outs) else 1


if __name__ == "__main__":
    sys.exit(main())
