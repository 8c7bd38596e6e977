"""The Redis module's kept answers: is their memory bounded and visible?

    python benchmarks/kept_answers_bench.py [--adds 2000000] [--write]

Starts a redis-server with bloomline's module and AOF on, sends `--adds`
single-key BLOOMLINE.ADD commands (pipelined) with mixed answer TTLs (one
in ten kept for a day, the rest for 2 s), and reads, after the adds, after
the short answers expire, and after an AOF reload (DEBUG LOADAOF): the
answers kept (INFO bloomline_kept), the module's bytes, Redis's
used_memory and the server's RSS. --write puts the table into
benchmarks/RESULTS.md between the kept-answers markers.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import redis

from bloomline import __version__, _core
from bloomline.redis import module_path

HERE = Path(__file__).resolve().parent
NUM_BITS = 1 << 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def blob_of(key: int) -> bytes:
    _, _, _, bodies, _ = _core.redis_batch(np.array([key], dtype=np.uint64), NUM_BITS, 7)
    return bytes(bodies[0]).split(b"\r\n", 1)[1][:-2]


def reading(r: redis.Redis, pid: int) -> dict[str, float]:
    kept = r.info("bloomline_kept")
    with open(f"/proc/{pid}/status") as f:
        rss_kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return {"answers": int(kept["bloomline_answers"]), "kept_mb": int(kept["bloomline_bytes"]) / 1e6,
            "used_mb": r.info("memory")["used_memory"] / 1e6, "rss_mb": rss_kb / 1e3}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--adds", type=int, default=2_000_000)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    port = free_port()
    server = subprocess.Popen([shutil.which("redis-server") or "redis-server", "--port", str(port), "--bind",
                               "127.0.0.1", "--save", "", "--appendonly", "yes", "--appendfsync", "no",
                               "--enable-debug-command", "local", "--dir", str(tmp), "--loadmodule", module_path()],
                              stdout=subprocess.DEVNULL)
    rows: list[tuple[str, dict[str, float]]] = []
    try:
        r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=600)
        for _ in range(100):
            try:
                r.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.1)
        r.set("s", bytes(NUM_BITS // 8))
        r.set("c", 0)
        rows.append(("empty", reading(r, server.pid)))
        blobs = [blob_of(i) for i in range(1000)]
        start = time.perf_counter()
        for lo in range(0, args.adds, 10_000):
            with r.pipeline(transaction=False) as p:
                for i in range(lo, min(lo + 10_000, args.adds)):
                    ttl = 86_400_000 if i % 10 == 0 else 2_000
                    p.execute_command("BLOOMLINE.ADD", "s", "c", f"answer-{i:010d}", ttl, "F", blobs[i % 1000])
                p.execute()
        took = time.perf_counter() - start
        rows.append((f"after {args.adds:,} adds ({took:.0f} s)", reading(r, server.pid)))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and r.info("bloomline_kept")["bloomline_answers"] > args.adds // 10 + 10:
            time.sleep(0.5)
        rows.append(("short answers expired (idle)", reading(r, server.pid)))
        r.execute_command("DEBUG", "LOADAOF")
        rows.append(("after an AOF reload", reading(r, server.pid)))
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    lines = [f"`kept_answers_bench.py --adds {args.adds}`: one in ten answers kept for a day, the rest for 2 s; "
             f"redis-server {subprocess.run(['redis-server', '--version'], capture_output=True, text=True).stdout.split()[2]}, "
             f"bloomline {__version__}, Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs.",
             "", "| when | answers kept | module bytes (MB) | used_memory (MB) | RSS (MB) |", "|---|---:|---:|---:|---:|"]
    for label, v in rows:
        lines.append(f"| {label} | {v['answers']:,} | {v['kept_mb']:.1f} | {v['used_mb']:.1f} | {v['rss_mb']:.1f} |")
    table = "\n".join(lines)
    print(table)
    if args.write:
        path = HERE / "RESULTS.md"
        text = path.read_text()
        begin, end = "<!-- kept-answers:begin -->", "<!-- kept-answers:end -->"
        block = f"{begin}\n{table}\n{end}"
        if begin in text:
            text = text[:text.index(begin)] + block + text[text.index(end) + len(end):]
        else:
            text = text.rstrip("\n") + "\n\n## Redis: the module's kept answers\n\n" + block + "\n"
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
