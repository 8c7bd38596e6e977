"""ScalableBloomFilter: grows without passing its error rate."""

from __future__ import annotations

import copy
import pickle
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from forking import FORK_AND_DIE, exited_ok, in_forked_child
from interrupting import with_sigint_after

import bloomline
from bloomline import BloomFilter, ScalableBloomFilter

pytestmark = pytest.mark.core  # run by CI's wheel and sanitizer (clang, flock) jobs (.ci/run)


def test_add_reports_new_across_the_chain(layout: str) -> None:
    s = ScalableBloomFilter(100, 0.01, layout=layout)
    keys = [f"k{i}" for i in range(5000)]
    new = [s.add(k) for k in keys]
    assert sum(new) >= 5000 * (1 - 0.01)  # each add faces a rate below 1%
    assert s.num_stages > 1
    assert all(k in s for k in keys)
    assert not any(s.add(k) for k in keys)


def test_batches_match_scalar_semantics(layout: str) -> None:
    s = ScalableBloomFilter(1000, 0.001, layout=layout)
    arr = np.concatenate([np.arange(50_000), np.arange(100)]).astype(np.int64)
    out = s.add_many(arr)
    assert out[:50_000].sum() >= 50_000 - 50
    assert not out[50_000:].any()  # repeats inside the batch, across stages
    assert s.contains_many(arr).all()
    assert s.add_many(list(range(100))).sum() == 0
    # every stage took at most its capacity of new keys
    for stage, count in zip(s.stages, s._stage_counts):
        assert stage.capacity is not None and count <= stage.capacity


@pytest.mark.slow
def test_grows_from_10k_to_10m_within_its_error_rate(rng: np.random.Generator) -> None:
    s = ScalableBloomFilter(10_000, 0.01)
    keys = rng.permutation(20_000_000)[:10_000_000].astype(np.uint64)
    for chunk in np.array_split(keys, 20):
        s.add_many(chunk)
    assert s.contains_many(keys).all()
    absent = np.arange(2_000_000, dtype=np.uint64) + np.uint64(2**40)
    measured = s.contains_many(absent).mean()
    assert measured <= 0.01
    assert s.num_stages == 10  # 10k * (2**10 - 1) = 10.23M >= 10M > 10k * (2**9 - 1)
    assert s.expected_fp_rate <= 0.01


def test_compound_rate_bound() -> None:
    s = ScalableBloomFilter(1000, 0.01, growth=4, tightening=0.5)
    rates = [s._stage_params(i)[1] for i in range(64)]
    assert sum(rates) < 0.01
    assert rates[0] == pytest.approx(0.005)


def test_bytes_pickle_copy(layout: str) -> None:
    s = ScalableBloomFilter(500, 0.01, layout=layout, seed=9, growth=4, tightening=0.8)
    s.update(range(5000))
    data = s.to_bytes()
    assert bloomline.read_header(data)["kind"] == "ScalableBloomFilter"
    t = ScalableBloomFilter.from_bytes(data)
    assert t == s and t.num_stages == s.num_stages and t.growth == 4 and t.tightening == 0.8
    assert t.contains_many(range(5000)).all()
    u = pickle.loads(pickle.dumps(s))
    assert isinstance(u, ScalableBloomFilter) and u == s
    assert bloomline.from_bytes(data) == s
    c = copy.deepcopy(s)
    c.add("extra")
    assert c != s
    # growing state survives: the copy keeps counting toward the same capacity
    assert c.add_many(range(5000, 6000)).sum() >= 990


def test_corrupt_container_is_refused() -> None:
    s = ScalableBloomFilter(100, 0.01)
    s.update(range(1000))
    data = bytearray(s.to_bytes())
    data[300] ^= 0xFF
    with pytest.raises(ValueError, match="checksum mismatch"):
        ScalableBloomFilter.from_bytes(bytes(data))
    with pytest.raises(ValueError, match="this holds a BloomFilter, not a ScalableBloomFilter"):
        ScalableBloomFilter.from_bytes(BloomFilter(10).to_bytes())
    with pytest.raises(ValueError, match="truncated"):
        ScalableBloomFilter.from_bytes(s.to_bytes()[:-9])


