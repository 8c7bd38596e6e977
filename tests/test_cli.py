"""The `bloomline` console script, run for real in a subprocess."""

from __future__ import annotations

import ast
import os
import shutil
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bloomline
from bloomline import BloomFilter

EXE = shutil.which("bloomline")


def run(*args: str, stdin: bytes | None = None, module: bool = False) -> subprocess.CompletedProcess[bytes]:
    cmd = [sys.executable, "-m", "bloomline", *args] if module else [EXE or "bloomline", *args]
    return subprocess.run(cmd, input=stdin, capture_output=True, timeout=300, check=False)


@pytest.fixture(autouse=True)
def _need_script() -> None:
    if EXE is None:
        pytest.fail("the bloomline console script is not on PATH (pip install the package)")


def test_version() -> None:
    for module in (False, True):
        r = run("--version", module=module)
        assert r.returncode == 0
        assert r.stdout.decode().strip() == f"bloomline {bloomline.__version__}"


def test_dedup_keeps_first_occurrences(tmp_path: Path) -> None:
    lines = [f"https://example.com/{i % 700}" for i in range(2000)] + ["", "", "last-no-newline"]
    (tmp_path / "urls.txt").write_text("\n".join(lines))
    r = run("dedup", str(tmp_path / "urls.txt"))
    assert r.returncode == 0, r.stderr
    expected = list(dict.fromkeys(lines))
    got = r.stdout.decode().split("\n")
    assert got[-1] == ""  # output lines all end in a newline
    assert got[:-1] == expected  # at 1e-6 no false positive is expected here
    assert "2,003 lines read, 702 written, 1,301 dropped" in r.stderr.decode()


def test_dedup_reads_stdin_and_several_files(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x\r\ny\n")
    (tmp_path / "b").write_bytes(b"y\nz\nx\n")
    r = run("dedup", "-q", str(tmp_path / "a"), "-", str(tmp_path / "b"), stdin=b"w\nx\n")
    assert r.returncode == 0
    assert r.stdout == b"x\r\ny\nw\nz\n"  # CRLF and LF lines compare equal
    assert r.stderr == b""


def test_dedup_counts_false_positives_honestly(tmp_path: Path) -> None:
    # A deliberately tiny filter: lines are lost only as false positives,
    # never is a duplicate written twice.
    lines = [f"key-{i}" for i in range(5000)]
    (tmp_path / "in").write_text("\n".join(lines + lines) + "\n")
    r = run("dedup", "--capacity", "1000", "--error-rate", "0.01", str(tmp_path / "in"))
    assert r.returncode == 0
    out = r.stdout.decode().splitlines()
    assert len(out) == len(set(out))
    assert set(out) <= set(lines)
    lost = 5000 - len(out)
    assert lost > 0
    assert "warning: the filter holds" in r.stderr.decode() and "Raise --capacity" in r.stderr.decode()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["dedup", "--capacity", "0"], "argument --capacity: must be a positive integer, got '0'"),
        (["dedup", "--error-rate", "1.5"], "argument --error-rate: must be in (0, 1), got '1.5'"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(args: list[str], message: str) -> None:
    r = run(*args)
    assert r.returncode == 2
    err = r.stderr.decode()
    assert err.count("\n") == 1 and err.startswith("bloomline")
    assert message in err


def test_missing_file_exits_1_with_one_line(tmp_path: Path) -> None:
    r = run("dedup", str(tmp_path / "nope.txt"))
    assert r.returncode == 1
    err = r.stderr.decode()
    assert err.count("\n") == 1 and "cannot read" in err and "No such file" in err
    assert "Traceback" not in err


def test_demo_runs_and_reports_against_a_set() -> None:
    r = run("demo", "--urls", "100000")
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert "Python set" in out and "BloomFilter.add_many" in out
    assert "60,000 distinct URLs" in out
    assert "lost to FP" in out


@pytest.mark.skipif(not hasattr(os, "pipe"), reason="needs pipes")
def test_dedup_into_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    (tmp_path / "in").write_text("\n".join(str(i) for i in range(200_000)) + "\n")
    p = subprocess.run(
        f"{EXE} dedup {tmp_path / 'in'} | head -n 1", shell=True, capture_output=True, timeout=120, check=False
    )
    assert p.stdout == b"0\n"
    assert b"Traceback" not in p.stderr


def test_dedup_state_resumes_across_runs(tmp_path: Path) -> None:
    state = tmp_path / "seen.blf"
    (tmp_path / "day1").write_text("a\nb\nc\n")
    (tmp_path / "day2").write_text("c\nd\na\ne\n")
    r1 = run("dedup", "--state", str(state), "--capacity", "1000", str(tmp_path / "day1"))
    assert r1.returncode == 0 and r1.stdout == b"a\nb\nc\n"
    assert state.exists()
    r2 = run("dedup", "--state", str(state), "--capacity", "1000", str(tmp_path / "day2"))
    assert r2.returncode == 0 and r2.stdout == b"d\ne\n"
    state.write_bytes(b"garbage" * 30)
    r3 = run("dedup", "--state", str(state), str(tmp_path / "day2"))
    assert r3.returncode == 1 and b"invalid bloomline data" in r3.stderr and r3.stderr.count(b"\n") == 1


def test_dedup_window_drops_only_lines_seen_within_it(tmp_path: Path) -> None:
    """--window 7d on a fixed --now per run: 4 generations of 1.75 days
    (days 0 and 1 are both in generation 0, day 7 in 4, day 9 in 5). A line
    seen on day 0 or 1 is dropped through day 7 and new again once
    generation 0 expires (day 8.75)."""
    state = tmp_path / "seen.blf"
    day = 86400

    def dedup(t: float, lines: str, *more: str) -> subprocess.CompletedProcess[bytes]:
        return run("dedup", "--window", "7d", "--state", str(state), "--capacity", "1000", "--now", str(t), *more,
                   stdin=lines.encode())

    r = dedup(0, "a\nb\nc\n")
    assert r.returncode == 0 and r.stdout == b"a\nb\nc\n", r.stderr
    assert bloomline.read_header(state.read_bytes())["kind"] == "WindowedBloomFilter"
    assert dedup(1 * day, "c\nd\na\n").stdout == b"d\n"
    assert dedup(7 * day, "c\n", "-q").stdout == b""  # seen on day 0: dropped through day 7 (and seen again now)
    assert dedup(9 * day, "a\nb\nc\nd\ne\n").stdout == b"a\nb\nd\ne\n"  # c was seen on day 7
    # --no-refresh: a line's window runs from when it was written, however often it is seen since.
    state.unlink()
    assert dedup(0, "x\n", "--no-refresh").stdout == b"x\n"
    assert dedup(5 * day, "x\n", "--no-refresh").stdout == b""
    assert dedup(9 * day, "x\n", "--no-refresh").stdout == b"x\n"
    w = bloomline.WindowedBloomFilter.load(state, clock=lambda: 9.0 * day)
    assert w.window == 7 * day and "x" in w


def test_dedup_state_in_the_shared_form_stays_shared(tmp_path: Path) -> None:
    """A windowed state saved with shared=True (the ring form worker
    processes map) is saved in that form again: a compact rewrite would
    leave the workers unable to open it."""
    state = tmp_path / "ring.blf"
    w = bloomline.WindowedBloomFilter(1000, 0.01, window=7 * 86400, clock=lambda: 100.0)
    w.add("a")
    w.save(state, shared=True)
    assert bloomline.read_header(state.read_bytes())["shared"] is True
    r = run("dedup", "-q", "--state", str(state), "--now", "200", stdin=b"a\nb\n")
    assert r.returncode == 0 and r.stdout == b"b\n", r.stderr
    assert bloomline.read_header(state.read_bytes())["shared"] is True
    with bloomline.WindowedBloomFilter.open(state, "r+", clock=lambda: 300.0) as mapped:
        assert "a" in mapped and "b" in mapped and "c" not in mapped
    compact = tmp_path / "compact.blf"
    w.save(compact)
    assert run("dedup", "-q", "--state", str(compact), "--now", "200", stdin=b"b\n").returncode == 0
    assert bloomline.read_header(compact.read_bytes())["shared"] is False


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--window", "7x"], "argument --window: must be a duration such as 90s, 30m, 12h, 7d or 2w, or seconds, "
                             "got '7x'"),
        (["--window=-5m"], "argument --window: must be a duration .* got '-5m'"),
        (["--window", "0"], "argument --window: must be a duration .* got '0'"),
        (["--window", "nan"], "argument --window: .* got 'nan'"),
        (["--now", "5"], "--now goes with --window"),
        (["--no-refresh"], "--no-refresh goes with --window"),
        (["--window", "1h", "--now", "soon"], "argument --now: must be seconds since the epoch"),
        (["--window", "1h", "--now", "1767225600000"], r"argument --now: .* not milliseconds\), at most a day ahead "
                                                       "of this machine's clock, got '1767225600000'"),
        (["--state", "-"], r"argument --state: must name a file \(the filter is read from it and saved back to it\), "
                           "got '-'"),
        (["--state", ""], "argument --state: must name a file .* got ''"),
        (["--window", "1h", "--generations", "65"], r"generations must be in \[1, 64\], got 65"),
        (["--window", "1h", "--redis", "redis://127.0.0.1:1/0", "--key", "k"], "--redis and --window are exclusive"),
    ],
)
def test_dedup_window_bad_usage_exits_2(args: list[str], message: str) -> None:
    r = run("dedup", "--capacity", "100", *args, stdin=b"a\n")
    assert r.returncode == 2, r.stderr
    assert r.stderr.decode().count("\n") == 1 and re.search(message, r.stderr.decode())


