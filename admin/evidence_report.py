"""One finding's evidence report (HTML or PDF): what the template is given, the capture's
time-stamp verified as it is shown."""

from __future__ import annotations

from typing import Any

from tracker.context import Context
from tracker.evidence.verification import Verification, verify_token
from tracker.findings import MAX_SHOWN_CHARS, Evidence, capture

from .pdf import pdf
from .web import templates


def timestamp_check(ctx: Context, found: Evidence) -> Verification | None:
    """The capture's token checked against the capture's own SHA-256 (None: no token)."""
    token = found.timestamp.token
    if token is None:
        return None
    return verify_token(token, found.page["raw_sha256"], ctx.settings.tsa_ca_file)


def capture_name(found: Evidence) -> str:
    """The name the capture travels under, attached to the PDF."""
    return f"capture-{found.page.get('raw_sha256', 'none')[:16]}.html"


def report_context(ctx: Context, found: Evidence, raw: bytes | None) -> dict[str, Any]:
    return {"ev": found, "has_capture": raw is not None, "capture_name": capture_name(found),
            "max_chars": MAX_SHOWN_CHARS, "verified": timestamp_check(ctx, found)}  # fmt: skip


def evidence_pdf(ctx: Context, found: Evidence) -> bytes:
    """The evidence report as a PDF carrying the capture (and its token) as attachments."""
    raw = capture(ctx, found.finding["page_id"])
    html = templates.get_template("evidence.html").render(
        pdf=True, **report_context(ctx, found, raw)
    )
    sha256 = found.page.get("raw_sha256")
    attachments = []
    if raw is not None:
        name = capture_name(found)
        attachments.append((name, raw, f"The page as captured, SHA-256 {sha256}"))
        if found.timestamp.token is not None:
            attachments.append((f"{name}.tsr", found.timestamp.token,
                                f"RFC 3161 time-stamp token over SHA-256 {sha256}"))  # fmt: skip
    return pdf(html, attachments)