@pytest.mark.parametrize(
    ("kwargs", "exc", "message"),
    [
        ({"initial_capacity": 0}, ValueError, "initial_capacity must be >= 1, got 0"),
        ({"initial_capacity": 1.5}, ValueError, "initial_capacity must be a whole number .* got 1.5"),
        ({"initial_capacity": 10, "error_rate": 1.5}, ValueError, r"error_rate must be in \(0, 1\), got 1.5"),
        ({"initial_capacity": 10, "growth": 3}, ValueError, "growth must be 2 or 4, got 3"),
        ({"initial_capacity": 10, "tightening": 1.0}, ValueError, r"tightening must be in \(0, 1\), got 1.0"),
        ({"initial_capacity": 10, "layout": "x"}, ValueError, "layout must be 'blocked' or 'standard', got 'x'"),
    ],
)
def test_bad_arguments(kwargs: dict[str, object], exc: type, message: str) -> None:
    with pytest.raises(exc, match=message):
        ScalableBloomFilter(**kwargs)  # type: ignore[arg-type]


def test_clear_and_repr() -> None:
    s = ScalableBloomFilter(10)
    s.update(range(100))
    assert s.num_stages > 1
    s.clear()
    assert s.num_stages == 1 and 5 not in s
    assert repr(s).startswith("<ScalableBloomFilter initial_capacity=10")


# ---- the chain's rule and its stage stores ----------------------------------------------


def test_the_rule_says_at_construction_where_the_chain_stops() -> None:
    s = ScalableBloomFilter(1000, 0.01, tightening=0.01)
    # stage 9 would need a rate near 1e-20: more than 64 hashes
    assert s.rule.max_stages == 9 and s.max_capacity == 1000 * (2**9 - 1)
    s.add_many(np.arange(s.max_capacity - 10, dtype=np.uint64))
    left = s.max_capacity - s.insert_count  # keys lost as false positives left room
    assert 10 <= left < 20_000
    before = s.to_bytes()
    with pytest.raises(ValueError, match="the chain can take .* nothing was added"):
        s.add_many(np.arange(2**40, 2**40 + 2 * left + 100, dtype=np.uint64))
    assert s.to_bytes() == before  # all or nothing
    assert s.add_many(np.arange(5, dtype=np.uint64)).sum() == 0  # known keys still pass
    fill_up = np.arange(2**41, 2**41 + left, dtype=np.uint64)  # new, known or false positives: all fit
    s.add_many(fill_up)
    assert s.contains_many(fill_up).all() and s.num_stages == 9
    assert s.max_capacity - s.insert_count >= 0
    with pytest.raises(ValueError, match="tightening must be in"):
        ScalableBloomFilter(10, tightening=0.0)


def test_a_first_stage_beyond_64_hashes_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="needs more than 64 hashes"):
        ScalableBloomFilter(10, 1e-16, tightening=0.9999)


def test_seed_is_checked_like_bloomfilters() -> None:
    with pytest.raises(TypeError, match="seed must be an int, got float"):
        ScalableBloomFilter(10, seed=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"seed must be in \[0, 2\*\*64\)"):
        ScalableBloomFilter(10, seed=-1)


def test_batch_answers_keep_the_input_shape() -> None:
    s = ScalableBloomFilter(10)
    keys = np.arange(60, dtype=np.int64).reshape(3, 4, 5)
    assert s.add_many(keys).shape == (3, 4, 5)
    assert s.contains_many(keys).shape == (3, 4, 5) and s.contains_many(keys).all()
    assert s.num_stages > 1


def test_directory_stages_resume_where_they_left_off(tmp_path: Path) -> None:
    from bloomline.scalable import DirectoryStages

    with ScalableBloomFilter(100, 0.01, store=DirectoryStages(tmp_path)) as s:
        assert s.add_many(range(1000)).sum() >= 990
        stages, counts = s.num_stages, s._stage_counts
    assert sorted(p.name for p in tmp_path.glob("*.blf")) == [f"bloomline-seen.{i}.blf" for i in range(stages)]
    with ScalableBloomFilter(100, 0.01, store=DirectoryStages(tmp_path)) as again:
        assert again.num_stages == stages and again._stage_counts == counts
        assert again.contains_many(range(1000)).all()
        assert again.add_many(range(1000)).sum() == 0
        assert again.add("new one")
    with pytest.raises(ValueError, match=r"stage 0 differs in capacity \(stored 100 != 200"):
        ScalableBloomFilter(200, 0.01, store=DirectoryStages(tmp_path))


