"""Scrapy integration: dupefilters (dupefilter.py) and a JOBDIR scheduler
that survives kill -9 (scheduler.py, with its request journal in
journal.py). Needs Scrapy (``pip install 'bloomline[scrapy]'``)."""

from __future__ import annotations

from .._optional import require

require("scrapy", "bloomline.scrapy")  # before the modules that import it: the message names the extra

from .dupefilter import BloomDupeFilter, RedisBloomDupeFilter
from .scheduler import JournalDoneMiddleware, JournalScheduler

__all__ = ["BloomDupeFilter", "JournalDoneMiddleware", "JournalScheduler", "RedisBloomDupeFilter"]
