"""The forkserver the extraction workers are forked from: it imports and warms the
extraction code once (`crawler.extract_preload`, a second of CPU) for all of them.

Started as early as the crawl process can (`python -m crawler`, before Scrapy is imported),
so that its imports run on another core meanwhile; the pipeline only starts it if that did
not happen (`python -m crawler.run`).
"""

from __future__ import annotations

import os
import sys
import threading
from multiprocessing import forkserver

PRELOAD = ["crawler.extract_preload"]


def start_extraction_server(niceness: int) -> None:
    """Start the forkserver (its imports go on in the background), ``niceness`` nicer than
    this process on Linux: downloading comes first. Does nothing if it runs already."""
    forkserver.set_forkserver_preload(PRELOAD)
    if sys.platform != "linux":
        # Elsewhere nice values are per process: extraction keeps the crawl's priority.
        forkserver.ensure_running()
        return
    # Linux keeps nice values per thread, and a process inherits its creator's: the
    # forkserver started from a thread of lower priority, and every worker it forks, run
    # at that priority (imports and warm-up included).
    starter = threading.Thread(target=_start_niced, args=(niceness,), name="forkserver-start")
    starter.start()
    starter.join()


def _start_niced(niceness: int) -> None:
    os.nice(niceness)  # this thread's only
    forkserver.ensure_running()
