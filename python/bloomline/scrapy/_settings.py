"""The dupefilters' settings, read and checked (each error names its
setting and the value, as a ``_Refused`` with reason
``bloomline_bad_settings``), and the defaults and chain parameters both
filters and the scrapy-redis import share."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Optional, cast

from scrapy.utils.misc import load_object

from .._core import ChainRule
from .._layouts import setting_layout
from .._window_parts import generation_rate
from ..sizing import optimal_params
from ..scalable import ChainMismatch
from .._optional import require
from ._crawl import REASON_SETTINGS, _Refused

if TYPE_CHECKING:
    from .._core import Layout

DEFAULT_CAPACITY = 100_000
DEFAULT_ERROR_RATE = 1e-4
DEFAULT_RETRY_TIMEOUT_S = 30.0
GROWTH = 2
TIGHTENING = 0.9
FRONT_SHARE = 0.1  # of the error budget, for the Redis filter's local front filter
RECRAWL_GENERATIONS = 4  # BLOOMLINE_RECRAWL_AFTER's filters: a page is fetched again within 1.25x it
# Redis's own socket timeouts: short, since a check runs on the reactor
# (scrapy-redis uses 30 s; REDIS_PARAMS may set others).
REDIS_DEFAULTS: dict[str, Any] = {"socket_timeout": 5, "socket_connect_timeout": 5, "retry_on_timeout": True}
MAX_WAIT_TIMEOUT = 4.0  # BLOOMLINE_REDIS_REPLICAS_TIMEOUT: WAIT must end within the 5 s socket timeout


def _int_setting(settings: Any, name: str, default: int, minimum: int) -> int:
    raw = settings.get(name, default)
    value: Optional[int] = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, (str, float)) and not isinstance(raw, bool):
        try:
            value = int(raw) if isinstance(raw, str) and raw.strip().lstrip("+-").isdigit() else None
            if value is None:
                f = float(raw)
                value = int(f) if f.is_integer() else None
        except (ValueError, OverflowError):
            value = None
    if value is None or value < minimum:
        raise _Refused(REASON_SETTINGS, f"{name} must be an integer >= {minimum}, got {raw!r}")
    return value


def _float_setting(settings: Any, name: str, default: float, low: float, high: float, closed: bool = False) -> float:
    raw = settings.get(name, default)
    try:
        value = float(raw) if not isinstance(raw, bool) else float("nan")
    except (TypeError, ValueError):
        value = float("nan")
    inside = (low <= value <= high) if closed else (low < value < high)
    if not inside:
        span = f"[{low:g}, {high:g}]" if closed else f"({low:g}, {high:g})"
        raise _Refused(REASON_SETTINGS, f"{name} must be in {span}, got {raw!r}")
    return value


def _recrawl_setting(settings: Any) -> Optional[float]:
    """BLOOMLINE_RECRAWL_AFTER: seconds (>= 0.001, finite), or None when unset."""
    raw = settings.get("BLOOMLINE_RECRAWL_AFTER")
    if raw is None or raw == "":
        return None
    try:
        value = float(raw) if not isinstance(raw, bool) else float("nan")
    except (TypeError, ValueError):
        value = float("nan")
    if not 1e-3 <= value < float("inf"):
        raise _Refused(REASON_SETTINGS, f"BLOOMLINE_RECRAWL_AFTER must be a number of seconds >= 0.001, got {raw!r}")
    return value


class _Config:
    """The settings both filters read, checked (each error names its setting)."""

    def __init__(self, settings: Any) -> None:
        self.capacity = _int_setting(settings, "BLOOMLINE_CAPACITY", DEFAULT_CAPACITY, 1)
        self.error_rate = _float_setting(settings, "BLOOMLINE_ERROR_RATE", DEFAULT_ERROR_RATE, 0.0, 1.0)
        layout = settings.get("BLOOMLINE_LAYOUT", "blocked")
        if layout not in ("blocked", "standard"):
            raise _Refused(REASON_SETTINGS, f"BLOOMLINE_LAYOUT must be 'blocked' or 'standard', got {layout!r}")
        self.layout = cast("Layout", layout)
        self.debug = _bool_setting(settings, "DUPEFILTER_DEBUG", False)
        self.recrawl_after = _recrawl_setting(settings)

    def check_local_sizes(self) -> None:
        """The local filter can be made of BLOOMLINE_CAPACITY and
        BLOOMLINE_ERROR_RATE (the chain's first stage, or each recrawl
        generation), checked before JOBDIR is read: a size out of range is a
        bad setting, never taken for a damaged JOBDIR."""
        try:
            if self.recrawl_after is None:
                rule = ChainRule(self.capacity, self.error_rate, GROWTH, TIGHTENING)
                optimal_params(rule.stage_capacity(0), rule.stage_error_rate(0), self.layout)
            else:
                optimal_params(self.capacity, generation_rate(self.error_rate, RECRAWL_GENERATIONS), self.layout)
        except ValueError as e:
            raise _Refused(REASON_SETTINGS, f"BLOOMLINE_CAPACITY={self.capacity!r} with BLOOMLINE_ERROR_RATE="
                                            f"{self.error_rate!r} makes no filter: {e}") from None


def _bool_setting(settings: Any, name: str, default: bool) -> bool:
    try:
        return bool(settings.getbool(name, default))
    except ValueError:
        raise _Refused(REASON_SETTINGS, f"{name} must be a boolean, got {settings.get(name)!r}") from None


def _keeps_journal(settings: Any) -> bool:
    """SCHEDULER is JournalScheduler, or a scheduler of its kind (its
    keeps_journal): JOBDIR's requests.journal is read, and kept over a kill."""
    scheduler = settings.get("SCHEDULER")
    return bool(getattr(load_object(scheduler) if isinstance(scheduler, str) else scheduler, "keeps_journal", False))


