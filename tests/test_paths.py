"""What saves and loads do with paths that are not plain files.

The rule (docs/design/format.md, "Paths: regular files only"): bloomline reads, maps and replaces
regular files only. A FIFO, a device node, a socket or a directory is
refused with a ValueError that says what it is, at once (a FIFO is never
opened: that would block), and never replaced. A symlink is followed, not
replaced: the file it leads to is checked (mapped for writing elsewhere?
read-only?) and replaced, and the link stays. A long name still saves.
Each call that could hang runs in a child process with a time limit.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import bloomline
from bloomline import BloomFilter, CountingBloomFilter, ScalableBloomFilter

pytestmark = pytest.mark.core

KINDS = {"BloomFilter": lambda: BloomFilter(1000, 0.01), "CountingBloomFilter": lambda: CountingBloomFilter(1000, 0.01),
         "ScalableBloomFilter": lambda: ScalableBloomFilter(1000, 0.01)}


def run_child(code: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    prelude = "import os, sys, bloomline\nfrom bloomline import *\n"
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_save_to_a_fifo_is_refused_at_once_and_the_fifo_stays(tmp_path: Path, kind: str) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    r = run_child(f"""
        f = {kind}(1000, 0.01)
        f.add("k")
        try:
            f.save(sys.argv[1] if len(sys.argv) > 1 else {str(fifo)!r})
        except ValueError as e:
            print("refused:", e)
    """)
    assert "refused:" in r.stdout and "is a FIFO (named pipe)" in r.stdout, r.stdout + r.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_load_and_open_of_a_fifo_are_refused_at_once(tmp_path: Path, kind: str) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    calls = [f"{kind}.load({str(fifo)!r})"]
    if kind != "ScalableBloomFilter":
        calls += [f"{kind}.open({str(fifo)!r}, 'r')", f"{kind}.open({str(fifo)!r}, 'r+')",
                  f"{kind}.load({str(fifo)!r}, mmap=True)"]
    for call in calls:
        r = run_child(f"""
            try:
                {call}
            except ValueError as e:
                print("refused:", e)
        """)
        assert "refused:" in r.stdout and "FIFO" in r.stdout, (call, r.stdout + r.stderr)


def test_save_never_replaces_a_device_node(tmp_path: Path) -> None:
    node = tmp_path / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # the node of /dev/null
    except PermissionError:
        pytest.skip("making a device node needs root")
    for make in KINDS.values():
        with pytest.raises(ValueError, match="is a character device"):
            make().save(node)
        assert stat.S_ISCHR(os.lstat(node).st_mode)


def test_save_through_a_link_to_a_pipe_is_refused(tmp_path: Path) -> None:
    # /proc/self/fd/1 is the child's stdout, a pipe: a link to it leads to a pipe.
    link = tmp_path / "out"
    link.symlink_to("/proc/self/fd/1")
    r = run_child(f"""
        try:
            BloomFilter(1000, 0.01).save({str(link)!r})
        except ValueError as e:
            print("refused:", e)
    """)
    assert "refused:" in r.stdout and "is a FIFO" in r.stdout, r.stdout + r.stderr
    assert link.is_symlink()


def test_directories_and_sockets_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is a directory"):
        BloomFilter(1000, 0.01).save(tmp_path)
    import socket
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        with pytest.raises(ValueError, match="is a socket"):
            BloomFilter(1000, 0.01).save(path)
        with pytest.raises(ValueError, match="is a socket"):
            BloomFilter.load(path)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_save_through_a_symlink_replaces_its_target_and_keeps_the_link(tmp_path: Path, kind: str) -> None:
    real_dir = tmp_path / "data"
    real_dir.mkdir()
    target = real_dir / "seen.blf"
    KINDS[kind]().save(target)
    links = tmp_path / "links"
    links.mkdir()
    link = links / "current.blf"
    link.symlink_to(Path("..") / "data" / "seen.blf")  # relative, from the link's own directory
    f = KINDS[kind]()
    f.add("after")
    f.save(link)
    assert link.is_symlink() and os.readlink(link) == str(Path("..") / "data" / "seen.blf")
    loaded = getattr(bloomline, kind).load(target)
    assert "after" in loaded
    assert not list(links.iterdir())[1:], "a temporary file was left beside the link"
    assert sorted(p.name for p in real_dir.iterdir()) == ["seen.blf"]


def test_save_through_a_dangling_symlink_makes_the_file_it_names(tmp_path: Path) -> None:
    link = tmp_path / "link.blf"
    link.symlink_to(tmp_path / "new.blf")
    BloomFilter(1000, 0.01).save(link)
    assert link.is_symlink() and (tmp_path / "new.blf").is_file()


def test_save_through_a_symlink_to_a_file_mapped_for_writing_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "shared.blf"
    BloomFilter(1000, 0.01).save(target)
    link = tmp_path / "alias.blf"
    link.symlink_to(target)
    with BloomFilter.open(target, "r+") as shared:
        shared.add("kept")
        with pytest.raises(ValueError, match="open for writing through a map"):
            BloomFilter(1000, 0.01).save(link)
        with pytest.raises(ValueError, match="open for writing through a map"):
            bloomline._core.AtomicWriter.check(link)
        shared.add("still writable")
    loaded = BloomFilter.load(target)
    assert "kept" in loaded and "still writable" in loaded


def test_symlink_loops_are_an_error(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.symlink_to(b)
    b.symlink_to(a)
    with pytest.raises(OSError):
        BloomFilter(1000, 0.01).save(a)


def test_a_long_name_saves(tmp_path: Path) -> None:
    name = "f" * 244 + ".blf"  # 248 bytes: its temporary name must be cut to fit 255
    f = BloomFilter(1000, 0.01)
    f.add("x")
    f.save(tmp_path / name)
    assert "x" in BloomFilter.load(tmp_path / name)
    assert [p.name for p in tmp_path.iterdir()] == [name]


@pytest.mark.skipif(os.geteuid() != 0, reason="making a link owned by another user needs root")
def test_a_link_planted_by_another_user_in_a_sticky_directory_is_not_followed(tmp_path: Path) -> None:
    # /tmp's rule (the kernel's protected_symlinks), kept by the save that
    # follows links itself: a link another user owns in a sticky,
    # world-writable directory does not aim a save at a file of ours.
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    victim = tmp_path / "important"
    victim.write_bytes(b"not a filter")
    for name, target in (("planted.blf", victim), ("dangling.blf", tmp_path / "made-by-the-link")):
        link = shared / name
        link.symlink_to(target)
        os.lchown(link, 12345, 12345)
        with pytest.raises(PermissionError, match="another user owns in a sticky, world-writable directory"):
            BloomFilter(1000, 0.01).save(link)
    assert victim.read_bytes() == b"not a filter" and not (tmp_path / "made-by-the-link").exists()
    mine = shared / "mine.blf"  # a link of the caller's own is followed as anywhere else
    mine.symlink_to(tmp_path / "mine-target.blf")
    BloomFilter(1000, 0.01).save(mine)
    assert (tmp_path / "mine-target.blf").is_file()


def test_a_long_multibyte_name_saves(tmp_path: Path) -> None:
    name = "é" * 120 + ".blf"  # 244 bytes of UTF-8: its temporary name is cut between characters
    BloomFilter(1000, 0.01).save(tmp_path / name)
    assert [p.name for p in tmp_path.iterdir()] == [name]
