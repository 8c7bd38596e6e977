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
    def __init__(self, tmp: Path, *extra: str) -> None:
        self.port = free_port(with_bus="--cluster-enabled" in extra)
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


@pytest.fixture
def redis_client(redis_server: RedisServer) -> Iterator[object]:
    redis = pytest.importorskip("redis")
    client = redis.Redis(host="127.0.0.1", port=redis_server.port)
    yield client
    client.close()


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[RedisServer]]:
    """Three masters on loopback ports joined into a Redis Cluster."""
    servers: list[RedisServer] = []
    try:
        for i in range(3):
            servers.append(
                RedisServer(tmp_path_factory.mktemp(f"cluster{i}"), "--cluster-enabled", "yes",
                            "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000")
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
