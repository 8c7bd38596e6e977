"""Adds on every core of a many-core machine: threads= against one thread,
a 1-billion-key build against the threaded atomic-OR probe, and
`bloomline dedup --threads N` on a 400 MB URL file.

    python benchmarks/many_cores.py measure --out DIR [--scale 1.0]
        measures (about 3 minutes on 16 cores at scale 1) and writes
        DIR/many_cores.json; --scale shrinks every size for a trial run
    python benchmarks/many_cores.py steps OLD=DIR NEW=DIR --out DIR
        builds side by side (each DIR holds a built bloomline package), at
        1 thread and every CPU, taking turns; writes DIR/many_cores_steps.json
    python benchmarks/many_cores.py write [benchmarks/many_cores.json]
        writes the "many-cores" section of benchmarks/RESULTS.md from it
        (and from benchmarks/many_cores_steps.json: earlier builds, each
        measured beside the next in one run)

Every threaded result is checked against one thread's in the same run:
the add answers and the filter's bytes, and dedup's output byte for byte.
The probe is benchmarks/threads_probe.cpp, compiled by this script.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import numpy as np

HERE = Path(__file__).resolve().parent
TARGET_SCALING = 8.0  # adds at 16 threads against one
TARGET_PROBE = 1.5  # a 1B-key build against the 16-thread probe
TARGET_DEDUP_GBS = 1.0
DEDUP_STEPS = HERE / "dedup_steps.json"  # benchmarks/dedup_steps.py's figures, shown beside dedup's


def thread_counts() -> list[int]:
    """1, 2, 4, 8, 16 and every CPU; BLOOMLINE_MANY_CORES_THREADS (say "1,16") picks fewer."""
    cpus = os.cpu_count() or 1
    picked = os.environ.get("BLOOMLINE_MANY_CORES_THREADS")
    if picked:
        return sorted({min(int(t), cpus) for t in picked.split(",")})
    return sorted({t for t in (1, 2, 4, 8, 16) if t <= cpus} | {cpus})


def machine() -> dict[str, Any]:
    cpu = platform.processor() or "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    kb = int(Path("/proc/meminfo").read_text().split()[1])
    import bloomline

    return {"cpu": cpu, "cpus": os.cpu_count(), "memory_gib": round(kb / 2**20), "kernel": platform.release(),
            "python": platform.python_version(), "numpy": np.__version__, "bloomline": bloomline.__version__,
            "when": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def seconds(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def random_u64(n: int, seed: int) -> np.ndarray:
    return np.random.PCG64(seed).random_raw(n).astype(np.uint64, copy=False)


def url_array(n: int, seed: int) -> np.ndarray:
    """n distinct URL-like keys, 55 to 65 bytes, as a NumPy S array, built
    without a Python loop: a template whose host number and 12 hex digits
    of id are filled in column by column; the id is the key's index times
    an odd constant mod 2**48 (distinct), its tail cut at random."""
    template = b"https://www.site00000.example.com/articles/000000000000/page.html"
    width = len(template)
    rng = np.random.default_rng(seed)
    m = np.empty((n, width), dtype=np.uint8)
    m[:] = np.frombuffer(template, dtype=np.uint8)
    host = rng.integers(0, 100_000, n)
    for j in range(5):
        m[:, 20 - j] = 48 + (host // 10**j) % 10
    ident = (np.arange(n, dtype=np.uint64) * np.uint64(0x9E3779B97F4B)) & np.uint64((1 << 48) - 1)
    hexdig = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    for j in range(12):
        m[:, 54 - j] = hexdig[((ident >> np.uint64(4 * j)) & np.uint64(15)).astype(np.intp)]
    cut = rng.integers(0, 11, n)
    cols = np.arange(width)
    m[cols[None, :] >= (width - cut)[:, None]] = 0
    return m.view(f"S{width}").ravel()


def add_scaling(name: str, keys: Any, capacity: int, layout: str, repeats: int) -> dict[str, Any]:
    """add_many(keys, threads=t) into a fresh filter (pages touched first,
    so page faults are not counted), thread counts taking turns; then the
    same for contains_many on the filled filter. Checks each thread
    count's answers and bytes against one thread's."""
    import bloomline

    counts = thread_counts()
    n = len(keys)
    add: dict[int, list[float]] = {t: [] for t in counts}
    look: dict[int, list[float]] = {t: [] for t in counts}
    reference_answers: Any = None
    reference_bits: Any = None
    same = True
    for _ in range(repeats):
        for t in counts:
            bf = bloomline.BloomFilter(capacity, 0.01, layout=layout)
            bf.clear()
            out: list[Any] = []
            add[t].append(seconds(lambda: out.append(bf.add_many(keys, threads=t))))
            look[t].append(seconds(lambda: bf.contains_many(keys, threads=t)))
            bits = np.frombuffer(bf, dtype=np.uint8)
            if reference_answers is None:
                reference_answers, reference_bits = out[0], bits.copy()
            else:
                same = same and bool(np.array_equal(out[0], reference_answers)) and bool(
                    np.array_equal(bits, reference_bits))
            del bf, bits, out
        print(f"{name} {layout}: " + ", ".join(f"{t}: {add[t][-1] / n * 1e9:.1f}" for t in counts), flush=True)
    rows = []
    for t in counts:
        rows.append({"threads": t, "add_ns": statistics.median(add[t]) / n * 1e9,
                     "add_speedup": statistics.median(a / b for a, b in zip(add[counts[0]], add[t])),
                     "contains_ns": statistics.median(look[t]) / n * 1e9,
                     "contains_speedup": statistics.median(a / b for a, b in zip(look[counts[0]], look[t]))})
    return {"keys": name, "n": n, "layout": layout, "capacity": capacity, "repeats": repeats,
            "mb": bloomline.BloomFilter(capacity, 0.01, layout=layout).nbytes / 1e6, "rows": rows,
            "same_as_one_thread": same}


def build_probe(tmp: Path) -> Path:
    exe = tmp / "threads_probe"
    subprocess.run(["g++", "-O3", "-std=c++17", "-pthread", str(HERE / "threads_probe.cpp"), "-o", str(exe)],
                   check=True)
    return exe


def probe(exe: Path, size: int, keys: int, repeats: int, counts: list[int]) -> list[dict[str, Any]]:
    out = subprocess.run([str(exe), str(size), str(keys), str(repeats), *map(str, counts)], check=True,
                         capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def billion(exe: Path, n: int) -> dict[str, Any]:
    """A 1B-key build on every core, from a fresh filter as a user makes it
    (its page faults counted), against the probe on an array of the same
    size on as many threads."""
    import bloomline

    cpus = os.cpu_count() or 1
    keys = random_u64(n, 11)
    bf = bloomline.BloomFilter(n, 0.01)
    size = bf.nbytes
    build = seconds(lambda: bf.add_many(keys, threads=cpus))
    approx = bf.approx_count
    sample = keys[:: max(1, n // 1_000_000)]
    all_found = bool(bf.contains_many(sample).all())
    absent = random_u64(1_000_000, 12)
    fp = float(bf.contains_many(absent, threads=cpus).mean())
    # The same filter again, pages touched first: the add alone.
    bf.clear()
    add_only = seconds(lambda: bf.add_many(keys, threads=cpus))
    before = bf.to_bytes() if n <= 10_000_000 else None  # (a trial run checks update's bits too)
    # A build that asks for no answers: update() into a fresh filter.
    del bf
    bf = bloomline.BloomFilter(n, 0.01)
    update = seconds(lambda: bf.update(keys, threads=cpus))
    same = bf.approx_count == approx and (before is None or bf.to_bytes() == before)
    del bf, keys
    p = probe(exe, size, n, 1, [cpus])[0]
    return {"n": n, "threads": cpus, "nbytes": size, "build_s": build, "add_only_s": add_only,
            "update_s": update, "update_same": same,
            "approx_count": approx, "all_found": all_found, "fp_rate": fp, "probe": p}


def write_url_file(path: Path, byte_target: int) -> int:
    """About byte_target bytes of URL lines (drawn at random, with repeats:
    about half are first sightings), read once into the page cache; returns
    the lines written."""
    lines = byte_target // 61
    distinct = lines * 6 // 10
    urls = url_array(distinct, 40)
    order = np.random.default_rng(41).integers(0, distinct, lines)  # draws with repeats
    with open(path, "wb") as out:
        for lo in range(0, lines, 1_000_000):
            out.write(b"\n".join(urls[order[lo: lo + 1_000_000]].tolist()) + b"\n")
    path.read_bytes()  # into the page cache
    return lines


def dedup_command(src: Path, out: Path, threads: int) -> float:
    """Seconds of `python -m bloomline dedup --threads N src > out`, Python's start included."""
    with open(out, "wb") as sink:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "bloomline", "dedup", "--threads", str(threads), str(src)], stdout=sink,
                       stderr=subprocess.DEVNULL, check=True)
        return time.perf_counter() - start


