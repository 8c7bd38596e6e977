"""Journals of one machine's crawlers in a shared directory, and who owns
each: the taken journals of RedisJournalScheduler and the spills of
RedisBloomDupeFilter (_outage.py). A journal is named for its key and its
Redis (journal_stems), its owner process and a random part
(own_journal_path); a crawl hands back only what a dead owner left of its
own key on its own Redis (left_journals, claim).

An owner is alive while it holds its lock: each process that writes
journals in a directory holds flock(2) on ``.owner.<pid>-<token>.lock``
there for its life, and names its journals and claims with that token.
The kernel drops the lock when the process dies, whatever its pid was in
its own namespace (a container's crawler is pid 1 on every start) and
whichever process has that pid now; a pid alone says "alive" for as long
as any process has it. Journals an earlier bloomline named by pid alone
are still judged by their pid, and one left alone because its pid runs
is named in a WARNING."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import logging
import os
import re
import time
from pathlib import Path
from typing import Any, Optional, Sequence

from ._settings import _server_where

logger = logging.getLogger(__name__)

# This process's token, and its lock's descriptor in each directory (made
# again in a forked child: its parent's lock is not its own).
_owner: dict[str, Any] = {"pid": -1, "token": "", "locks": {}}
_warned: set[str] = set()  # journals left alone for a live pid, named once a process
OPEN: set[Path] = set()  # the journals this process's open crawls write, resolved: never taken by another
_LOCK = re.compile(r"\.owner\.([0-9]+)-([0-9a-f]+)\.lock(\.new)?")
_MAKING_S = 60.0  # a lock file still under its making name this long after it was made: its maker died first


def journal_stems(key: str, server: Any, *, legacy_hashed: bool) -> tuple[str, list[str]]:
    """The stem of the journals of `key` on the Redis `server` talks to
    (the key folded to a file name, then a hash of the key and the server),
    and those earlier versions named them by, read and never written: the
    key folded, with a hash of the key alone where legacy_hashed. A journal
    is handed back only to a crawl of its own key on its own Redis: two
    keys that fold alike, or one key on two servers (or databases), never
    take each other's requests."""
    safe = _file_safe(key)
    own = hashlib.sha256(f"{key}\n{_server_where(server)}".encode()).hexdigest()[:12]
    return f"{safe}-{own}", [f"{safe}-{hashlib.sha256(key.encode()).hexdigest()[:12]}" if legacy_hashed else safe]


def _token(directory: Path) -> str:
    """This process's token, its lock in directory held (taken once)."""
    if _owner["pid"] != os.getpid():
        for fd in _owner["locks"].values():  # (a forked child's copies: closed, the parent's lock stays held)
            with contextlib.suppress(OSError):
                os.close(fd)
        _owner.update(pid=os.getpid(), token=os.urandom(6).hex(), locks={})
    where = str(directory.resolve())
    path = directory / f".owner.{os.getpid()}-{_owner['token']}.lock"
    held = _owner["locks"].get(where)
    if held is not None and not _same_file(held, path):  # (the directory removed and made again, or the file)
        os.close(held)
        del _owner["locks"][where]
    if where not in _owner["locks"]:
        _owner["locks"][where] = _make_lock(path)  # (a child's copy made before this is recorded: _forks closes it)
    return str(_owner["token"])


