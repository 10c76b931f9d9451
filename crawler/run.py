"""``python -m crawler --campaign NAME --run-id ID`` (or ``-m crawler.run``): one crawl process
of a run.

Started by ``tracker.campaigns.trigger_run`` (Twisted's reactor runs once per process,
so every crawl gets a fresh one). The process joins the run, renews the campaign's lock
and the run's heartbeat from a thread while Scrapy crawls, and on exit reports to the
run; the last process of a run moves it on to ``scanning`` and releases the lock.

Frontier: ``memory`` (default) keeps the queue and the seen-URL filter in this process.
``redis`` (``--frontier redis`` or ``COPYTRACK_CRAWL_FRONTIER=redis``) puts both in Redis
through scrapy-redis, keyed by run: start more processes with the same ``--run-id``, on
any machine reaching the same MongoDB and Redis, and they share the work.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from datetime import datetime
from typing import Any

from bson import ObjectId
from bson.errors import InvalidId
from scrapy.crawler import CrawlerProcess
from scrapy.settings import Settings as ScrapySettings
from scrapy_redis.defaults import REDIS_PARAMS as REDIS_DEFAULTS

from tracker.campaigns import (
    HEARTBEAT_EVERY,
    Campaign,
    CampaignError,
    drop_frontier,
    finish_crawl,
    get_campaign,
    heartbeat,
    join_run,
    run_cancelled,
)
from tracker.context import Context, follow_servers, process_context
from tracker.core.config import ConfigError, Settings, crawl_limits
from tracker.core.failures import CONNECTION_ERRORS, describe, storage_failed
from tracker.core.keys import RedisKeys
from tracker.discovery.providers import SearchError, provider_from_settings
from tracker.discovery.searches import discover
from tracker.runtime.processes import recorded
from tracker.runtime.servers import ServerStartError
from tracker.scanning.chains import MAX_CHAIN

from . import settings as crawl_settings
from .frontier_client import FollowingRedis
from .pipelines import NOT_STORED_STAT, STORE_ERRORS, STORE_PAUSES
from .rendering import render_settings
from .spiders.campaign import CampaignSpider

log = logging.getLogger("crawler.run")

FRONTIERS = ("memory", "redis")
FRONTIER_GRACE = 10.0  # seconds every process of a shared frontier must idle before closing


def frontier_keys(keys: RedisKeys, run_id: ObjectId) -> dict[str, str]:
    """Redis keys of a run's shared frontier: request queue, seen filter, busy mark."""
    prefix = keys.frontier(run_id)
    return {
        "SCHEDULER_QUEUE_KEY": f"{prefix}:requests",
        "SCHEDULER_DUPEFILTER_KEY": f"{prefix}:dupefilter",
        "COPYTRACK_FRONTIER_BUSY_KEY": f"{prefix}:busy",
    }