def dedup(byte_target: int, repeats: int) -> dict[str, Any]:
    """A URL file of about byte_target bytes (URLs drawn at random, with repeats), in the
    page cache; `python -m bloomline dedup --threads t` on it, output to a
    file, thread counts taking turns. Outputs compared byte for byte."""
    counts = thread_counts()
    with tempfile.TemporaryDirectory(prefix="bloomline-many-") as tmp:
        d = Path(tmp)
        src = d / "urls.txt"
        lines = write_url_file(src, byte_target)
        size = src.stat().st_size
        times: dict[int, list[float]] = {t: [] for t in counts}
        for _ in range(repeats):
            for t in counts:
                times[t].append(dedup_command(src, d / f"out{t}.txt", t))
        identical = all(filecmp.cmp(d / f"out{counts[0]}.txt", d / f"out{t}.txt", shallow=False) for t in counts)
        written = sum(1 for _ in open(d / f"out{counts[0]}.txt", "rb"))
    return {"bytes": size, "lines": lines, "written": written, "repeats": repeats,
            "runs": [{"threads": t, "wall_s": statistics.median(times[t]),
                      "gb_per_s": size / statistics.median(times[t]) / 1e9} for t in counts],
            "identical": identical}


PARTS = ("probe", "uint64", "uint64_standard", "S", "billion", "dedup")


