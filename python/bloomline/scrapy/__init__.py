"""Scrapy integration: dupefilters (dupefilter.py) and a JOBDIR scheduler
that survives kill -9 (scheduler.py, with its request journal in
journal.py). Needs Scrapy (``pip install scrapy``, or ``pip install '.[scrapy]'``
from a checkout)."""

from __future__ import annotations

from .dupefilter import BloomDupeFilter, RedisBloomDupeFilter
from .scheduler import JournalDoneMiddleware, JournalScheduler

__all__ = ["BloomDupeFilter", "JournalDoneMiddleware", "JournalScheduler", "RedisBloomDupeFilter"]