def scrapy_settings(
    campaign: Campaign,
    run_id: ObjectId,
    ctx: Context,
    frontier: str,
    resume_since: datetime | None = None,
) -> ScrapySettings:
    """crawler.settings, the crawl limits as the environment sets them, and this campaign's
    limits and politeness overrides; ConfigError names a limit set to something unusable.

    ``resume_since``: the run resumes a failed one; pages fetched since are not fetched again.
    """
    settings = ScrapySettings()
    settings.setmodule(crawl_settings, priority="project")
    settings.setdict(crawl_limits(os.environ), priority="cmdline")
    overrides: dict[str, Any] = {
        "COPYTRACK_CAMPAIGN": campaign.to_doc(),
        "COPYTRACK_RUN_ID": str(run_id),
        "COPYTRACK_ALLOW_PRIVATE_NETWORKS": ctx.settings.allow_private_networks,
        "LOG_LEVEL": ctx.settings.log_level,
    }
    if resume_since is not None:
        overrides["COPYTRACK_RESUME_SINCE"] = resume_since.isoformat()
    if campaign.max_depth is not None:
        # The spider keeps the depth itself (a chapter's next pages do not count); Scrapy's
        # limit is the backstop, past the longest chain joined.
        overrides["DEPTH_LIMIT"] = campaign.max_depth + MAX_CHAIN
    if campaign.max_pages is not None:
        overrides["CLOSESPIDER_PAGECOUNT"] = campaign.max_pages
    if campaign.delay is not None:
        overrides["DOWNLOAD_DELAY"] = campaign.delay
        overrides["AUTOTHROTTLE_START_DELAY"] = campaign.delay
    if campaign.concurrency is not None:
        overrides["CONCURRENT_REQUESTS_PER_DOMAIN"] = campaign.concurrency
        overrides["AUTOTHROTTLE_TARGET_CONCURRENCY"] = float(campaign.concurrency)
    if campaign.render:
        overrides.update(render_settings(settings))
    if campaign.ocr:
        overrides["COPYTRACK_OCR"] = True
        overrides["EXTENSIONS"] = {
            **settings.getdict("EXTENSIONS"),
            "scrapy.extensions.closespider.CloseSpider": None,
            "crawler.image_downloads.PageCloseSpider": 0,
        }
    if frontier == "redis":
        overrides.update(
            frontier_keys(ctx.keys, run_id),
            SCHEDULER="scrapy_redis.scheduler.Scheduler",
            DUPEFILTER_CLASS="scrapy_redis.dupefilter.RFPDupeFilter",
            # Never flush on close: the other processes of the run still use the queue.
            SCHEDULER_PERSIST=True,
            REDIS_URL=ctx.endpoints.redis_url,
            # A client that follows Redis to a new port, as the crawl's storage does.
            REDIS_PARAMS={**REDIS_DEFAULTS, "redis_cls": FollowingRedis},
            COPYTRACK_FRONTIER_GRACE=FRONTIER_GRACE,
            DOWNLOADER_MIDDLEWARES={
                **settings.getdict("DOWNLOADER_MIDDLEWARES"),
                "crawler.middlewares.SharedFrontierMiddleware": 40,
            },
        )
    settings.setdict(overrides, priority="cmdline")
    return settings


def _keep_alive(name: str, run_id: ObjectId, stop: threading.Event) -> None:
    while not stop.wait(HEARTBEAT_EVERY.total_seconds()):
        try:
            # The context as it is now: another one once the servers moved.
            ctx = process_context()
            if not heartbeat(ctx, name, run_id):
                if run_cancelled(ctx, run_id):  # stopped from another machine: end here too
                    log.warning("run %s was stopped; ending its crawl", run_id)
                    os.kill(os.getpid(), signal.SIGTERM)  # Scrapy's graceful shutdown
                    return
                log.warning("run %s no longer holds the lock of campaign %s", run_id, name)
        except CONNECTION_ERRORS as err:  # a server died: start it again, the next beat retries
            log.warning("heartbeat of run %s failed (%s); looking for the servers", run_id, err)
            try:
                follow_servers()
            except ServerStartError as start_error:
                log.error("%s", start_error)
        except Exception:
            log.exception("heartbeat of run %s failed", run_id)


def discovered(ctx: Context, campaign: Campaign, run: dict[str, Any]) -> Campaign:
    """A discover campaign with its run's seeds, the search results: looked up by the first
    crawl process of the run, read from the run by the others. SearchError when no search
    engine is configured."""
    if run.get("discovery") is None:
        found = discover(ctx, campaign.name, provider_from_settings(ctx.settings), campaign.sample)
        ctx.db.runs.update_one(
            {"_id": run["_id"], "discovery": {"$exists": False}},
            {"$set": {"discovery": found.to_doc()}},
        )
        run = ctx.db.runs.find_one({"_id": run["_id"]}) or run
    return campaign.with_seeds(run["discovery"]["seeds"])