def measure(out_dir: Path, scale: float, parts: list[str], repeats: int) -> None:
    def sized(n: float) -> int:
        return max(10_000, int(n * scale))

    result: dict[str, Any] = {"machine": machine(), "scale": scale}
    print(result["machine"], flush=True)
    out_dir.mkdir(parents=True, exist_ok=True)

    def keep(part: str, value: Any) -> None:  # written as it goes: a run cut short keeps its parts
        result[part] = value
        print(part, json.dumps(value), flush=True)
        (out_dir / "many_cores.json").write_text(json.dumps(result, indent=1) + "\n")

    import bloomline

    with tempfile.TemporaryDirectory() as tmp:
        exe = build_probe(Path(tmp)) if {"probe", "billion"} & set(parts) else Path()
        if "probe" in parts:
            size_1b = bloomline.BloomFilter(sized(1e9), 0.01).nbytes
            keep("probe", probe(exe, size_1b, sized(1e8), repeats, thread_counts()))
        if {"uint64", "uint64_standard"} & set(parts):
            ints = random_u64(sized(2e8), 8)
            if "uint64" in parts:
                keep("uint64", add_scaling("uint64", ints, sized(2e8), "blocked", repeats))
            if "uint64_standard" in parts:
                keep("uint64_standard", add_scaling("uint64", ints[: sized(5e7)], sized(5e7), "standard", 1))
            del ints
        if "S" in parts:
            keep("S", add_scaling("S (URLs)", url_array(sized(2e7), 9), sized(2e7), "blocked", repeats))
        if "billion" in parts:
            keep("billion", billion(exe, sized(1e9)))
    if "dedup" in parts:
        keep("dedup", dedup(sized(4e8), max(2, repeats)))


def steps(builds: list[tuple[str, Path]], out_dir: Path, parts: list[str], rounds: int, repeats: int,
          scale: float) -> None:
    """Builds side by side: `measure` of each build (PYTHONPATH=its folder)
    in its own process, at 1 thread and every CPU, the builds taking turns
    for `rounds` rounds; writes out_dir/many_cores_steps.json, each build's
    parts from its rounds' medians."""
    env_threads = f"1,{os.cpu_count() or 1}"
    results: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in builds}
    for r in range(rounds):
        for name, folder in builds:
            out = out_dir / f"{name}-{r}"
            env = dict(os.environ, PYTHONPATH=str(folder), BLOOMLINE_MANY_CORES_THREADS=env_threads)
            subprocess.run([sys.executable, __file__, "measure", "--out", str(out), "--parts", ",".join(parts),
                            "--repeats", str(repeats), "--scale", str(scale)], env=env, check=True)
            results[name].append(json.loads((out / "many_cores.json").read_text()))
    merged: dict[str, Any] = {}
    for name, runs in results.items():
        build: dict[str, Any] = {"machine": runs[0]["machine"], "rounds": len(runs)}
        for part in ("uint64", "S"):
            if part in runs[0]:
                rows = []
                for i, row in enumerate(runs[0][part]["rows"]):
                    rows.append({k: (statistics.median(x[part]["rows"][i][k] for x in runs) if k != "threads" else v)
                                 for k, v in row.items()})
                build[part] = dict(runs[0][part], rows=rows,
                                   same_as_one_thread=all(x[part]["same_as_one_thread"] for x in runs))
        if "dedup" in runs[0]:
            d = runs[0]["dedup"]
            build["dedup"] = dict(d, identical=all(x["dedup"]["identical"] for x in runs), runs=[
                {"threads": row["threads"], "wall_s": statistics.median(x["dedup"]["runs"][i]["wall_s"] for x in runs),
                 "gb_per_s": statistics.median(x["dedup"]["runs"][i]["gb_per_s"] for x in runs)}
                for i, row in enumerate(d["runs"])])
        merged[name] = build
    (out_dir / "many_cores_steps.json").write_text(json.dumps(merged, indent=1) + "\n")
    print(json.dumps({n: {p: b[p]["rows"] if p != "dedup" else b[p]["runs"] for p in b if p in ("uint64", "S", "dedup")}
                      for n, b in merged.items()}), flush=True)


