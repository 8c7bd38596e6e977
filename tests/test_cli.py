"""The `bloomline` console script, run for real in a subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import bloomline

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
    assert "warning: about" in r.stderr.decode() and "Raise --capacity" in r.stderr.decode()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["dedup", "--capacity", "0"], "argument --capacity: must be a positive integer, got '0'"),
        (["dedup", "--error-rate", "1.5"], "argument --error-rate: must be in (0, 1), got '1.5'"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        ([], "the following arguments are required: COMMAND"),
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


def test_bench_runs() -> None:
    r = run("bench", "--keys", "20000")
    assert r.returncode == 0, r.stderr
    assert "ns/key" in r.stdout.decode() and "Python set" in r.stdout.decode()
