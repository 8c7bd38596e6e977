"""The wire: how a command is framed, routed, and sent again after a fault.

Every command a Redis filter sends is a ``Job`` framed by ``pack`` (the one
place that counts a command's arguments: the operands of a batch arrive
from the core already encoded, with their count) and sent by a ``Sender``,
the one place that knows what may be sent again. Its rules
(docs/design/redis.md):

- A batch's commands are built once, under one batch id, and every re-send
  is the same command: after a dropped connection or a timeout, after
  NOSCRIPT (sent again as EVAL), after MOVED (the slot map refreshed) or ASK
  (ASKING first), after TRYAGAIN, CLUSTERDOWN or LOADING (after a pause).
  LOADING is a reply, not a fault: the command did not run. redis-py raises
  it (BusyLoadingError, a ConnectionError) and would close the connection;
  the Sender reads it as the error reply it is, keeps the connection, and
  reads the replies after it.
- A write whose reply was lost may have run. Its re-send carries the mode
  ``R``; the server then returns the answer it kept under the batch id, or,
  if that answer is gone, answers ``?`` for any key it finds present (the
  lost send may have set it). The caller raises on ``?``: never "seen" for
  a key this call may have added.
- An answer is kept at least as long as any re-send may come: the retry
  window (every try's socket timeout, plus the pauses between them) must fit
  in ``answer_ttl_ms``, checked when the Sender is made; and a re-send that
  would come later than the answer is trusted to live raises UnknownOutcome
  instead (a client without a socket timeout has no bound on a try). The
  timeout is the one the client's connections have: the one it was given,
  else its connection class's default (5 s in redis-py 8).
- Commands that change nothing, or change it idempotently (reads, creating
  a filter's keys when missing), are simply sent again.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import socket
import threading
import time
import weakref
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

import redis as _redis

from ._errors import UnknownOutcome
from ._names import sibling

DEFAULT_RETRIES = 8
DEFAULT_WAIT_TIMEOUT_MS = 1_000
DEFAULT_ANSWER_TTL_MS = 120_000  # when the retry window has no bound (no socket timeout)
MIN_ANSWER_TTL_MS, MAX_ANSWER_TTL_MS = 1_000, 86_400_000
_SAFETY_S = 1.0  # a kept answer is trusted until this long before it expires
_MAX_REDIRECTS = 64  # MOVED, ASK, TRYAGAIN... rounds for one batch
_FIRST_PAUSE_S, _MAX_PAUSE_S = 0.05, 2.0
_PENDING: Any = object()
_REDIRECTED = ("MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "LOADING", "NOSCRIPT")  # not run: send again
# The connection pools this process has exchanged commands through: a
# server reached once is a session, whose faults are retried; one that
# refuses the very first connection is not there (wrong URL, not started).
_REACHED: "weakref.WeakSet[Any]" = weakref.WeakSet()
# Error replies: redis-py raises LOADING's as a ConnectionError (BusyLoadingError).
_REPLY_ERRORS = (_redis.ResponseError, _redis.exceptions.BusyLoadingError)


# ---- commands -----------------------------------------------------------------------


class _Mode:
    """Where a write's mode goes among its arguments (F or R), with what
    follows it there (the module's adds: the shards' sizes, MODE.sized)."""

    def __init__(self, suffix: bytes = b"") -> None:
        self.suffix = suffix

    def sized(self, sizes: Sequence[int]) -> "_Mode":
        """The module's mode argument with the shards' sizes in bytes, which
        it checks before reading a shard (cpp/redis/module.cpp)."""
        return _Mode(b";bytes=" + b",".join(b"%d" % n for n in sizes))

    def __repr__(self) -> str:
        return f"MODE{self.suffix.decode()}"


MODE = _Mode()


@dataclass(frozen=True)
class Script:
    """A Lua script, sent by its SHA-1 (EVALSHA), or whole after NOSCRIPT."""

    text: str

    @property
    def sha(self) -> bytes:
        return hashlib.sha1(self.text.encode()).hexdigest().encode()


def _arg(a: Any) -> bytes:
    return a if isinstance(a, bytes) else str(a).encode()


@dataclass(eq=False)
class Job:
    """One command. route: a key of it (its node and slot); keys: the key
    arguments (after EVALSHA's key count for a script); args: the others,
    MODE where a write's mode goes; body and body_count: operands already in
    RESP (from the core) and how many arguments they are; writes: a re-send
    after a lost reply must say so (MODE) and fit in the answer's life."""

    route: bytes
    command: Union[bytes, Script]
    keys: Sequence[Any] = ()
    args: Sequence[Any] = ()
    body: bytes = b""
    body_count: int = 0
    writes: bool = False


_hiredis_pack: Optional[Callable[[tuple[Any, ...]], bytes]]
try:  # hiredis frames a command's own arguments in C (the redis extra brings it)
    from hiredis import pack_command as _hiredis_pack
except ImportError:  # pragma: no cover - without hiredis, in Python below
    _hiredis_pack = None


def pack(job: Job, *, resend: bool = False, by_text: bool = False) -> bytes:
    """The command in RESP: the one place a command's arguments are counted
    (its own, then the operands that came encoded with their count)."""
    if isinstance(job.command, Script):
        head: list[Any] = [b"EVAL", job.command.text.encode()] if by_text else [b"EVALSHA", job.command.sha]
        head.append(len(job.keys))
    else:
        head = [job.command]
    mode = b"R" if resend else b"F"
    args = (*head, *job.keys, *[mode + a.suffix if isinstance(a, _Mode) else a for a in job.args])
    count = len(args) + job.body_count
    if _hiredis_pack is not None:
        packed: bytes = _hiredis_pack(args)
        return packed if not job.body_count else b"*%d" % count + packed[packed.index(b"\r\n"):] + job.body
    items = [_arg(a) for a in args]
    return b"*%d\r\n" % count + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in items) + job.body