def verdict(ok: bool) -> str:
    return "**met**" if ok else "**missed**"


def steps_table(steps: dict[str, Any]) -> list[str]:
    """The threaded add's steps, each measured beside the one before in one
    run (many_cores_steps.json): add_many ns/key and speed-up over one
    thread, at 1 and 16 threads."""
    lines = ["### The steps, each beside the one before in one run", "", steps["about"], "",
             "| run | build | keys | add ns/key, 1 thread | 16 threads | speed-up |", "|---|---|---|---:|---:|---:|"]
    runs = sorted(k for k in steps if k.startswith("run"))
    for run in runs:
        for build, r in steps[run].items():
            for part in ("uint64", "S"):
                if part not in r:
                    continue
                rows = {row["threads"]: row for row in r[part]["rows"]}
                top = max(rows)
                lines.append(f"| {run} | {build} | {r[part]['keys']} | {rows[1]['add_ns']:.1f} | "
                             f"{rows[top]['add_ns']:.2f} | {rows[top]['add_speedup']:.2f}x |")
    dedups = [(run, build, r["dedup"]) for run in runs for build, r in steps[run].items() if "dedup" in r]
    if dedups:
        lines += ["", "`bloomline dedup` on the same 400 MB of URL lines in those runs, the whole command:", "",
                  "| run | build | 1 thread, s | 16 threads, s | GB/s at 16 |", "|---|---|---:|---:|---:|"]
        for run, build, d in dedups:
            rows = {row["threads"]: row for row in d["runs"]}
            top = max(rows)
            lines.append(f"| {run} | {build} | {rows[1]['wall_s']:.2f} | {rows[top]['wall_s']:.2f} | "
                         f"{rows[top]['gb_per_s']:.2f} |")
    return lines + [""]


def dedup_steps_table(d: dict[str, Any]) -> list[str]:
    """dedup_steps.json: the whole command per interpreter and build, the
    interpreters' start, and the loop's steps."""
    m = d["machine"]
    lines = [f"### `bloomline dedup`: builds and interpreters side by side ({m['when']})", "",
             f"`python benchmarks/dedup_steps.py`, {d['bytes'] / 1e6:.0f} MB of URL lines ({d['lines']:,} lines, "
             f"{d['written']:,} written), in the page cache; every (interpreter, build, threads) taking turns, medians "
             f"of {d['repeats']}; the whole command, output to a file. Builds: " + ", ".join(d["builds"]) + "; "
             "interpreters: " + ", ".join(d["pythons"]) + ".", "",
             "| interpreter | build | threads | wall s | GB/s |", "|---|---|---:|---:|---:|"]
    lines += [f"| {c['python']} | {c['build']} | {c['threads']} | {c['wall_s']:.3f} | {c['gb_per_s']:.2f} |"
              for c in d["commands"]]
    lines += ["", f"The interpreter's start (medians of {d.get('start_runs', 7)}, seconds): bare, NumPy imported, "
              "bloomline's CLI imported:", "",
              "| interpreter | bare | numpy | " + " | ".join(f"cli ({b})" for b in d["builds"]) + " |",
              "|---|---:|---:|" + "---:|" * len(d["builds"])]
    lines += [f"| {s['python']} | {s['bare']:.3f} | {s['numpy']:.3f} | "
              + " | ".join(f"{s['cli_' + b]:.3f}" for b in d["builds"]) + " |" for s in d["start_up"]]
    of = f", the {d['steps_of']} build's" if "steps_of" in d else ""
    lines += ["", f"dedup's loop in one process{of}, step by step, no overlap (seconds, medians): separate = "
              "add_lines then select_lines, fused = dedup_lines (its add column holds the add and the copy):", "",
              "| loop | threads | read | add | select | write | loop |", "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {s['kind']} | {s['threads']} | {s['read']:.3f} | {s['add']:.3f} | {s['select']:.3f} | "
              f"{s['write']:.3f} | {s['loop']:.3f} |" for s in d["steps"]]
    lines += ["", f"Outputs identical byte for byte: **{'yes' if d['identical'] else 'NO'}**.", ""]
    return lines