def test_dedup_refuses_a_state_saved_by_a_clock_that_ran_ahead(tmp_path: Path) -> None:
    """A windowed state whose newest generation is more than a window ahead
    of the run's clock (a --now in milliseconds once, a clock that ran
    ahead) would drop every line it holds until the clock got there: the
    run refuses it, naming the file, and writes nothing. Within a window
    ahead (a clock stepped back a little) it is read."""
    state = tmp_path / "seen.blf"
    ahead = bloomline.WindowedBloomFilter(1000, 0.01, window=3600, clock=lambda: time.time() + 10 * 86400)
    ahead.add("a")
    ahead.save(state)
    r = run("dedup", "--window", "1h", "--state", str(state), stdin=b"a\nb\n")
    assert r.returncode == 1 and r.stdout == b""
    assert re.search(r"seen.blf': the windowed filter read holds generation \d+, 96\d generations .* ahead of this "
                     r"clock's", r.stderr.decode()), r.stderr
    assert state.read_bytes() == ahead.to_bytes()
    ahead_2h = str(time.time() + 7200)  # (within --now's day, past the hour's window: the next run would refuse it)
    r = run("dedup", "--window", "1h", "--state", str(tmp_path / "new.blf"), "--now", ahead_2h, stdin=b"a\n")
    assert r.returncode == 2 and not (tmp_path / "new.blf").exists()
    assert re.search(r"--now \d+ is 7[12]\d\d s ahead of this machine's clock, more than the 3600 s window", r.stderr.decode())
    near = bloomline.WindowedBloomFilter(1000, 0.01, window=3600, clock=lambda: time.time() + 1800)
    near.add("a")
    near.save(state)
    assert run("dedup", "-q", "--window", "1h", "--state", str(state), stdin=b"a\nb\n").stdout == b"b\n"


def test_dedup_window_durations_and_state_kind(tmp_path: Path) -> None:
    for text, seconds in (("90s", 90), ("30m", 1800), ("12h", 43200), ("7d", 604800), ("2w", 1209600),
                          ("3600", 3600), ("1.5h", 5400)):
        state = tmp_path / f"{text}.blf"
        assert run("dedup", "--window", text, "--state", str(state), "--capacity", "10", "-q", stdin=b"a\n").stdout \
            == b"a\n"
        assert bloomline.read_header(state.read_bytes())["window"] == seconds
    plain = tmp_path / "plain.blf"
    assert run("dedup", "--state", str(plain), "--capacity", "10", "-q", stdin=b"a\n").returncode == 0
    r = run("dedup", "--window", "1d", "--state", str(plain), stdin=b"a\n")
    assert r.returncode == 2 and b"holds a BloomFilter, which has no window" in r.stderr
    import json

    info = json.loads(run("info", "--json", str(tmp_path / "7d.blf")).stdout)
    assert info["kind"] == "WindowedBloomFilter" and info["generations"] == 4 and info["live_generations"] == 1
    full = run("dedup", "--window", "1h", "--capacity", "5", "-q", stdin=b"".join(b"%d\n" % i for i in range(8)))
    assert full.returncode == 0 and full.stdout.count(b"\n") == 8
    assert (b"warning: the filter holds at least 8 distinct lines in one generation (a 900 s slice of its window), more than "
            b"its capacity of 5") in full.stderr


def test_build_query_info_round_trip(tmp_path: Path) -> None:
    keys = [f"https://example.com/{i}" for i in range(3000)]
    (tmp_path / "keys").write_text("\n".join(keys) + "\n")
    r = run("build", str(tmp_path / "f.blf"), str(tmp_path / "keys"), "--error-rate", "0.001")
    assert r.returncode == 0, r.stderr
    probes = keys[:100] + [f"https://example.org/{i}" for i in range(2000)]
    (tmp_path / "probes").write_text("\n".join(probes) + "\n")
    present = run("query", str(tmp_path / "f.blf"), str(tmp_path / "probes"))
    absent = run("query", "--absent", str(tmp_path / "f.blf"), str(tmp_path / "probes"))
    got_present = present.stdout.decode().splitlines()
    got_absent = absent.stdout.decode().splitlines()
    assert set(keys[:100]) <= set(got_present)
    assert sorted(got_present + got_absent) == sorted(probes)
    assert len(got_present) - 100 <= 10  # false positives at 0.1% of 2,000
    info = run("info", "--json", str(tmp_path / "f.blf"))
    assert info.returncode == 0
    import json

    meta = json.loads(info.stdout)
    assert meta["kind"] == "BloomFilter" and meta["capacity"] == 3000 and meta["error_rate"] == 0.001
    assert meta["approx_count"] == pytest.approx(3000, rel=0.05)
    counting = run("build", "--counting", str(tmp_path / "c.blf"), str(tmp_path / "keys"))
    assert counting.returncode == 0
    assert json.loads(run("info", "--json", str(tmp_path / "c.blf")).stdout)["kind"] == "CountingBloomFilter"


def test_params_prints_both_layouts() -> None:
    r = run("params", "--capacity", "1000000", "--error-rate", "0.01")
    assert r.returncode == 0
    out = r.stdout.decode()
    assert "9,594,647" in out and "blocked" in out and "standard" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["dedup", "--redis", "redis://127.0.0.1:1/0"], "--redis and --key go together"),
        (["params", "--capacity", "10"], "the following arguments are required: --error-rate"),
        (["build"], "the following arguments are required: OUT"),
        (["query", "--absent"], "the following arguments are required: FILTER"),
    ],
)
def test_more_bad_usage_exits_2(args: list[str], message: str) -> None:
    r = run(*args)
    assert r.returncode == 2
    assert r.stderr.decode().count("\n") == 1 and message in r.stderr.decode()


@pytest.mark.slow
def test_dedup_through_redis(tmp_path: Path, redis_server: object) -> None:
    pytest.importorskip("redis")
    url = redis_server.url  # type: ignore[attr-defined]
    (tmp_path / "a").write_text("x\ny\nx\n")
    (tmp_path / "b").write_text("y\nz\n")
    r1 = run("dedup", "--redis", url, "--key", "k", "--capacity", "1000", str(tmp_path / "a"))
    r2 = run("dedup", "--redis", url, "--key", "k", "--capacity", "1000", str(tmp_path / "b"))
    assert (r1.stdout, r2.stdout) == (b"x\ny\n", b"z\n")
    bad = run("dedup", "--redis", "redis://127.0.0.1:1/0", "--key", "k", str(tmp_path / "a"))
    assert bad.returncode == 1 and bad.stderr.startswith(b"bloomline: error: redis:") and bad.stderr.count(b"\n") == 1


def _lines(prefix: str, n: int) -> bytes:
    return b"".join(f"{prefix}{i}\n".encode() for i in range(n))


def test_dedup_through_redis_that_fails_mid_block_writes_every_line_it_recorded(tmp_path: Path,
                                                                                 redis_server: Any) -> None:
    """The connection lost for good part-way through a block (every add
    after the first two cut before it reaches the server): the run exits 1
    with one line, having written the block's lines answered new and those
    without an answer, so that with a rerun every line is written at least
    once: none recorded as seen in Redis and never written."""
    pytest.importorskip("redis")
    from conftest import FaultProxy

    data = _lines("u", 60_000)
    # (adds only; cut after the server ran them, so that part of the block is recorded for certain)
    proxy = FaultProxy(redis_server.port, "cut_after", match=b"\r\nSET\r\n", after=1)
    try:
        first = run("dedup", "--redis", f"redis://127.0.0.1:{proxy.port}/0", "--key", "k", "--capacity", "100000",
                    "--error-rate", "1e-9", stdin=data)
    finally:
        proxy.close()
    assert first.returncode == 1 and proxy.faults >= 1
    assert first.stderr.startswith(b"bloomline: error: redis:") and first.stderr.count(b"\n") == 1, first.stderr
    assert b"answered new" in first.stderr and b"Traceback" not in first.stderr
    assert 0 < first.stdout.count(b"\n") <= 60_000
    again = run("dedup", "--redis", redis_server.url, "--key", "k", "--capacity", "100000", "--error-rate", "1e-9",
                stdin=data)
    assert again.returncode == 0, again.stderr
    assert set(first.stdout.splitlines()) | set(again.stdout.splitlines()) == set(data.splitlines())


def test_dedup_through_redis_into_a_closed_pipe_says_what_it_recorded_but_did_not_write(redis_server: Any) -> None:
    """`| head`: the lines are recorded in Redis before they are written, so
    a reader that went away leaves some recorded and never written. The run
    ends by SIGPIPE as coreutils do, and says how many on stderr first."""
    import signal

    pytest.importorskip("redis")
    p = subprocess.Popen([EXE or "bloomline", "dedup", "--redis", redis_server.url, "--key", "k", "--capacity",
                          "1000000"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stdin is not None
    p.stdout.close()  # the reader went away before any line
    _, err = p.communicate(_lines("v", 200_000), timeout=120)
    assert p.returncode == -signal.SIGPIPE, err
    said = re.fullmatch(rb"bloomline: the output was closed; ([\d,]+) new lines of the block were not written but "
                        rb"are recorded as seen in Redis at 'k'\n", err)
    assert said is not None and int(said.group(1).replace(b",", b"")) > 0, err


def test_sizes_that_cannot_fit_in_memory_are_one_line_not_a_traceback(tmp_path: Path) -> None:
    """demo's and bench's workloads are bounded up front (usage, exit 2), and
    a MemoryError (here a 250 MB line under a 400 MB address-space limit) is
    one line, exit 1, wherever it is raised: the bytes of dedup's output
    raised pybind11's RuntimeError, a traceback. A line past 256 MiB is
    refused before memory runs out."""
    import resource

    for args in (("demo", "--urls", "1e12"), ("bench", "--keys", "1e12")):
        r = run(*args)
        assert r.returncode == 2 and b"must be at most 1,000,000,000" in r.stderr and r.stderr.count(b"\n") <= 3
    line = tmp_path / "line"
    for size, limit, said in ((250_000_000, 400_000_000, b"bloomline: error: out of memory"),
                              (700_000_000, 1_200_000_000, b"bloomline: error: stdin: a line of 256.0 MiB or more")):
        with open(line, "wb") as out:
            out.truncate(size)  # (sparse: zero bytes, no newline)
        with open(line, "rb") as data:
            r = subprocess.run([EXE or "bloomline", "dedup", "-q", "--capacity", "1000"], stdin=data,
                               capture_output=True, timeout=120, check=False,
                               preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)))
        assert (r.returncode, r.stdout) == (1, b"") and r.stderr.startswith(said), r.stderr
        assert r.stderr.count(b"\n") == 1


