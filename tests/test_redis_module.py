"""bloomline's Redis module at the command level, against real servers:
kept answers never outlive the dataset they describe (a replica's full
sync, FLUSHALL, an AOF reload), a command from the primary is applied and
never answered from memory, and the answers' memory is Redis's own
(used_memory, maxmemory, INFO) and freed as each expires.

The commands are sent by hand (docs/FORMAT.md, "Positions"), so each case
controls exactly which server saw which batch.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bloomline import _core

from conftest import RedisServer, module_args, wait_until

redis = pytest.importorskip("redis")

NUM_BITS = 1 << 16
K = 7


def positions(keys: Any) -> bytes:
    """The positions blob of a batch in a one-shard filter of NUM_BITS bits."""
    shards, _, _, bodies, _ = _core.redis_batch(keys, NUM_BITS, K)
    assert list(shards) == [0]
    body = bytes(bodies[0])
    return body.split(b"\r\n", 1)[1][:-2]  # the RESP bulk string's bytes


def client(server: RedisServer) -> Any:
    return redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=30)


def make_filter(r: Any) -> None:
    r.set("s", bytes(NUM_BITS // 8))
    r.set("c", 0)


def add(r: Any, blob: bytes, answer: str, mode: str = "F", ttl_ms: int = 60_000) -> Any:
    return r.execute_command("BLOOMLINE.ADD", "s", "c", answer, ttl_ms, mode, blob)


def kept(r: Any) -> dict[str, int]:
    info = r.info("bloomline_kept")
    return {k.removeprefix("bloomline_"): int(v) for k, v in info.items()}




def test_an_old_primary_rejoining_by_full_sync_applies_the_resend_instead_of_its_stale_answer(tmp_path: Path) -> None:
    # A batch reaches primary A and is applied, but its reply and its
    # replication are lost; B (which never saw it) is promoted; A rejoins
    # as B's replica by a full sync. The client's re-send reaches B and is
    # replicated to A, which must apply it: both end with the same bits.
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_dir.mkdir()
    b_dir.mkdir()
    a, b = RedisServer(a_dir, *module_args("module")), RedisServer(b_dir, *module_args("module"))
    try:
        ra, rb = client(a), client(b)
        for r in (ra, rb):
            make_filter(r)
        blob = positions(np.arange(1000, dtype=np.uint64))
        first = add(ra, blob, "batch-1")
        assert first[0] == b"1" * 1000
        ra.execute_command("REPLICAOF", "127.0.0.1", b.port)
        wait_until(lambda: ra.info("replication")["master_link_status"] == "up" and ra.get("s") == rb.get("s"))
        again = add(rb, blob, "batch-1", mode="R")
        assert again[0] == b"1" * 1000  # B never saw the batch: every key is new there
        assert rb.execute_command("WAIT", 1, 10_000) == 1
        wait_until(lambda: ra.info("replication")["master_repl_offset"] == rb.info("replication")["master_repl_offset"])
        assert ra.get("s") == rb.get("s"), "the replica diverged from its primary"
        assert ra.bitcount("s") == rb.bitcount("s") > 0
    finally:
        a.stop()
        b.stop()


def test_flushall_forgets_kept_answers(module_server: RedisServer) -> None:
    r = client(module_server)
    make_filter(r)
    blob = positions(np.arange(500, dtype=np.uint64))
    assert add(r, blob, "b")[0] == b"1" * 500
    r.flushall()
    make_filter(r)
    # The re-send is applied to the new dataset (never answered "new" from
    # memory while its bits stay unset): its keys are then present.
    assert add(r, blob, "b", mode="R")[0] == b"1" * 500
    assert r.execute_command("BLOOMLINE.HAS", "s", blob) == b"1" * 500


def test_an_aof_reload_does_not_bring_answers_back(tmp_path: Path) -> None:
    s = RedisServer(tmp_path, *module_args("module"), "--appendonly", "yes", "--appendfsync", "always",
                    "--enable-debug-command", "local")
    try:
        r = client(s)
        make_filter(r)
        blob = positions(np.arange(300, dtype=np.uint64))
        assert add(r, blob, "b")[0] == b"1" * 300
        r.execute_command("DEBUG", "LOADAOF")
        # The batch's first send is long gone: a re-send finds its keys present
        # and cannot know whether it set them ('?'), never a replayed "new".
        assert add(r, blob, "b", mode="R")[0] == b"?" * 300
    finally:
        s.stop()


def test_info_shows_the_kept_answers(module_server: RedisServer) -> None:
    r = client(module_server)
    make_filter(r)
    blob = positions(np.arange(10, dtype=np.uint64))
    for i in range(3):
        add(r, blob, f"b{i}")
    info = kept(r)
    assert info["answers"] == 3 and info["bytes"] > 3 * 10
    r.flushall()
    assert kept(r) == {"answers": 0, "bytes": kept(r)["bytes"]} and kept(r)["bytes"] < info["bytes"]


def test_kept_answers_count_in_used_memory_and_maxmemory_refuses_adds(module_server: RedisServer) -> None:
    r = client(module_server)
    make_filter(r)
    base = r.info("memory")["used_memory"]
    r.config_set("maxmemory", base + 4_000_000)
    r.config_set("maxmemory-policy", "noeviction")
    blob = positions(np.arange(1, dtype=np.uint64))
    refused_at = None
    for i in range(200_000):
        try:
            add(r, blob, f"answer-{i:08d}-" + "x" * 40, ttl_ms=86_400_000)
        except redis.exceptions.OutOfMemoryError:
            refused_at = i
            break
    assert refused_at is not None, "200,000 kept answers and maxmemory never refused an add"
    info = kept(r)
    assert info["answers"] == refused_at and info["bytes"] > 2_000_000
    assert r.info("memory")["used_memory"] - base >= info["bytes"]


def test_expired_answers_are_freed_whatever_order_they_were_kept_in(module_server: RedisServer) -> None:
    r = client(module_server)
    make_filter(r)
    blob = positions(np.arange(1, dtype=np.uint64))
    add(r, blob, "long", ttl_ms=86_400_000)  # one long-lived answer first ...
    with r.pipeline(transaction=False) as p:
        for i in range(20_000):  # ... then many short ones behind it
            p.execute_command("BLOOMLINE.ADD", "s", "c", f"short-{i}", 2000, "F", blob)
        p.execute()
    assert kept(r)["answers"] > 10_000  # (some may be gone already on a slow machine)
    # Freed by the server's cron while no add comes, not only at the queue's front.
    wait_until(lambda: kept(r)["answers"] == 1, seconds=15)


def test_acl_key_permissions_see_a_lookup_as_a_read_and_an_add_as_a_write(module_server: RedisServer) -> None:
    r = client(module_server)
    make_filter(r)
    blob = positions(np.arange(5, dtype=np.uint64))
    r.execute_command("ACL", "SETUSER", "reader", "on", "nopass", "%R~*", "+@all")
    reader = redis.Redis(host="127.0.0.1", port=module_server.port, username="reader", password="unused")
    assert reader.execute_command("BLOOMLINE.HAS", "s", blob) == b"00000"  # a user that may only read keys looks up
    with pytest.raises(redis.exceptions.NoPermissionError):
        reader.execute_command("BLOOMLINE.ADD", "s", "c", "a", 1000, "F", blob)
    assert r.bitcount("s") == 0


def test_acl_write_denial_covers_the_adds(module_server: RedisServer) -> None:
    # Redis 7.2 and later take the module's ACL categories, so "-@write"
    # denies the adds; on 7.0 the adds are denied by name (docs/guides/redis.md, ACLs).
    r = client(module_server)
    make_filter(r)
    blob = positions(np.arange(5, dtype=np.uint64))
    version = tuple(int(x) for x in r.info("server")["redis_version"].split(".")[:2])
    rule = ["-@write"] if version >= (7, 2) else ["-bloomline.add", "-bloomline.cadd"]
    r.execute_command("ACL", "SETUSER", "nowrite", "on", "nopass", "~*", "+@all", *rule)
    user = redis.Redis(host="127.0.0.1", port=module_server.port, username="nowrite", password="unused")
    with pytest.raises(redis.exceptions.NoPermissionError):
        user.execute_command("BLOOMLINE.ADD", "s", "c", "a", 1000, "F", blob)
    assert user.execute_command("BLOOMLINE.HAS", "s", blob) == b"00000"


def test_a_stage_add_whose_later_shard_has_bad_positions_changes_no_shard(module_server: RedisServer) -> None:
    """BLOOMLINE.CADD over two shards, the first shard's positions good and
    the second's past its block: refused whole. (It set the first shard's
    bits before it read the second's: a key nobody added read "seen" on the
    primary, and its replicas, sent nothing, differed.)"""
    r = client(module_server)
    r.mset({"{c}:stages": 1, "{c}:count": 0, "{c}:sh1": bytes(64), "{c}:sh2": bytes(64)})
    good = b"B\x02\x00\x00" + struct.pack("<IHH", 0, 3, 7)  # one key: block 0 (at byte 0), bits 3 and 7
    bad = b"B\x02\x00\x00" + struct.pack("<IHH", 0, 600, 7)  # a bit past its 512-bit block
    for second in (bad, b"B\x02\x00\x00" + struct.pack("<IHH", 64, 3, 7)):  # (then a block past the shard)
        blob = struct.pack("<I", len(good)) + good + struct.pack("<I", len(second)) + second
        with pytest.raises(redis.ResponseError, match="past"):
            r.execute_command("BLOOMLINE.CADD", "{c}:stages", "{c}:count", "{c}:ans", "{c}:sh1", "{c}:sh2",
                              1, 1000, 5000, "F", blob)
        assert r.mget("{c}:sh1", "{c}:sh2", "{c}:count") == [bytes(64), bytes(64), b"0"]
        assert r.execute_command("BLOOMLINE.HAS", "{c}:sh1", good) == b"0"


@pytest.mark.parametrize("count", ["9223372036854775807", "99999999999999999999999", " +7", "+7", "-3", "007",
                                   str(2**53), ""])
def test_a_count_not_written_as_bloomline_writes_one_is_refused(module_server: RedisServer, count: str) -> None:
    """A count key damaged by hand: out of range (it overflowed on the
    add, undefined behaviour in C++, and stored a negative count), signed,
    padded or empty is refused and nothing changes."""
    r = client(module_server)
    make_filter(r)
    r.set("c", count)
    blob = positions(np.arange(5, dtype=np.uint64))
    with pytest.raises(redis.ResponseError, match=r"WRONGTYPE bloomline: c does not hold an integer in \[0, 2\*\*53\)"):
        add(r, blob, "a")
    assert r.get("c") == count.encode() and r.bitcount("s") == 0
    r.set("c", str(2**53 - 1))
    assert add(r, blob, "b")[0] == b"11111"  # (the largest count taken)


def test_a_shard_of_another_size_is_refused_whole_and_the_bare_forms_still_run(module_server: RedisServer) -> None:
    """The adds' mode and HAS carry each shard's size in bytes: a shard
    truncated, grown, or deleted and made again shorter (a SETRANGE) was read
    at the size it had, and keys added before read "new" where their blocks
    still lay in it. The forms without sizes, of an earlier module's AOF,
    still run unchecked (an AOF must replay)."""
    r = client(module_server)
    make_filter(r)
    size = NUM_BITS // 8
    blob = positions(np.arange(5, dtype=np.uint64))
    assert r.execute_command("BLOOMLINE.ADD", "s", "c", "a", 60_000, f"F;bytes={size}", blob)[0] == b"11111"
    for damaged in (bytes(size // 2), bytes(size + 64)):
        r.set("s", damaged)
        with pytest.raises(redis.ResponseError, match=rf"WRONGSIZE s holds {len(damaged)} bytes, not {size}"):
            r.execute_command("BLOOMLINE.ADD", "s", "c", "b", 60_000, f"F;bytes={size}", blob)
        with pytest.raises(redis.ResponseError, match="WRONGSIZE s"):
            r.execute_command("BLOOMLINE.HAS", "s", f"bytes={size}", blob)
        r.mset({"{c}:stages": 1, "{c}:count": 0, "{c}:sh": damaged})
        with pytest.raises(redis.ResponseError, match="WRONGSIZE {c}:sh"):
            r.execute_command("BLOOMLINE.CADD", "{c}:stages", "{c}:count", "{c}:ans", "{c}:sh", 1, 1000, 5000,
                              f"F;bytes={size}", struct.pack("<I", len(blob)) + blob)
        assert r.get("s") == damaged and r.get("{c}:sh") == damaged and r.get("{c}:count") == b"0"
    make_filter(r)
    assert add(r, blob, "bare")[0] == b"11111"  # ADD shard count answer ttl_ms mode positions
    assert r.execute_command("BLOOMLINE.HAS", "s", blob) == b"11111"
    for bad in ("bytes=", "bytes=63", "bytes=100", f"bytes={size},{size}", "bytes=1e4", f"size={size}"):
        with pytest.raises(redis.ResponseError, match="shard sizes must be"):
            r.execute_command("BLOOMLINE.HAS", "s", bad, blob)
        with pytest.raises(redis.ResponseError, match="shard sizes must be"):
            r.execute_command("BLOOMLINE.ADD", "s", "c", "x", 60_000, "F;" + bad, blob)
    with pytest.raises(redis.ResponseError, match="mode must be F"):
        r.execute_command("BLOOMLINE.ADD", "s", "c", "x", 60_000, f"F,bytes={size}", blob)


@pytest.mark.parametrize("backend", ["module", "plain"])
@pytest.mark.parametrize("damage", ["remade shorter", "truncated", "grown"])
def test_a_filters_shard_at_another_size_is_an_error_never_keys_new_again(
        module_server: RedisServer, backend: str, damage: str) -> None:
    # The hostile read's case: a shard deleted and made again shorter, then
    # the keys added before added again one at a time: the module answered
    # 78 of 600 "new", and the plain backend refused them all.
    from bloomline.redis import MissingKeyError, RedisBloomFilter

    r = client(module_server)
    keys = [f"k{i}".encode() for i in range(3000)]
    f = RedisBloomFilter(r, "d", 3000, 0.01, backend=backend, shards=1)
    f.add_many(keys)
    shard = f.shard_keys()[0]
    size = r.strlen(shard)
    if damage == "remade shorter":
        r.delete(shard)
        r.setrange(shard, 8 * 64 - 1, b"\0")
    elif damage == "truncated":
        r.set(shard, r.getrange(shard, 0, size // 2 - 1))
    else:
        r.append(shard, bytes(64))
    for key in keys[:50]:
        with pytest.raises(MissingKeyError, match="has the wrong size"):
            f.add(key)
    with pytest.raises(MissingKeyError, match="has the wrong size"):
        f.add_many(keys)
    with pytest.raises(MissingKeyError, match="has the wrong size"):
        f.contains_many(keys)

