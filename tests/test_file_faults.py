"""Mapped files under the faults a crawler meets on one machine: a full
disk under a sparse file, a fork of a process that holds a file "r+", a
payload damaged before anyone wrote, and streams that claim absurd lengths.
A crash would end the run, so those cases run in child processes.
"""

from __future__ import annotations

import errno
import io
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bloomline import BloomFilter, CountingBloomFilter, ScalableBloomFilter

pytestmark = pytest.mark.core


def run_child(code: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    prelude = "import os, sys, signal, numpy as np, bloomline\nfrom bloomline import *\n"
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code), *args], capture_output=True,
                          text=True, timeout=timeout)


def write_sparse(data: bytes, path: Path) -> None:
    # The header and the trailer, with a hole between: an empty filter's zero
    # payload, which takes no disk blocks until a page is written.
    with open(path, "wb") as out:
        out.write(data[:128])
        out.seek(len(data) - 8)
        out.write(data[-8:])


@pytest.mark.parametrize("kind", ["BloomFilter", "CountingBloomFilter"])
def test_a_sparse_file_on_a_full_disk_is_refused_at_open_not_a_crash(small_fs: Any, kind: str) -> None:
    fs = small_fs("1m")
    path = fs / "sparse.blf"
    cls = BloomFilter if kind == "BloomFilter" else CountingBloomFilter
    write_sparse(cls(3_000_000 if kind == "BloomFilter" else 800_000, 0.01).to_bytes(), path)  # ~3.6 MB on 1 MB
    assert os.stat(path).st_blocks * 512 < 1 << 20
    r = run_child(f"""
        try:
            f = {kind}.open(sys.argv[1], "r+")
        except OSError as e:
            print("refused", e.errno, e)
            sys.exit(0)
        f.add_many(np.arange(2_000_000, dtype=np.uint64))
        print("added")
    """, str(path))
    assert r.returncode == 0, f"the process died ({r.returncode}): {r.stderr[-1500:]}"
    assert f"refused {errno.ENOSPC}" in r.stdout, r.stdout + r.stderr
    assert kind.endswith("Filter") and cls.load(path).approx_count == 0  # untouched, still loads


FORK = """
path = sys.argv[1]
f = BloomFilter.open(path, "r+")
f.add_many(np.arange(0, 1000, dtype=np.uint64))
pid = os.fork()
if pid == 0:
    try:
        f.add("from the child")
        print("child added", flush=True)
    except ValueError as e:
        print("child refused:", e, flush=True)
    try:  # a threaded add (every thread writes) is refused the same way
        f.add_many(np.arange(100_000, 200_000, dtype=np.uint64), threads=2)
        print("child added on threads", flush=True)
    except ValueError as e:
        print("child threaded refused:", e, flush=True)
    try:
        f.flush()
    except ValueError as e:
        print("child flush refused", flush=True)
    f.close()  # lets go of the child's copy only
    os._exit(0)
os.waitpid(pid, 0)
f.add_many(np.arange(1000, 50_000, dtype=np.uint64))
loaded = BloomFilter.load(path)  # the file is still open for writing: dirty, and loads
print("parent reads", bool(loaded.contains_many(np.arange(0, 50_000, dtype=np.uint64)).all()), flush=True)
if sys.argv[2] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
f.close()
print("parent closed", flush=True)
"""


@pytest.mark.parametrize("end", ["close", "kill"])
def test_a_forked_child_never_releases_what_its_parent_holds(tmp_path: Path, end: str) -> None:
    path = tmp_path / "f.blf"
    BloomFilter(100_000, 0.01).save(path)
    r = run_child(FORK, str(path), end)
    assert "child refused: this filter's memory was opened for writing by a parent" in r.stdout, r.stdout + r.stderr
    assert "child threaded refused: this filter's memory was opened for writing by a parent" in r.stdout, r.stdout
    assert "child flush refused" in r.stdout
    assert "parent reads True" in r.stdout, r.stdout + r.stderr
    if end == "close":
        assert "parent closed" in r.stdout and r.returncode == 0, r.stderr
    else:
        assert r.returncode == -signal.SIGKILL
    # Killed or closed, the parent's adds are all there and the file loads.
    assert BloomFilter.load(path).contains_many(np.arange(0, 50_000, dtype=np.uint64)).all()


@pytest.mark.parametrize("cls", [BloomFilter, CountingBloomFilter])
def test_a_writer_never_blesses_a_damaged_payload(tmp_path: Path, cls: Any) -> None:
    path = tmp_path / "f.blf"
    f = cls(10_000, 0.01)
    f.add_many(np.arange(5000, dtype=np.uint64))
    f.save(path)
    data = bytearray(path.read_bytes())
    data[128:128 + 4096] = bytes(4096)  # payload damage: many keys' bits or counters gone
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="payload checksum mismatch"):
        cls.open(path, "r+")
    # Refused, and left as it was: still damaged, still refused by a load.
    with pytest.raises(ValueError, match="payload checksum mismatch"):
        cls.load(path)


def test_a_stream_header_claiming_a_huge_payload_is_refused_before_reading(tmp_path: Path) -> None:
    # A checksummed header whose payload_len does not match its geometry:
    # refused from the header alone, with at most the header read.
    good = bytearray(BloomFilter.from_params(10_240, 7).to_bytes())
    good[72:80] = (1 << 40).to_bytes(8, "little")
    from bloomline import murmur3_128
    good[120:128] = (murmur3_128(bytes(good[:120]), 0) & ((1 << 64) - 1)).to_bytes(8, "little")

    class Endless(io.RawIOBase):
        read_bytes = 0

        def readable(self) -> bool:
            return True

        def readinto(self, b: Any) -> int:
            n = len(b)
            if self.read_bytes == 0:
                b[:128] = good[:128]
                n = 128
            else:
                b[:n] = bytes(n)
            self.read_bytes += n
            return n

    src = Endless()
    with pytest.raises(ValueError, match="payload_len 1099511627776 does not match num_slots 10240"):
        BloomFilter.load(src)
    assert src.read_bytes == 128


