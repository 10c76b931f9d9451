"""Findings: which page copies which work, and what reviewers decided about it.

- `status`: the status model (statuses, labels, transitions, open and closed sets, history
  entries), the one place that knows them;
- `record`: the match store, one finding per (page, work), updated by every scan;
- `queries`: filters, lists and a finding's neighbours, the same in the admin, the API and
  the command line;
- `passages`: the matched passages, the work's text beside the page's;
- `dashboard`, `export` (CSV), `reports` (printable, per work or per domain);
- `workflow`: reviewers' status changes; `licensing`: licensed domains; `notices`: takedown
  notices.

The public names of all of them are importable from ``tracker.findings``.
"""

from .dashboard import (
    DASHBOARD_MAX_AGE_S,
    DAYS_CHARTED,
    dashboard,
    invalidate_dashboard,
    recent_runs,
)
from .export import CSV_COLUMNS, findings_csv, safe_cell
from .licensing import (
    add_licensed_domain,
    licensed_domain_of,
    list_licensed_domains,
    normalize_domain,
    remove_licensed_domain,
    suppress_licensed,
)
from .notices import (
    NOTICE_LANGUAGES,
    NOTICE_PASSAGE_CHARS,
    NOTICE_PASSAGES,
    NOTICE_TEMPLATES,
    SENDER_FIELDS,
    NoSender,
    Notice,
    build_notice,
    check_sender,
    notice_sender,
    notices_of,
    record_notice,
    set_notice_sender,
)
from .passages import Passage, passages
from .queries import (
    DEFAULT_SORT,
    MAX_PER_PAGE,
    NEIGHBOURS_SCANNED,
    SEARCH_PAGES,
    SORT_KEYS,
    FilterError,
    FindingFilter,
    FindingPage,
    Neighbours,
    domain_query,
    find_findings,
    finding_query,
    neighbours,
    parse_filter,
    parse_object_id,
)
from .record import REOPEN_AS, RecordResult, list_findings, record_findings
from .reports import Report, domain_report, work_report
from .status import (
    CLOSED,
    CONFIRMED,
    DISMISSED,
    LABELS,
    LICENSED,
    MAX_NOTE_CHARS,
    NEW,
    NOT_COPIES,
    NOTICE_READY,
    NOTICE_SENT,
    OPEN,
    REMOVED,
    REVIEWER_STATUSES,
    STATUSES,
    SYSTEM,
    TRANSITIONS,
    history_entry,
)
from .workflow import (
    DISMISS_REASONS,
    BulkResult,
    FindingNotFound,
    WorkflowError,
    bulk_set_status,
    set_status,
    sources_of,
    status_update,
)

__all__ = [
    "CLOSED",
    "CONFIRMED",
    "CSV_COLUMNS",
    "DASHBOARD_MAX_AGE_S",
    "DAYS_CHARTED",
    "DEFAULT_SORT",
    "DISMISSED",
    "DISMISS_REASONS",
    "LABELS",
    "LICENSED",
    "MAX_NOTE_CHARS",
    "MAX_PER_PAGE",
    "NEIGHBOURS_SCANNED",
    "NEW",
    "NOTICE_LANGUAGES",
    "NOTICE_PASSAGES",
    "NOTICE_PASSAGE_CHARS",
    "NOTICE_READY",
    "NOTICE_SENT",
    "NOTICE_TEMPLATES",
    "NOT_COPIES",
    "OPEN",
    "REMOVED",
    "REOPEN_AS",
    "REVIEWER_STATUSES",
    "SEARCH_PAGES",
    "SENDER_FIELDS",
    "SORT_KEYS",
    "STATUSES",
    "SYSTEM",
    "TRANSITIONS",
    "BulkResult",
    "FilterError",
    "FindingFilter",
    "FindingNotFound",
    "FindingPage",
    "Neighbours",
    "NoSender",
    "Notice",
    "Passage",
    "RecordResult",
    "Report",
    "WorkflowError",
    "add_licensed_domain",
    "build_notice",
    "bulk_set_status",
    "check_sender",
    "dashboard",
    "domain_query",
    "domain_report",
    "find_findings",
    "finding_query",
    "findings_csv",
    "history_entry",
    "invalidate_dashboard",
    "licensed_domain_of",
    "list_findings",
    "list_licensed_domains",
    "neighbours",
    "normalize_domain",
    "notice_sender",
    "notices_of",
    "parse_filter",
    "parse_object_id",
    "passages",
    "recent_runs",
    "record_findings",
    "record_notice",
    "remove_licensed_domain",
    "safe_cell",
    "set_notice_sender",
    "set_status",
    "sources_of",
    "status_update",
    "suppress_licensed",
    "work_report",
]