def test_directory_stages_clear(tmp_path: Path) -> None:
    from bloomline.scalable import DirectoryStages

    with ScalableBloomFilter(10, store=DirectoryStages(tmp_path)) as s:
        s.update(range(100))
        s.clear()
        assert s.num_stages == 1 and 5 not in s
    assert [p.name for p in tmp_path.glob("*.blf")] == ["bloomline-seen.0.blf"]


@pytest.mark.parametrize("where", ["memory", "directory"])
def test_a_closed_chain_refuses_use_and_its_clear_deletes_nothing(tmp_path: Path, where: str) -> None:
    # clear() of a closed directory chain deleted its stage files (the keys a
    # later run resumes from) and made the chain write again; in memory a
    # closed chain went on taking keys.
    from bloomline.scalable import DirectoryStages

    store = DirectoryStages(tmp_path) if where == "directory" else None
    s = ScalableBloomFilter(100, store=store)
    s.update(range(150))
    assert not s.closed
    s.close()
    assert s.closed and "closed" in repr(s)
    files = sorted(p.name for p in tmp_path.glob("*.blf"))
    for use in (s.clear, lambda: 5 in s, lambda: s.add(1000), lambda: s.add_many([1001]),
                lambda: s.contains_many([5]), s.to_bytes, lambda: s | s.copy(), lambda: s.update([1002])):
        with pytest.raises(ValueError, match="closed"):
            use()
    assert sorted(p.name for p in tmp_path.glob("*.blf")) == files
    if where == "directory":
        assert files == ["bloomline-seen.0.blf", "bloomline-seen.1.blf"]
        with ScalableBloomFilter(100, store=DirectoryStages(tmp_path)) as again:
            assert again.contains_many(range(150)).all() and 1000 not in again


def test_a_chain_closed_while_a_thread_adds_leaves_every_stage_file_closed(tmp_path: Path) -> None:
    # close() took no lock: an add already under way could grow the chain
    # after the store was closed, leaving a new stage file mapped and dirty
    # (11 of 60 trials).
    from bloomline.scalable import DirectoryStages

    for trial in range(30):
        d = tmp_path / str(trial)
        s = ScalableBloomFilter(1000, 0.01, store=DirectoryStages(d))
        refused: list[str] = []

        def adder(s: ScalableBloomFilter = s, refused: list[str] = refused) -> None:
            try:
                for i in range(0, 10_000_000, 300):
                    s.add_many(np.arange(i, i + 300, dtype=np.uint64))
            except ValueError as e:
                refused.append(str(e))

        t = threading.Thread(target=adder)
        t.start()
        time.sleep(0.002 * (trial % 15))
        s.close()
        t.join(timeout=60)
        assert not t.is_alive() and refused and "closed" in refused[0]
        for i in DirectoryStages.indices_in(d):
            path = d / f"bloomline-seen.{i}.blf"
            assert not bloomline.read_header(path.read_bytes())["dirty"], (trial, i)


ONE_MORE_WRITER = """
import sys
import numpy as np
from bloomline import ScalableBloomFilter
from bloomline.scalable import DirectoryStages, StagesInUse
try:
    s = ScalableBloomFilter(1000, 0.01, store=DirectoryStages(sys.argv[1]))
except StagesInUse as e:
    print("refused:", e)
    sys.exit(0)
print("added", int(s.add_many(np.arange(1000, 2000, dtype=np.uint64)).sum()), "as new")
s.close()
sys.exit(1)
"""


def test_a_directory_chain_has_one_writer_at_a_time(tmp_path: Path) -> None:
    """Two chains on one DirectoryStages directory (two processes, or two
    objects in one) each counted their own adds: each filled a stage to its
    capacity, twice the keys it was sized for, without a word. The second is
    refused, saying why, until the first closes; a failed open lets the
    directory go."""
    import subprocess
    import sys

    from bloomline.scalable import ChainMismatch, DirectoryStages, StagesInUse

    first = ScalableBloomFilter(1000, 0.01, store=DirectoryStages(tmp_path))
    first.add_many(np.arange(900, dtype=np.uint64))
    counts = first._stage_counts
    other = subprocess.run([sys.executable, "-c", ONE_MORE_WRITER, str(tmp_path)], capture_output=True, text=True,
                           timeout=120)
    assert other.returncode == 0, other.stdout + other.stderr
    assert "is in use by another" in other.stdout and "bloomline-seen.lock" in other.stdout
    with pytest.raises(StagesInUse, match="is in use by another"):
        ScalableBloomFilter(1000, 0.01, store=DirectoryStages(tmp_path))
    first.close()
    with pytest.raises(ChainMismatch):  # (refused for its parameters: the directory is let go again)
        ScalableBloomFilter(500, 0.01, store=DirectoryStages(tmp_path))
    dropped = ScalableBloomFilter(1000, 0.01, store=DirectoryStages(tmp_path))
    del dropped  # (unclosed, collected: the directory is let go)
    with ScalableBloomFilter(1000, 0.01, store=DirectoryStages(tmp_path)) as again:
        assert again._stage_counts == counts