def write(path: Path, steps_path: Path) -> None:
    sys.path.insert(0, str(HERE))
    from _sections import write_section

    r = json.loads(path.read_text())
    m = r["machine"]
    top = max(row["threads"] for row in r["uint64"]["rows"])
    lines = [
        f"## Adds on every core: a {m['cpus']}-CPU machine",
        "",
        f"`python benchmarks/many_cores.py measure`, {m['when']}, on a lent machine: {m['cpu']}, {m['cpus']} CPUs, "
        f"{m['memory_gib']} GiB, Linux {m['kernel']}, Python {m['python']}, NumPy {m['numpy']}, bloomline "
        f"{m['bloomline']}, built there by pip. Raw figures: benchmarks/many_cores.json.",
        *([""] + [f"- {parts}: {src}." for parts, src in r["parts_from"].items()] if "parts_from" in r else []),
        "",
        "### threads= on add_many and contains_many",
        "",
        "Fresh filter at 1% per add (pages touched first); thread counts take turns within each repeat; "
        "ns/key and speed-ups are medians (speed-up: of per-repeat ratios to one thread). Every thread "
        "count's answers and filter bytes were compared with one thread's in the same run.",
        "",
        "| keys | layout | filter MB | threads | add_many ns/key | speed-up | contains_many ns/key | speed-up |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for part in ("uint64", "uint64_standard", "S"):
        s = r[part]
        for row in s["rows"]:
            lines.append(f"| {s['n']:,} {s['keys']} | {s['layout']} | {s['mb']:.0f} | {row['threads']} | "
                         f"{row['add_ns']:.1f} | {row['add_speedup']:.2f}x | {row['contains_ns']:.1f} | "
                         f"{row['contains_speedup']:.2f}x |")
    same = all(r[p]["same_as_one_thread"] for p in ("uint64", "uint64_standard", "S"))
    lines += ["", f"Answers and bytes equal to one thread's at every count: **{'yes' if same else 'NO'}**.", ""]
    if steps_path.exists():
        lines += steps_table(json.loads(steps_path.read_text()))
    lines += ["The probe (`threads_probe.cpp`, one random atomic OR, or read, per key, on an array the size "
              f"of a 1B-key filter, {r['probe'][0]['size_bytes'] / 1e9:.2f} GB):", "",
              "| threads | atomic OR ns/key | read ns/key |", "|---:|---:|---:|"]
    lines += [f"| {p['threads']} | {p['atomic_or_ns_per_key']:.2f} | {p['read_ns_per_key']:.2f} |" for p in r["probe"]]
    b = r["billion"]
    probe_s = b["probe"]["atomic_or_ns_per_key"] * b["n"] / 1e9
    lines += [
        "",
        f"### A {b['n']:,}-key build on {b['threads']} threads",
        "",
        "| step | seconds | ns/key |",
        "|---|---:|---:|",
        f"| add_many(threads={b['threads']}) into a fresh BloomFilter({b['n']:,}, 0.01), "
        f"{b['nbytes'] / 1e9:.2f} GB, its page faults counted | {b['build_s']:.2f} | {b['build_s'] / b['n'] * 1e9:.2f} |",
        f"| the same add into the filter again, pages touched | {b['add_only_s']:.2f} | "
        f"{b['add_only_s'] / b['n'] * 1e9:.2f} |",
        *([f"| update(keys, threads={b['threads']}) into a fresh filter (no answers made), its page faults counted | "
           f"{b['update_s']:.2f} | {b['update_s'] / b['n'] * 1e9:.2f} |"] if "update_s" in b else []),
        f"| the probe: one atomic OR per key, {b['threads']} threads, same size | {probe_s:.2f} | "
        f"{b['probe']['atomic_or_ns_per_key']:.2f} |",
        "",
        f"approx_count {round(b['approx_count']):,}; a sample of 1,000,000 added keys all found: "
        f"{'yes' if b['all_found'] else 'NO'}; false-positive rate on 1,000,000 absent keys {b['fp_rate']:.4%}"
        + (f"; update's filter the same as add_many's (approx_count): {'yes' if b['update_same'] else 'NO'}."
           if "update_s" in b else "."),
        "",
    ]
    d = r["dedup"]
    lines += [
        f"### `bloomline dedup --threads N`, {d['bytes'] / 1e6:.0f} MB of URL lines",
        "",
        f"{d['lines']:,} lines (URLs drawn with repeats), {d['written']:,} written; the file in the page cache, output "
        f"to a file; median of {d['repeats']} runs each, taking turns; the whole command, Python's start included.",
        "",
        "| threads | wall s | GB/s |", "|---:|---:|---:|",
        *[f"| {x['threads']} | {x['wall_s']:.2f} | {x['gb_per_s']:.2f} |" for x in d["runs"]],
        "",
        f"Output identical byte for byte across thread counts: **{'yes' if d['identical'] else 'NO'}**.",
        "",
        *(dedup_steps_table(json.loads(DEDUP_STEPS.read_text())) if DEDUP_STEPS.exists() else []),
        "### Targets",
        "",
    ]
    for part, label in (("uint64", "uint64"), ("S", "S (URLs)")):
        row = next(x for x in r[part]["rows"] if x["threads"] == top)
        lines.append(f"- Adds at {top} threads at least {TARGET_SCALING:g}x one thread, {label}: "
                     f"{row['add_speedup']:.2f}x, {verdict(row['add_speedup'] >= TARGET_SCALING)}"
                     + (" in this run (see the note below)." if r.get("notes") else "."))
    ratio = b["build_s"] / probe_s
    by_update = b["update_s"] / probe_s if "update_s" in b else None
    lines.append(f"- A 1B-key build within {TARGET_PROBE:g}x of the {b['threads']}-thread probe: add_many {ratio:.2f}x "
                 f"({b['add_only_s'] / probe_s:.2f}x with the pages touched first)"
                 + (f", update {by_update:.2f}x" if by_update is not None else "") + ", "
                 + verdict(min(ratio, by_update or ratio) <= TARGET_PROBE) + ".")
    at_top = next(x["gb_per_s"] for x in d["runs"] if x["threads"] == top)
    best = max(d["runs"], key=lambda x: x["gb_per_s"])
    lines.append(f"- `dedup --threads {top}` at least {TARGET_DEDUP_GBS:g} GB/s: {at_top:.2f} GB/s (the best count, "
                 f"{best['threads']}: {best['gb_per_s']:.2f}), {verdict(at_top >= TARGET_DEDUP_GBS)}.")
    for n in r.get("notes", []):
        lines += ["", f"Note: {n}"]
    write_section("many-cores", "\n".join(lines))
    print("wrote the many-cores section of benchmarks/RESULTS.md")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("--scale", type=float, default=1.0)
    m.add_argument("--parts", default=",".join(PARTS), help="comma-separated, of: " + ", ".join(PARTS))
    m.add_argument("--repeats", type=int, default=3)
    st = sub.add_parser("steps")
    st.add_argument("builds", nargs="+", help="NAME=FOLDER, each folder holding a built bloomline package")
    st.add_argument("--out", type=Path, required=True)
    st.add_argument("--parts", default="uint64,S,dedup")
    st.add_argument("--rounds", type=int, default=2)
    st.add_argument("--repeats", type=int, default=2)
    st.add_argument("--scale", type=float, default=1.0)
    w = sub.add_parser("write")
    w.add_argument("json", type=Path, nargs="?", default=HERE / "many_cores.json")
    w.add_argument("--steps", type=Path, default=HERE / "many_cores_steps.json",
                   help="earlier builds measured beside each other (shown when the file exists)")
    args = ap.parse_args(argv)
    if args.cmd == "measure":
        parts = [p for p in args.parts.split(",") if p]
        unknown = sorted(set(parts) - set(PARTS))
        if unknown:
            ap.error(f"--parts: unknown {', '.join(unknown)}; the parts are {', '.join(PARTS)}")
        measure(args.out, args.scale, parts, args.repeats)
    elif args.cmd == "steps":
        builds = [(b.split("=", 1)[0], Path(b.split("=", 1)[1]).resolve()) for b in args.builds]
        steps(builds, args.out, [p for p in args.parts.split(",") if p], args.rounds, args.repeats, args.scale)
    else:
        write(args.json, args.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