def _redis_key(settings: Any, spider_name: str) -> str:
    name = "BLOOMLINE_REDIS_KEY" if settings.get("BLOOMLINE_REDIS_KEY") else "SCHEDULER_DUPEFILTER_KEY"
    template = settings.get(name) or "%(spider)s:dupefilter"
    try:
        key = str(template) % {"spider": spider_name}
    except (ValueError, KeyError, TypeError) as e:
        raise _Refused(REASON_SETTINGS, f"{name} must be a %-format with only %(spider)s (write %% for a "
                                        f"literal %), got {template!r}: {e}") from None
    if not key:
        raise _Refused(REASON_SETTINGS, f"{name} must give a non-empty key, got {template!r}")
    return key


def _redis_client(settings: Any) -> Any:
    """A redis-py client from scrapy-redis's settings (BLOOMLINE_REDIS_*
    first)."""
    params = dict(REDIS_DEFAULTS)
    for name in ("REDIS_PARAMS", "BLOOMLINE_REDIS_PARAMS"):
        try:
            params.update(settings.getdict(name))
        except (ValueError, TypeError):
            raise _Refused(REASON_SETTINGS, f"{name} must be a dict, got {settings.get(name)!r}") from None
    params.pop("decode_responses", None)  # the filter reads bytes
    params.pop("encoding", None)
    cls: Any = params.pop("redis_cls", None)
    if cls is None:  # (redis is optional; the local filter does without it)
        try:
            cls = require("redis", "RedisBloomDupeFilter").Redis
        except ImportError as e:
            raise _Refused(REASON_SETTINGS, str(e)) from None
    try:
        if isinstance(cls, str):
            cls = load_object(cls)
    except (ImportError, NameError, ValueError) as e:
        raise _Refused(REASON_SETTINGS, f"REDIS_PARAMS['redis_cls'] cannot be loaded, got {cls!r}: {e}") from None
    url = settings.get("BLOOMLINE_REDIS_URL") or settings.get("REDIS_URL")
    try:
        if url:
            return cls.from_url(url, **params)
        host = settings.get("BLOOMLINE_REDIS_HOST") or settings.get("REDIS_HOST") or "localhost"
        port = _int_setting(settings, "BLOOMLINE_REDIS_PORT" if settings.get("BLOOMLINE_REDIS_PORT") else "REDIS_PORT",
                            6379, 1)
        db = settings.get("REDIS_DB")
        if db is not None:
            params["db"] = db
        return cls(host=host, port=port, **params)
    except _Refused:
        raise
    except (TypeError, ValueError) as e:
        where = "BLOOMLINE_REDIS_URL or REDIS_URL" if url else "REDIS_HOST, REDIS_PORT or REDIS_PARAMS"
        shown = _safe_url(str(url)) if url else repr(params)
        raise _Refused(REASON_SETTINGS, f"{where} cannot make a Redis client ({shown}): {e}") from None


def _safe_url(url: str) -> str:
    """A URL without its password, for the log."""
    return re.sub(r"//([^:@/]*):[^@/]*@", r"//\1:***@", url)


def _server_where(server: Any) -> str:
    """Where a redis-py client connects, for the log (host:port/db, or a
    socket's path)."""
    kw = getattr(getattr(server, "connection_pool", None), "connection_kwargs", {})
    return (f"{kw.get('host', '?')}:{kw.get('port', '?')}/{kw.get('db', 0)}" if "host" in kw
            else kw.get("path") or type(server).__name__)


def _mismatch(where: str, error: ChainMismatch, settings: Any, share: float) -> _Refused:
    """A stored chain made with other settings: which, as the settings read
    (the earlier rate recovered from stage 0's and printed with %g)."""
    stage = error.stage
    per_rate = ChainRule(1000, 0.01, GROWTH, TIGHTENING).stage_error_rate(0) / 0.01  # stage 0's share of the rate
    if error.index == 0 and stage is not None and stage.capacity is not None and stage.error_rate is not None:
        made = (f"BLOOMLINE_CAPACITY={stage.capacity}, BLOOMLINE_ERROR_RATE={stage.error_rate / per_rate / share:g}, "
                f"BLOOMLINE_LAYOUT={setting_layout(stage.layout)!r}")
    elif error.chain is not None and {"initial_capacity", "error_rate", "layout"} <= error.chain.keys():
        # the chain's own parameters, as Redis keeps them (the chain's rate: the settings' share)
        made = (f"BLOOMLINE_CAPACITY={error.chain['initial_capacity']}, "
                f"BLOOMLINE_ERROR_RATE={float(error.chain['error_rate']) / share:g}, "
                f"BLOOMLINE_LAYOUT={setting_layout(error.chain['layout'])!r}")
    else:  # pragma: no cover - stage 0 matched, a later one did not: a chain made by other code
        made = f"other parameters ({error})"
    now = (f"BLOOMLINE_CAPACITY={settings.get('BLOOMLINE_CAPACITY', DEFAULT_CAPACITY)!r}, BLOOMLINE_ERROR_RATE="
           f"{settings.get('BLOOMLINE_ERROR_RATE', DEFAULT_ERROR_RATE)!r}, "
           f"BLOOMLINE_LAYOUT={settings.get('BLOOMLINE_LAYOUT', 'blocked')!r}")
    return _Refused(REASON_SETTINGS, f"{where} was made with {made}; this crawl has {now}: set them as that crawl "
                                     "did, or start anew")
