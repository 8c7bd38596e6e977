"""dedup_lines over one file in blocks of several sizes, on 1 and 2 threads (or --threads),
for each build given, the builds taking turns (each round a fresh process
per build); prints the fastest of each round's three passes, and at the end
the fastest and the median over the rounds. benchmarks/NOTES.md quotes it.

    python benchmarks/dedup_blocks.py DIR [DIR ...] [--mb 100] [--rounds 8] [--blocks 2,16] [--threads 1,2]

Each DIR holds a built `bloomline` package (PYTHONPATH for its process).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

CODE = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import bloomline
assert bloomline.__file__.startswith(sys.argv[1]), bloomline.__file__
data = open(sys.argv[2], "rb").read()
mv = memoryview(data)

def run(block, threads):
    f = bloomline.BloomFilter(10_000_000, 1e-6)  # dedup's default filter
    t = time.perf_counter()
    i, n = 0, len(data)
    while i < n:
        j = data.rfind(b"\n", i, i + block) + 1 if i + block < n else n
        f.dedup_lines(mv[i:j], threads=threads)
        i = j
    return time.perf_counter() - t

print(json.dumps({f"{mib} MiB, {t} thread(s)": min(run(mib << 20, t) for _ in range(3))
                  for mib in map(int, sys.argv[3].split(",")) for t in map(int, sys.argv[4].split(","))}))
"""


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("builds", nargs="+")
    ap.add_argument("--mb", type=float, default=100)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--blocks", default="2,16", help="block sizes in MiB")
    ap.add_argument("--threads", default="1,2", help="thread counts")
    ap.add_argument("--json", type=Path, help="also write every round's figures here")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(HERE))
    from many_cores import write_url_file

    times: dict[str, dict[str, list[float]]] = {b: {} for b in args.builds}
    with tempfile.TemporaryDirectory(prefix="bloomline-blocks-") as tmp:
        src = Path(tmp) / "urls.txt"
        write_url_file(src, int(args.mb * 1e6))
        for r in range(args.rounds):
            for build in args.builds:
                out = subprocess.run([sys.executable, "-c", CODE, build, str(src), args.blocks, args.threads],
                                     check=True, capture_output=True, text=True).stdout
                for what, seconds in json.loads(out).items():
                    times[build].setdefault(what, []).append(seconds)
                print(r, build, out.strip(), flush=True)
    for build, rows in times.items():
        for what, v in rows.items():
            print(f"{build}  {what}: fastest {min(v):.3f} s, median {statistics.median(v):.3f} s")
    if args.json:
        args.json.write_text(json.dumps({"mb": args.mb, "rounds": args.rounds, "times": times}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
