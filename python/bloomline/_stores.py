"""Where a scalable chain's stages live: the ``StageStore`` protocol (and
``SharedStageStore``, for a store several processes add through), what a
store's add returns (``StageAdd``), and the stores of one process: in
memory (``MemoryStages``, the default) and as mapped files in a directory
(``DirectoryStages``, the Scrapy dupefilter's JOBDIR). The chain
(scalable.ScalableBloomFilter) decides when a stage starts and with what
parameters; a store keeps them. bloomline.redis.RedisStages is the shared one.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Protocol

from ._core import AtomicWriter, BloomFilter, ChainRule
from ._forks import renew_locks_after_fork
from ._numpy import np

if TYPE_CHECKING:
    import numpy.typing as npt

    from ._core import Layout, StrPath

__all__ = ["ChainMismatch", "DirectoryStages", "MemoryStages", "SharedStageStore", "StageAdd", "StageStore",
           "StagesInUse"]


class StagesInUse(BlockingIOError):
    """A DirectoryStages directory another chain holds (another process's,
    or another object's in this one), or a chain forked with it whose child
    adds: its stages have one writer."""


class ChainMismatch(ValueError):
    """A stored stage differs from what the chain's parameters make (or the
    chain's own parameters, as a shared store keeps them: `chain`)."""

    def __init__(self, index: int, field: str, stored: Any, wanted: Any, stage: Any,
                 chain: Optional[dict[str, str]] = None) -> None:
        super().__init__(f"stage {index} differs in {field} (stored {stored!r} != {wanted!r} from these "
                         "parameters); resume with the parameters it was made with")
        self.index, self.field, self.stored, self.wanted, self.stage = index, field, stored, wanted, stage
        self.chain = chain


@dataclass
class StageAdd:
    """What a store's add to the chain's last stage did, as a value: `new`
    per key given. A shared store also says which keys the stage `taken`
    (False for the rest: it is full, or the chain grew) and the stage's
    `count`; `stale` (the chain's stage count) when another process grew
    the chain and nothing was taken; `error` when the add failed part-way,
    with `unknown` True for the keys it has no answer for. The chain
    raises, once, with the facts of the whole batch.

    `doubted`: keys not taken by a send re-sent after a lost reply. The
    lost send may have taken them before the stage filled or the chain
    grew, and a re-send whose kept answer is gone cannot say (it takes
    nothing from a full or stale stage): found present in that stage
    afterwards, such a key's answer is unknown, not "seen", and the chain
    raises `doubt` for it."""

    new: npt.NDArray[np.bool_]
    taken: Optional[npt.NDArray[np.bool_]] = None
    count: Optional[int] = None
    stale: Optional[int] = None
    error: Optional[BaseException] = None
    unknown: Optional[npt.NDArray[np.bool_]] = None
    doubted: Optional[npt.NDArray[np.bool_]] = None
    doubt: Optional[BaseException] = None


class StageStore(Protocol):
    """Where a chain's stages live. A store hands the chain its existing
    stages (oldest first, each with its count of new keys) and makes new
    ones; the chain decides when and with what parameters. A shared store
    (``shared`` True: several processes add to the same chain, as
    ``redis.RedisStages``) decides when its last stage is full, in the same
    step as the add, looks a batch up in several stages at once
    (``contains_any``), and the chain reads its stages again whenever their
    number changes. A store may have ``check_writer()``, which the chain
    calls before it writes a stage itself (a single add, a union) and which
    raises where this process may not write (DirectoryStages in a fork)."""

    shared: bool

    def attach_chain(self, rule: ChainRule, layout: Layout, seed: int) -> None:
        """The chain's parameters, before its stages are read: a store that
        keeps them (RedisStages, with its first stage) checks them against
        what it holds (ChainMismatch)."""
        ...

    def stages(self) -> list[tuple[BloomFilter, int]]:
        """The stages in the store, oldest first, with their counts."""
        ...

    def stage_count(self) -> int:
        """How many stages the store holds now."""
        ...

    def new_stage(self, index: int, capacity: int, error_rate: float, layout: Layout, seed: int) -> BloomFilter:
        """Make stage ``index`` (empty) and keep it; a shared store makes it
        once, however many processes ask."""
        ...

    def add_to_last(self, index: int, stage: BloomFilter, keys: Any) -> StageAdd:
        """Add hashed keys to stage `index`, the last one. A local store
        takes every key and the chain counts; a shared store takes keys
        while the stage has room and reports the stage's count (StageAdd)."""
        ...

    def reset(self) -> None:
        """Drop every stage."""
        ...

    def close(self) -> None:
        """Release what the stages hold (files); the chain is unusable after."""
        ...


class SharedStageStore(StageStore, Protocol):
    """A store shared by several processes (``shared`` True)."""

    def contains_any(self, first: int, last: int, keys: Any) -> npt.NDArray[np.bool_]:
        """Hashed keys looked up in stages first..last-1 at once; True where
        any may hold the key."""
        ...


class _LocalStages:
    """What the stores of one process share: adds go to the stage as they are."""

    shared = False
    _made = 0

    def attach_chain(self, rule: ChainRule, layout: Layout, seed: int) -> None:
        pass  # the stages' own parameters say it (checked by the chain)

    def add_to_last(self, index: int, stage: BloomFilter, keys: Any) -> StageAdd:
        return StageAdd(stage.add_many(keys))

    def stage_count(self) -> int:
        return self._made


class MemoryStages(_LocalStages):
    """Stages in memory (the default store)."""

    def __init__(self, stages: list[tuple[BloomFilter, int]] | None = None) -> None:
        self._initial = list(stages or [])

    def stages(self) -> list[tuple[BloomFilter, int]]:
        initial, self._initial = self._initial, []
        self._made = len(initial)
        return initial

    def new_stage(self, index: int, capacity: int, error_rate: float, layout: Layout, seed: int) -> BloomFilter:
        self._made = index + 1
        return BloomFilter(capacity, error_rate, layout=layout, seed=seed)

    def reset(self) -> None:
        self._initial = []
        self._made = 0

    def close(self) -> None:
        pass


class DirectoryLock:
    """One user at a time of a directory (a chain's stage files, a crawl's
    recrawl window): ``flock`` on a lock file there, held from take() to
    close() (the kernel lets go when the process dies); another user, in
    any process, is refused with StagesInUse. A child forked from the
    holder closes its copy of the descriptor (held there, it would keep the
    directory from the next user once the holder lets go, while the child
    lives), and its take() is refused: the holder is the directory's writer."""

    def __init__(self, path: Path, what: str) -> None:
        self.path, self._what = path, what
        self._fd: Optional[int] = None
        self._holder = -1  # the pid that took it
        self._let_go: Optional[weakref.finalize[Any, Any]] = None  # closes the descriptor (a holder dropped unclosed too)

    def take(self) -> None:
        """Held by this process from now on (nothing if it is), or StagesInUse."""
        if self._fd is not None:
            if self._holder != os.getpid():
                raise StagesInUse(errno.EWOULDBLOCK, f"{self._what} {self.path.parent} was opened by process "
                                  f"{self._holder}, of which this process is a fork: its writes would overfill "
                                  "it (each process counts its own); open it here once that process has closed "
                                  "it", str(self.path))
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StagesInUse(errno.EWOULDBLOCK, f"{self._what} {self.path.parent} is in use by another (it "
                              f"holds {self.path.name}): two writers would each fill it to its capacity. Close "
                              "that one first, or give this one its own directory", str(self.path)) from None
        self._fd, self._holder = fd, os.getpid()
        self._let_go = weakref.finalize(self, os.close, fd)
        renew_locks_after_fork(self, DirectoryLock._in_child)  # (a child's copy taken before this: _forks closes it)

    def _in_child(self) -> None:
        let_go, self._let_go = self._let_go, None
        if let_go is not None and let_go.detach() is not None and self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)

    def close(self) -> None:
        """Let go of the directory (the holder's close; in a forked child, nothing)."""
        let_go, self._let_go, self._fd = self._let_go, None, None
        if let_go is not None:
            let_go()


