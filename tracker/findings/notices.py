"""Takedown notices: drafted from a confirmed finding in Chinese or English, signed by the
sender set in Settings, and recorded on the finding when sent."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bson import ObjectId

from ..context import Context
from ..core.store import update_found
from ..core.times import now
from .captures import page_text
from .dashboard import invalidate_dashboard
from .passages import Passage, passages
from .status import MAX_NOTE_CHARS, NOTICE_READY, NOTICE_SENT
from .workflow import FindingNotFound, WorkflowError, status_update

NOTICE_LANGUAGES = ("zh", "en")


NOTICE_PASSAGES = 3


NOTICE_PASSAGE_CHARS = 120


#: Working days a notice gives the site to take the copy down (the notice says so); the
#: page is re-checked once they are over (tracker.scanning.rechecks).
NOTICE_DEADLINE_DAYS = 5


_SENDER_ID = "notice_sender"


# Something@domain.tld, no spaces: a typo check, not RFC 5322.
EMAIL_ADDRESS = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s.]+")
SENDER_FIELDS = ("organization", "email", "address", "signature")


NOTICE_TEMPLATES = {
    "en": {
        "subject": 'Copyright infringement notice: "{title}" at {domain}',
        "body": """\
To the operator of {domain}:

{organization} owns the copyright in the work "{title}"{author_en} (reference {external_id}).
The page

    {url}

reproduces this work without our permission: {master_coverage:.0%} of the work appears on
the page, in {passages_en}. For example:

{passages}

Evidence: we captured the page on {fetched_at} (final address {final_url}).
SHA-256 of the captured page: {raw_sha256}
SHA-256 of its text: {content_sha256}

We ask you to remove the infringing content within {deadline_days} working days and to confirm the
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
{deadline_days} 个工作日内删除上述侵权内容，并向我方回复确认。我方保留追究法律责任的权利。

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


class NoSender(WorkflowError):
    """No notice can go out before Settings say who sends it."""


def set_notice_sender(ctx: Context, **fields: str) -> None:
    """Store who signs the notices; unknown field names and a malformed e-mail address are
    refused (WorkflowError)."""
    unknown = set(fields) - set(SENDER_FIELDS)
    if unknown:
        raise WorkflowError(f"unknown sender fields: {', '.join(sorted(unknown))}")
    values = {name: (value or "").strip()[:MAX_NOTE_CHARS] for name, value in fields.items()}
    email = values.get("email")
    if email and not EMAIL_ADDRESS.fullmatch(email):
        raise WorkflowError(
            f"{email!r} is not an e-mail address: give one where site operators can answer "
            "(e.g. legal@your-paper.example)"
        )
    ctx.db.settings.update_one({"_id": _SENDER_ID}, {"$set": values}, upsert=True)


def check_sender(ctx: Context) -> dict[str, str]:
    """The notice sender; raises NoSender when the organization or the e-mail is missing:
    a notice must say who claims the right and where to answer."""
    sender = notice_sender(ctx)
    missing = [name for name in ("organization", "email") if not sender[name]]
    if missing:
        raise NoSender(
            f"a notice needs its sender's {' and '.join(missing)}: an administrator sets "
            "them in Settings (/settings) first"
        )
    return sender


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
    if finding["status"] not in NOTICE_READY:
        raise WorkflowError(
            f"a notice needs a confirmed finding; this one is {finding['status']!r}"
        )
    master = ctx.db.masters.find_one({"_id": finding["master_id"]}) or {}
    page = ctx.db.pages.find_one({"_id": finding["page_id"]}, {"raw_zlib": 0}) or {}
    found = passages(finding, master.get("text", ""), page_text(ctx, page))
    shown = sorted(found, key=lambda p: p.page_start - p.page_end)[:NOTICE_PASSAGES]
    quoted = "\n\n".join(
        f"  [{n}] {_one_line(p.page_text, NOTICE_PASSAGE_CHARS)}"
        for n, p in enumerate(sorted(shown, key=lambda p: p.page_start), start=1)
    )
    sender = check_sender(ctx)
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
        "passages_en": f"{len(found)} matching passage{'' if len(found) == 1 else 's'}",
        "passages": quoted,
        "fetched_at": fetched.strftime("%Y-%m-%d %H:%M UTC") if fetched else "—",
        "raw_sha256": page.get("raw_sha256") or "—",
        "content_sha256": page.get("content_sha256") or "—",
        "organization": sender["organization"],
        "deadline_days": NOTICE_DEADLINE_DAYS,
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


def working_days_after(start: datetime, days: int) -> datetime:
    """``start`` moved on by ``days`` working days (Saturdays and Sundays do not count)."""
    end = start
    while days > 0:
        end += timedelta(days=1)
        if end.weekday() < 5:
            days -= 1
    return end


def record_notice(
    ctx: Context,
    finding_id: ObjectId,
    *,
    lang: str,
    subject: str,
    body: str,
    recipient: str,
    by: str,
    deadline: datetime | None = None,
    delivery: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Record that a notice was sent; the finding becomes ``notice_sent``. Returns the record.

    The text is stored as sent, with its SHA-256, so it can be produced later as proof.
    ``deadline``: when the site should have removed the copy (default: NOTICE_DEADLINE_DAYS
    working days from now); the page is re-checked after it. ``delivery``: how copytrack
    e-mailed it (Message-ID, recipients, the relay's answer), kept with the record.
    """
    recipient, body = recipient.strip(), body.strip()
    if not recipient:
        raise WorkflowError("say where the notice went (an e-mail address or the site's form)")
    if not body:
        raise WorkflowError("the notice is empty")
    sent_at = now()
    deadline = deadline or working_days_after(sent_at, NOTICE_DEADLINE_DAYS)
    if deadline <= sent_at:
        raise WorkflowError(
            f"the deadline {deadline:%Y-%m-%d} has passed already: give the site a date to come"
        )
    check_sender(ctx)
    note = f"{lang} notice sent to {recipient}, deadline {deadline:%Y-%m-%d}"
    update = status_update(NOTICE_SENT, by, note)
    update["$set"]["notice_deadline"] = deadline
    update["$unset"]["notice_check"] = ""  # a new notice: its own re-check is to come
    updated = update_found(
        ctx.db.findings, {"_id": finding_id, "status": {"$in": list(NOTICE_READY)}}, update
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
        "sent_at": sent_at,
        "deadline": deadline,
    }
    if delivery:
        record["delivery"] = delivery
    record["_id"] = ctx.db.notices.insert_one(record).inserted_id
    invalidate_dashboard(ctx)
    return record


def notices_of(ctx: Context, finding_id: ObjectId) -> list[dict[str, Any]]:
    """The notices sent for a finding, newest first."""
    return list(ctx.db.notices.find({"finding_id": finding_id}).sort("sent_at", -1))
