"""A least-recently-used map bounded by the bytes of its values, for the per-process caches
of masters (texts, letter streams): a count bound would let a library of whole novels take
gigabytes where one of news articles takes megabytes."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SizedLRU(Generic[K, V]):
    """Values by key taking at most ``max_bytes`` (as ``size`` counts them), the least
    recently used dropped first; a value larger than the bound is not kept. Not locked:
    callers sharing one between threads hold their own lock."""

    def __init__(self, max_bytes: int, size: Callable[[V], int]) -> None:
        self.max_bytes = max_bytes
        self._size = size
        self._values: OrderedDict[K, V] = OrderedDict()
        self.bytes = 0

    def get(self, key: K) -> V | None:
        value = self._values.get(key)
        if value is not None:
            self._values.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        size = self._size(value)
        if key in self._values or size > self.max_bytes:
            return
        self._values[key] = value
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, dropped = self._values.popitem(last=False)
            self.bytes -= self._size(dropped)

    def clear(self) -> None:
        self._values.clear()
        self.bytes = 0

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __len__(self) -> int:
        return len(self._values)