def crawl(
    ctx: Context,
    campaign: Campaign,
    run_id: ObjectId,
    frontier: str,
    resume_since: datetime | None = None,
) -> str | None:
    """Run the spider to its end in this process; returns why the run fails, or None."""
    process = CrawlerProcess(scrapy_settings(campaign, run_id, ctx, frontier, resume_since))
    crawler = process.create_crawler(CampaignSpider)
    process.crawl(crawler)
    process.start()
    assert crawler.stats is not None
    reason = str(crawler.stats.get_value("finish_reason", "unknown"))
    if reason == "shutdown":
        return "interrupted (the crawl process was asked to stop)"
    if not_stored := crawler.stats.get_value(NOT_STORED_STAT):
        return f"pages could not be stored: {not_stored}"
    return None


def main(argv: list[str] | None = None) -> int:
    """Crawl one campaign for one run; exit status 0 when the crawl ran to its end."""
    parser = argparse.ArgumentParser(prog="python -m crawler", description=__doc__.split("\n")[0])
    parser.add_argument("--campaign", required=True, help="campaign name")
    parser.add_argument("--run-id", required=True, help="run to crawl for (from trigger_run)")
    parser.add_argument(
        "--frontier",
        choices=FRONTIERS,
        default=Settings.from_env().crawl_frontier,
        help="where the request queue lives (default: $COPYTRACK_CRAWL_FRONTIER or memory)",
    )
    args = parser.parse_args(argv)
    if args.frontier not in FRONTIERS:
        parser.error(f"COPYTRACK_CRAWL_FRONTIER must be one of {', '.join(FRONTIERS)}")
    # Recorded in the data dir while it runs: `copytrack down` stops it, and waits for it.
    with recorded(Settings.from_env().data_dir, "crawl"):
        return _crawl_run(args)


def _crawl_run(args: argparse.Namespace) -> int:
    """`main` once its arguments are read: join the run, crawl, report to the run."""
    try:
        run_id = ObjectId(args.run_id)
        ctx = process_context()
        campaign = get_campaign(ctx, args.campaign)
        run = join_run(ctx, run_id)
    except (InvalidId, CampaignError, ConfigError) as err:
        print(f"crawler.run: {err}", file=sys.stderr)
        return 2
    except CONNECTION_ERRORS as err:
        # Its run, unjoined, is failed by whoever looks at it next (its process is gone).
        print(f"crawler.run: {describe(err, Settings.from_env())}", file=sys.stderr)
        return 2
    resume_since = run.get("resume_since")

    stop = threading.Event()
    beat = threading.Thread(target=_keep_alive, args=(campaign.name, run_id, stop), daemon=True)
    beat.start()
    error = None
    try:
        if campaign.kind == "discover":
            campaign = discovered(ctx, campaign, run)
        error = crawl(ctx, campaign, run_id, args.frontier, resume_since)
    except (ConfigError, SearchError) as err:
        log.error("%s", err)
        error = str(err)
    except Exception as err:
        log.exception("crawl of %s failed", campaign.name)
        error = f"crawl failed: {type(err).__name__}: {err}"
    finally:
        stop.set()
        beat.join()
    if _reported(run_id, error):
        drop_frontier(process_context(), run_id)
    return 1 if error else 0


def _reported(run_id: ObjectId, error: str | None) -> bool:
    """`finish_crawl` on the servers as they are now, tried again (the servers looked for)
    while they cannot take it, for a while: else the run is failed as interrupted by
    whoever looks at it once its heartbeat is old."""
    for pause in (*STORE_PAUSES, 0.0):
        try:
            return finish_crawl(process_context(), run_id, error)
        except STORE_ERRORS as err:
            log.warning("cannot report to run %s yet (%s)", run_id, err)
            with contextlib.suppress(ServerStartError, *STORE_ERRORS):
                follow_servers(restart_failed=storage_failed(err))
            time.sleep(pause)
    return False


if __name__ == "__main__":
    sys.exit(main())
