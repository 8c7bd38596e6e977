"""Bulk inputs: columns in every form, and `bloomline dedup`
against mawk and sort.

    python benchmarks/bulk_bench.py [inputs|dedup|all] [--lines N]

inputs: contains_many and add_many on the same 1,000,000 URL keys given as a
NumPy S array, a list of str, a NumPy U array, a pandas object Series, a
pandas 3 default str Series, pandas string[pyarrow], pyarrow string,
large_string and string_view arrays, and a polars Series. The forms are
timed in turn, round after round (7 rounds), and each form's median is
divided by the S array's median from the same rounds.

dedup: a file of 10,000,000 URL lines, 40% of them repeats (6,000,000
distinct; every repeat comes after its first sighting at a random place),
through `bloomline dedup` (its default filter: 10M keys at 1e-6), mawk's
`!seen[$0]++` and `LC_ALL=C sort -u`, each writing to a file. Wall time and
peak RSS come from /usr/bin/time -v. bloomline's output is checked against
mawk's: the same lines in the same order, except the lines it dropped as
false positives, which are counted.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _sections import write_section  # noqa: E402
from run import machine as machine_facts  # noqa: E402

ROUNDS = 11


def url_keys(n: int, seed: int = 20) -> list[str]:
    rng = np.random.default_rng(seed)
    hosts = rng.integers(0, 50_000, n)
    ids = rng.integers(0, 1 << 40, n)
    return [f"https://www.site{h}.example.com/articles/{i:x}/page.html?ref={j}" for j, (h, i) in
            enumerate(zip(hosts.tolist(), ids.tolist()))]


def versions() -> dict[str, str]:
    import bloomline

    out = {"python": platform.python_version(), "numpy": np.__version__, "bloomline": bloomline.__version__}
    for mod in ("pandas", "pyarrow", "polars"):
        try:
            out[mod] = __import__(mod).__version__
        except ImportError:
            out[mod] = "missing"
    return out


def machine() -> str:
    facts = machine_facts()
    return f"{facts['cpu']}, {facts['cores']} cores, {facts['os']}"


# ---------------------------------------------------------------------------
# inputs


def input_forms(keys: list[str]) -> dict[str, Any]:
    import pandas as pd
    import polars as pl
    import pyarrow as pa

    return {
        "NumPy S": np.array([k.encode() for k in keys]),
        "list of str": keys,
        "NumPy U": np.array(keys),
        "pandas object Series": pd.Series(keys, dtype=object),
        "pandas 3 default str": pd.Series(keys),
        "pandas string[pyarrow]": pd.Series(keys, dtype="string[pyarrow]"),
        "pyarrow string": pa.array(keys, pa.string()),
        "pyarrow large_string": pa.array(keys, pa.large_string()),
        "pyarrow string_view": pa.array(keys, pa.string_view()),
        "polars Series": pl.Series(keys),
    }


def run_inputs(n: int) -> dict[str, Any]:
    import bloomline

    keys = url_keys(n)
    forms = input_forms(keys)
    f = bloomline.BloomFilter(n, 0.01)
    f.add_many(forms["NumPy S"][::2])
    reference = f.contains_many(forms["NumPy S"])
    for name, obj in forms.items():  # every form gives the same answers
        assert (f.contains_many(obj) == reference).all(), name
    times: dict[str, dict[str, list[float]]] = {"contains_many": {k: [] for k in forms},
                                                 "add_many": {k: [] for k in forms}}
    fresh = bloomline.BloomFilter(n, 0.01)
    for _ in range(ROUNDS):
        for name, obj in forms.items():
            t = time.perf_counter()
            f.contains_many(obj)
            times["contains_many"][name].append(time.perf_counter() - t)
            fresh.clear()
            t = time.perf_counter()
            fresh.add_many(obj)
            times["add_many"][name].append(time.perf_counter() - t)
    out: dict[str, Any] = {"n": n, "rounds": ROUNDS, "rows": []}
    for name in forms:
        row = {"input": name}
        for op in ("contains_many", "add_many"):
            # Paired: each round's time over the S array's in the same round,
            # so that the machine's drift between rounds cancels.
            ratios = [t / s for t, s in zip(times[op][name], times[op]["NumPy S"])]
            row[op] = {"ns_per_key": statistics.median(times[op][name]) / n * 1e9,
                       "ratio_to_S": statistics.median(ratios),
                       "min_ratio": min(times[op][name]) / min(times[op]["NumPy S"])}
        out["rows"].append(row)
    return out


def inputs_section(r: dict[str, Any]) -> str:
    arrow = ("pyarrow string", "pyarrow large_string", "pandas 3 default str", "polars Series")
    lines = [
        f"## Bulk inputs: {r['n']:,} URL keys in every form",
        "",
        f"`python benchmarks/bulk_bench.py inputs`. {machine()}. Versions: "
        + ", ".join(f"{k} {v}" for k, v in r["versions"].items()) + ".",
        "",
        f"{r['rounds']} interleaved rounds; ns/key are medians, and each ratio is the median over rounds of the "
        "form's time over the NumPy `S` array's time in the same round (in brackets: the ratio of the fastest "
        "rounds). One thread. The filter is 1M keys at 1% (1.2 MB, "
        "in cache): these times are the key reading and hashing.",
        "",
        "| input | contains_many ns/key | ratio to S | add_many ns/key | ratio to S |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in r["rows"]:
        c, a = row["contains_many"], row["add_many"]
        lines.append(f"| {row['input']} | {c['ns_per_key']:.1f} | {c['ratio_to_S']:.2f}x [{c['min_ratio']:.2f}] | "
                     f"{a['ns_per_key']:.1f} | {a['ratio_to_S']:.2f}x [{a['min_ratio']:.2f}] |")
    worst = max(max(row["contains_many"]["ratio_to_S"], row["add_many"]["ratio_to_S"])
                for row in r["rows"] if row["input"] in arrow)
    u = next(row for row in r["rows"] if row["input"] == "NumPy U")
    u_worst = max(u["contains_many"]["ratio_to_S"], u["add_many"]["ratio_to_S"])
    lines += [
        "",
        f"- Arrow string inputs (pyarrow string and large_string, pandas 3 str, polars): worst ratio "
        f"{worst:.2f}x, target at most 1.2x: **{'met' if worst <= 1.2 else 'missed'}**.",
        f"- NumPy `U` (ASCII keys): worst ratio {u_worst:.2f}x, target at most 1.5x: "
        f"**{'met' if u_worst <= 1.5 else 'missed'}**.",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# dedup


def make_dedup_file(path: Path, lines: int, seed: int = 40) -> int:
    """lines URL lines, 40% repeats; returns the number of distinct lines."""
    distinct = lines * 6 // 10
    rng = np.random.default_rng(seed)
    keys = url_keys(distinct, seed)
    # Each line is a draw: a new URL (in order) or a repeat of one already
    # seen. Place the distinct URLs' first sightings, then fill the others
    # with repeats of a URL whose first sighting came before.
    is_new = np.zeros(lines, dtype=bool)
    is_new[0] = True
    is_new[1 + rng.choice(lines - 1, distinct - 1, replace=False)] = True
    seen_before = np.cumsum(is_new)  # distinct URLs seen up to each line
    order = np.empty(lines, dtype=np.int64)
    order[is_new] = np.arange(distinct)
    rep = ~is_new
    order[rep] = (rng.random(int(rep.sum())) * seen_before[rep]).astype(np.int64)
    with open(path, "w") as out:
        step = 1_000_000
        for lo in range(0, lines, step):
            out.write("\n".join(keys[i] for i in order[lo : lo + step].tolist()))
            out.write("\n")
    return distinct


def timed(cmd: list[str], out_path: Path, env: dict[str, str] | None = None) -> dict[str, float]:
    with open(out_path, "wb") as out:
        p = subprocess.run(["/usr/bin/time", "-v", *cmd], stdout=out, stderr=subprocess.PIPE, env=env, check=True)
    info: dict[str, float] = {}
    for line in p.stderr.decode().splitlines():
        line = line.strip()
        if line.startswith("Elapsed (wall clock) time"):
            clock = line.rsplit(" ", 1)[1]
            secs = 0.0
            for part in clock.split(":"):
                secs = secs * 60 + float(part)
            info["seconds"] = secs
        elif line.startswith("Maximum resident set size"):
            info["rss_mb"] = int(line.rsplit(" ", 1)[1]) / 1024
    info["stderr"] = p.stderr.decode().split("\tCommand being timed")[0]  # type: ignore[assignment]
    return info


def subsequence_losses(ours: Path, theirs: Path) -> tuple[int, bool]:
    """How many of theirs' lines ours lacks, and whether ours is theirs with
    only those lines taken out (same order, nothing added)."""
    missing = 0
    with open(ours, "rb") as a, open(theirs, "rb") as b:
        mine = a.readline()
        for line in b:
            if line == mine:
                mine = a.readline()
            else:
                missing += 1
        return missing, mine == b""


def run_dedup(lines: int) -> dict[str, Any]:
    if shutil.which("mawk") is None:
        raise SystemExit("mawk is needed: apt-get install -y mawk")
    bloomline_cmd = shutil.which("bloomline") or str(Path(sys.executable).parent / "bloomline")
    with tempfile.TemporaryDirectory(prefix="bloomline-dedup-") as tmp:
        d = Path(tmp)
        src = d / "urls.txt"
        distinct = make_dedup_file(src, lines)
        size = src.stat().st_size
        subprocess.run(["cat", str(src)], stdout=subprocess.DEVNULL, check=True)  # into the page cache
        c_env = dict(os.environ, LC_ALL="C")
        runs = {
            "bloomline dedup": timed([bloomline_cmd, "dedup", str(src)], d / "bl.txt"),
            "mawk '!seen[$0]++'": timed(["mawk", "!seen[$0]++", str(src)], d / "mawk.txt"),
            "LC_ALL=C sort -u": timed(["sort", "-u", str(src)], d / "sort.txt", env=c_env),
        }
        missing, in_order = subsequence_losses(d / "bl.txt", d / "mawk.txt")
        mawk_lines = sum(1 for _ in open(d / "mawk.txt", "rb"))
        sort_lines = sum(1 for _ in open(d / "sort.txt", "rb"))
        summary = runs["bloomline dedup"].pop("stderr")
        for r in runs.values():
            r.pop("stderr", None)
    import bloomline

    filt = bloomline.BloomFilter(10_000_000, 1e-6)
    return {"lines": lines, "distinct": distinct, "bytes": size, "runs": runs, "fp_lost": missing,
            "same_order": in_order, "mawk_lines": mawk_lines, "sort_lines": sort_lines,
            "filter_mb": filt.nbytes / 2**20, "summary": summary.strip()}


def dedup_section(r: dict[str, Any]) -> str:
    runs = r["runs"]
    ours = runs["bloomline dedup"]
    mawk = runs["mawk '!seen[$0]++'"]
    sort = runs["LC_ALL=C sort -u"]
    lines = [
        f"## `bloomline dedup` against mawk and sort: {r['lines']:,} URL lines",
        "",
        f"`python benchmarks/bulk_bench.py dedup`. {machine()}. {r['bytes'] / 2**20:.0f} MiB of URL lines, "
        f"{r['distinct']:,} distinct (40% repeats). Each tool reads the file (in the page cache) and writes to a "
        "file. Time and peak RSS from `/usr/bin/time -v`; one run each, in turn.",
        "",
        "| tool | wall s | peak RSS MiB | bloomline is faster by |",
        "|---|---:|---:|---:|",
    ]
    for name, run in runs.items():
        lines.append(f"| {name} | {run['seconds']:.2f} | {run['rss_mb']:.0f} | "
                     f"{run['seconds'] / ours['seconds']:.2f}x |")
    limit = r["filter_mb"] + 40e6 / 2**20  # 40 MB
    lines += [
        "",
        f"- Output: mawk wrote {r['mawk_lines']:,} lines, sort {r['sort_lines']:,}. bloomline's output is mawk's "
        f"with {r['fp_lost']:,} lines left out (false positives), in the same order: "
        f"**{'yes' if r['same_order'] else 'NO'}**. bloomline's own summary: \"{r['summary']}\"",
        f"- At least 10x faster than mawk: {mawk['seconds'] / ours['seconds']:.1f}x, "
        f"**{'met' if mawk['seconds'] / ours['seconds'] >= 10 else 'missed'}**.",
        f"- At least 3x faster than `LC_ALL=C sort -u`: {sort['seconds'] / ours['seconds']:.1f}x, "
        f"**{'met' if sort['seconds'] / ours['seconds'] >= 3 else 'missed'}**.",
        f"- Peak RSS at most the filter ({r['filter_mb']:.1f} MiB) + 40 MB = {limit:.1f} MiB: "
        f"{ours['rss_mb']:.1f} MiB, **{'met' if ours['rss_mb'] <= limit else 'missed'}**; at most 1/5 of mawk's "
        f"({mawk['rss_mb'] / 5:.1f} MiB): **{'met' if ours['rss_mb'] <= mawk['rss_mb'] / 5 else 'missed'}**.",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    what = argv[0] if argv else "all"
    n_lines = int(argv[argv.index("--lines") + 1]) if "--lines" in argv else 10_000_000
    results_json = Path(__file__).resolve().parent / "bulk_results.json"
    saved = json.loads(results_json.read_text()) if results_json.exists() else {}
    if what in ("inputs", "all"):
        r = run_inputs(1_000_000)
        r["versions"] = versions()
        saved["inputs"] = r
        print(inputs_section(r))
        write_section("bulk-inputs", inputs_section(r))
    if what in ("dedup", "all"):
        r = run_dedup(n_lines)
        saved["dedup"] = r
        print(dedup_section(r))
        write_section("bulk-dedup", dedup_section(r))
    results_json.write_text(json.dumps(saved, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
