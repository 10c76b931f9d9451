"""tracker.core.sized_lru: the per-process caches of masters stay within their bytes."""

from __future__ import annotations

from tracker.core.sized_lru import SizedLRU


def test_the_least_recently_used_go_first_once_the_bytes_are_spent():
    cache: SizedLRU[str, bytes] = SizedLRU(10, len)
    cache.put("a", b"aaaa")
    cache.put("b", b"bbbb")
    assert cache.get("a") == b"aaaa"  # now the most recently used
    cache.put("c", b"cccc")  # 12 bytes: the least recently used, b, goes
    assert "b" not in cache and cache.get("a") == b"aaaa" and cache.get("c") == b"cccc"
    assert cache.bytes == 8 and len(cache) == 2


def test_a_value_larger_than_the_bound_is_not_kept_and_evicts_nothing():
    cache: SizedLRU[str, bytes] = SizedLRU(10, len)
    cache.put("a", b"aaaa")
    cache.put("novel", b"x" * 11)
    assert "novel" not in cache and cache.get("a") == b"aaaa"
    cache.clear()
    assert len(cache) == 0 and cache.bytes == 0 and cache.get("a") is None
