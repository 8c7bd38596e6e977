"""Dupefilters with a stopwatch, for scrapy_bench.py's crawls: each class
times its request_seen (perf_counter around the call) and counts the Redis
round trips made inside it (commands written to a redis-py connection; a
pipelined batch is one), and at exit writes those with the process's peak
RSS to the JSON file named by BLOOMLINE_PROBE_OUT."""

from __future__ import annotations

import atexit
import json
import os
import resource
import time
from typing import Any

_state = {"calls": 0, "seconds": 0.0, "round_trips": 0, "inside": False}


def _count_round_trips() -> None:
    try:
        import redis.connection as rc
    except ImportError:
        return
    original = rc.AbstractConnection.send_packed_command if hasattr(rc, "AbstractConnection") \
        else rc.Connection.send_packed_command

    def send_packed_command(self: Any, command: Any, check_health: bool = True) -> Any:
        if _state["inside"]:
            _state["round_trips"] += 1
        return original(self, command, check_health)

    if hasattr(rc, "AbstractConnection"):
        rc.AbstractConnection.send_packed_command = send_packed_command  # type: ignore[method-assign]
    else:  # pragma: no cover - older redis-py
        rc.Connection.send_packed_command = send_packed_command  # type: ignore[method-assign]


def _dump() -> None:
    out = os.environ.get("BLOOMLINE_PROBE_OUT")
    if out:
        data = dict(_state, peak_rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
        data.pop("inside")
        with open(out, "w") as f:
            json.dump(data, f)


_count_round_trips()
atexit.register(_dump)


def _timed(base: Any) -> Any:
    class Timed(base):  # type: ignore[misc, valid-type]
        def request_seen(self, request: Any) -> bool:
            _state["inside"] = True
            t = time.perf_counter()
            try:
                return bool(super().request_seen(request))
            finally:
                _state["seconds"] += time.perf_counter() - t
                _state["calls"] += 1
                _state["inside"] = False

    Timed.__name__ = f"Timed{base.__name__}"
    return Timed


def _load() -> dict[str, Any]:
    from scrapy.dupefilters import RFPDupeFilter

    from bloomline.scrapy import BloomDupeFilter, RedisBloomDupeFilter

    classes = {"RFP": _timed(RFPDupeFilter), "Bloom": _timed(BloomDupeFilter),
               "RedisBloom": _timed(RedisBloomDupeFilter)}
    try:
        from scrapy_redis.dupefilter import RFPDupeFilter as ScrapyRedisRFP

        classes["ScrapyRedis"] = _timed(ScrapyRedisRFP)
    except ImportError:  # pragma: no cover
        pass
    return classes


_classes = _load()
TimedRFP = _classes["RFP"]
TimedBloom = _classes["Bloom"]
TimedRedisBloom = _classes["RedisBloom"]
TimedScrapyRedis = _classes.get("ScrapyRedis")
