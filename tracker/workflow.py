"""The reviewers' workflow: status changes with history, licensed domains, takedown notices.

new → confirmed / dismissed → notice_sent → removed. The crawler's re-check marks a
finding ``removed`` by itself (``tracker.findings.record_findings``); ``licensed`` is only
ever set and lifted through the whitelist of licensed domains (syndication partners).
Every change appends ``{at, status, by, note}`` to the finding's history.
"""

from __future__ import annotations

import hashlib
import unicodedata
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from bson import ObjectId
from pymongo import ReturnDocument

from .context import Context
from .findings import REOPEN_AS, STATUSES
from .reports import Passage, domain_query, invalidate_dashboard, passages
from .times import now

#: Where a reviewer may move a finding from each status.
TRANSITIONS: dict[str, tuple[str, ...]] = {
    "new": ("confirmed", "dismissed"),
    "confirmed": ("notice_sent", "dismissed", "new"),
    "dismissed": ("new", "confirmed"),
    "notice_sent": ("removed", "confirmed"),
    "removed": ("new",),
    "licensed": (),
}
NOTICE_LANGUAGES = ("zh", "en")
DEFAULT_SENDER = {"zh": "我方", "en": "The copyright holder"}
NOTICE_PASSAGES = 3
NOTICE_PASSAGE_CHARS = 120
MAX_NOTE_CHARS = 2000
_SENDER_ID = "notice_sender"
SENDER_FIELDS = ("organization", "email", "address", "signature")


class WorkflowError(ValueError):
    """A workflow step that is not allowed, with the reason."""


class FindingNotFound(LookupError):
    """No finding has this id."""


#: Why a finding is dismissed: reports and the review queue tell them apart.
DISMISS_REASONS = {
    "false_positive": "False positive",
    "licensed": "Licensed or permitted",
    "quotation": "Quotation or fair use",
    "other": "Other",
}


def _entry(status: str, by: str, note: str | None, reason: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"at": now(), "status": status, "by": by}
    if note:
        entry["note"] = note[:MAX_NOTE_CHARS]
    if reason:
        entry["reason"] = reason
    return entry


def _check_reason(status: str, reason: str | None) -> None:
    if reason is None:
        return
    if status != "dismissed":
        raise WorkflowError("a reason is given only when dismissing a finding")
    if reason not in DISMISS_REASONS:
        raise WorkflowError(
            f"unknown dismiss reason {reason!r}: use one of {', '.join(DISMISS_REASONS)}"
        )


def _move(status: str, by: str, note: str | None, reason: str | None = None) -> dict[str, Any]:
    """The update that moves a finding to ``status`` and records it in the history."""
    update: dict[str, Any] = {
        "$set": {"status": status, "status_at": now()},
        # A status someone chose: a later scan must not put back the one copytrack closed.
        "$unset": {REOPEN_AS: ""},
        "$push": {"history": _entry(status, by, note, reason)},
    }
    if reason:
        update["$set"]["dismiss_reason"] = reason
    else:
        update["$unset"]["dismiss_reason"] = ""
    return update


def sources_of(status: str) -> list[str]:
    """The statuses a reviewer may move a finding to ``status`` from."""
    return [source for source, targets in TRANSITIONS.items() if status in targets]


def _check_target(status: str) -> None:
    if status not in STATUSES:
        raise WorkflowError(f"unknown status {status!r}: use one of {', '.join(STATUSES)}")
    if status == "licensed":
        raise WorkflowError("'licensed' follows from the whitelist: add the domain there instead")


