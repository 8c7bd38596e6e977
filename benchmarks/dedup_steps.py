"""Where `bloomline dedup --threads N` spends its time: the command's own
loop (read a block, add_lines, select_lines, write) timed step by step in
one process, beside the interpreter's start with bloomline imported, and
the whole command.

    python benchmarks/dedup_steps.py [--mb 400] [--threads 1,16] [--out FILE.json]

Each thread count's steps are summed over the file's blocks (the blocks as
the CLI cuts them); the output of every thread count is compared byte for
byte with one thread's. benchmarks/NOTES.md quotes it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def steps(src: Path, out: Path, threads: int) -> dict[str, float]:
    """One pass of dedup's loop over src, as `bloomline dedup` makes it."""
    import bloomline
    from bloomline.cli._input import LineBlocks
    from bloomline.cli._local import DEDUP_CAPACITY, DEDUP_ERROR_RATE, _line_blocks

    spent = {"read": 0.0, "add_lines": 0.0, "select_lines": 0.0, "write": 0.0}
    blocks: LineBlocks = _line_blocks([str(src)], threads)
    f = bloomline.BloomFilter(DEDUP_CAPACITY, DEDUP_ERROR_RATE, layout="blocked")  # dedup's own filter
    start = time.perf_counter()
    with open(out, "wb") as sink:
        it = iter(blocks)
        while True:
            t0 = time.perf_counter()
            block = next(it, None)
            t1 = time.perf_counter()
            spent["read"] += t1 - t0
            if block is None:
                break
            new = f.add_lines(block, threads=threads)
            t2 = time.perf_counter()
            kept = bloomline.select_lines(block, new, threads=threads)
            t3 = time.perf_counter()
            sink.write(kept)
            t4 = time.perf_counter()
            spent["add_lines"] += t2 - t1
            spent["select_lines"] += t3 - t2
            spent["write"] += t4 - t3
    spent["loop"] = time.perf_counter() - start
    return spent


def start_up() -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import bloomline.cli"], check=True)
    return time.perf_counter() - t0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=400)
    ap.add_argument("--threads", default=f"1,{os.cpu_count() or 1}")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(HERE))
    from many_cores import dedup_command, machine, write_url_file

    counts = [int(t) for t in args.threads.split(",")]
    result: dict[str, Any] = {"machine": machine(), "runs": []}
    with tempfile.TemporaryDirectory(prefix="bloomline-dedup-") as tmp:
        d = Path(tmp)
        src = d / "urls.txt"
        write_url_file(src, int(args.mb * 1e6))
        result["bytes"] = src.stat().st_size
        result["start_up_s"] = statistics.median(start_up() for _ in range(5))
        per: dict[int, list[dict[str, float]]] = {t: [] for t in counts}
        whole: dict[int, list[float]] = {t: [] for t in counts}
        for _ in range(args.repeats):
            for t in counts:  # taking turns
                per[t].append(steps(src, d / f"steps{t}.txt", t))
                whole[t].append(dedup_command(src, d / f"out{t}.txt", t))
        same = all(open(d / f"out{t}.txt", "rb").read() == open(d / f"out{counts[0]}.txt", "rb").read()
                   and open(d / f"steps{t}.txt", "rb").read() == open(d / f"out{counts[0]}.txt", "rb").read()
                   for t in counts)
    for t in counts:
        row = {"threads": t, "command_s": statistics.median(whole[t])}
        row.update({k: statistics.median(x[k] for x in per[t]) for k in per[t][0]})
        result["runs"].append(row)
        print(json.dumps(row), flush=True)
    result["identical"] = same
    print(f"start-up {result['start_up_s']:.3f} s; outputs identical: {same}", flush=True)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