# ---- sending --------------------------------------------------------------------------


def socket_timeout_of(client: Any) -> Optional[float]:
    """The socket timeout of a client's connections: the one it was given,
    else its connection class's default (a URL or a cluster client may not
    name one; redis-py 8's connections then wait 5 s, older ones forever)."""
    if hasattr(client, "get_node_from_key"):
        kwargs = client.nodes_manager.connection_kwargs
        cls = kwargs.get("connection_class", _redis.Connection)
    else:
        kwargs = client.connection_pool.connection_kwargs
        cls = client.connection_pool.connection_class
    if "socket_timeout" in kwargs:
        return kwargs["socket_timeout"]  # type: ignore[no-any-return]
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        param = inspect.signature(init).parameters.get("socket_timeout") if init is not None else None
        if param is not None and param.default is not inspect.Parameter.empty:
            return param.default  # type: ignore[no-any-return]
    return None


_KEEPS: dict[type, bool] = {}


def _read(conn: Any) -> Any:
    """One reply, an error reply as its exception. LOADING is one (the
    command did not run), though redis-py raises it as a ConnectionError and
    closes the connection: kept open where redis-py lets us (4.6 and later),
    so that the replies after it are read, not lost."""
    keeps = _KEEPS.get(type(conn))
    if keeps is None:
        keeps = _KEEPS[type(conn)] = "disconnect_on_error" in inspect.signature(conn.read_response).parameters
    try:
        return conn.read_response(disconnect_on_error=False) if keeps else conn.read_response()
    except _REPLY_ERRORS as e:
        if not keeps and isinstance(e, _redis.ConnectionError):
            raise  # (redis-py closed the connection: what followed is lost)
        return e
    except BaseException:
        conn.disconnect()  # (a fault, or an interrupt mid-read: never reused half read)
        raise