def test_a_forked_child_of_a_directory_chains_writer_looks_up_and_never_adds(tmp_path: Path) -> None:
    """A child forked from the process whose chain holds the directory
    shares its stage files and counts apart: its adds would overfill them.
    It may look keys up; every add (single, batch, union) is refused."""
    from forking import exited_ok, in_forked_child

    from bloomline.scalable import DirectoryStages, StagesInUse

    with ScalableBloomFilter(1000, 0.01, store=DirectoryStages(tmp_path)) as chain:
        chain.add_many(range(500))

        def child() -> bool:
            refused = 0
            for add in (lambda: chain.add("x"), lambda: chain.add_many(["y", "z"]),
                        lambda: chain.update(ScalableBloomFilter(1000, 0.01))):
                try:
                    add()
                except StagesInUse as e:
                    refused += "of which this process is a fork" in str(e)
            return refused == 3 and bool(chain.contains_many(range(500)).all())

        assert exited_ok(in_forked_child(child))
        assert chain.add("x")  # the parent still writes


FORKS_AND_DIES = """
import os, sys, time
from bloomline import ScalableBloomFilter
from bloomline.scalable import DirectoryStages
s = ScalableBloomFilter(1000, 0.01, store=DirectoryStages(sys.argv[1]))
s.add_many(range(100))
""" + FORK_AND_DIE  # (the writer dies without closing its chain; its child lives)


def test_a_directory_whose_writer_died_is_free_while_its_forked_child_lives(tmp_path: Path) -> None:
    """A child forked from the writer kept a copy of the directory's lock:
    once the writer died, no chain could open the directory while the child
    lived. The child now closes its copy. It also kept the stage file's
    writer lock (the open file its map shares), so the next chain did not
    find itself the file's only writer and resumed the stage at the dead
    writer's last count (0 here) instead of repairing it: it would have
    filled the stage past its capacity, and a flock build refused to open
    it at all. The child now maps the stage through a file of its own."""
    import os
    import signal
    import subprocess
    import sys

    from bloomline.scalable import DirectoryStages

    r = subprocess.run([sys.executable, "-c", FORKS_AND_DIES, str(tmp_path)], capture_output=True, text=True,
                       timeout=120)
    child = int(r.stdout)
    try:
        with ScalableBloomFilter(1000, 0.01, store=DirectoryStages(tmp_path)) as s:
            assert s.contains_many(range(100)).all()
            assert s.insert_count >= 90, s.insert_count  # the stage's count repaired from its bits (about 100)
    finally:
        os.kill(child, signal.SIGKILL)


