"""Where `bloomline dedup --threads N` spends its time: the whole command
for each build and interpreter given, taking turns; the interpreter's start
(bare, with NumPy, with bloomline's CLI imported), a dedup of three lines
and the first filter a process sizes; and dedup's loop timed step by step
in this process.

    python benchmarks/dedup_steps.py [--mb 400] [--threads 1,16] [--repeats 3] [--start-runs 7]
        [--builds old=DIR,new=DIR] [--pythons machine=EXE,clean=EXE] [--out FILE.json]

--builds: folders each holding a built bloomline package (PYTHONPATH for
the commands); by default the bloomline this interpreter imports.
--pythons: interpreters to run the commands with (a fresh venv starts
faster than one with hundreds of packages); by default this one.

The steps, summed over the file's blocks as the CLI cuts them, for the
bloomline this process imports: "separate" is add_lines then select_lines
(two splits of each block), "fused" is dedup_lines (one); neither overlaps
the reads and writes, which the command does on threads of its own.
Every output is compared byte for byte with the first. benchmarks/NOTES.md
quotes it.
"""

from __future__ import annotations

import argparse
import filecmp
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


def loop_steps(src: Path, out: Path, threads: int, fused: bool) -> dict[str, float]:
    """One pass of dedup's loop over src, one step after another."""
    import bloomline
    from bloomline.cli._input import LineBlocks
    from bloomline.cli._local import DEDUP_CAPACITY, DEDUP_ERROR_RATE, _line_blocks

    spent = {"read": 0.0, "add": 0.0, "select": 0.0, "write": 0.0}
    blocks = _line_blocks([str(src)], threads)
    assert isinstance(blocks, LineBlocks)
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
            if fused:
                kept = f.dedup_lines(block, threads=threads)[0]
                t3 = t2 = time.perf_counter()
            else:
                new = f.add_lines(block, threads=threads)
                t2 = time.perf_counter()
                kept = bloomline.select_lines(block, new, threads=threads)
                t3 = time.perf_counter()
            sink.write(kept)
            t4 = time.perf_counter()
            spent["add"] += t2 - t1
            spent["select"] += t3 - t2
            spent["write"] += t4 - t3
    spent["loop"] = time.perf_counter() - start
    return spent


def seconds(cmd: list[str], env: dict[str, str], stdout: Any = subprocess.DEVNULL) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=stdout, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def pairs(spec: str | None, default: str) -> list[tuple[str, str]]:
    if not spec:
        return [("this", default)]
    return [(p.split("=", 1)[0], p.split("=", 1)[1]) for p in spec.split(",")]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=400)
    ap.add_argument("--threads", default=f"1,{os.cpu_count() or 1}")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--start-runs", type=int, default=7, help="runs of each interpreter start (default 7)")
    ap.add_argument("--builds", help="NAME=DIR,... (default: the bloomline this interpreter imports)")
    ap.add_argument("--pythons", help="NAME=EXE,... (default: this interpreter)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(HERE))
    from many_cores import machine, write_url_file

    counts = [int(t) for t in args.threads.split(",")]
    builds = pairs(args.builds, "")
    pythons = pairs(args.pythons, sys.executable)

    def env(folder: str) -> dict[str, str]:
        return dict(os.environ, PYTHONPATH=folder) if folder else dict(os.environ)

    result: dict[str, Any] = {"machine": machine(), "threads": counts, "repeats": args.repeats,
                              "start_runs": args.start_runs,
                              "builds": [b for b, _ in builds], "pythons": [p for p, _ in pythons]}
    with tempfile.TemporaryDirectory(prefix="bloomline-dedup-") as tmp:
        d = Path(tmp)
        src = d / "urls.txt"
        result["lines"] = write_url_file(src, int(args.mb * 1e6))
        result["bytes"] = src.stat().st_size
        # The interpreter's start: bare, with NumPy, with the CLI (each build's),
        # a dedup of three lines (each build's: the command's fixed cost),
        # taking turns, --start-runs each: medians, and the fastest (what other
        # work on the machine added least to).
        tiny = d / "tiny.txt"
        tiny.write_bytes(b"a\nb\na\n")
        start: list[dict[str, Any]] = []
        for pname, exe in pythons:
            start_runs: dict[str, list[float]] = {}
            starts = [("bare", [exe, "-c", "pass"], ""), ("numpy", [exe, "-c", "import numpy"], "")]
            for bname, folder in builds:
                starts += [(f"cli_{bname}", [exe, "-c", "import bloomline.cli"], folder),
                           (f"tiny_{bname}", [exe, "-m", "bloomline", "dedup", "-q", str(tiny)], folder)]
            for _ in range(args.start_runs):
                for what, cmd, folder in starts:
                    start_runs.setdefault(what, []).append(seconds(cmd, env(folder)))
            # The first filter a process sizes (dedup's default: 10M lines at
            # 1e-6), timed inside the process.
            first = "import time, bloomline; t = time.perf_counter(); bloomline.BloomFilter(10**7, 1e-6); " \
                    "print(time.perf_counter() - t)"
            for _ in range(args.start_runs):
                for bname, folder in builds:
                    start_runs.setdefault(f"first_filter_{bname}", []).append(float(subprocess.run(
                        [exe, "-c", first], env=env(folder), capture_output=True, text=True, check=True).stdout))
            row: dict[str, Any] = {"python": pname}
            row.update({what: statistics.median(v) for what, v in start_runs.items()})
            row.update({f"{what}_min": min(v) for what, v in start_runs.items()})
            start.append(row)
            print(json.dumps(row), flush=True)
        result["start_up"] = start
        # Whole commands, every (python, build, threads) taking turns in each repeat.
        combos = [(p, b, t) for p in pythons for b in builds for t in counts]
        times: dict[tuple[str, str, int], list[float]] = {(p[0], b[0], t): [] for p, b, t in combos}
        outs: list[Path] = []
        for r in range(args.repeats):
            for (pname, exe), (bname, folder), t in combos[r % len(combos):] + combos[: r % len(combos)]:
                out = d / f"out-{pname}-{bname}-{t}.txt"
                with open(out, "wb") as sink:
                    times[(pname, bname, t)].append(
                        seconds([exe, "-m", "bloomline", "dedup", "--threads", str(t), str(src)], env(folder), sink))
                outs.append(out)
        result["commands"] = [{"python": p, "build": b, "threads": t, "wall_s": statistics.median(v),
                               "gb_per_s": result["bytes"] / statistics.median(v) / 1e9, "runs_s": v}
                              for (p, b, t), v in times.items()]
        for row in result["commands"]:
            print(json.dumps(row), flush=True)
        # The loop's steps in this process, for the bloomline it imports.
        steps: list[dict[str, Any]] = []
        for fused in (False, True):
            for t in counts:
                runs = []
                for r in range(args.repeats):
                    out = d / f"steps-{fused}-{t}.txt"
                    runs.append(loop_steps(src, out, t, fused))
                    outs.append(out)
                row = {"kind": "fused" if fused else "separate", "threads": t}
                row.update({k: statistics.median(x[k] for x in runs) for k in runs[0]})
                steps.append(row)
                print(json.dumps(row), flush=True)
        result["steps"] = steps
        result["identical"] = all(filecmp.cmp(outs[0], o, shallow=False) for o in outs)
        result["written"] = sum(1 for _ in open(outs[0], "rb"))
    print(f"outputs identical: {result['identical']}", flush=True)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