class DirectoryStages(_LocalStages):
    """Stages as files ``bloomline-seen.{i}.blf`` in a directory, each mapped
    for writing (``BloomFilter.open(path, "r+")``): adds go straight to the
    files, so a process killed with SIGKILL loses none of them, and a chain
    made on the same directory later resumes from them. A stage's count of
    new keys is its header's insert count. With ``verify``, each file's
    payload checksum is checked when it is opened (O(size), once). A
    missing stage with later ones present is an error, never a shorter
    chain (whose growth would then save over the later files); so is a
    missing last stage, or every stage missing, by ``bloomline-seen.stages``,
    where the chain records how many it made (a best effort: a full disk
    leaves it behind). A directory with neither is a new chain; to start
    one over, remove the stage files and that record (or ``reset()``).

    One chain at a time: it holds ``flock`` on ``bloomline-seen.lock`` in
    the directory from its first read to close (the kernel lets go when
    the process dies), and another chain on the directory is refused with
    StagesInUse. Each chain counts its own adds, so two writers would each
    fill a stage to its capacity: twice the keys, above the error rate,
    without a word. A child forked from the writer may look keys up; its
    adds are refused too."""

    def __init__(self, directory: StrPath, *, verify: bool = False) -> None:
        self.directory = Path(os.fsdecode(directory))
        self.directory.mkdir(parents=True, exist_ok=True)
        self.verify = verify
        self._open: list[BloomFilter] = []
        self._lock = DirectoryLock(self.directory / self.LOCK, "the chain in")

    FILES = "bloomline-seen.*.blf"  # (the stage files, as a glob; stage i is bloomline-seen.{i}.blf)
    LOCK = "bloomline-seen.lock"  # (held by the chain that uses the directory)
    MADE = "bloomline-seen.stages"  # (how many stages the chain made, in decimal)

    def _hold(self) -> None:
        """Take the directory for this chain, or StagesInUse (in a forked
        child too: the parent's chain is the directory's writer)."""
        self._lock.take()

    def check_writer(self) -> None:
        """StagesInUse in a process forked from this chain's (the chain
        asks before it writes a stage: every add, a union)."""
        self._hold()

    def add_to_last(self, index: int, stage: BloomFilter, keys: Any) -> StageAdd:
        self._hold()
        return StageAdd(stage.add_many(keys))

    def path(self, index: int) -> Path:
        return self.directory / self.FILES.replace("*", str(index))

    @classmethod
    def indices_in(cls, directory: StrPath) -> list[int]:
        """The indices of the stage files in a directory, in order."""
        head, tail = cls.FILES.split("*")
        names = (p.name[len(head):-len(tail)] for p in Path(os.fsdecode(directory)).glob(cls.FILES))
        return sorted(int(n) for n in names if n.isdigit() and str(int(n)) == n)

    def stages(self) -> list[tuple[BloomFilter, int]]:
        self._hold()
        try:
            return self._read()
        except BaseException:
            self.close()  # (the directory is let go: nothing of it is in use)
            raise

    def _read(self) -> list[tuple[BloomFilter, int]]:
        indices = self.indices_in(self.directory)
        anew = f"remove every {self.FILES} file and {self.MADE} to start a new chain"
        if indices != list(range(len(indices))):
            gap = next(i for i in range(len(indices) + 1) if i not in indices)
            raise ValueError(f"{self.path(gap)} is missing, but the chain's later stage "
                             f"{self.path(max(indices)).name} is there: restore the missing file, or {anew}")
        made = self._recorded()
        if made is not None and made > len(indices):
            raise ValueError(f"{self.path(len(indices))} is missing: the chain made {made} "
                             f"{'stage' if made == 1 else 'stages'} ({self.MADE} says so) and {len(indices)} "
                             f"{'is' if len(indices) == 1 else 'are'} there: restore the missing "
                             f"{'file' if made - len(indices) == 1 else 'files'}, or {anew}")
        found = []
        i = 0
        while self.path(i).exists():
            try:
                stage = BloomFilter.open(self.path(i), "r+", verify=self.verify)
            except ValueError as e:
                raise ValueError(f"{self.path(i)}: {e}") from e
            self._open.append(stage)
            # (A file whose writer was killed is repaired by the open, its
            # insert count made at least the estimate from its bits.)
            found.append((stage, stage.insert_count))
            i += 1
        self._made = i
        if made != i:
            self._record(i)  # (one an earlier version made, or a record left behind)
        return found

    def _recorded(self) -> Optional[int]:
        """How many stages the chain made, as recorded; None where no
        record can be read (none made yet, or an earlier version's chain)."""
        try:
            text = (self.directory / self.MADE).read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError):
            return None
        return int(text) if text.strip().isdigit() else None

    def _record(self, made: int) -> None:
        """Record how many stages the chain made. A best effort: where it
        cannot be written (a full disk), the record stays behind the files,
        which only ever makes a missing last stage go unnoticed, never a
        present one refused."""
        with contextlib.suppress(OSError):
            with AtomicWriter(self.directory / self.MADE) as out:
                out.write(f"{made}\n".encode("ascii"))
                out.commit()

    def new_stage(self, index: int, capacity: int, error_rate: float, layout: Layout, seed: int) -> BloomFilter:
        self._hold()
        if self.path(index).exists():  # (another chain's, or one written since this chain was read)
            raise FileExistsError(f"{self.path(index)} exists already: a new stage never saves over one")
        BloomFilter(capacity, error_rate, layout=layout, seed=seed).save(self.path(index))
        stage = BloomFilter.open(self.path(index), "r+")
        self._open.append(stage)
        self._made = index + 1
        self._record(index + 1)
        return stage

    def reset(self) -> None:
        self._hold()
        self._close_stages()  # (the directory stays held: the chain starts again in it)
        self._record(0)  # (first: a reset cut short leaves the record behind the files, never ahead)
        for i in self.indices_in(self.directory):
            self.path(i).unlink()
        self._made = 0

    def close(self) -> None:
        self._close_stages()
        self._lock.close()

    def _close_stages(self) -> None:
        for stage in self._open:
            stage.close()
        self._open = []