def test_bench_runs() -> None:
    r = run("bench", "--keys", "20000")
    assert r.returncode == 0, r.stderr
    assert "ns/key" in r.stdout.decode() and "Python set" in r.stdout.decode()


# ---- outputs, errors and signals ----------------------------------------------------------


def test_outputs_that_are_not_regular_files_are_written_through(tmp_path: Path) -> None:
    (tmp_path / "keys").write_text("a\nb\nc\n")
    # /dev/stdout is a symlink: the filter goes to stdout, the link stays a link
    with open(tmp_path / "out.blf", "wb") as out:
        r = subprocess.run([EXE or "bloomline", "build", "/dev/stdout", str(tmp_path / "keys")], stdout=out,
                           stderr=subprocess.PIPE, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    assert os.path.islink("/dev/stdout")
    f = bloomline.BloomFilter.load(tmp_path / "out.blf")
    assert f.contains_many(["a", "b", "c"]).all()
    r = run("build", "-", str(tmp_path / "keys"))
    assert r.returncode == 0 and not (Path.cwd() / "-").exists()
    assert bloomline.from_bytes(r.stdout).contains_many(["a", "b", "c"]).all()
    os.mkfifo(tmp_path / "fifo")
    reader = subprocess.Popen(["cat", str(tmp_path / "fifo")], stdout=subprocess.PIPE)
    r = run("build", str(tmp_path / "fifo"), str(tmp_path / "keys"))
    data, _ = reader.communicate(timeout=60)
    assert r.returncode == 0 and (tmp_path / "fifo").is_fifo()
    assert "a" in bloomline.from_bytes(data)


def test_a_full_disk_is_one_line_and_exit_1(tmp_path: Path) -> None:
    (tmp_path / "in").write_text("\n".join(str(i) for i in range(50_000)) + "\n")
    with open("/dev/full", "wb") as full:
        r = subprocess.run([EXE or "bloomline", "dedup", "-q", str(tmp_path / "in")], stdout=full,
                           stderr=subprocess.PIPE, timeout=60, check=False)
    assert r.returncode == 1
    assert r.stderr == b"bloomline: error: cannot write the output: No space left on device\n"


def test_a_closed_pipe_ends_the_process_by_sigpipe_silently(tmp_path: Path) -> None:
    import signal

    (tmp_path / "in").write_text("\n".join(str(i) for i in range(2_000_000)) + "\n")
    p = subprocess.Popen([EXE or "bloomline", "dedup", str(tmp_path / "in")], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stdout.readline() == b"0\n"
    p.stdout.close()
    _, err = p.communicate(timeout=60)
    assert p.returncode == -signal.SIGPIPE
    assert err == b""


@pytest.mark.parametrize("capacity", ["1000000000000000", "1e300"])  # (past 2**64: an OverflowError inside)
def test_params_prints_nothing_until_it_knows_the_answer(capacity: str) -> None:
    r = run("params", "--capacity", capacity, "--error-rate", "1e-30")
    assert r.returncode == 2 and r.stdout == b""
    assert r.stderr.startswith(b"bloomline: error: ") and r.stderr.count(b"\n") == 1


def test_build_names_only_what_is_required() -> None:
    r = run("build")
    assert r.returncode == 2 and b"required: OUT\n" in r.stderr and b"FILE" not in r.stderr
    r = run("build", "out.blf", stdin=b"a\n")
    assert r.returncode == 2 and b"build needs --capacity when it reads stdin" in r.stderr


def test_state_says_which_capacity_wins(tmp_path: Path) -> None:
    state = tmp_path / "seen.blf"
    (tmp_path / "in").write_text("a\nb\n")
    assert run("dedup", "-q", "--state", str(state), "--capacity", "1000", str(tmp_path / "in")).returncode == 0
    r = run("dedup", "-q", "--state", str(state), "--capacity", "5000", str(tmp_path / "in"))
    assert r.returncode == 0 and r.stdout == b""
    assert (f"bloomline: note: --capacity 5000 is ignored: {state} holds a filter made for capacity 1000 "
            "(delete it to start over)\n").encode() == r.stderr
    r = run("dedup", "-q", "--state", str(state), "--capacity", "1000", str(tmp_path / "in"))
    assert r.stderr == b""


def test_ctrl_c_in_dedup_state_saves_what_was_printed(tmp_path: Path) -> None:
    import signal

    state = tmp_path / "seen.blf"
    lines = [f"line-{i}" for i in range(400_000)]
    p = subprocess.Popen([EXE or "bloomline", "dedup", "-q", "--state", str(state), "--capacity", "1000000"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdin is not None and p.stdout is not None
    first = "\n".join(lines[:200_000]).encode() + b"\n"

    def feed() -> None:  # from another thread: the output pipe must be read meanwhile
        assert p.stdin is not None
        p.stdin.write(first)
        p.stdin.flush()

    import threading

    feeder = threading.Thread(target=feed)
    feeder.start()
    printed = b""
    while printed.count(b"\n") < 200_000:  # everything sent so far came out
        printed += p.stdout.read1(1 << 20)
    feeder.join()
    p.send_signal(signal.SIGINT)  # waiting for more input: stops at once
    rest, err = p.communicate(timeout=60)
    printed += rest
    assert p.returncode == 130 and b"holds every line written" in err
    again = subprocess.run([EXE or "bloomline", "dedup", "-q", "--state", str(state)],
                           input="\n".join(lines).encode() + b"\n", capture_output=True, timeout=120, check=True)
    first_run, second_run = printed.decode().split(), again.stdout.decode().split()
    assert not set(first_run) & set(second_run)
    assert sorted(first_run + second_run) == sorted(lines)


def test_build_streams_its_keys_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    with open(path, "w") as out:
        for start in range(0, 1_500_000, 100_000):
            out.write("".join(f"https://www.example.com/page/{i:012d}\n" for i in range(start, start + 100_000)))
    # VmHWM, not ru_maxrss: the latter keeps the forking pytest's peak across exec.
    code = ("import sys; from bloomline.cli import main; rc = main(sys.argv[1:]); "
            "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0]); sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", code, "build", str(tmp_path / "f.blf"), str(path)],
                       capture_output=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    peak_kib = int(r.stdout.split()[-1])
    size = path.stat().st_size
    assert size > 60e6 and peak_kib * 1024 < 0.8 * size  # far below the input: no key is kept
    f = bloomline.BloomFilter.load(tmp_path / "f.blf")
    assert f.capacity == 1_500_000 and "https://www.example.com/page/000000001234" in f
    assert b"peak memory" in r.stderr and b"expected false-positive rate" in r.stderr


def test_a_local_dedup_runs_without_numpy(tmp_path: Path) -> None:
    """NumPy and the package's Python kinds (scalable, windowed) are most of
    bloomline's import time, and a local dedup (its blocks bytes to bytes in
    the core) never imports them, with --state and threads too; the output
    is the first occurrences, as ever."""
    (tmp_path / "in.txt").write_bytes(b"".join(b"k%d\n" % (i % 700) for i in range(3000)))
    code = ("import sys; from bloomline.cli import main; rc = main(sys.argv[1:]); "
            "sys.stderr.write('numpy imported: %s' % [m for m in ('numpy', 'bloomline.scalable', "
            "'bloomline.windowed') if m in sys.modules]); sys.exit(rc)")
    for extra in ([], ["--threads", "2", "--state", str(tmp_path / "s.blf")]):
        r = subprocess.run([sys.executable, "-c", code, "dedup", *extra, str(tmp_path / "in.txt")],
                           capture_output=True, timeout=120, check=False)
        assert r.returncode == 0, r.stderr
        assert r.stdout == b"".join(b"k%d\n" % i for i in range(700))
        assert r.stderr.endswith(b"numpy imported: []"), r.stderr


MAIN_THEN_THREADS = ("import sys, threading; from bloomline.cli import main; rc = main(sys.argv[1:]); "
                     "sys.stderr.write('threads left: %r' % [t.name for t in threading.enumerate() "
                     "if t.name.startswith('bloomline-')]); sys.exit(rc)")


def test_a_dedup_into_a_file_writes_every_block_before_a_failure_and_leaves_no_thread(tmp_path: Path) -> None:
    """Into a regular file, dedup writes one block behind on a thread: an
    input that fails later (a missing file) still finds every block before
    it written whole, and no thread of the command outlives main()."""
    data = b"".join(b"https://example.com/%07d\n" % i for i in range(120_000))  # 3.4 MB: blocks of 1 MiB
    (tmp_path / "a.txt").write_bytes(data)
    for files, rc in (([tmp_path / "a.txt"], 0), ([tmp_path / "a.txt", tmp_path / "missing"], 1)):
        with open(tmp_path / "out.txt", "wb") as out:
            r = subprocess.run([sys.executable, "-c", MAIN_THEN_THREADS, "dedup", "-q", *map(str, files)], stdout=out,
                               stderr=subprocess.PIPE, timeout=120, check=False)
        assert r.returncode == rc and r.stderr.endswith(b"threads left: []"), r.stderr
        assert (tmp_path / "out.txt").read_bytes() == data
        assert (b"cannot read" in r.stderr) == (rc == 1)


def test_a_closed_pipe_ends_dedup_without_waiting_for_more_input() -> None:
    """`... | bloomline dedup | head -1` with input still coming: the write
    after the reader left ends the command, as it always did, without
    another line of input."""
    p = subprocess.Popen([sys.executable, "-m", "bloomline", "dedup", "-q"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert p.stdin is not None and p.stdout is not None
        p.stdin.write(b"a\n")
        p.stdin.flush()
        assert p.stdout.readline() == b"a\n"
        p.stdout.close()  # as head -1 does
        p.stdin.write(b"b\nc\n")  # its write fails; stdin stays open
        p.stdin.flush()
        p.wait(timeout=30)
    finally:
        p.kill()
        p.wait()
        p.stderr.close()  # type: ignore[union-attr]
        p.stdin.close()  # type: ignore[union-attr]


def test_a_dedup_stopped_while_reading_stdin_leaves_the_rest_to_the_next_reader(tmp_path: Path) -> None:
    """A process that runs dedup twice on its stdin, the first stopped by
    Ctrl-C while it waits for input: the second reads every line that came
    after (nothing read ahead and dropped by the first)."""
    code = f"""
import os, signal, sys, threading, time
from bloomline.cli import main
r, w = os.pipe()
os.dup2(r, 0)
os.dup2(os.open({str(tmp_path / "out.txt")!r}, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1)
def feed():
    os.write(w, b"a\\n"); time.sleep(1)
    os.kill(os.getpid(), signal.SIGINT); time.sleep(1)
    os.write(w, b"b\\n"); time.sleep(0.5)
    os.write(w, b"c\\n"); os.close(w)
threading.Thread(target=feed).start()
first = main(["dedup", "-q"])
second = main(["dedup", "-q"])
sys.stderr.write("rc %d %d" % (first, second))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, check=False)
    assert r.returncode == 0 and r.stderr.endswith(b"rc 130 0"), r.stderr
    assert (tmp_path / "out.txt").read_bytes() == b"a\nb\nc\n"


def test_redis_module_prints_the_module_path() -> None:
    r = run("redis-module")
    assert r.returncode == 0
    path = r.stdout.decode().strip()
    assert path.endswith("redis_module.so") and os.path.exists(path)


# ---- reading lines in blocks -------------------------------------------------


def test_lines_longer_than_a_block_and_crlf(tmp_path: Path) -> None:
    from bloomline.cli import BLOCK

    long_line = b"L" * (3 * BLOCK + 17)  # spans four blocks
    data = b"a\r\n" + long_line + b"\r\nb\n" + long_line + b"\nb\r\na\n" + long_line + b"x\r\n" + b"tail"
    (tmp_path / "in.txt").write_bytes(data)
    r = run("dedup", str(tmp_path / "in.txt"))
    assert r.returncode == 0, r.stderr
    # CRLF and LF lines are one key; the first occurrence is written as it was
    assert r.stdout == b"a\r\n" + long_line + b"\r\nb\n" + long_line + b"x\r\n" + b"tail\n"
    assert "8 lines read, 5 written, 3 dropped" in r.stderr.decode()


def test_line_blocks_end_at_newlines(tmp_path: Path) -> None:
    from bloomline.cli import LineBlocks

    lines = [b"x" * (i % 23) + (b"\r\n" if i % 3 == 0 else b"\n") for i in range(500)]
    data = b"".join(lines) + b"no newline at the end"
    (tmp_path / "in.txt").write_bytes(data)
    for block in (1, 7, 64, 4096):
        got = [bytes(b) for b in LineBlocks([str(tmp_path / "in.txt")], block=block)]
        assert b"".join(got) == data
        assert all(b.endswith(b"\n") for b in got[:-1]) and got[-1].endswith(b"no newline at the end")


def test_blocks_read_ahead_stay_whole_while_they_are_handled(tmp_path: Path) -> None:
    """dedup reads one block ahead on a thread (three buffers taking turns):
    a block handed out is never written into before the next one is asked
    for, across files, a last line without a newline, and a line longer
    than the buffer; the reader stops when the consumer does, and an
    unreadable file is raised where its blocks would have come."""
    import threading
    import time

    from bloomline.cli import CliError
    from bloomline.cli._input import LineBlocks, ReadAhead

    files = {"a": b"k\r", "b": b"".join(b"line%d\n" % i for i in range(300)), "c": b"x" * 5000 + b"\nend"}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    names = [str(tmp_path / n) for n in files]
    for block in (7, 64, 4096):
        expected = [bytes(b) for b in LineBlocks(names, block=block)]
        got = []
        for b in ReadAhead(LineBlocks(names, block=block, buffers=3)):
            time.sleep(0.002)  # the reader runs ahead meanwhile
            got.append(bytes(b))
        assert got == expected and b"".join(got) == b"".join(files.values())

    def readers() -> int:
        return sum(t.name == "bloomline-read-ahead" for t in threading.enumerate())

    for b in ReadAhead(LineBlocks(names, block=7, buffers=3)):
        break
    deadline = time.monotonic() + 10
    while readers() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert readers() == 0
    got = []
    with pytest.raises(CliError, match="cannot read .*missing"):
        for b in ReadAhead(LineBlocks([names[1], str(tmp_path / "missing")], block=64, buffers=3)):
            got.append(bytes(b))
    assert b"".join(got) == files["b"]


def test_add_lines_reads_crlf_empty_and_unterminated_lines() -> None:
    f = bloomline.BloomFilter(1000, 1e-6)
    assert f.add_lines(b"a\r\nb\n\nb\r\n\r\na").tolist() == [True, True, True, False, False, False]
    assert f.contains_lines(b"a\nc").tolist() == [True, False]
    assert "" in f  # the empty line is the empty key
    assert bloomline.select_lines(b"a\r\nb\nc", np.array([True, False, True])) == b"a\r\nc\n"


def test_progress_is_drawn_on_a_terminal_only(tmp_path: Path) -> None:
    import pty
    import select
    import time

    # stdin is a pipe fed slowly, so that the half-second redraw comes
    # round; stderr is a terminal.
    leader, follower = pty.openpty()
    p = subprocess.Popen([EXE or "bloomline", "dedup"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         stderr=follower)
    os.close(follower)
    seen = b""
    assert p.stdin is not None
    deadline = time.monotonic() + 60
    for i in range(12):
        p.stdin.write(b"".join(b"https://example.com/%d/%d\n" % (i, j) for j in range(2000)))
        p.stdin.flush()
        time.sleep(0.15)
        while select.select([leader], [], [], 0)[0]:
            seen += os.read(leader, 65536)
        if b"lines/s" in seen or time.monotonic() > deadline:
            break
    p.stdin.close()
    p.wait(timeout=60)
    while select.select([leader], [], [], 0.2)[0]:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    text = seen.decode(errors="replace")
    assert p.returncode == 0
    assert "lines/s" in text and "/s, " in text  # bytes and lines per second, redrawn in place
    assert "%" not in text.split("lines/s")[0]  # stdin: no size, no percentage
    assert "peak memory" in text and "expected false-positive rate" in text
    # piped stderr gets the summary only
    r = run("dedup", stdin=b"a\nb\n")
    assert "lines/s" not in r.stderr.decode() and "peak memory" in r.stderr.decode()


def test_progress_shows_a_percentage_when_the_size_is_known(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from bloomline import cli

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    progress = cli.Progress(total_bytes=4_000_000)
    progress.last -= 1  # as if half a second had passed
    progress.update(1_000_000, 12_345)
    assert "(25%)" in err.getvalue() and "12,345 lines" in err.getvalue() and "lines/s" in err.getvalue()
    progress.done()
    assert err.getvalue().endswith("\r\x1b[K")  # the line is cleared at the end


# ---- pipes, one-line errors, '-' as the filter, rough edges ------------------------------

KEYS = [f"https://example.com/{i}" for i in range(2000)]


def _keys_file(tmp_path: Path) -> Path:
    path = tmp_path / "keys.txt"
    path.write_text("\n".join(KEYS) + "\n")
    return path


def _sh(script: str, tmp_path: Path, timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    """A bash command line (process substitution, pipes), the bloomline
    script on PATH; never waits more than `timeout`."""
    env = {**os.environ, "PATH": f"{Path(EXE or 'bloomline').parent}:{os.environ['PATH']}"}
    return subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, timeout=timeout, env=env,
                          check=False)


def test_a_closed_stdout_or_stdin_is_one_line_and_never_a_file_of_the_run(tmp_path: Path) -> None:
    """With stdout closed (`>&-`), the state's lock file took fd 1 and
    dedup's new lines went into it, the run exiting 0 with the state saved:
    the lines seen, never written. A closed stdin was a traceback. Each is
    now one line, exit 1, and no state is saved."""
    (tmp_path / "keys").write_bytes(b"a\nb\n")
    r = _sh("bloomline dedup --state s.blf keys >&-", tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 1 and err.count("\n") == 1 and "cannot write the output: Bad file descriptor" in err, err
    assert not (tmp_path / "s.blf").exists()
    assert not (tmp_path / "s.blf.lock").exists() or (tmp_path / "s.blf.lock").read_bytes() == b""
    r = _sh("bloomline dedup --state s.blf keys", tmp_path)
    assert r.returncode == 0 and r.stdout == b"a\nb\n", r.stderr
    for command in ("bloomline info - <&-", "bloomline dedup <&-", "bloomline query s.blf <&-", "bloomline info s.blf >&-"):
        r = _sh(command, tmp_path)
        err = r.stderr.decode()
        assert r.returncode == 1 and err.count("\n") == 1 and err.startswith("bloomline: error: "), (command, err)
        assert "Bad file descriptor" in err, (command, err)


PIPE_FORMS = {
    "process substitution": "bloomline build {opt} out.blf <(cat keys.txt)",
    "cat | /dev/stdin": "cat keys.txt | bloomline build {opt} out.blf /dev/stdin",
    "cat | -": "cat keys.txt | bloomline build {opt} out.blf -",
    "cat | (no file)": "cat keys.txt | bloomline build {opt} out.blf",
}


@pytest.mark.parametrize("form", sorted(PIPE_FORMS))
def test_every_pipe_form_asks_for_capacity_or_holds_every_key(form: str, tmp_path: Path) -> None:
    _keys_file(tmp_path)
    r = _sh(PIPE_FORMS[form].format(opt=""), tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 2 and err.count("\n") == 1 and "build needs --capacity when it reads" in err, err
    assert "a pipe" in err and not (tmp_path / "out.blf").exists()
    r = _sh(PIPE_FORMS[form].format(opt="--capacity 1e4"), tmp_path)
    assert r.returncode == 0, r.stderr
    f = BloomFilter.load(tmp_path / "out.blf")
    assert f.contains_many(KEYS).all() and f.capacity == 10_000
    assert "2,000 keys into out.blf" in r.stderr.decode()


def test_a_named_fifo_asks_for_capacity_at_once_or_is_read_whole(tmp_path: Path) -> None:
    keys = _keys_file(tmp_path)
    fifo = tmp_path / "keys.fifo"
    os.mkfifo(fifo)
    # No writer ever opens it: found by its type without opening it (an open would wait forever).
    r = run("build", str(tmp_path / "out.blf"), str(fifo))
    assert r.returncode == 2 and b"build needs --capacity when it reads" in r.stderr and b"a pipe" in r.stderr
    writer = subprocess.Popen(["bash", "-c", f"cat {keys} > {fifo}"])
    try:
        r = run("build", "--capacity", "1_000_000", str(tmp_path / "out.blf"), str(fifo))
    finally:
        writer.wait(timeout=60)
    assert r.returncode == 0, r.stderr
    f = BloomFilter.load(tmp_path / "out.blf")
    assert f.contains_many(KEYS).all() and f.capacity == 1_000_000


def test_stdin_from_a_regular_file_is_counted_like_a_file(tmp_path: Path) -> None:
    keys = _keys_file(tmp_path)
    r = _sh(f"bloomline build out.blf < {keys}", tmp_path)
    assert r.returncode == 0, r.stderr
    f = BloomFilter.load(tmp_path / "out.blf")
    assert f.capacity == len(KEYS) and f.contains_many(KEYS).all()


@pytest.mark.parametrize(("text", "value"), [("1e6", 1_000_000), ("1_000_000", 1_000_000), ("2.5E3", 2500),
                                             ("1000", 1000)])
def test_capacity_takes_the_ways_numbers_are_written(text: str, value: int, tmp_path: Path) -> None:
    _keys_file(tmp_path)
    r = run("build", "--capacity", text, str(tmp_path / "f.blf"), str(tmp_path / "keys.txt"))
    assert r.returncode == 0, r.stderr
    assert BloomFilter.load(tmp_path / "f.blf").capacity == value


@pytest.mark.parametrize("text", ["1.5", "0", "-1e3", "abc", "1e", "inf", "nan"])
def test_capacity_refuses_what_is_not_a_positive_whole_number(text: str) -> None:
    r = run("params", f"--capacity={text}", "--error-rate", "0.01")
    err = r.stderr.decode()
    assert r.returncode == 2 and err.count("\n") == 1 and f"must be a positive integer, got {text!r}" in err


@pytest.mark.parametrize("text", ["0e30", "-1e30"])
def test_capacity_of_zero_or_below_written_large_is_not_called_too_big(text: str) -> None:
    r = run("params", f"--capacity={text}", "--error-rate", "0.01")
    err = r.stderr.decode()
    assert r.returncode == 2 and err.count("\n") == 1 and f"must be a positive integer, got {text!r}" in err, err


@pytest.mark.parametrize("text", ["1e999999999", "9e99999999999999", "1e400", "1e20", "9" * 5000])
def test_capacity_past_any_size_is_one_line_at_once(text: str) -> None:
    """1e999999999 was written out as a billion-digit int (a hang that ate
    memory), and 1e400 and 9e99999999999999 ended in tracebacks."""
    for command in (["params", "--error-rate", "0.01"], ["build", os.devnull], ["dedup", os.devnull]):
        r = run(*command, f"--capacity={text}")
        err = r.stderr.decode()
        assert r.returncode == 2 and err.count("\n") == 1, err[-2000:]
        assert f"--capacity: must be a positive integer below 2**64, got {text[:20]!r}"[:-1] in err


def test_an_endless_or_newline_free_input_is_refused_before_memory_runs_out(tmp_path: Path) -> None:
    """A filter read from a pipe or a device was read to its end before its
    header was checked (`info /dev/zero` ran until memory ran out); lines
    with no newline grew a buffer for as long as they came."""
    bad_magic = "invalid bloomline data: bad magic (not a bloomline filter)"
    for args, stdin in ((["info", "/dev/zero"], None), (["query", "/dev/zero", "k"], None),
                        (["dedup", "--state", "/dev/zero", os.devnull], None),
                        (["info", "-"], b"NOT A FILTER" + bytes(1 << 20))):
        r = run(*args, stdin=stdin)
        err = r.stderr.decode()
        assert r.returncode == 1 and err.count("\n") == 1 and bad_magic in err, (args, err[-2000:])
    f = BloomFilter(1000, 0.01)
    f.add("k")
    r = run("info", "-", stdin=f.to_bytes())
    assert r.returncode == 0 and b"BloomFilter" in r.stdout, r.stderr
    r = run("info", "-", stdin=f.to_bytes() + b"more")
    assert r.returncode == 1 and "stdin: more bytes follow the filter's" in r.stderr.decode(), r.stderr
    # A header naming a filter of 2**47 bits (16 TiB), and nothing after it: one line naming the input, not an
    # "out of memory" naming nothing.
    import struct

    header = bytearray(f.to_bytes()[:128])
    header[24:32] = struct.pack("<Q", 2**47)  # num_slots
    header[72:80] = struct.pack("<Q", 2**47 // 8)  # payload_len
    header[80:88] = struct.pack("<Q", 0)  # fill
    header[120:128] = struct.pack("<Q", bloomline.murmur3_128(bytes(header[:120])) & (2**64 - 1))
    r = run("info", "-", stdin=bytes(header))
    err = r.stderr.decode()
    assert r.returncode == 1 and err.count("\n") == 1, err
    assert "stdin: its header names a filter larger than this machine could give" in err, err
    r = run("dedup", "--capacity", "100", "/dev/zero")
    err = r.stderr.decode()
    assert r.returncode == 1 and err.count("\n") == 1 and "'/dev/zero': a line of 256.0 MiB or more" in err, err


def test_saving_onto_a_file_mapped_for_writing_is_one_line_before_any_output(tmp_path: Path) -> None:
    keys = _keys_file(tmp_path)
    shared = tmp_path / "shared.blf"
    BloomFilter(10_000, 0.01).save(shared)
    with BloomFilter.open(shared, "r+") as live:
        live.add("mine")
        for args in (["build", str(shared), str(keys)], ["dedup", "--state", str(shared), str(keys)]):
            r = run(*args)
            err = r.stderr.decode()
            assert r.returncode == 1 and err.count("\n") == 1 and "Traceback" not in err, err
            assert err.startswith("bloomline: error: ") and str(shared) in err and "open for writing" in err
            assert r.stdout == b""  # dedup printed nothing: it refused before reading
        assert "mine" in live
    assert "mine" in BloomFilter.load(shared)


def test_a_read_only_target_is_one_line_naming_it(tmp_path: Path) -> None:
    keys = _keys_file(tmp_path)
    target = tmp_path / "ro.blf"
    BloomFilter(100, 0.01).save(target)
    target.chmod(0o444)
    before = target.read_bytes()
    for args in (["build", str(target), str(keys)], ["dedup", "--state", str(target), str(keys)]):
        r = run(*args)
        err = r.stderr.decode()
        assert r.returncode == 1 and err.count("\n") == 1 and "read-only" in err and str(target) in err, err
        assert r.stdout == b""
    assert target.read_bytes() == before


def test_errors_name_the_path_given_never_a_temporary_file(tmp_path: Path) -> None:
    keys = _keys_file(tmp_path)
    r = run("build", str(tmp_path / "nodir" / "x.blf"), str(keys))
    err = r.stderr.decode()
    assert r.returncode == 1 and err.count("\n") == 1 and str(tmp_path / "nodir" / "x.blf") in err, err
    assert ".tmp-" not in err


def test_the_filter_can_come_from_stdin(tmp_path: Path) -> None:
    keys = _keys_file(tmp_path)
    assert run("build", str(tmp_path / "f.blf"), str(keys)).returncode == 0
    (tmp_path / "cand.txt").write_text("https://example.com/5\nhttps://elsewhere.org/\n")
    r = _sh("cat f.blf | bloomline query - cand.txt", tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"https://example.com/5\n"
    r = _sh("cat f.blf | bloomline info --json -", tmp_path)
    assert r.returncode == 0 and b'"kind": "BloomFilter"' in r.stdout
    r = _sh("cat f.blf | bloomline query -", tmp_path)
    assert r.returncode == 2 and b"name the files of keys" in r.stderr and r.stderr.count(b"\n") == 1


def test_info_shows_fill_as_a_fraction_and_bits_set_as_a_count(tmp_path: Path) -> None:
    import json

    f = BloomFilter(1000, 0.01)
    f.update(range(500))
    f.save(tmp_path / "f.blf")
    meta = json.loads(run("info", "--json", str(tmp_path / "f.blf")).stdout)
    assert meta["bits_set"] == f.bits_set and meta["fill"] == pytest.approx(f.bits_set / f.num_bits)
    assert 0 < meta["fill"] < 1
    text = run("info", str(tmp_path / "f.blf")).stdout.decode()
    assert f"bits_set          {f.bits_set:,}\n" in text and f"fill              {f.fill_ratio:.6g}\n" in text
    c = bloomline.CountingBloomFilter(1000, 0.01)
    c.update(range(10))
    c.save(tmp_path / "c.blf")
    meta = json.loads(run("info", "--json", str(tmp_path / "c.blf")).stdout)
    assert meta["counters_set"] == c.nonzero_counters and meta["fill"] == pytest.approx(c.fill_ratio)
    s = bloomline.ScalableBloomFilter(100, 0.01)
    s.update(range(300))
    s.save(tmp_path / "s.blf")
    meta = json.loads(run("info", "--json", str(tmp_path / "s.blf")).stdout)
    assert meta["bits_set"] == sum(st.bits_set for st in s.stages) and meta["fill"] == pytest.approx(s.fill_ratio)


def test_every_subcommand_has_a_description() -> None:
    for command in ("demo", "dedup", "build", "query", "info", "params", "bench", "redis-module"):
        r = run(command, "--help")
        assert r.returncode == 0
        paragraphs = r.stdout.decode().split("\n\n")
        # usage, then a description paragraph before the arguments
        assert len(paragraphs) >= 3 and not paragraphs[1].lstrip().startswith(("positional", "options")), command


def test_quiet_silences_every_command_that_reports_progress(tmp_path: Path) -> None:
    keys = _keys_file(tmp_path)
    for args in (["build", "-q", str(tmp_path / "f.blf"), str(keys)], ["query", "-q", str(tmp_path / "f.blf"), str(keys)],
                 ["dedup", "-q", str(keys)]):
        r = run(*args)
        assert r.returncode == 0 and r.stderr == b"", (args, r.stderr)


def test_counts_of_one_are_singular(tmp_path: Path) -> None:
    (tmp_path / "one").write_text("only\n")
    r = run("build", str(tmp_path / "f.blf"), str(tmp_path / "one"))
    assert "build: 1 key into" in r.stderr.decode()
    assert "warning" not in r.stderr.decode()  # one key at capacity 1 (the line count) is within it
    r = run("dedup", str(tmp_path / "one"))
    assert "dedup: 1 line read, 1 written" in r.stderr.decode()


def test_quiet_progress_draws_nothing_even_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from bloomline import cli

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for quiet, drawn in ((False, True), (True, False)):
        err = Terminal()
        monkeypatch.setattr(sys, "stderr", err)
        progress = cli.Progress(total_bytes=1000, quiet=quiet)
        progress.last -= 1  # as if half a second had passed
        progress.update(500, 10)
        assert ("10 lines" in err.getvalue()) is drawn


# ---- the line rule for \r, whole writes, outputs that are inputs, rough edges -----------

CR_INPUTS = [b"k\r\nk\r", b"k\r", b"a\r\rb\r\n\r", b"\r", b"\r\n\r", b"x\ry\r\nx\ry", b"a\r\r\na\r\r"]


@pytest.mark.parametrize("data", CR_INPUTS)
def test_dedup_of_its_own_output_changes_nothing(data: bytes) -> None:
    once = run("dedup", "-q", stdin=data)
    assert once.returncode == 0, once.stderr
    twice = run("dedup", "-q", stdin=once.stdout)
    assert twice.stdout == once.stdout


def test_a_cr_ends_the_last_line_as_crlf_would_and_is_content_elsewhere(tmp_path: Path) -> None:
    # printf 'k\r\nk\r' | bloomline dedup: one k, written as it came (the last line gets its \n).
    assert run("dedup", "-q", stdin=b"k\r\nk\r").stdout == b"k\r\n"
    # A file's last line without \n is the same key as in the middle of the next file.
    (tmp_path / "a").write_bytes(b"k\r")
    (tmp_path / "b").write_bytes(b"k\nm\rn\nm\rn\r\nmn\n")
    r = run("dedup", "-q", str(tmp_path / "a"), str(tmp_path / "b"))
    assert r.stdout == b"k\r\nm\rn\nmn\n"  # a \r inside a line is content: "m\rn" is not "mn"
    # build and query read the same rule.
    (tmp_path / "keys").write_bytes(b"u1\r\nu2\r")
    assert run("build", "-q", str(tmp_path / "f.blf"), str(tmp_path / "keys")).returncode == 0
    (tmp_path / "probes").write_bytes(b"u1\nu2\nu2\r\nu1\r")
    assert run("query", str(tmp_path / "f.blf"), str(tmp_path / "probes")).stdout == b"u1\nu2\nu2\r\nu1\r\n"
    f = BloomFilter.load(tmp_path / "f.blf")
    assert "u2" in f and "u2\r" not in f


def test_the_core_line_readers_strip_a_final_cr_too() -> None:
    f = BloomFilter(1000, 1e-6)
    assert f.add_lines(b"k\r").tolist() == [True]
    assert f.contains_lines(b"k\nk\r\nk\r\r\nk\r").tolist() == [True, True, False, True]
    assert "k" in f and "k\r" not in f
    c = bloomline.CountingBloomFilter(1000, 1e-6)
    assert c.add_lines(b"k\r\nk\r").tolist() == [True, False]
    s = bloomline.ScalableBloomFilter(100, 1e-6)
    assert s.add_lines(b"k\r\nk\r").tolist() == [True, False]
    hashes = bloomline.hash_lines(b"k\r\nk\r\nk\rx\r")
    assert hashes[0] == hashes[1] and hashes[2] != hashes[0]
    assert (bloomline.hash_lines(b"k\r") == bloomline.hash_many([b"k"])).all()


# Writes: all of it, or one error line and exit 1; --state records only lines written. Under
# PYTHONUNBUFFERED (many images and CI set it) stdout is a raw FileIO whose writes may be short.
STDOUT_MODES = ["unbuffered", "buffered"]


def _env(mode: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if mode == "unbuffered":
        env["PYTHONUNBUFFERED"] = "1"
    return env


def _run_to(out_path: Path, mode: str, *args: str, append: bool = False) -> subprocess.CompletedProcess[bytes]:
    """bloomline with stdout a real file (opened for appending with `append`)."""
    with open(out_path, "ab" if append else "wb") as out:
        return subprocess.run([EXE or "bloomline", *args], stdout=out, stderr=subprocess.PIPE, env=_env(mode),
                              timeout=120, check=False)


ENOSPC_LINE = b"bloomline: error: cannot write the output: No space left on device"


@pytest.mark.parametrize("threads", ["1", "2"])  # (2: a block of 1 MiB a thread, added on two)
@pytest.mark.parametrize("mode", STDOUT_MODES)
def test_dedup_onto_a_full_disk_fails_and_its_state_keeps_only_what_was_written(mode: str, threads: str,
                                                                                 tmp_path: Path, small_fs: Any) -> None:
    d = small_fs("64k")
    lines = [f"https://example.com/page/{i:06d}" for i in range(25_000)]
    data = "".join(line + "\n" for line in lines).encode()  # 775 KB: one block, more than the disk holds
    (tmp_path / "in").write_bytes(data)
    state = tmp_path / "seen.blf"
    head = data.index(lines[100].encode())  # the first 100 lines, from a run that wrote them
    assert run("dedup", "-q", "--state", str(state), "--capacity", "1e5", stdin=data[:head]).returncode == 0
    before = state.read_bytes()
    r = _run_to(d / "out", mode, "dedup", "-q", "--threads", threads, "--state", str(state), str(tmp_path / "in"))
    assert r.returncode == 1
    assert r.stderr == ENOSPC_LINE + f"; {state} was not saved, so the next run writes this run's lines again\n".encode()
    written = (d / "out").read_bytes()
    assert 0 < len(written) < len(data) - head and data[head:].startswith(written)
    assert state.read_bytes() == before
    again = run("dedup", "-q", "--state", str(state), str(tmp_path / "in"))
    assert again.returncode == 0 and again.stdout == data[head:]  # none of the lines lost


def test_a_state_that_cannot_be_saved_says_the_lines_will_come_again(tmp_path: Path, small_fs: Any) -> None:
    """The output written whole, the state's disk full: exit 1, one line
    saying the state holds what it held and the next run writes these lines
    again (it said only "No space left on device")."""
    d = small_fs("64k")
    state = d / "seen.blf"
    r = run("dedup", "-q", "--state", str(state), "--capacity", "1e5", stdin=b"a\nb\na\n")  # a 120 KB filter
    assert r.returncode == 1 and r.stdout == b"a\nb\n"
    assert re.fullmatch(f"bloomline: error: cannot save {re.escape(str(state))}: No space left on device[^;]*; it "
                        "holds what it held before this run, so the next run writes this run's 2 lines again\n",
                        r.stderr.decode()), r.stderr
    assert not state.exists() and not list(d.glob("seen.blf.tmp*"))


@pytest.mark.parametrize("mode", STDOUT_MODES)
def test_a_filter_built_to_stdout_on_a_full_disk_is_an_error(mode: str, tmp_path: Path, small_fs: Any) -> None:
    d = small_fs("64k")
    (tmp_path / "keys").write_text("a\nb\n")
    r = _run_to(d / "f.blf", mode, "build", "-q", "--capacity", "1e5", "-", str(tmp_path / "keys"))  # 120 KB
    assert r.returncode == 1 and r.stderr == ENOSPC_LINE + b"\n"


@pytest.mark.parametrize("mode", STDOUT_MODES)
@pytest.mark.parametrize("command", ["dedup", "query", "build", "info", "params", "redis-module"])
def test_every_command_writing_to_dev_full_says_so(command: str, mode: str, tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text("".join(f"{i}\n" for i in range(50_000)))
    assert run("build", "-q", str(tmp_path / "f.blf"), str(keys)).returncode == 0
    args = {"dedup": ["dedup", "-q", str(keys)], "query": ["query", str(tmp_path / "f.blf"), str(keys)],
            "build": ["build", "-q", "-", str(keys)], "info": ["info", str(tmp_path / "f.blf")],
            "params": ["params", "--capacity", "1e6", "--error-rate", "0.01"], "redis-module": ["redis-module"]}
    r = _run_to(Path("/dev/full"), mode, *args[command])
    assert r.returncode == 1 and r.stderr == ENOSPC_LINE + b"\n"


@pytest.mark.parametrize("mode", STDOUT_MODES)
def test_text_output_cut_short_by_a_full_disk_is_an_error(mode: str, tmp_path: Path, small_fs: Any) -> None:
    # The last write is the one that is short: nothing after it would have failed.
    args = ("params", "--capacity", "1e6", "--error-rate", "0.01")
    whole = run(*args).stdout
    last_line = whole.splitlines(keepends=True)[-1]
    d = small_fs("8k")
    size = 8192 - (len(whole) - len(last_line)) - 5  # room for all but 5 bytes short of the last line
    (d / "out").write_bytes(b"x" * size)
    r = _run_to(d / "out", mode, *args, append=True)
    assert (d / "out").read_bytes()[size:] == whole[:len(whole) - len(last_line) + 5]
    assert r.returncode == 1 and r.stderr == ENOSPC_LINE + b"\n"


def _lines_file(tmp_path: Path, n: int) -> tuple[Path, list[bytes]]:
    lines = [f"line-{i:07d}".encode() for i in range(n)]
    path = tmp_path / "in"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path, lines


@pytest.mark.parametrize("mode", STDOUT_MODES)
def test_ctrl_c_while_a_slow_reader_holds_the_output_still_writes_what_state_records(mode: str,
                                                                                    tmp_path: Path) -> None:
    import signal
    import time

    path, lines = _lines_file(tmp_path, 300_000)  # 3.9 MB: four blocks, each far more than a pipe holds
    state = tmp_path / "seen.blf"
    with subprocess.Popen([EXE or "bloomline", "dedup", "-q", "--state", str(state), "--capacity", "1e6", str(path)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(mode)) as p:
        assert p.stdout is not None
        try:
            printed = p.stdout.read(4096)  # it is writing its first block ...
            time.sleep(0.5)  # ... and waits for this slow reader, the pipe full
            p.send_signal(signal.SIGINT)
            time.sleep(0.3)
            rest, err = p.communicate(timeout=60)  # then the reader takes the rest, to the end
            printed += rest
        finally:
            p.kill()
    assert p.returncode == 130 and err.endswith(f"interrupted; {state} holds every line written\n".encode())
    first = printed.splitlines()
    assert printed.endswith(b"\n") and 4096 < len(printed) < path.stat().st_size
    again = run("dedup", "-q", "--state", str(state), str(path))
    second = again.stdout.splitlines()
    assert not set(first) & set(second)
    assert sorted(first + second) == lines  # every line written once: none recorded unwritten


def test_a_second_ctrl_c_gives_up_the_block_and_saves_no_state(tmp_path: Path) -> None:
    import signal
    import time

    path, _ = _lines_file(tmp_path, 300_000)
    state = tmp_path / "seen.blf"
    with subprocess.Popen([EXE or "bloomline", "dedup", "-q", "--state", str(state), str(path)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as p:
        assert p.stdout is not None
        try:
            p.stdout.read(4096)  # a reader that then stalls: the first Ctrl-C cannot finish the block
            time.sleep(0.5)
            p.send_signal(signal.SIGINT)
            time.sleep(0.5)
            p.send_signal(signal.SIGINT)
            _, err = p.communicate(timeout=60)
        finally:
            p.kill()
    assert p.returncode == 130 and not state.exists()
    assert err == (f"bloomline: interrupted again: the block being written was given up; {state} was not saved, so "
                   "the next run writes this run's lines again\n").encode()


# ---- paths: an output that is also an input ----------------------------------------------

SAME_FILE = {
    "build OUT is the input": ("bloomline build keys.txt keys.txt", "OUT 'keys.txt' is the input 'keys.txt'"),
    "build OUT links to the input": ("bloomline build link keys.txt", "OUT 'link' is the input 'keys.txt'"),
    "build OUT is a hard link": ("bloomline build hard sub/../keys.txt", "OUT 'hard' is the input 'sub/../keys.txt'"),
    "build OUT is stdin": ("bloomline build keys.txt < keys.txt", "OUT 'keys.txt' is stdin"),
    "build to stdout onto its input": ("bloomline build - keys.txt >> keys.txt", "stdout is the input 'keys.txt'"),
    "dedup --state is the input": ("bloomline dedup --state keys.txt keys.txt",
                                   "--state 'keys.txt' is the input 'keys.txt'"),
    "dedup --state links to the input": ("bloomline dedup --state link keys.txt",
                                         "--state 'link' is the input 'keys.txt'"),
    "dedup onto its input": ("bloomline dedup keys.txt >> keys.txt", "stdout is the input 'keys.txt'"),
    "dedup onto its state": ("bloomline dedup --state seen.blf keys.txt >> seen.blf", "stdout is --state 'seen.blf'"),
    "query onto its keys": ("bloomline query f.blf keys.txt >> keys.txt", "stdout is the input 'keys.txt'"),
    "query onto its filter": ("bloomline query f.blf keys.txt >> f.blf", "stdout is the input 'f.blf'"),
}


@pytest.mark.parametrize("case", sorted(SAME_FILE))
def test_an_output_that_is_also_an_input_is_refused_up_front(case: str, tmp_path: Path) -> None:
    command, message = SAME_FILE[case]
    keys = _keys_file(tmp_path)
    (tmp_path / "link").symlink_to("keys.txt")
    os.link(keys, tmp_path / "hard")
    (tmp_path / "sub").mkdir()
    assert run("build", "-q", str(tmp_path / "f.blf"), str(keys)).returncode == 0
    assert run("dedup", "-q", "--state", str(tmp_path / "seen.blf"), stdin=b"x\n").returncode == 0
    before = {name: (tmp_path / name).read_bytes() for name in ("keys.txt", "f.blf", "seen.blf")}
    r = _sh(command, tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 2 and err.count("\n") == 1, err
    assert err.startswith(f"bloomline: error: {message} (the same file): ") and "would write over what it reads" in err
    assert {name: (tmp_path / name).read_bytes() for name in before} == before
    assert (tmp_path / "link").is_symlink()


def test_different_files_of_the_same_content_are_not_the_same_file(tmp_path: Path) -> None:
    keys = _keys_file(tmp_path)
    (tmp_path / "copy.txt").write_bytes(keys.read_bytes())
    r = _sh("bloomline build -q copy.blf keys.txt copy.txt && bloomline dedup -q keys.txt < copy.txt > out.txt",
            tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out.txt").read_bytes() == keys.read_bytes()


# ---- smaller errors ------------------------------------------------------------------------


def test_options_may_come_between_positionals(tmp_path: Path) -> None:
    keys = _keys_file(tmp_path)
    (tmp_path / "more.txt").write_text("extra\n")
    r = run("build", str(tmp_path / "f.blf"), "--capacity", "1e4", str(keys), "-q", str(tmp_path / "more.txt"))
    assert r.returncode == 0 and r.stderr == b""
    f = BloomFilter.load(tmp_path / "f.blf")
    assert f.capacity == 10_000 and f.contains_many(KEYS).all() and "extra" in f
    r = run("query", str(tmp_path / "f.blf"), "--absent", "-", stdin=b"extra\nnot-there\n")
    assert r.returncode == 0 and r.stdout == b"not-there\n"
    r = run("dedup", str(keys), "-q", str(tmp_path / "more.txt"), "--capacity", "1e4")
    assert r.returncode == 0 and r.stdout == keys.read_bytes() + b"extra\n" and r.stderr == b""


def test_a_capacity_beyond_memory_is_one_line_saying_how_much(tmp_path: Path) -> None:
    keys = _keys_file(tmp_path)
    r = run("build", "--capacity", "2e13", str(tmp_path / "f.blf"), str(keys))
    assert r.returncode == 1 and r.stderr == (
        b"bloomline: error: capacity 20,000,000,000,000 (from --capacity) at error rate 0.01 needs 22.6 TiB of "
        b"memory for the BloomFilter (held in memory whole), more than this machine could give\n")
    assert not (tmp_path / "f.blf").exists()
    r = run("dedup", "--capacity", "3e12", str(keys))
    err = r.stderr.decode()
    assert r.returncode == 1 and err.count("\n") == 1 and "needs 13.2 TiB of memory" in err, err
    r = run("dedup", "--capacity", "3e12", "--window", "1h", str(keys))  # (five generations of its own size)
    err = r.stderr.decode()
    assert r.returncode == 1 and err.count("\n") == 1, err
    assert re.fullmatch(r"bloomline: error: capacity 3,000,000,000,000 \(from --capacity\) at error rate 1e-06 "
                        r"needs (\d+\.\d) TiB of memory for the WindowedBloomFilter \(held in memory whole\), "
                        r"more than this machine could give\n", err), err


def test_a_read_only_file_system_is_refused_before_any_input_is_read(tmp_path: Path, small_fs: Any) -> None:
    d = small_fs("64k")
    r = subprocess.run(["mount", "-o", "remount,ro", str(d)], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"cannot remount read-only: {r.stderr.strip()}")
        pytest.skip(f"cannot remount read-only: {r.stderr.strip()}")
    fifo = tmp_path / "keys.fifo"
    os.mkfifo(fifo)  # no writer: reading it would wait until the timeout below
    for args, path in ((["build", "--capacity", "10", str(d / "f.blf"), str(fifo)], d / "f.blf"),
                       (["dedup", "--state", str(d / "seen.blf"), str(fifo)], d / "seen.blf")):
        r = subprocess.run([EXE or "bloomline", *args], capture_output=True, timeout=20, check=False)
        assert r.returncode == 1 and r.stdout == b""
        assert r.stderr == (f"bloomline: error: cannot write {str(path)!r}: its directory {str(d)!r} is on a "
                            "read-only file system\n").encode()


def _url_lines(n: int) -> bytes:
    return "".join(f"https://x.example/{i}\n" for i in range(1, n + 1)).encode()


def test_the_capacity_warning_comes_past_capacity_and_names_where_it_came_from(tmp_path: Path) -> None:
    (tmp_path / "1000").write_bytes(_url_lines(1000))  # whose estimate from the bits is 1000.3
    r = run("build", str(tmp_path / "f.blf"), str(tmp_path / "1000"))
    assert r.returncode == 0 and b"warning:" not in r.stderr  # exactly at its capacity, the line count
    (tmp_path / "1100").write_bytes(_url_lines(1100))
    r = run("build", "-q", "--capacity", "1000", str(tmp_path / "f.blf"), str(tmp_path / "1100"))
    assert r.returncode == 0 and r.stderr.startswith(
        b"bloomline build: warning: the filter holds at least 1,09")  # its count of new keys: false positives are not new
    assert b"distinct keys, more than its capacity of 1,000 (from --capacity); its false-positive rate is now " \
        in r.stderr and r.stderr.endswith(b". Raise --capacity.\n") and r.stderr.count(b"\n") == 1
    # Far past its capacity a filter finds nearly every key seen: its count of
    # new keys (2,7xx here) is a floor, and the bits say how far past it is.
    (tmp_path / "50k").write_bytes(_url_lines(50_000))
    r = run("build", "-q", "--capacity", "1000", str(tmp_path / "g.blf"), str(tmp_path / "50k"))
    assert r.returncode == 0 and b"warning: the filter holds at least " in r.stderr
    assert b"distinct keys (every bit is set: how many is past telling), more than its capacity" in r.stderr \
        or b" by its bits), more than its capacity" in r.stderr, r.stderr
    state = tmp_path / "seen.blf"
    assert run("dedup", "-q", "--state", str(state), "--capacity", "100", stdin=_url_lines(50)).stderr == b""
    r = run("dedup", "-q", "--state", str(state), stdin=_url_lines(150))
    err = r.stderr.decode()
    assert err.count("\n") == 1 and "CapacityWarning" not in err, err  # one line, not Python's warning as well
    assert f"more than its capacity of 100 (from the filter in {state}); " in err
    assert err.endswith("A new state file with a larger --capacity holds more.\n")


def test_state_or_out_through_a_symlink_to_a_file_mapped_for_writing_is_refused(tmp_path: Path) -> None:
    # The link is followed: the file it leads to is checked (another handle
    # maps it "r+"), and that handle's file is never written in place.
    target = tmp_path / "shared.blf"
    BloomFilter(1000, 0.01).save(target)
    link = tmp_path / "link.blf"
    link.symlink_to(target)
    (tmp_path / "in").write_bytes(b"a\nb\n")
    with BloomFilter.open(target, "r+") as shared:
        shared.add("mine")
        for args in (("dedup", "-q", "--state", str(link), str(tmp_path / "in")),
                     ("build", str(link), str(tmp_path / "in"))):
            r = run(*args)
            assert r.returncode != 0, args
            assert b"open for writing through a map" in r.stderr, (args, r.stderr)
        shared.add("still mine")
    loaded = BloomFilter.load(target)
    assert "mine" in loaded and "still mine" in loaded and "a" not in loaded
    assert link.is_symlink()


# ---- the package's house rules, read from its source ---------------------------------------
# (its docstring and docs/ARCHITECTURE.md): its modules import in one direction; inside a
# function only the optional dependencies are imported (redis-py, Scrapy, and the parts of
# bloomline built on them), so that every other command runs without them; the package
# docstring names every command.

CLI_PACKAGE = Path(__file__).resolve().parent.parent / "python" / "bloomline" / "cli"
# Lowest first: each module imports only those before it.
CLI_ORDER = ["_errors", "_parser", "_input", "_output", "_demo", "_local", "_redis", "__init__"]
# What a function may import: (level, module) of `from ..x import y`, or (0, name) of `import x`.
OPTIONAL_IMPORTS = {(0, "redis"), (2, "redis"), (2, "scrapy.migrate")}


def _cli_module(name: str) -> ast.Module:
    return ast.parse((CLI_PACKAGE / f"{name}.py").read_text(), filename=f"{name}.py")


def test_every_module_of_the_cli_package_is_in_the_order() -> None:
    assert sorted(p.stem for p in CLI_PACKAGE.glob("*.py")) == sorted(CLI_ORDER)


@pytest.mark.parametrize("name", CLI_ORDER)
def test_cli_modules_import_only_those_below_them(name: str) -> None:
    below = set(CLI_ORDER[: CLI_ORDER.index(name)])
    for node in ast.walk(_cli_module(name)):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            assert node.module in below, f"{name} imports .{node.module} at line {node.lineno}"


@pytest.mark.parametrize("name", CLI_ORDER)
def test_a_cli_function_imports_only_optional_dependencies(name: str) -> None:
    for func in ast.walk(_cli_module(name)):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(func):
            if isinstance(node, ast.ImportFrom):
                assert (node.level, node.module) in OPTIONAL_IMPORTS, \
                    f"{name}.{func.name} imports at line {node.lineno}"
            elif isinstance(node, ast.Import):
                assert all((0, a.name) in OPTIONAL_IMPORTS for a in node.names), \
                    f"{name}.{func.name} imports at line {node.lineno}"


def test_the_cli_docstring_names_every_command() -> None:
    init = _cli_module("__init__")
    doc = ast.get_docstring(init) or ""
    table = next(n.value for n in init.body if isinstance(n, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == "COMMANDS" for t in n.targets))
    assert isinstance(table, ast.Dict)
    commands = [k.value for k in table.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    assert "dedup" in commands and "redis" in commands
    for command in commands:
        if command != "redis":
            assert f"\n  {command} " in doc, command
    for action in ("dump", "restore", "import-set"):
        assert f"\n  redis {action} " in doc, action


@pytest.mark.parametrize(("args", "head"), [([], "usage: bloomline [-h] [--version] COMMAND"),
                                            (["redis"], "usage: bloomline redis [-h] ACTION")])
def test_no_command_prints_the_whole_help_and_exits_2(args: list[str], head: str) -> None:
    r = run(*args)
    assert r.returncode == 2 and r.stderr == b""
    out = r.stdout.decode()
    assert out.startswith(head) and "options:" in out and "required" not in out


def test_help_texts_say_why_and_show_percent_once() -> None:
    imp = run("redis", "import-set", "--help").stdout.decode()
    assert "%(spider)s:dupefilter" in " ".join(imp.split()) and "%%" not in imp
    dedup = " ".join(run("dedup", "--help").stdout.decode().split())
    assert "default 1e-6, low because each false positive silently drops a new line" in dedup
    build = " ".join(run("build", "--help").stdout.decode().split())
    assert "default 0.01: the file answers later lookups" in build


def test_info_prints_the_estimated_count_as_a_whole_number(tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("".join(f"k{i}\n" for i in range(3000)))
    out = tmp_path / "f.blf"
    assert run("build", "-q", "--error-rate", "0.5", str(out), str(keys)).returncode == 0
    (line,) = [x for x in run("info", str(out)).stdout.decode().splitlines() if x.startswith("approx_count")]
    assert re.fullmatch(r"approx_count\s+about \d{1,3}(,\d{3})*", line), line
    assert "e+" not in run("info", str(out)).stdout.decode()


def test_dedup_rounds_its_expected_false_positives() -> None:
    data = "".join(f"{i}\n" for i in range(100_000)).encode() * 2
    r = run("dedup", "--capacity", "10000", "--error-rate", "0.5", stdin=data)
    err = r.stderr.decode()
    m = re.search(r"of which about ([\d,.]+) may be false positives", err)
    assert m is not None and "." not in m.group(1) and int(m.group(1).replace(",", "")) > 10, err
    assert "CapacityWarning" not in err and "warnings.warn" not in err
    assert len([x for x in err.splitlines() if "warning:" in x]) == 1


def test_a_full_filter_restored_says_so_not_a_traceback(tmp_path: Path, redis_server: Any) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("".join(f"k{i}\n" for i in range(3000)))
    out = tmp_path / "full.blf"
    assert run("build", "-q", "--capacity", "100", str(out), str(keys)).returncode == 0
    r = run("redis", "restore", str(out), redis_server.url, "full")
    assert r.returncode == 0 and b"every bit set" in r.stderr and b"Traceback" not in r.stderr


def test_the_redis_commands_under_warnings_as_errors_report_a_warning_and_close_their_connection(
        tmp_path: Path, redis_server: Any) -> None:
    """Under PYTHONWARNINGS=error a chain restored past a stage's capacity
    exited 1 with a traceback, though every stage was in Redis; and dump and
    restore left their connection to the collector ("Exception ignored ...
    ResourceWarning: unclosed socket"). The warning is now one line, the
    status 0, and the connection closed."""
    from bloomline import _core

    chain = bloomline.ScalableBloomFilter(1000, 0.01)
    chain.add_many(np.arange(7000, dtype=np.uint64))
    with pytest.warns(bloomline.CapacityWarning):
        chain.stages[0].add_many(np.arange(10**6, 10**6 + 500, dtype=np.uint64))
    data = tmp_path / "chain.blf"
    data.write_bytes(_core.encode_chain(chain.rule, chain.layout, chain.seed, chain.stages, chain._stage_counts))
    env = {**os.environ, "PYTHONWARNINGS": "error"}
    for args in (["restore", str(data), redis_server.url, "warned"],
                 ["dump", redis_server.url, "warned", str(tmp_path / "back.blf")]):
        r = subprocess.run([EXE or "bloomline", "redis", *args], capture_output=True, timeout=300, env=env,
                           check=False)
        err = r.stderr.decode()
        assert r.returncode == 0, err
        assert "Traceback" not in err and "Exception ignored" not in err and "ResourceWarning" not in err, err
        assert len([x for x in err.splitlines() if "warning:" in x]) == (args[0] == "restore"), err
    back = bloomline.ScalableBloomFilter.load(tmp_path / "back.blf")
    keys = np.arange(2 * 10**6, dtype=np.uint64)
    np.testing.assert_array_equal(back.contains_many(keys), chain.contains_many(keys))


def test_a_warning_in_the_cli_is_one_line() -> None:
    """A warning the command does not word itself (here an EvictionWarning-
    like UserWarning raised while the command runs) is one line."""
    code = (
        "import sys, warnings\n"
        "from bloomline import cli\n"
        "from bloomline.cli import _local\n"
        "real = _local.cmd_params\n"
        "def params(args):\n"
        "    warnings.warn('the false-positive rate is\\nnow above what it was made for', UserWarning)\n"
        "    return real(args)\n"
        "cli.COMMANDS['params'] = params\n"
        "sys.exit(cli.main(['params', '--capacity', '1e6', '--error-rate', '0.01']))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert r.returncode == 0
    assert r.stderr == b"bloomline: warning: the false-positive rate is now above what it was made for\n"