def test_a_stream_chain_header_claiming_more_than_its_rule_allows_is_refused(tmp_path: Path) -> None:
    chain = ScalableBloomFilter(1000, 0.01)
    chain.add_many(np.arange(5000, dtype=np.uint64))
    data = bytearray(chain.to_bytes())
    data[72:80] = (1 << 40).to_bytes(8, "little")
    from bloomline import murmur3_128
    data[120:128] = (murmur3_128(bytes(data[:120]), 0) & ((1 << 64) - 1)).to_bytes(8, "little")
    with pytest.raises(ValueError, match="is more than a chain of"):
        ScalableBloomFilter.load(io.BytesIO(bytes(data)))


def test_a_non_blocking_file_with_no_data_is_a_clear_error() -> None:
    import socket
    a, b = socket.socketpair()
    with a, b:
        a.setblocking(False)
        with a.makefile("rb", buffering=0) as src:
            with pytest.raises(ValueError, match=r"file.read\(\) returned None"):
                BloomFilter.load(src)


class _Writer(io.RawIOBase):
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> Any:  # type: ignore[override]
        return self.answer(len(b))


@pytest.mark.parametrize("answer, error, match", [
    (lambda n: -1, ValueError, r"file.write\(\) returned -1 for \d+ bytes offered"),
    (lambda n: "ok", TypeError, r"file.write\(\) must return the number of bytes it took, got str"),
    (lambda n: n + 10, ValueError, r"returned \d+ for \d+ bytes offered .*the save is incomplete"),
])
def test_a_writer_that_answers_wrongly_is_an_error_not_a_truncated_save(answer: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        BloomFilter(1000, 0.01).save(_Writer(answer))


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can open a 0444 file for writing")
def test_root_cannot_open_a_0444_file_for_writing(tmp_path: Path) -> None:
    path = tmp_path / "f.blf"
    BloomFilter(1000, 0.01).save(path)
    path.chmod(0o444)
    with pytest.raises(PermissionError, match="a read-only file, mode 0444, is not opened for writing"):
        BloomFilter.open(path, "r+")
    with BloomFilter.open(path, "r") as f:  # reading stays allowed
        assert "x" not in f


def test_buffer_of_an_uninitialised_filter_says_so() -> None:
    for cls in (BloomFilter, CountingBloomFilter):
        with pytest.raises(TypeError, match="the filter is not initialised"):
            memoryview(cls.__new__(cls))


def test_masked_arrays_are_refused_not_read_by_their_hidden_values() -> None:
    keys = np.ma.masked_array(np.arange(10, dtype=np.uint64), mask=[0, 1] * 5)
    f = BloomFilter(1000, 0.01)
    for call in (f.add_many, f.contains_many):
        with pytest.raises(TypeError, match=r"keys is a numpy masked array.*keys.compressed\(\)"):
            call(keys)
    f.add_many(keys.compressed())
    assert f.contains_many(np.arange(0, 10, 2, dtype=np.uint64)).all()
    assert not f.contains_many(np.arange(1, 10, 2, dtype=np.uint64)).any()


def test_false_positive_rate_near_zero_keys_is_a_number() -> None:
    import math
    from bloomline import false_positive_rate
    for n in (5e-324, 1e-310, 1e-100, 1e-17):
        for k in (1, 2, 7):
            for layout in ("blocked", "standard"):
                rate = false_positive_rate(n, 512, k, layout=layout)
                assert math.isfinite(rate) and 0 <= rate < 1e-6, (n, k, layout, rate)
    assert false_positive_rate(0, 512, 1) == 0


def test_counting_insert_count_is_zero_once_every_key_is_removed() -> None:
    c = CountingBloomFilter(400_000, 0.01)
    keys = np.arange(400_000, dtype=np.uint64)
    c.add_many(keys)
    c.remove_many(keys)
    assert c.nonzero_counters == 0 and c.insert_count == 0


def test_a_first_writer_recounts_a_wrong_fill_under_a_sound_checksum(tmp_path: Path) -> None:
    # A clean file whose header's fill is wrong but whose payload matches its
    # checksum opens "r+" (the fill recounted); verify=True still refuses it.
    from bloomline import murmur3_128
    path = tmp_path / "f.blf"
    f = BloomFilter(10_000, 0.01)
    f.add_many(np.arange(1000, dtype=np.uint64))
    data = bytearray(f.to_bytes())
    data[80:88] = (12345).to_bytes(8, "little")
    data[120:128] = (murmur3_128(bytes(data[:120]), 0) & ((1 << 64) - 1)).to_bytes(8, "little")
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="fill 12345 does not match"):
        BloomFilter.open(path, "r+", verify=True)
    with BloomFilter.open(path, "r+") as g:
        assert g.contains_many(np.arange(1000, dtype=np.uint64)).all()
    assert BloomFilter.load(path).contains_many(np.arange(1000, dtype=np.uint64)).all()


def test_a_writer_answering_true_is_not_taken_for_one_byte() -> None:
    with pytest.raises(TypeError, match=r"must return the number of bytes it took, got bool"):
        BloomFilter(1000, 0.01).save(_Writer(lambda n: True))
