"""Request fingerprints by the rules other crawlers used, so that a filter
imported from them (a scrapy-redis fingerprint set) answers for the same
requests. Each rule is written here in our own code, from the function it
reproduces; tests check each against that project's own output.

``scrapy-redis``
    scrapy-redis 0.8 and later (its ``RFPDupeFilter.request_fingerprint``):
    the SHA-1 of ``json.dumps({"body": <body as hex>, "method": ...,
    "url": <canonical URL>}, sort_keys=True)``.
``scrapy-legacy``
    Scrapy's ``scrapy.utils.request.request_fingerprint`` before 2.7 (and
    scrapy-redis before 0.8, which called it): the SHA-1 of the method, the
    canonical URL and the body, one after the other.
``scrapy``
    Scrapy 2.7 and later (``REQUEST_FINGERPRINTER_IMPLEMENTATION = "2.7"``,
    the crawler's default fingerprinter): as scrapy-redis's, with
    ``"headers": {}`` in the JSON.

Every rule gives the 20 bytes of the SHA-1; a fingerprint set holds them as
40 hex characters.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable

from w3lib.url import canonicalize_url

__all__ = ["RULES", "rule"]

DEFAULT_RULE = "scrapy-redis"


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _json_sha1(request: Any, **extra: Any) -> bytes:
    data = {"method": _text(request.method), "url": canonicalize_url(request.url),
            "body": (request.body or b"").hex(), **extra}
    return hashlib.sha1(json.dumps(data, sort_keys=True).encode()).digest()


def scrapy_redis(request: Any) -> bytes:
    return _json_sha1(request)


def scrapy_legacy(request: Any) -> bytes:
    fp = hashlib.sha1()
    fp.update(_text(request.method).encode())
    fp.update(canonicalize_url(request.url).encode())
    fp.update(request.body or b"")
    return fp.digest()


def scrapy(request: Any) -> bytes:
    return _json_sha1(request, headers={})


RULES: dict[str, Callable[[Any], bytes]] = {"scrapy-redis": scrapy_redis, "scrapy-legacy": scrapy_legacy,
                                             "scrapy": scrapy}


def rule(name: str) -> Callable[[Any], bytes]:
    """The fingerprint function of a rule (ValueError naming the known ones)."""
    try:
        return RULES[name]
    except KeyError:
        raise ValueError(f"fingerprint rule must be one of {', '.join(map(repr, RULES))}, got {name!r}") from None


def as_key(fingerprint: Any) -> bytes:
    """What a request_fingerprint override returned, as the key recorded: hex
    text as its bytes (Scrapy's and scrapy-redis's form), other text as UTF-8,
    bytes as they are."""
    if isinstance(fingerprint, (bytes, bytearray, memoryview)):
        return bytes(fingerprint)
    text = str(fingerprint)
    try:
        return bytes.fromhex(text)
    except ValueError:
        return text.encode("utf-8")