def set_status(
    ctx: Context,
    finding_id: ObjectId,
    status: str,
    by: str,
    note: str | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    """Move one finding to ``status``; returns it updated.

    Raises FindingNotFound, or WorkflowError naming the allowed next statuses. The
    status is checked in the same update that changes it, so two reviewers racing
    cannot both move the finding.
    """
    _check_target(status)
    _check_reason(status, reason)
    updated = ctx.db.findings.find_one_and_update(
        {"_id": finding_id, "status": {"$in": sources_of(status)}},
        _move(status, by, note, reason),
        return_document=ReturnDocument.AFTER,
    )
    if updated is None:
        current = ctx.db.findings.find_one({"_id": finding_id}, {"status": 1})
        if current is None:
            raise FindingNotFound(f"no finding {finding_id}")
        allowed = ", ".join(TRANSITIONS[current["status"]]) or "nothing (it is on the whitelist)"
        raise WorkflowError(
            f"a {current['status']!r} finding cannot become {status!r}; it can become {allowed}"
        )
    invalidate_dashboard(ctx)
    return updated


@dataclass(frozen=True)
class BulkResult:
    """How many findings changed, and how many were refused by the workflow (or missing)."""

    changed: int
    refused: int


def bulk_set_status(
    ctx: Context,
    finding_ids: list[ObjectId],
    status: str,
    by: str,
    note: str | None = None,
    reason: str | None = None,
) -> BulkResult:
    """Move many findings to ``status``; those whose status does not allow it stay as they are."""
    _check_target(status)
    _check_reason(status, reason)
    ids = list(dict.fromkeys(finding_ids))
    result = ctx.db.findings.update_many(
        {"_id": {"$in": ids}, "status": {"$in": sources_of(status)}},
        _move(status, by, note, reason),
    )
    if result.modified_count:
        invalidate_dashboard(ctx)
    return BulkResult(result.modified_count, len(ids) - result.modified_count)


# ---------------------------------------------------------------- licensed domains


def normalize_domain(value: str) -> str:
    """A bare lower-case host name from ``example.com``, ``*.example.com`` or a URL.

    Raises WorkflowError when it is not a plausible domain name.
    """
    value = value.strip()
    host = urlsplit(value).hostname if "://" in value else value.split("/")[0]
    host = (host or "").lower().removeprefix("*.").rstrip(".")
    try:
        host = unicodedata.normalize("NFC", host).encode("idna").decode("ascii")
    except UnicodeError:
        raise WorkflowError(f"{value!r} is not a domain name") from None
    labels = host.split(".")
    if len(labels) < 2 or not all(
        label and len(label) <= 63 and label.replace("-", "").isalnum() for label in labels
    ):
        raise WorkflowError(f"{value!r} is not a domain name (e.g. partner.example.com)")
    return host


def licensed_domain_of(ctx: Context, host: str) -> str | None:
    """The whitelist entry covering ``host`` (itself or a parent domain), if any."""
    labels = host.lower().split(".")
    suffixes = [".".join(labels[i:]) for i in range(len(labels) - 1)]
    entry = ctx.db.whitelist.find_one({"_id": {"$in": suffixes}}, {"_id": 1})
    return entry["_id"] if entry else None


def list_licensed_domains(ctx: Context) -> list[dict[str, Any]]:
    """The whitelist, by domain."""
    return list(ctx.db.whitelist.find().sort("_id", 1))


def _suppress(ctx: Context, query: dict[str, Any], domain: str, by: str) -> int:
    """Mark matching findings licensed, remembering each one's status to restore it later."""
    changed = 0
    for status in TRANSITIONS:
        if status == "licensed":
            continue
        changed += ctx.db.findings.update_many(
            {"$and": [query, {"status": status}]},
            {
                "$set": {
                    "status": "licensed",
                    "status_at": now(),
                    "licensed_by": domain,
                    "status_before_license": status,
                },
                "$push": {"history": _entry("licensed", by, f"{domain} is a licensed domain")},
            },
        ).modified_count
    return changed


def add_licensed_domain(ctx: Context, domain: str, by: str, note: str | None = None) -> int:
    """Whitelist a domain (and its subdomains); returns how many findings it suppressed."""
    domain = normalize_domain(domain)
    ctx.db.whitelist.update_one(
        {"_id": domain},
        {"$set": {"note": (note or "")[:MAX_NOTE_CHARS]}, "$setOnInsert": {"by": by, "at": now()}},
        upsert=True,
    )
    changed = _suppress(ctx, domain_query(domain), domain, by)
    invalidate_dashboard(ctx)
    return changed


def remove_licensed_domain(ctx: Context, domain: str, by: str) -> int:
    """Take a domain off the whitelist; its findings get back the status they had before.

    Findings still covered by another entry (a parent or a subdomain entry) stay licensed.
    Returns how many findings were restored.
    """
    domain = normalize_domain(domain)
    if ctx.db.whitelist.delete_one({"_id": domain}).deleted_count == 0:
        raise WorkflowError(f"{domain} is not on the whitelist")
    restored = 0
    for status in TRANSITIONS:
        restored += ctx.db.findings.update_many(
            {"licensed_by": domain, "status": "licensed", "status_before_license": status},
            {
                "$set": {"status": status, "status_at": now()},
                "$unset": {"licensed_by": "", "status_before_license": ""},
                "$push": {"history": _entry(status, by, f"{domain} is no longer licensed")},
            },
        ).modified_count
    for entry in list_licensed_domains(ctx):
        other = entry["_id"]
        if other.endswith("." + domain) or domain.endswith("." + other):
            restored -= _suppress(ctx, domain_query(other), other, by)
    invalidate_dashboard(ctx)
    return restored


def suppress_licensed(ctx: Context, page_id: ObjectId, by: str = "copytrack") -> int:
    """Mark a freshly scanned page's findings licensed when its domain is whitelisted.

    Meant to run right after ``record_findings``, so new findings on a partner's site
    never show up as ``new``. Returns how many findings it suppressed.
    """
    page = ctx.db.findings.find_one({"page_id": page_id}, {"domain": 1})
    if page is None or not page.get("domain"):
        return 0
    domain = licensed_domain_of(ctx, page["domain"])
    if domain is None:
        return 0
    changed = _suppress(ctx, {"page_id": page_id}, domain, by)
    if changed:
        invalidate_dashboard(ctx)
    return changed


# ---------------------------------------------------------------- takedown notices

NOTICE_TEMPLATES = {
    "en": {
        "subject": 'Copyright infringement notice: "{title}" at {domain}',
        "body": """\
To the operator of {domain}:

{organization} owns the copyright in the work "{title}"{author_en} (reference {external_id}).
The page

    {url}

reproduces this work without our permission: {master_coverage:.0%} of the work appears on
the page, in {passage_count} matching passages. For example:

{passages}

Evidence: we captured the page on {fetched_at} (final address {final_url}).
SHA-256 of the captured page: {raw_sha256}
SHA-256 of its text: {content_sha256}

We ask you to remove the infringing content within 5 working days and to confirm the
removal to us. We reserve all rights, including the right to take legal action.

{signature}
""",
    },
    "zh": {
        "subject": "关于《{title}》的侵权删除通知（{domain}）",
        "body": """\
{domain} 网站运营者：

{organization}依法享有作品《{title}》{author_zh}（编号 {external_id}）的著作权。
贵网站以下网页未经许可转载了该作品：

    {url}

经比对，该网页包含该作品 {master_coverage:.0%} 的内容，共 {passage_count} 处相同段落，例如：

{passages}

证据：我方于 {fetched_at} 保存了该网页（最终地址 {final_url}）。
网页原始文件 SHA-256：{raw_sha256}
网页正文 SHA-256：{content_sha256}

根据《中华人民共和国著作权法》及《信息网络传播权保护条例》，请贵方于收到本通知后
5 个工作日内删除上述侵权内容，并向我方回复确认。我方保留追究法律责任的权利。

{signature}
""",
    },
}


@dataclass(frozen=True)
class Notice:
    """A generated takedown notice for one finding."""

    finding_id: ObjectId
    lang: str
    subject: str
    body: str
    passages: list[Passage]


def notice_sender(ctx: Context) -> dict[str, str]:
    """Who signs the notices (organization, email, address, signature); blanks when unset."""
    doc = ctx.db.settings.find_one({"_id": _SENDER_ID}) or {}
    return {name: doc.get(name) or "" for name in SENDER_FIELDS}


def set_notice_sender(ctx: Context, **fields: str) -> None:
    """Store who signs the notices; unknown field names are refused."""
    unknown = set(fields) - set(SENDER_FIELDS)
    if unknown:
        raise WorkflowError(f"unknown sender fields: {', '.join(sorted(unknown))}")
    values = {name: (value or "").strip()[:MAX_NOTE_CHARS] for name, value in fields.items()}
    ctx.db.settings.update_one({"_id": _SENDER_ID}, {"$set": values}, upsert=True)


def _finding(ctx: Context, finding_id: ObjectId) -> dict[str, Any]:
    finding = ctx.db.findings.find_one({"_id": finding_id})
    if finding is None:
        raise FindingNotFound(f"no finding {finding_id}")
    return finding


def build_notice(ctx: Context, finding_id: ObjectId, lang: str) -> Notice:
    """Write the takedown notice of a confirmed finding in ``lang`` (zh or en)."""
    if lang not in NOTICE_LANGUAGES:
        raise WorkflowError(f"no notice template for {lang!r}: use {' or '.join(NOTICE_LANGUAGES)}")
    finding = _finding(ctx, finding_id)
    if finding["status"] not in ("confirmed", "notice_sent"):
        raise WorkflowError(
            f"a notice needs a confirmed finding; this one is {finding['status']!r}"
        )
    master = ctx.db.masters.find_one({"_id": finding["master_id"]}) or {}
    page = ctx.db.pages.find_one({"_id": finding["page_id"]}, {"raw_zlib": 0}) or {}
    found = passages(finding, master.get("text", ""), page.get("text", ""))
    shown = sorted(found, key=lambda p: p.page_start - p.page_end)[:NOTICE_PASSAGES]
    quoted = "\n\n".join(
        f"  [{n}] {_one_line(p.page_text, NOTICE_PASSAGE_CHARS)}"
        for n, p in enumerate(sorted(shown, key=lambda p: p.page_start), start=1)
    )
    sender = notice_sender(ctx)
    fetched = page.get("fetched_at")
    author = master.get("author")
    fields = {
        "title": master.get("title") or finding["master_external_id"],
        "external_id": finding["master_external_id"],
        "author_en": f" by {author}" if author else "",
        "author_zh": f"（作者：{author}）" if author else "",
        "domain": finding["domain"],
        "url": finding["url"],
        "final_url": page.get("final_url") or finding["url"],
        "master_coverage": finding.get("master_coverage") or 0.0,
        "passage_count": len(found),
        "passages": quoted,
        "fetched_at": fetched.strftime("%Y-%m-%d %H:%M UTC") if fetched else "—",
        "raw_sha256": page.get("raw_sha256") or "—",
        "content_sha256": page.get("content_sha256") or "—",
        "organization": sender["organization"] or DEFAULT_SENDER[lang],
        "signature": "\n".join(
            part for part in (sender["signature"], sender["address"], sender["email"]) if part
        ),
    }
    template = NOTICE_TEMPLATES[lang]
    return Notice(
        finding_id,
        lang,
        template["subject"].format(**fields),
        template["body"].format(**fields).rstrip() + "\n",
        found,
    )


def _one_line(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def record_notice(
    ctx: Context,
    finding_id: ObjectId,
    *,
    lang: str,
    subject: str,
    body: str,
    recipient: str,
    by: str,
) -> dict[str, Any]:
    """Record that a notice was sent; the finding becomes ``notice_sent``. Returns the record.

    The text is stored as sent, with its SHA-256, so it can be produced later as proof.
    """
    recipient, body = recipient.strip(), body.strip()
    if not recipient:
        raise WorkflowError("say where the notice went (an e-mail address or the site's form)")
    if not body:
        raise WorkflowError("the notice is empty")
    note = f"{lang} notice sent to {recipient}"
    updated = ctx.db.findings.find_one_and_update(
        {"_id": finding_id, "status": {"$in": ["confirmed", "notice_sent"]}},
        _move("notice_sent", by, note),
    )
    if updated is None:
        status = _finding(ctx, finding_id)["status"]
        raise WorkflowError(f"a notice needs a confirmed finding; this one is {status!r}")
    record = {
        "finding_id": finding_id,
        "lang": lang,
        "subject": subject.strip(),
        "body": body,
        "sha256": hashlib.sha256(body.encode("utf-8")).hexdigest(),
        "recipient": recipient,
        "by": by,
        "sent_at": now(),
    }
    record["_id"] = ctx.db.notices.insert_one(record).inserted_id
    invalidate_dashboard(ctx)
    return record


def notices_of(ctx: Context, finding_id: ObjectId) -> list[dict[str, Any]]:
    """The notices sent for a finding, newest first."""
    return list(ctx.db.notices.find({"finding_id": finding_id}).sort("sent_at", -1))