def test_directory_stages_with_their_last_stage_file_missing_refuse_to_resume(tmp_path: Path) -> None:
    """The last stage file gone (deleted, or left out of a copy): the chain
    resumed one stage shorter, and every key of the lost stage read new
    again, without a word. The chain now records how many stages it made
    (bloomline-seen.stages), and refuses where fewer are there, none
    included. With neither the files nor the record it is a new chain, as
    the error says."""
    from bloomline.scalable import DirectoryStages

    with ScalableBloomFilter(100, 0.01, store=DirectoryStages(tmp_path)) as s:
        s.add_many(range(1000))
        made = s.num_stages
        assert made >= 3
    (tmp_path / DirectoryStages.MADE).unlink()  # a chain an earlier version made: no record
    with ScalableBloomFilter(100, 0.01, store=DirectoryStages(tmp_path)) as s:  # resumes, and records it
        assert s.num_stages == made and s.contains_many(range(1000)).all()
    (tmp_path / f"bloomline-seen.{made - 1}.blf").unlink()
    before = {p.name: p.read_bytes() for p in tmp_path.glob("bloomline-seen.*")}
    for verify in (False, True):
        with pytest.raises(ValueError, match=rf"bloomline-seen\.{made - 1}\.blf is missing: the chain made {made} "
                                             rf"stages \(bloomline-seen\.stages says so\) and {made - 1} are there"):
            ScalableBloomFilter(100, 0.01, store=DirectoryStages(tmp_path, verify=verify))
    assert {p.name: p.read_bytes() for p in tmp_path.glob("bloomline-seen.*")} == before
    for p in tmp_path.glob(DirectoryStages.FILES):
        p.unlink()
    # Every stage gone (a one-stage chain's only one, say) is no new chain either.
    with pytest.raises(ValueError, match=rf"bloomline-seen\.0\.blf is missing: the chain made {made} stages .* "
                                         r"and 0 are there: restore the missing files, or remove every "
                                         r"bloomline-seen\.\*\.blf file and bloomline-seen\.stages"):
        ScalableBloomFilter(100, 0.01, store=DirectoryStages(tmp_path))
    (tmp_path / DirectoryStages.MADE).unlink()
    with ScalableBloomFilter(100, 0.01, store=DirectoryStages(tmp_path)) as s:
        assert s.insert_count == 0
        s.add_many(range(300))
        grown = s.num_stages
    with ScalableBloomFilter(100, 0.01, store=DirectoryStages(tmp_path)) as s:
        assert s.num_stages == grown and s.contains_many(range(300)).all()
    assert (tmp_path / DirectoryStages.MADE).read_text() == f"{grown}\n"


@pytest.mark.parametrize("lost", [0, 1])
def test_directory_stages_with_a_stage_file_missing_refuse_to_resume(tmp_path: Path, lost: int) -> None:
    """A stage file gone (deleted, not copied) with later ones present: the
    chain refuses to resume, names the file, and leaves the others as they
    were, where it used to resume shorter and then save over them."""
    from bloomline.scalable import DirectoryStages

    with ScalableBloomFilter(100, 0.01, store=DirectoryStages(tmp_path)) as s:
        s.add_many(range(1000))
        assert s.num_stages >= 3
    (tmp_path / f"bloomline-seen.{lost}.blf").unlink()
    before = {p.name: p.read_bytes() for p in tmp_path.glob("*.blf")}
    for verify in (False, True):
        with pytest.raises(ValueError, match=rf"bloomline-seen\.{lost}\.blf is missing, but the chain's later stage"):
            ScalableBloomFilter(100, 0.01, store=DirectoryStages(tmp_path, verify=verify))
    assert {p.name: p.read_bytes() for p in tmp_path.glob("*.blf")} == before
    store = DirectoryStages(tmp_path)
    with pytest.raises(FileExistsError, match=r"bloomline-seen\.2\.blf exists already"):
        store.new_stage(2, 400, 0.001, "blocked", 0)
    store.reset()  # (every stage file goes, the ones past the gap too)
    assert not list(tmp_path.glob("*.blf"))


def test_growth_is_reported() -> None:
    grown: list[int] = []
    s = ScalableBloomFilter(10, on_grow=lambda chain: grown.append(chain.num_stages))
    s.update(range(100))
    assert grown == list(range(2, s.num_stages + 1))


def test_an_empty_chain_is_false() -> None:
    chain = ScalableBloomFilter(1000, 0.01)
    assert not chain
    chain.add("a")
    assert chain


def _exports_load(chain: ScalableBloomFilter, path: Path) -> None:
    """Every export of chain reads back, with its keys."""
    chain.save(path)
    for back in (ScalableBloomFilter.from_bytes(chain.to_bytes()), ScalableBloomFilter.load(path),
                 pickle.loads(pickle.dumps(chain)), chain.copy()):
        assert back == chain or back.num_stages == chain.num_stages


def test_a_union_of_overlapping_chains_saves_a_file_that_loads(tmp_path: Path) -> None:
    """A stage's count after |= is what its bits say, which overlapping keys
    push past its capacity: it is capped there (the format refuses more),
    so every export loads, and the union holds both chains' keys."""
    a, b = ScalableBloomFilter(100), ScalableBloomFilter(100)
    a.add_many(range(500))
    b.add_many(range(400, 900))
    union = a | b
    assert all(c <= s.capacity for c, s in zip(union._stage_counts, union.stages))
    _exports_load(union, tmp_path / "union.blf")
    a |= b
    _exports_load(a, tmp_path / "a.blf")
    assert a.contains_many(list(range(900))).all() and (a | b).contains_many(list(range(900))).all()


