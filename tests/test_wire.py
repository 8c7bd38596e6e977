"""The wire's framing and its retry rules, without a server: every command a
Redis filter sends is framed by one function (bloomline.redis._wire.pack)
around operands the core frames (resp.hpp), and what the server reads back
is exactly the arguments meant, whichever packer frames the head."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from bloomline import _core

redis = pytest.importorskip("redis")
from bloomline.redis import _wire  # noqa: E402
from bloomline.redis._wire import MODE, Job, Script, Sender, pack  # noqa: E402


def parse(data: bytes) -> list[bytes]:
    """One RESP command (an array of bulk strings) as its arguments; every
    byte must be used, and every length must match."""
    assert data[:1] == b"*"
    end = data.index(b"\r\n")
    count, at = int(data[1:end]), end + 2
    args = []
    for _ in range(count):
        assert data[at : at + 1] == b"$", data[at : at + 10]
        end = data.index(b"\r\n", at)
        n = int(data[at + 1 : end])
        args.append(data[end + 2 : end + 2 + n])
        assert data[end + 2 + n : end + 4 + n] == b"\r\n"
        at = end + 4 + n
    assert at == len(data), "bytes after the command"
    return args


@pytest.fixture(params=["hiredis", "python"])
def packer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each way the head is framed: hiredis's packer where installed, and the
    Python one without it (both must frame the same bytes)."""
    if request.param == "python":
        monkeypatch.setattr(_wire, "_hiredis_pack", None)
    elif _wire._hiredis_pack is None:
        pytest.skip("hiredis is not installed")
    return str(request.param)


def test_a_command_and_its_mode(packer: str) -> None:
    job = Job(b"k", b"BLOOMLINE.ADD", ("k", "{k}:count"), (1000, MODE, "x y"), writes=True)
    assert parse(pack(job)) == [b"BLOOMLINE.ADD", b"k", b"{k}:count", b"1000", b"F", b"x y"]
    assert parse(pack(job, resend=True))[4] == b"R"  # a re-send says so


def test_a_script_by_sha_and_by_text(packer: str) -> None:
    script = Script("return KEYS[1]")
    job = Job(b"a", script, ("a", "b"), ("1",))
    assert parse(pack(job)) == [b"EVALSHA", script.sha, b"2", b"a", b"b", b"1"]
    assert parse(pack(job, by_text=True)) == [b"EVAL", b"return KEYS[1]", b"2", b"a", b"b", b"1"]  # after NOSCRIPT


@pytest.mark.parametrize("form", ["positions", "set", "get"])
def test_one_key_is_framed_as_a_batch_part_is(packer: str, form: str) -> None:
    """A single key's operands (redis_key) and a one-key batch's
    (redis_batch) are the same bytes, framed by the core, counted by pack."""
    geometry = (1 << 20, 7)
    shard, body, count = _core.redis_key("https://a.example/", *geometry, "blocked", 3, 1 << 19, form)
    shards, _, _, bodies, counts = _core.redis_batch(np.array(["https://a.example/"]), *geometry, layout="blocked",
                                                     seed=3, shard_bits=1 << 19, form=form)
    assert (shard, body, count) == (int(shards[0]), bodies[0], int(counts[0]))
    args = parse(pack(Job(b"s", b"CMD", ("s",), ("t",), body, count)))
    assert args[:3] == [b"CMD", b"s", b"t"] and len(args) == 3 + count
    if form == "positions":  # one argument: the positions blob (docs/FORMAT.md, "Positions")
        assert args[3][:2] == b"B\x07" and len(args[3]) == 4 + 4 + 7 * 2
    else:  # BITFIELD operations, k of them: SET u1 <offset> 1, or GET u1 <offset>
        per = 4 if form == "set" else 3
        assert count == 7 * per and args[3 : 3 + per][:2] == [form.upper().encode(), b"u1"]


def test_key_bytes_for_the_servers_bloom_commands_are_framed_one_argument_a_key(packer: str) -> None:
    keys = ["a", "", "é", 7]
    bodies, counts, valid = _core.redis_items(keys, chunk=3)
    assert counts == [3, 1] and valid.all()
    first = parse(pack(Job(b"k", b"BF.MADD", ("k",), (), bodies[0], counts[0])))
    assert first == [b"BF.MADD", b"k", b"a", b"", "é".encode()]
    last = parse(pack(Job(b"k", b"BF.MADD", ("k",), (), bodies[1], counts[1])))
    assert last == [b"BF.MADD", b"k", (7).to_bytes(8, "little")]


def client(**kwargs: Any) -> Any:
    """A client that never connects: the rules read only its settings."""
    return redis.Redis(host="127.0.0.1", port=1, **kwargs)


def test_the_retry_window_comes_from_the_real_socket_timeout() -> None:
    s = Sender(client(socket_timeout=2.0), retries=3)
    pauses = 0.05 + 0.1 + 0.2
    assert s.window_s == pytest.approx(4 * 2.0 + pauses)
    assert s.answer_ttl_ms >= 1000 * (s.window_s + 1.0)  # each kept answer outlives every re-send
    assert Sender(client(socket_timeout=None), retries=3).window_s is None  # no bound on a try


def test_an_answer_that_would_expire_before_a_resend_is_refused() -> None:
    with pytest.raises(ValueError, match=r"answer_ttl_ms=2000 is shorter than the retry window: 4 tries of "
                                         r"socket_timeout=2.0 s"):
        Sender(client(socket_timeout=2.0), retries=3, answer_ttl_ms=2000)
    with pytest.raises(ValueError, match=r"answer_ttl_ms must be an int in \[1000, 86400000\]"):
        Sender(client(socket_timeout=2.0), answer_ttl_ms=10**9)


def test_wait_must_fit_in_the_socket_timeout() -> None:
    with pytest.raises(ValueError, match=r"wait_timeout_ms=5000 does not fit in the client's socket_timeout=2.0 s"):
        Sender(client(socket_timeout=2.0), wait_replicas=1, wait_timeout_ms=5000)
    assert Sender(client(socket_timeout=2.0), wait_replicas=1, wait_timeout_ms=500).wait_replicas == 1
