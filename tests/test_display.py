"""Every filter kind satisfies the Filter protocol, and Jupyter shows each
through it (bloomline.display)."""

from __future__ import annotations

import re

import pytest

import bloomline
from bloomline import BloomFilter, CountingBloomFilter, Filter, ScalableBloomFilter

pytestmark = pytest.mark.core  # run by CI's wheel and sanitizer (clang, flock) jobs (.ci/run)


def kinds() -> list[Filter]:
    return [
        BloomFilter(1000, 0.01),
        BloomFilter.from_params(4096, 3, layout="standard"),
        CountingBloomFilter(1000, 0.01, counter_bits=8),
        ScalableBloomFilter(100, 0.01),
    ]


@pytest.mark.parametrize("f", kinds(), ids=lambda f: type(f).__name__)
def test_every_kind_is_a_filter_and_displays_its_fill(f: Filter) -> None:
    assert isinstance(f, Filter)
    f.update(range(500))
    html = f._repr_html_()  # type: ignore[attr-defined]
    assert f"<td>{type(f).__name__}</td>" in html
    shown = re.search(r"<th[^>]*>fill</th><td>([0-9.]+)%</td>", html)
    assert shown is not None and float(shown.group(1)) == pytest.approx(100 * f.fill_ratio, abs=0.05)
    assert 0 < f.fill_ratio < 1


def test_fill_ratio_is_the_share_of_slots_set() -> None:
    bf = BloomFilter.from_params(1024, 2, layout="standard")
    bf.update(range(30))
    assert bf.fill_ratio == bf.bits_set / 1024
    cf = CountingBloomFilter.from_params(1024, 2, layout="standard")
    cf.update(range(30))
    assert cf.fill_ratio == cf.nonzero_counters / 1024


def test_a_full_filter_shows_inf_keys() -> None:
    bf = BloomFilter.from_params(512, 1)
    bf.update(range(20_000))
    assert "inf (full)" in bf._repr_html_()  # type: ignore[attr-defined]


def test_redis_filter_is_a_filter(redis_client: object) -> None:
    from bloomline.redis import RedisBloomFilter

    rf = RedisBloomFilter(redis_client, "shown", 1000, 0.01)
    rf.update(range(100))
    assert isinstance(rf, bloomline.Filter)
    assert "<td>RedisBloomFilter</td>" in rf._repr_html_()
