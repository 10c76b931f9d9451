"""Limits on a response's head (its status line and header lines), the part of a response
the size cap (DOWNLOAD_MAXSIZE, a cap on bodies) does not see.

A client keeps every header line it reads until the blank line that ends them: a server
that answers ``HTTP/1.1 200 OK`` and then sends header lines for ever grows the client
until the kernel kills it. So a head may hold at most COPYTRACK_MAX_HEADER_BYTES and
COPYTRACK_MAX_HEADERS lines, and must be whole COPYTRACK_HEADER_SECONDS after its first
byte. The crawl's download handler (crawler.download_handler) and the one-page fetch's
connections (crawler.connections) apply them; a refusal names the limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracker.core.config import CRAWL_DEFAULTS

__all__ = ["HEAD_LIMITS", "HeadCount", "HeadLimits", "HeadRefused"]


class HeadRefused(Exception):
    """A response's head broke a limit; ``reason`` is the run's counter key."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason

    @classmethod
    def too_slow(cls, seconds: float) -> HeadRefused:
        return cls(
            "headers_too_slow",
            f"the server had not sent all its headers {seconds:g} s after the first byte "
            "(COPYTRACK_HEADER_SECONDS)",
        )

    @classmethod
    def line_too_long(cls, max_bytes: int) -> HeadRefused:
        return cls(
            "headers_too_large",
            f"the server sent a header line over {max_bytes / 1024:g} KB",
        )


@dataclass(frozen=True)
class HeadLimits:
    """What a response may send before its body (0: no limit): bytes and header lines, and
    seconds from its first byte to the end of its head."""

    max_bytes: int = int(CRAWL_DEFAULTS["COPYTRACK_MAX_HEADER_BYTES"])
    max_lines: int = int(CRAWL_DEFAULTS["COPYTRACK_MAX_HEADERS"])
    seconds: float = CRAWL_DEFAULTS["COPYTRACK_HEADER_SECONDS"]

    @classmethod
    def from_settings(cls, settings: Any) -> HeadLimits:
        """The limits a crawl's (Scrapy) settings give."""
        return cls(
            settings.getint("COPYTRACK_MAX_HEADER_BYTES"),
            settings.getint("COPYTRACK_MAX_HEADERS"),
            settings.getfloat("COPYTRACK_HEADER_SECONDS"),
        )


#: The limits by default: the one-page fetch's (crawler.fetch).
HEAD_LIMITS = HeadLimits()


class HeadCount:
    """The lines of one response's head as they are read, against its limits (the heads of
    any interim 1xx responses before it included)."""

    def __init__(self, limits: HeadLimits) -> None:
        self.limits = limits
        self.bytes = 0
        self.lines = 0

    def line(self, line: bytes) -> None:
        """Count one more line (with or without its line end); HeadRefused past a limit."""
        self.bytes += len(line.rstrip(b"\r\n")) + 2
        max_bytes, max_lines = self.limits.max_bytes, self.limits.max_lines
        if max_bytes and self.bytes > max_bytes:
            raise HeadRefused(
                "headers_too_large",
                f"the server sent over {max_bytes / 1024:g} KB of headers "
                "(COPYTRACK_MAX_HEADER_BYTES)",
            )
        if line.strip():
            self.lines += 1
        if max_lines and self.lines > max_lines + 1:  # the status line is no header
            raise HeadRefused(
                "headers_too_large",
                f"the server sent over {max_lines} header lines (COPYTRACK_MAX_HEADERS)",
            )
