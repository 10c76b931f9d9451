"""Crawl campaigns and their runs, one concern per module.

- `definition`: what a campaign is (fields checked one by one) and campaign files (YAML);
- `store`: campaigns in MongoDB;
- `lock`: the Redis lock that keeps a campaign from running twice at once;
- `runs`: the run state machine, ``(queued →) starting → running → scanning → finished``
  or ``failed``, its counters, heartbeats and completion;
- `dispatch`: where a run crawls, a crawl process started here or by a crawler worker;
- `schedule`: cron schedules starting runs;
- `stop`: stopping a run, recorded cancelled with who and when;
- `outcomes`: the URLs a run skipped or failed, with their reasons, and its health.

The public names of all of them are importable from ``tracker.campaigns``.
"""

from .definition import KINDS, Campaign, CampaignError, check_seeds, load_campaign_file
from .dispatch import (
    CRAWL_COMMAND,
    crawl_log_path,
    crawl_queued_run,
    launch_crawl,
    stop_crawls,
    trigger_run,
)
from .lock import LOCK_TTL, CampaignBusy, lock_holder, release_lock, renew_lock, take_lock
from .outcomes import (
    KEPT_PER_CRAWLER,
    OUTCOMES,
    REASONS,
    Health,
    Problem,
    ProblemPage,
    explain,
    outcome_counts,
    problem_page,
    record_problems,
    run_health,
)
from .runs import (
    ACTIVE_STATES,
    DONE_STATES,
    HEARTBEAT_EVERY,
    HEARTBEAT_STALE,
    QUEUE_WAIT,
    abort_run,
    claim_unscanned,
    crawl_died,
    crawl_process_record,
    drop_frontier,
    finish_crawl,
    get_run,
    heartbeat,
    join_run,
    pending_scans,
    reason_key,
    record_progress,
    refresh_run,
    refresh_runs,
    run_cancelled,
    run_history,
    start_run,
    wait_for_run,
)
from .schedule import due_at, run_due_campaigns
from .stop import STOPPABLE_STATES, NotRunning, signal_crawls, stop_run
from .store import get_campaign, list_campaigns, remove_campaign, save_campaign

__all__ = [
    "ACTIVE_STATES",
    "CRAWL_COMMAND",
    "DONE_STATES",
    "HEARTBEAT_EVERY",
    "HEARTBEAT_STALE",
    "KEPT_PER_CRAWLER",
    "KINDS",
    "LOCK_TTL",
    "OUTCOMES",
    "QUEUE_WAIT",
    "REASONS",
    "STOPPABLE_STATES",
    "Campaign",
    "CampaignBusy",
    "CampaignError",
    "Health",
    "NotRunning",
    "Problem",
    "ProblemPage",
    "abort_run",
    "check_seeds",
    "claim_unscanned",
    "crawl_died",
    "crawl_log_path",
    "crawl_process_record",
    "crawl_queued_run",
    "drop_frontier",
    "due_at",
    "explain",
    "finish_crawl",
    "get_campaign",
    "get_run",
    "heartbeat",
    "join_run",
    "launch_crawl",
    "list_campaigns",
    "load_campaign_file",
    "lock_holder",
    "outcome_counts",
    "pending_scans",
    "problem_page",
    "reason_key",
    "record_problems",
    "record_progress",
    "refresh_run",
    "refresh_runs",
    "release_lock",
    "remove_campaign",
    "renew_lock",
    "run_cancelled",
    "run_due_campaigns",
    "run_health",
    "run_history",
    "save_campaign",
    "signal_crawls",
    "start_run",
    "stop_crawls",
    "stop_run",
    "take_lock",
    "trigger_run",
    "wait_for_run",
]
