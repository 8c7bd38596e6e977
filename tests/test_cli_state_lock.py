"""`bloomline dedup --state`: one run at a time on a state file. Two at
once would each load the same filter and the second to save would drop the
lines only the first wrote, so a later run printed them again; the second
run is refused, saying why, and a killed run leaves no lock behind."""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

EXE = shutil.which("bloomline") or "bloomline"
NL = b"\n"


def lines(prefix: str, n: int) -> bytes:
    return b"".join(f"{prefix}{i}\n".encode() for i in range(n))


class Holder:
    """A dedup run on `state` that has written its first lines and waits on
    its stdin for more: it holds the state until its input ends."""

    def __init__(self, state: Path, *options: str) -> None:
        self.p = subprocess.Popen([EXE, "dedup", "-q", "--capacity", "100000", *options, "--state", str(state)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert self.p.stdin is not None and self.p.stdout is not None
        self.p.stdin.write(lines("a", 1000))
        self.p.stdin.flush()
        got = b""
        deadline = time.monotonic() + 60
        while got.count(b"\n") < 1000:  # printed: it is in its loop, the state loaded
            ready, _, _ = select.select([self.p.stdout], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, f"the run printed {got.count(NL)} of its 1,000 lines in 60 s"
            chunk = self.p.stdout.read1(1 << 16)
            assert chunk, self.p.stderr.read() if self.p.stderr else b""
            got += chunk

    def finish(self) -> int:
        _out, err = self.p.communicate(timeout=120)
        assert not err, err
        return self.p.returncode


def dedup(state: Path, data: bytes, *options: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([EXE, "dedup", "-q", *options, "--state", str(state)], input=data, capture_output=True,
                          timeout=120, check=False)


@pytest.mark.parametrize("options", [(), ("--window", "7d")], ids=["fixed", "windowed"])
def test_a_second_run_on_a_state_in_use_is_refused_and_loses_nothing(tmp_path: Path, options: tuple[str, ...]) -> None:
    state = tmp_path / "seen.blf"
    holder = Holder(state, *options)
    second = dedup(state, lines("b", 500), *options)
    assert second.returncode == 1 and second.stdout == b""
    assert b"is in use by another bloomline run" in second.stderr and str(state).encode() in second.stderr
    assert holder.finish() == 0
    again = dedup(state, lines("a", 1000) + lines("b", 500), *options)
    assert again.returncode == 0
    assert again.stdout == lines("b", 500)  # the holder's lines seen; the refused run's not, as it wrote none


def test_a_killed_run_leaves_no_lock(tmp_path: Path) -> None:
    state = tmp_path / "seen.blf"
    dedup(state, lines("x", 10))  # a state to load
    holder = Holder(state)
    holder.p.send_signal(signal.SIGKILL)
    holder.p.communicate(timeout=60)
    after = dedup(state, lines("x", 10) + lines("c", 3))  # (the killed run saved nothing: its lines are not in it)
    assert after.returncode == 0 and after.stdout == lines("c", 3)


def test_a_run_through_a_symlink_holds_the_file_it_leads_to(tmp_path: Path) -> None:
    state = tmp_path / "seen.blf"
    link = tmp_path / "link.blf"
    os.symlink(state.name, link)
    holder = Holder(link)
    refused = dedup(state, lines("b", 5))
    assert refused.returncode == 1 and b"in use" in refused.stderr
    assert holder.finish() == 0
    assert dedup(link, lines("a", 1000)).stdout == b""


@pytest.fixture
def shm_dir() -> Any:
    """A directory of its own in /dev/shm (a tmpfs under /dev), removed after."""
    import tempfile

    if not os.path.isdir("/dev/shm") or not os.access("/dev/shm", os.W_OK):
        pytest.skip("no writable /dev/shm")
    where = Path(tempfile.mkdtemp(prefix="bloomline-test-", dir="/dev/shm"))
    yield where
    shutil.rmtree(where, ignore_errors=True)


def test_a_state_under_dev_shm_is_held_and_saved_atomically(shm_dir: Path) -> None:
    """/dev/shm is a file system under /dev, not an open file of the
    process: a state there is locked and replaced by a rename, as anywhere
    else (written in place, a failed save left it empty, loading nothing)."""
    state = shm_dir / "seen.blf"
    assert dedup(state, lines("x", 10), "--capacity", "100000").returncode == 0
    inode = state.stat().st_ino
    holder = Holder(state)
    second = dedup(state, lines("b", 5))
    assert second.returncode == 1 and b"is in use by another bloomline run" in second.stderr
    assert holder.finish() == 0
    assert state.stat().st_ino != inode  # a new file renamed over it, never the old one truncated
    again = dedup(state, lines("x", 10) + lines("a", 1000) + lines("c", 3))
    assert again.returncode == 0 and again.stdout == lines("c", 3)