def test_a_directory_chain_resumed_after_kill_9_saves_a_file_that_loads(tmp_path: Path) -> None:
    """A stage file repaired after its writer was killed counts what its
    bits say, which can pass the stage's capacity: the resumed chain caps
    it, so its exports load."""
    import signal
    import subprocess
    import sys

    child = (
        "import os, signal, bloomline\n"
        "from bloomline.scalable import DirectoryStages\n"
        f"s = bloomline.ScalableBloomFilter(1000, 0.01, store=DirectoryStages({str(tmp_path / 'stages')!r}))\n"
        "s.add_many([f'k{i}' for i in range(20000)])\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    killed = subprocess.run([sys.executable, "-c", child], timeout=120, check=False)
    assert killed.returncode == -signal.SIGKILL
    from bloomline.scalable import DirectoryStages

    s = ScalableBloomFilter(1000, 0.01, store=DirectoryStages(tmp_path / "stages"))
    try:
        assert s.contains_many([f"k{i}" for i in range(20000)]).all()
        assert all(c <= st.capacity for c, st in zip(s._stage_counts, s.stages))
        _exports_load(s, tmp_path / "saved.blf")
    finally:
        s.close()


def test_a_ctrl_c_during_a_batch_add_keeps_the_stage_counts_whole() -> None:
    """A SIGINT while add_many's stage add ran in C was raised as it
    returned, before the chain counted that stage's new keys: the stage then
    took keys past its capacity (its false-positive rate past its share),
    and the count was saved so. Real signals at several delays into a
    2M-key add; each run's chain counts exactly what its stages took."""
    keys = np.arange(2_000_000, dtype=np.uint64)
    ScalableBloomFilter(10, 0.01).add_many(keys[:1])  # (first-use imports done)
    after_the_add = 0
    for delay in (0.005, 0.02, 0.05, 0.1, 0.2, 0.4):
        chain = ScalableBloomFilter(4_000_000, 0.0001)
        with_sigint_after(delay, lambda: chain.add_many(keys))
        assert chain.insert_count == sum(s.insert_count for s in chain.stages), delay
        after_the_add += chain.insert_count == len(keys)
    assert after_the_add > 0  # (some signal came while the batch was in hand)


def test_a_fork_while_another_thread_takes_a_directory_leaves_the_child_no_copy_of_its_lock(tmp_path: Path) -> None:
    """A fork between a chain's open of its directory's lock and its record
    of it gave the child a copy it did not know to close: the directory
    stayed held while the child lived, after its chain had closed. Taking
    and recording are now one step a fork waits for."""
    import os

    from bloomline.scalable import DirectoryStages, StagesInUse

    stop = threading.Event()

    def opener() -> None:
        for i in range(100_000):  # (bounded: the forks below end it sooner)
            if stop.is_set():
                return
            try:
                ScalableBloomFilter(100, 0.01, store=DirectoryStages(tmp_path / str(i % 50))).close()
            except StagesInUse:
                pass  # (a child between its fork and its after-fork hook holds its copy for that moment)

    def holds_no_lock() -> bool:
        fds = os.listdir("/proc/self/fd")
        return not any(os.readlink(f"/proc/self/fd/{fd}").endswith("bloomline-seen.lock")
                       for fd in fds if os.path.islink(f"/proc/self/fd/{fd}"))

    t = threading.Thread(target=opener)
    t.start()
    try:
        statuses = [in_forked_child(holds_no_lock) for _ in range(300)]
    finally:
        stop.set()
        t.join(timeout=60)
    assert sum(not exited_ok(s) for s in statuses) == 0, sum(not exited_ok(s) for s in statuses)


def test_a_directory_reached_through_a_symlink_is_the_same_directory_to_its_lock(tmp_path: Path) -> None:
    """A JOBDIR given once by its path and once through a symlink is one
    directory: the second chain is refused, as through the same path."""
    from bloomline.scalable import DirectoryStages, StagesInUse

    real = tmp_path / "real"
    link = tmp_path / "link"
    real.mkdir()
    link.symlink_to(real, target_is_directory=True)
    with ScalableBloomFilter(100, 0.01, store=DirectoryStages(real)) as first:
        first.add_many(range(50))
        with pytest.raises(StagesInUse, match="is in use by another"):
            ScalableBloomFilter(100, 0.01, store=DirectoryStages(link))
    with ScalableBloomFilter(100, 0.01, store=DirectoryStages(link)) as again:
        assert again.contains_many(range(50)).all()
