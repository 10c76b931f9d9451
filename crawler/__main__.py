"""``python -m crawler --campaign NAME --run-id ID``: a campaign's crawl process
(`crawler.run`), with the extraction workers' forkserver started before Scrapy is imported:
its imports (a second) then run on another core while this process imports its own."""

from __future__ import annotations

import os
import sys

from tracker.core.config import ConfigError, crawl_limits

from .extraction_server import start_extraction_server


def _crawl() -> int:
    try:
        limits = crawl_limits(os.environ)
    except ConfigError:
        pass  # the crawl stops on the bad setting, naming it: nothing to extract
    else:
        start_extraction_server(int(limits["COPYTRACK_EXTRACT_NICENESS"]))
    from .run import main  # after the server's start, on purpose

    return main()


if __name__ == "__main__":
    sys.exit(_crawl())