def _not_there(e: Exception) -> bool:
    """A connection that never opened because nothing listens there or the
    name does not resolve (redis-py's ConnectionError over the OSError)."""
    seen: Optional[BaseException] = e
    while seen is not None:
        if isinstance(seen, (ConnectionRefusedError, FileNotFoundError, socket.gaierror)):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _where(pool: Any) -> str:
    """The server a pool connects to, as a URL (no password)."""
    kw = getattr(pool, "connection_kwargs", {})
    if kw.get("path"):
        return f"unix://{kw['path']}"
    return f"redis://{kw.get('host', 'localhost')}:{kw.get('port', 6379)}/{kw.get('db', 0)}"


def _error_code(e: Exception) -> str:
    """The error code of a reply (redis-py strips it from the ones it maps)."""
    for name, code in (("MovedError", "MOVED"), ("AskError", "ASK"), ("TryAgainError", "TRYAGAIN"),
                       ("ClusterDownError", "CLUSTERDOWN"), ("NoScriptError", "NOSCRIPT"),
                       ("BusyLoadingError", "LOADING")):
        cls = getattr(_redis.exceptions, name, None)
        if cls is not None and isinstance(e, cls):
            return code
    return str(e).split(" ", 1)[0]


def _address(e: Exception) -> tuple[str, int]:
    """host, port of a MOVED or ASK reply."""
    host, port = getattr(e, "host", None), getattr(e, "port", None)
    if host is None or port is None:
        host, port = str(e).split()[-1].rsplit(":", 1)
    return str(host), int(port)


class _State:
    __slots__ = ("ask", "by_text", "first_sent", "maybe_ran", "waited")

    def __init__(self) -> None:
        self.maybe_ran = False  # a send of it got no reply: it may have run
        self.by_text = False  # the node lost the script: EVAL
        self.ask: Optional[tuple[str, int]] = None  # ASK: the node to ask next
        self.first_sent: Optional[float] = None
        self.waited: Optional[Exception] = None  # its last TRYAGAIN, CLUSTERDOWN or LOADING reply


