"""Two builds of bloomline's Redis module side by side: the server's time
per single RedisWindowedFilter add (INFO commandstats, usec_per_call of
BLOOMLINE.WADD), 8 rounds of 2,000 adds each in alternating order, one
redis-server per build on loopback. For a change to the module's windowed
add, measured against the build before it:

    python benchmarks/module_ab.py OLD.so NEW.so

(build each with `ninja -C build/mod bloomline_redis` at its commit).
Prints the medians and their ratio; benchmarks/NOTES.md quotes it."""

from __future__ import annotations

import argparse
import socket
import subprocess
import tempfile
import time

import numpy as np
import redis

from bloomline.redis import RedisWindowedFilter


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", help="the module build before the change (.so)")
    ap.add_argument("new", help="the module build after it (.so)")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--adds", type=int, default=2000)
    args = ap.parse_args()
    builds = {"old": args.old, "new": args.new}
    ports = {name: _free_port() for name in builds}
    with tempfile.TemporaryDirectory() as where:
        servers = [subprocess.Popen(["redis-server", "--port", str(ports[n]), "--bind", "127.0.0.1", "--save", "",
                                     "--appendonly", "no", "--dir", where, "--loadmodule", path],
                                    stdout=subprocess.DEVNULL) for n, path in builds.items()]
        try:
            clients = {n: redis.Redis(port=p) for n, p in ports.items()}
            deadline = time.monotonic() + 10
            for c in clients.values():
                while time.monotonic() < deadline:
                    try:
                        c.ping()
                        break
                    except redis.ConnectionError:
                        time.sleep(0.05)
            filters = {n: RedisWindowedFilter(c, "ab", 500_000, 0.01, window=3600, backend="module")
                       for n, c in clients.items()}
            per: dict[str, list[float]] = {n: [] for n in builds}
            for r in range(args.rounds):
                for n in (["old", "new"] if r % 2 else ["new", "old"]):
                    clients[n].config_resetstat()
                    for i in range(args.adds):
                        filters[n].add(f"k{r}-{i}")
                    per[n].append(float(clients[n].info("commandstats")["cmdstat_bloomline.wadd"]["usec_per_call"]))
        finally:
            for s in servers:
                s.kill()
                s.wait()
    for n in builds:
        print(f"{n}: {np.median(per[n]):.2f} us of server time per single add (median of {args.rounds} x {args.adds})")
    print(f"new / old: {np.median(per['new']) / np.median(per['old']):.3f}")


if __name__ == "__main__":
    main()
