"""``python -m tests.security.guarded_crawl --campaign NAME --run-id ID``: crawler.run with
the guarded resolver looking names up in the ScriptedLookup of $COPYTRACK_TEST_DNS_SCRIPT.

Everything else is the real crawl process: settings, middlewares, the resolver's rule.
"""

from __future__ import annotations

import sys

from scrapy.settings import Settings as ScrapySettings

from crawler import run
from crawler.resolver import GuardedResolver
from tests.security.fakes import ScriptedLookup


class ScriptedResolver(GuardedResolver):
    lookup = ScriptedLookup.from_env()


def _settings(*args: object, **kwargs: object) -> ScrapySettings:
    settings = _real_settings(*args, **kwargs)
    settings.set("TWISTED_DNS_RESOLVER", f"{__name__}.ScriptedResolver", priority="cmdline")
    return settings


_real_settings = run.scrapy_settings
run.scrapy_settings = _settings

if __name__ == "__main__":
    sys.exit(run.main())