def _make_lock(path: Path) -> int:
    """The owner lock at path, made and held: locked before it is named, so
    a lock file found under its name is held while its owner lives (one
    found free is removed: _holds_lock). A making file swept meanwhile (by
    a crawl that took it for a dead maker's) is made again."""
    making = path.with_name(path.name + ".new")
    for attempt in range(3):
        fd = os.open(making, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            os.fchmod(fd, 0o644)  # (readable by crawlers of other users sharing the directory, whatever the umask)
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.rename(making, path)
            return fd
        except FileNotFoundError:
            os.close(fd)
            if attempt == 2:
                raise
        except BaseException:
            os.close(fd)
            raise
    raise AssertionError("unreachable")  # pragma: no cover


def own_journal_path(directory: Path, stem: str, kind: str) -> Path:
    """A new journal's path in directory (made if need be), named for this
    process: its pid, a random part (two crawls of one process never share
    a name) and its owner token."""
    directory.mkdir(parents=True, exist_ok=True)
    return directory / f"{stem}.{os.getpid()}-{os.urandom(4).hex()}.o{_token(directory)}.{kind}.journal"


def left_journals(directory: Path, stems: Sequence[str], kind: str, label: str) -> list[tuple[Path, Path]]:
    """(file, its name) of the journals named by own_journal_path, under
    any of `stems` (journal_stems: this version's and earlier ones'), that
    this process may take: those left by crawls of this process or of owners
    gone, and those claimed (claim()) by an owner that died as it handed
    them on, which would otherwise be stranded under their claimed names.
    A live owner's journal is its own: it may be writing to it now (taken,
    the file would be rewritten under it). This process's open one the
    caller has. A claim is made and settled within one call (handed on,
    or renamed back), so one of this process's is a dead process's, or
    an earlier crawl's of this process (one open in OPEN is left alone).
    The reserves (reserve_path) of owners gone are removed on the way."""
    if not directory.is_dir():
        return []
    names = "|".join(re.escape(stem) for stem in stems)
    name = rf"(?:{names})\.([0-9]+)(?:-[0-9a-f]+)?(?:\.o([0-9a-f]+))?\.{re.escape(kind)}"
    own, claimed = re.compile(name + r"\.journal"), re.compile(rf"({name}\.journal)\.([0-9]+)(?:\.o([0-9a-f]+))?\.claimed")
    reserve = re.compile(name + r"\.reserve")
    found = []
    for path in sorted(directory.iterdir()):
        if (m := _LOCK.fullmatch(path.name)) and m.group(2) != _owner["token"]:
            if not m.group(3) or (_older_than(path, _MAKING_S) and not _alive(int(m.group(1)))):  # (one being made)
                _holds_lock(path)  # (one whose owner is gone is removed)
        elif path.resolve() in OPEN or path.with_suffix(".journal").resolve() in OPEN:
            continue
        elif m := own.fullmatch(path.name):
            if _gone(directory, int(m.group(1)), m.group(2), path, label):
                found.append((path, path))
        elif (m := claimed.fullmatch(path.name)) and _gone(directory, int(m.group(4)), m.group(5), path, label):
            found.append((path, path.with_name(m.group(1))))
        elif (m := reserve.fullmatch(path.name)) and _gone(directory, int(m.group(1)), m.group(2), path, label):
            with contextlib.suppress(OSError):
                os.unlink(path)
    return found


def reserve_path(journal: Path) -> Path:
    """Where the room kept for a crawl's stop is held beside its journal
    (own_journal_path): the journal's name, ``.reserve`` for ``.journal``."""
    return journal.with_suffix(".reserve")


def claim(path: Path, name: Path) -> Optional[Path]:
    """Take a left journal (left_journals) by renaming it for this process,
    so that no other process takes it too: its new path, or None if another
    process took it first."""
    claimed = name.with_name(f"{name.name}.{os.getpid()}.o{_token(name.parent)}.claimed")
    try:
        os.rename(path, claimed)
    except OSError:
        return None
    return claimed


def _gone(directory: Path, pid: int, token: Optional[str], path: Path, label: str) -> bool:
    """Has the owner of a journal (its pid, and token if it has one) gone?
    This process's own are taken (the caller leaves out its open ones)."""
    if token is not None:
        if pid == os.getpid() and token == _owner["token"]:
            return True
        return not _holds_lock(directory / f".owner.{pid}-{token}.lock")
    if pid == os.getpid() or not _alive(pid):
        return True
    if str(path) not in _warned:
        _warned.add(str(path))
        logger.warning("%s: %s is left alone: it is named for process %d, which runs (an earlier bloomline named "
                       "journals by pid alone). If that process is no crawler of this directory, rename the file "
                       "with a pid that runs no process for the next crawl to take it", label, path, pid)
    return False


def _older_than(path: Path, seconds: float) -> bool:
    try:
        return time.time() - path.stat().st_mtime > seconds
    except OSError:
        return False


def _child_lets_go() -> None:
    """In a forked child: its copies of the parent's lock descriptors are
    closed (held here, they would keep a dead parent's journals from being
    taken while the child lives); it makes its own token if it writes."""
    for fd in _owner["locks"].values():
        with contextlib.suppress(OSError):
            os.close(fd)
    _owner.update(pid=-1, token="", locks={})


os.register_at_fork(after_in_child=_child_lets_go)


def _same_file(fd: int, path: Path) -> bool:
    """Is the file open at fd the one at path now?"""
    try:
        there = os.stat(path)
    except FileNotFoundError:
        return False
    here = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _holds_lock(path: Path) -> bool:
    """Does a live process hold the owner lock at path? (None there: its
    owner is gone; the lock taken here: gone too, and the file removed. One
    this process may not read is another user's: held, as far as it can
    tell, and its journals are left alone.)"""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    except PermissionError:
        return True
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return True
            raise
        with contextlib.suppress(OSError):  # (gone already, or another user's sticky directory: its owner is gone all the same)
            os.unlink(path)
        return False
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    """Does a process with this pid run on this machine?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # (someone else's)
        return True
    return True


def _file_safe(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", key)[:100]
