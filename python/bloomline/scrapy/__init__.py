"""Scrapy integration: dupefilters (dupefilter.py), a JOBDIR scheduler
that survives kill -9 (scheduler.py, with its request journal in
journal.py), and scrapy-redis's scheduler that loses no request taken to a
kill -9 (redis_scheduler.py, imported when first named: it needs
scrapy-redis). Needs Scrapy (``pip install 'bloomline[scrapy]'``)."""

from __future__ import annotations

from typing import Any

from .._optional import require

require("scrapy", "bloomline.scrapy")  # before the modules that import it: the message names the extra

from .dupefilter import BloomDupeFilter, RedisBloomDupeFilter
from .scheduler import JournalDoneMiddleware, JournalScheduler

__all__ = ["BloomDupeFilter", "JournalDoneMiddleware", "JournalScheduler", "RedisBloomDupeFilter",
           "RedisJournalScheduler"]


def __getattr__(name: str) -> Any:
    if name == "RedisJournalScheduler":
        require("scrapy_redis", "bloomline.scrapy.RedisJournalScheduler")
        from .redis_scheduler import RedisJournalScheduler

        return RedisJournalScheduler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
