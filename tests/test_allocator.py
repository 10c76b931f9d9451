"""tracker.core.allocator: freed memory kept for the next batch instead of faulted in again."""

from __future__ import annotations

import subprocess
import sys

import pytest

# 40 batches each allocating and touching six arrays of 4 MB, then freeing them, as
# matching's batches do; prints the page faults they took.
_BATCHES = """
import resource, sys
import numpy as np
from tracker.core.allocator import keep_freed_memory
if sys.argv[1] == "kept":
    assert keep_freed_memory()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(40):
    arrays = [np.ones(4 << 20, dtype=np.uint8) for _ in range(6)]
    del arrays
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", _BATCHES, mode], capture_output=True, text=True, check=True
    )
    return int(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_batches_reuse_their_memory_instead_of_faulting_it_in_each_time() -> None:
    default, kept = _faults("default"), _faults("kept")
    pages = 6 * (4 << 20) // 4096  # a batch's
    assert default > 10 * pages  # batch after batch faulted its 6,144 pages in again
    assert kept < 3 * pages  # the first batch's pages, reused by the others
