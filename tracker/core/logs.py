"""Logging for copytrack's processes: plain lines for people, JSON lines for log pipelines.

Events about one page, campaign or run carry their ids as fields (``extra=`` on the log
call, see ``CONTEXT_FIELDS``): in text they are appended as ``key=value``, in JSON they are
keys of their own, so a log pipeline can follow one page from crawl to findings.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

from .config import LOG_FORMATS

#: Record attributes that identify what an event is about.
CONTEXT_FIELDS = ("campaign", "run_id", "page_id", "url", "task_id", "findings", "seconds")
_TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: Libraries that narrate their work at INFO (WeasyPrint: ~10 lines per PDF): warnings only.
CHATTY_LIBRARIES = ("weasyprint", "fontTools")


def _context(record: logging.LogRecord) -> dict[str, Any]:
    return {key: getattr(record, key) for key in CONTEXT_FIELDS if hasattr(record, key)}


class TextFormatter(logging.Formatter):
    """The usual one-line format, with the record's context fields appended."""

    def __init__(self) -> None:
        super().__init__(_TEXT)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        context = _context(record)
        if not context:
            return line
        return line + " " + " ".join(f"{key}={value}" for key, value in context.items())


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, context."""

    def format(self, record: logging.LogRecord) -> str:
        event: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **_context(record),
        }
        if record.exc_info:
            event["exception"] = self.formatException(record.exc_info)
        return json.dumps(event, ensure_ascii=False, default=str)


def formatter(log_format: str) -> logging.Formatter:
    """The formatter of ``log_format`` (one of LOG_FORMATS)."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, not {log_format!r}")
    return JsonFormatter() if log_format == "json" else TextFormatter()


def configure_logging(level: str | int, log_format: str) -> None:
    """Send every logger's records, and Python's warnings, to stderr in ``log_format``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(log_format))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in CHATTY_LIBRARIES:
        # root.level: the level as a number, whether it came as "INFO" or as Celery's 20.
        logging.getLogger(name).setLevel(max(root.level, logging.WARNING))
    logging.captureWarnings(True)
