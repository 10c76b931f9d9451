"""What the matching workers' forkserver (`tracker.matching.match_pool`) imports once for all of
them: the matcher, and the fingerprinter's tables that a process otherwise loads on its
first text (the pinyin table and the reference frame, a third of a second). Workers forked
from the server start warm.

Importing it elsewhere only fills those caches.
"""

from .match_pool import MatchPool, load_tables

__all__ = ["MatchPool"]

load_tables()