class Sender:
    """Sends jobs: each node's jobs written together and their replies read
    together (one round trip per node), again after faults by the rules
    above. run() gives each job's reply, or the exception that ends it."""

    def __init__(self, client: Any, *, retries: int = DEFAULT_RETRIES, answer_ttl_ms: Optional[int] = None,
                 wait_replicas: int = 0, wait_timeout_ms: int = DEFAULT_WAIT_TIMEOUT_MS) -> None:
        if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 100:
            raise ValueError(f"retries must be an int in [0, 100], got {retries!r}")
        self.client = client
        self.cluster = hasattr(client, "get_node_from_key")
        self.retries = retries
        timeout = socket_timeout_of(client)
        pauses = sum(min(_FIRST_PAUSE_S * 2**i, _MAX_PAUSE_S) for i in range(retries))
        # The longest a batch's tries may take: every try's read timing out.
        self.window_s: Optional[float] = None if timeout is None else (retries + 1) * float(timeout) + pauses
        if answer_ttl_ms is None:
            answer_ttl_ms = (DEFAULT_ANSWER_TTL_MS if self.window_s is None
                             else min(MAX_ANSWER_TTL_MS, max(10_000, math.ceil(2000 * self.window_s) + 1000)))
        if isinstance(answer_ttl_ms, bool) or not isinstance(answer_ttl_ms, int) or not (
                MIN_ANSWER_TTL_MS <= answer_ttl_ms <= MAX_ANSWER_TTL_MS):
            raise ValueError(f"answer_ttl_ms must be an int in [1000, 86400000] (a day), got {answer_ttl_ms!r}")
        if self.window_s is not None and answer_ttl_ms < 1000 * (self.window_s + _SAFETY_S):
            raise ValueError(
                f"answer_ttl_ms={answer_ttl_ms} is shorter than the retry window: {retries + 1} tries of "
                f"socket_timeout={timeout} s and {pauses:.2f} s of pauses may take {self.window_s:.1f} s, and a "
                f"batch re-sent after its answer expired could not be answered; pass answer_ttl_ms >= "
                f"{math.ceil(1000 * (self.window_s + _SAFETY_S))} (or None to derive it), or fewer retries")
        self.answer_ttl_ms = answer_ttl_ms
        if isinstance(wait_replicas, bool) or not isinstance(wait_replicas, int) or wait_replicas < 0:
            raise ValueError(f"wait_replicas must be an int >= 0 (0: no WAIT), got {wait_replicas!r}")
        if isinstance(wait_timeout_ms, bool) or not isinstance(wait_timeout_ms, int) or not (
                0 < wait_timeout_ms <= MAX_ANSWER_TTL_MS):
            raise ValueError(f"wait_timeout_ms must be an int in [1, 86400000] (WAIT's 0, forever, is refused), "
                             f"got {wait_timeout_ms!r}")
        # WAIT holds the connection: a socket timeout shorter than it would
        # read as a lost connection, not as too few replicas.
        if wait_replicas and timeout is not None and wait_timeout_ms / 1000 + _SAFETY_S > float(timeout):
            raise ValueError(f"wait_timeout_ms={wait_timeout_ms} does not fit in the client's socket_timeout="
                             f"{timeout} s (WAIT holds the connection that long): pass wait_timeout_ms <= "
                             f"{max(0, math.floor(1000 * (float(timeout) - _SAFETY_S)))}, or a longer socket_timeout")
        self.wait_replicas = wait_replicas
        self.wait_timeout_ms = wait_timeout_ms
        self._local = threading.local()  # each thread's sockets that answered its add since it began (_wrote_on)
        # What the rules met: MOVED, ASK, TRYAGAIN..., NOSCRIPT, "lost"
        # (a connection fault), "resent" (a write sent again after one).
        self.stats: Counter[str] = Counter()

    # -- routing ------------------------------------------------------------------------

    def _node(self, job: Job, state: _State) -> Any:
        if state.ask is not None:
            node = self.client.get_node(host=state.ask[0], port=state.ask[1])
            if node is None:  # a node new to this client
                self.client.nodes_manager.initialize()
                node = self.client.get_node(host=state.ask[0], port=state.ask[1])
            return node
        return self.client.get_node_from_key(job.route)

    def _pool(self, node: Any) -> Any:
        return node.redis_connection.connection_pool if self.cluster else self.client.connection_pool

    # -- one round trip per node ----------------------------------------------------------

    def _exchange(self, pool: Any, payloads: list[tuple[bytes, bool]], conn: Any = None,
                  writes: Sequence[bool] = ()) -> tuple[list[Any], Optional[Exception], bool]:
        """Write the payloads on one connection (the pool's, or `conn`, held
        by the caller) and read their replies. Returns the replies read (an
        error reply as its exception), the connection fault that stopped it,
        and whether anything was sent. `writes`: which payloads are an add's
        commands (the socket that answered one is kept for the WAIT:
        _wrote_on)."""
        replies: list[Any] = []
        held = conn is not None
        if not held:
            try:
                conn = pool.get_connection()  # (it may connect)
            except (_redis.ConnectionError, _redis.TimeoutError) as e:
                return replies, e, False
        try:
            try:
                conn.connect()  # nothing has left yet: a failure here sent nothing
            except (_redis.ConnectionError, _redis.TimeoutError) as e:
                conn.disconnect()
                return replies, e, False
            sock = getattr(conn, "_sock", None)  # (a fault below clears it)
            try:
                conn.send_packed_command([b"".join((b"*1\r\n$6\r\nASKING\r\n" if ask else b"") + p
                                                   for p, ask in payloads)])
                for _, ask in payloads:
                    if ask:
                        conn.read_response()  # +OK
                    replies.append(_read(conn))
                _REACHED.add(pool)
                return replies, None, True
            except (_redis.ConnectionError, _redis.TimeoutError, OSError) as e:
                conn.disconnect()
                return replies, e if isinstance(e, _redis.RedisError) else _redis.ConnectionError(str(e)), True
            finally:
                self._wrote_on(pool, conn, sock, writes, replies)
        finally:
            if not held:
                pool.release(conn)

    def _wrote_on(self, pool: Any, conn: Any, sock: Any, writes: Sequence[bool], replies: Sequence[Any]) -> None:
        """Keep, for this thread, each connection (and its socket) on which
        an add's command was answered since the add began (forget_writes):
        its WAIT proves something only when every one of them is its own.
        A command whose reply was lost needs no place here: its re-send's
        answer is the one kept, and comes from the server the re-send
        reached (a kept answer is there only with the lost send's effects;
        without it, a key found present answers "?")."""
        if self.wait_replicas and any(w and not (isinstance(r, _REPLY_ERRORS) and _error_code(r) in _REDIRECTED)
                                      for w, r in zip(writes, replies)):
            self._local.__dict__.setdefault("writes", {}).setdefault(id(pool), set()).add((conn, sock))

    def forget_writes(self) -> None:
        """An add begins: its WAIT answers for its own commands only."""
        self._local.__dict__.pop("writes", None)

    # -- the rules ------------------------------------------------------------------------

    def one(self, job: Job) -> Any:
        """A lone command's reply (see direct)."""
        return self.direct([job])[0]

    def direct(self, jobs: Sequence[Job]) -> list[Any]:
        """A single key's few commands (its add, or its read and the check
        beside it): written straight on a pooled connection and read back;
        on a fault or a redirection, handed to run()'s rules with what this
        try did (a lost write may have run)."""
        if self.cluster:
            return self.run(jobs)
        pool = self.client.connection_pool
        try:
            conn = pool.get_connection()
        except (_redis.ConnectionError, _redis.TimeoutError):
            return self.run(jobs)  # nothing was sent
        first_sent = time.monotonic()
        replies: list[Any] = []
        try:
            conn.send_packed_command([b"".join(pack(job) for job in jobs)])
            for _ in jobs:
                replies.append(_read(conn))
        except (_redis.ConnectionError, _redis.TimeoutError, OSError):
            conn.disconnect()
            pool.release(conn)
            self.stats["lost"] += 1
            states = [_State() for _ in jobs]
            for st, job in zip(states, jobs):
                st.maybe_ran, st.first_sent = job.writes, first_sent
            time.sleep(_FIRST_PAUSE_S)
            return self._run(jobs, states, faults=1)
        _REACHED.add(pool)
        self._wrote_on(pool, conn, getattr(conn, "_sock", None), [job.writes for job in jobs], replies)
        pool.release(conn)
        codes = [_error_code(r) if isinstance(r, _REPLY_ERRORS) else "" for r in replies]
        if not any(code in _REDIRECTED for code in codes):
            return replies
        states = [_State() for _ in jobs]
        for st, code in zip(states, codes):
            st.by_text, st.first_sent = code == "NOSCRIPT", first_sent
            if code in _REDIRECTED:
                self.stats[code] += 1
        return self._run(jobs, states)  # (sent again whole: what succeeded was a read, or is kept under its id)

    def run(self, jobs: Sequence[Job], maybe_ran: Optional[list[bool]] = None) -> list[Any]:
        """The jobs' replies, in order. maybe_ran, where given, is filled
        with whether a send of each got no reply (its reply, if any, is a
        re-send's)."""
        states = [_State() for _ in jobs]
        try:
            return self._run(jobs, states)
        finally:
            if maybe_ran is not None:
                maybe_ran[:] = [st.maybe_ran for st in states]

    def _run(self, jobs: Sequence[Job], states: list[_State], faults: int = 0) -> list[Any]:
        results: list[Any] = [_PENDING] * len(jobs)
        pending = list(range(len(jobs)))
        redirects = 0
        pause = _FIRST_PAUSE_S * 2**faults
        while pending:
            groups: dict[Any, tuple[Any, list[int]]] = {}
            for i in pending:
                node = self._node(jobs[i], states[i]) if self.cluster else None
                groups.setdefault(getattr(node, "name", None), (node, []))[1].append(i)
            refresh = wait = False
            lost: Optional[Exception] = None
            for node, members in groups.values():
                sendable = []
                for i in members:
                    st = states[i]
                    if jobs[i].writes and st.maybe_ran and st.first_sent is not None and (
                            time.monotonic() - st.first_sent + _SAFETY_S > self.answer_ttl_ms / 1000):
                        results[i] = UnknownOutcome(
                            f"a batch's reply was lost and its answer, kept {self.answer_ttl_ms} ms, may be gone by "
                            "a re-send now: whether it was added is unknown")
                        continue
                    if st.first_sent is None:
                        st.first_sent = time.monotonic()
                    sendable.append(i)
                if not sendable:
                    continue
                payloads = [(pack(jobs[i], resend=states[i].maybe_ran, by_text=states[i].by_text),
                             states[i].ask is not None) for i in sendable]
                self.stats["resent"] += sum(states[i].maybe_ran for i in sendable)
                pool = self._pool(node)
                replies, fault, sent = self._exchange(pool, payloads, writes=[jobs[i].writes for i in sendable])
                if fault is not None and not sent and pool not in _REACHED and _not_there(fault):
                    # The first contact refused: no session to resume, nothing sent (so nothing is
                    # in doubt), and retrying for seconds would only delay this answer.
                    for i in sendable:
                        results[i] = _redis.ConnectionError(
                            f"cannot connect to Redis at {_where(pool)} (is a server running there?): {fault}")
                    continue
                for i, reply in zip(sendable, replies):
                    st = states[i]
                    st.ask = None
                    code = _error_code(reply) if isinstance(reply, _REPLY_ERRORS) else ""
                    if code in _REDIRECTED:
                        self.stats[code] += 1
                    if code == "MOVED":
                        refresh = True
                    elif code == "ASK":
                        st.ask = _address(reply)
                    elif code in ("TRYAGAIN", "CLUSTERDOWN", "LOADING"):
                        wait = True
                        st.waited = reply
                    elif code == "NOSCRIPT":
                        st.by_text = True
                    else:
                        results[i] = reply
                if fault is not None:
                    lost = fault
                    self.stats["lost"] += 1
                    for i in sendable[len(replies):]:
                        states[i].maybe_ran = states[i].maybe_ran or (sent and jobs[i].writes)
            pending = [i for i in pending if results[i] is _PENDING]
            if not pending:
                break
            if lost is not None:
                faults += 1
            else:
                redirects += 1
            if faults > self.retries or redirects > _MAX_REDIRECTS:
                why = lost if lost is not None else _redis.exceptions.ClusterError(
                    f"still redirected after {_MAX_REDIRECTS} tries (a slot moving for that long?)")
                for i in pending:
                    results[i] = (UnknownOutcome(f"a batch's reply was lost and {self.retries} re-sends failed "
                                                 f"({why}): whether it was added is unknown")
                                  if states[i].maybe_ran else
                                  # (a server loading for all those pauses: its own reply, the command not run)
                                  states[i].waited if lost is None and states[i].waited is not None else why)
                break
            if refresh:
                self.client.nodes_manager.initialize()
            if lost is not None or wait:
                time.sleep(pause)
                pause = min(pause * 2, _MAX_PAUSE_S)
        return results

    def replicated(self, routes: Sequence[bytes]) -> tuple[int, str]:
        """After an add: WAIT wait_replicas wait_timeout_ms on the node of
        each route. Returns the fewest replicas that acknowledged on any of
        those nodes, and why it fell short ('' when none did). A WAIT
        proves something of the server it reaches only, and a failover
        moves an address: a new connection may reach the promoted replica,
        which acknowledges a WAIT for writes it never had. So the WAIT goes
        out, once, on the very connection and socket that answered every
        one of the add's commands to that node (_wrote_on: a re-send after
        a lost reply answers for itself), after a short-lived write of its
        own whose offset is past everything the node wrote before it (WAIT
        counts its own connection's writes). An add answered on two sockets
        (its first commands on one that a failover then cut, on the old
        primary), on a socket lost or replaced since, or on a node its keys
        no longer live on, is not known to be on a replica."""
        fewest, why = self.wait_replicas, ""
        nodes: dict[Any, tuple[Any, bytes]] = {}
        for route in routes:
            node = self.client.get_node_from_key(route) if self.cluster else None
            nodes.setdefault(getattr(node, "name", None), (node, route))
        writes: dict[int, set[tuple[Any, Any]]] = self._local.__dict__.pop("writes", {})
        waited = {id(self._pool(node)) for node, _ in nodes.values()}
        if any(pool not in waited for pool in writes):
            # (A cluster's node that answered part of the add and no longer holds its slots: a failover's old
            # primary before MOVED, or an importing node asked: no WAIT here answers for it.)
            return 0, ("part of the add was answered by a node that is not where its keys now live (a failover "
                       "or a slot moving): whether the add is on a replica is not known")
        for node, route in nodes.values():
            mark = pack(Job(route, b"SET", (sibling(route.decode(), ":wait"),), (b"", b"PX", 1000)))
            wait = pack(Job(route, b"WAIT", (), (self.wait_replicas, self.wait_timeout_ms)))
            acked: Any = None
            pool = self._pool(node)
            try:
                conn = pool.get_connection()  # (it may reconnect: caught below by its socket)
            except (_redis.ConnectionError, _redis.TimeoutError) as e:
                conn, why = None, f"the WAIT's connection failed ({e})"
            if conn is not None:
                try:
                    if writes.get(id(pool)) != {(conn, getattr(conn, "_sock", None))}:
                        why = ("the add's commands went out on another connection than its WAIT's, or one that was "
                               "lost or replaced (a failover moves an address): whether the add is on a replica is "
                               "not known")
                    else:
                        replies, fault, _sent = self._exchange(pool, [(mark, False), (wait, False)], conn=conn)
                        if fault is None:
                            acked = replies[1]
                        else:
                            self.stats["lost"] += 1
                            why = f"the WAIT's connection failed ({fault})"
                finally:
                    pool.release(conn)
            if isinstance(acked, Exception):
                acked, why = 0, f"WAIT was refused ({acked})"
            elif acked is not None:
                acked = int(acked)
                if acked < self.wait_replicas and not why:
                    why = f"{acked} of {self.wait_replicas} replicas acknowledged within {self.wait_timeout_ms} ms"
            fewest = min(fewest, 0 if acked is None else acked)
        return fewest, why if fewest < self.wait_replicas else ""

    def each(self, jobs: Sequence[Job]) -> list[Any]:
        """Replies of independent commands (key by key); the first error raised."""
        replies = self.run(jobs)
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return replies

    def call(self, route: Any, *args: Any) -> Any:
        """One command (no batch, idempotent): its reply, or its error raised."""
        (reply,) = self.run([Job(_arg(route), _arg(args[0]), (), args[1:])])
        if isinstance(reply, Exception):
            raise reply
        return reply

    def script(self, script: Script, keys: Sequence[Any], args: Sequence[Any] = ()) -> Any:
        """One idempotent script call (creating keys when missing, reading)."""
        (reply,) = self.run([Job(_arg(keys[0]), script, keys, args)])
        if isinstance(reply, Exception):
            raise reply
        return reply
