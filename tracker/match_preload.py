"""What the matching workers' forkserver (`tracker.match_pool`) imports once for all of
them: the matcher, and the fingerprinter's tables that a process otherwise loads on its
first text (the pinyin table and the reference frame, a third of a second). Workers forked
from the server start warm.

Importing it elsewhere only fills those caches.
"""

from fingerprinter import DEFAULT_PARAMS, query_array

from .match_pool import MatchPool

__all__ = ["MatchPool"]

query_array("版权追踪 copyright tracking " * 4, DEFAULT_PARAMS)
