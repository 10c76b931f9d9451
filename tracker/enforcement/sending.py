"""Takedown notices e-mailed by a reviewer: one finding's, or one for every confirmed
finding of a domain listing each URL.

The message goes through the configured relay from the notice sender of Settings (who is
also its Reply-To), to the addresses the reviewer chose. What the relay answered is
recorded with the notice (Message-ID, recipients taken and refused, the answer), and each
finding's deadline starts from that moment (tracker.findings.notices.record_notice). A
message the relay refused outright is recorded on the findings as a failed sending, and
nothing is marked sent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bson import ObjectId

from ..context import Context
from ..core.store import changed
from ..core.times import now as utc_now
from ..findings.notices import (
    EMAIL_ADDRESS,
    NOTICE_DEADLINE_DAYS,
    NOTICE_LANGUAGES,
    build_notice,
    check_sender,
    record_notice,
)
from ..findings.status import CONFIRMED, NOTICE_READY
from ..findings.workflow import FindingNotFound, WorkflowError
from .rdap import RdapAnswer
from .recipients import Recipient, propose_recipients
from .smtp import SmtpError, build_message, relay_from_settings, send_mail

__all__ = [
    "DomainNotice",
    "NoticeNotSent",
    "PreparedNotice",
    "SentNotice",
    "build_domain_notice",
    "prepare_notice",
    "send_notice",
]

#: Findings one domain notice lists at most (a longer list goes in several notices).
DOMAIN_NOTICE_FINDINGS = 500
MAX_RECIPIENTS = 10

DOMAIN_TEMPLATES = {
    "en": {
        "subject": "Copyright infringement notice: {count} page(s) at {domain}",
        "item": '  [{n}] {url}\n      copies "{title}" (reference {external_id}), '
        "{coverage:.0%} of the work",
        "body": """\
To the operator of {domain}:

{organization} owns the copyright in the works named below. The following {count} page(s)
of {domain} reproduce them without our permission:

{items}

We captured each page as evidence and can provide the captures and their SHA-256 hashes.
We ask you to remove the infringing content within {deadline_days} working days and to
confirm the removal to us. We reserve all rights, including the right to take legal action.

{signature}
""",
    },
    "zh": {
        "subject": "侵权删除通知：{domain} 的 {count} 个网页",
        "item": "  [{n}] {url}\n      转载作品《{title}》（编号 {external_id}），"
        "占作品 {coverage:.0%}",
        "body": """\
{domain} 网站运营者：

{organization}依法享有下列作品的著作权。贵网站以下 {count} 个网页未经许可转载了这些作品：

{items}

我方已保存上述每个网页作为证据，可提供网页存档及其 SHA-256 值。
根据《中华人民共和国著作权法》及《信息网络传播权保护条例》，请贵方于收到本通知后
{deadline_days} 个工作日内删除上述侵权内容，并向我方回复确认。我方保留追究法律责任的权利。

{signature}
""",
    },
}


class NoticeNotSent(WorkflowError):
    """The relay took the notice for nobody, refused it, or there is no relay: the reason."""


@dataclass(frozen=True)
class DomainNotice:
    """One notice for every confirmed finding of a domain."""

    domain: str
    lang: str
    subject: str
    body: str
    finding_ids: list[ObjectId]


@dataclass(frozen=True)
class SentNotice:
    """A notice the relay took: its Message-ID, who it went to, whom the relay refused."""

    message_id: str
    accepted: list[str]
    refused: dict[str, str]
    answer: str
    findings: int
    at: datetime


def domain_findings(ctx: Context, domain: str) -> list[dict[str, Any]]:
    """The confirmed findings of ``domain``, by URL."""
    query = {"domain": domain.strip().lower(), "status": CONFIRMED}
    return list(ctx.db.findings.find(query).sort("url", 1).limit(DOMAIN_NOTICE_FINDINGS))


def build_domain_notice(ctx: Context, domain: str, lang: str) -> DomainNotice:
    """The notice listing every confirmed finding of ``domain``; WorkflowError when it has
    none or the sender is not set."""
    if lang not in NOTICE_LANGUAGES:
        raise WorkflowError(f"no notice template for {lang!r}: use {' or '.join(NOTICE_LANGUAGES)}")
    findings = domain_findings(ctx, domain)
    if not findings:
        raise WorkflowError(
            f"{domain!r} has no confirmed finding: confirm its copies first (a notice lists "
            "confirmed findings only)"
        )
    sender = check_sender(ctx)
    template = DOMAIN_TEMPLATES[lang]
    items = "\n".join(
        template["item"].format(
            n=n, url=f["url"], title=f.get("master_title") or f["master_external_id"],
            external_id=f["master_external_id"], coverage=f.get("master_coverage") or 0.0,
        )
        for n, f in enumerate(findings, start=1)
    )  # fmt: skip
    fields = {
        "domain": findings[0]["domain"],
        "count": len(findings),
        "items": items,
        "organization": sender["organization"],
        "deadline_days": NOTICE_DEADLINE_DAYS,
        "signature": "\n".join(
            part for part in (sender["signature"], sender["address"], sender["email"]) if part
        ),
    }
    return DomainNotice(
        fields["domain"],
        lang,
        template["subject"].format(**fields),
        template["body"].format(**fields).rstrip() + "\n",
        [f["_id"] for f in findings],
    )


def check_recipients(addresses: Iterable[str]) -> list[str]:
    """The addresses, each checked, without repeats; WorkflowError naming a bad one."""
    found = list(dict.fromkeys(a.strip().lower() for a in addresses if a.strip()))
    for address in found:
        if not EMAIL_ADDRESS.fullmatch(address):
            raise WorkflowError(f"{address!r} is not an e-mail address (abuse@host.example)")
    if not found:
        raise WorkflowError("choose whom the notice goes to: tick a proposed address or add one")
    if len(found) > MAX_RECIPIENTS:
        raise WorkflowError(f"at most {MAX_RECIPIENTS} recipients a notice")
    return found


def send_notice(
    ctx: Context,
    finding_ids: list[ObjectId],
    *,
    lang: str,
    subject: str,
    body: str,
    recipients: Iterable[str],
    by: str,
    deadline: datetime | None = None,
) -> SentNotice:
    """E-mail a notice for ``finding_ids`` (of one domain) and record it on each of them.

    Raises FindingNotFound, WorkflowError (a finding not confirmed, a bad address, no
    sender), or NoticeNotSent (no relay, or the relay took it for nobody: recorded on the
    findings as ``notice_failures``).
    """
    to = check_recipients(recipients)
    ids = list(dict.fromkeys(finding_ids))
    findings = list(ctx.db.findings.find({"_id": {"$in": ids}}, {"status": 1, "domain": 1}))
    if len(findings) != len(ids):
        raise FindingNotFound("a finding of this notice no longer exists")
    if not_ready := [f for f in findings if f["status"] not in NOTICE_READY]:
        raise WorkflowError(f"a notice needs confirmed findings; {len(not_ready)} of these are not")
    if len({f["domain"] for f in findings}) > 1:
        raise WorkflowError("one notice goes to one site: these findings are of several domains")
    if not subject.strip() or not body.strip():
        raise WorkflowError("the notice needs a subject and a text")
    sender = check_sender(ctx)
    try:
        relay = relay_from_settings(ctx.settings)
        message = build_message(
            sender["email"], to, subject.strip(), body.strip() + "\n",
            sender_name=sender["organization"], reply_to=sender["email"],
        )  # fmt: skip
        sent = send_mail(relay, message)
    except SmtpError as err:
        failure = {"at": utc_now(), "to": to, "error": str(err)[:500], "by": by}
        ctx.db.findings.update_many(
            {"_id": {"$in": ids}}, changed({"$push": {"notice_failures": failure}})
        )
        raise NoticeNotSent(f"the notice was not sent: {err}") from None
    delivery = {
        "channel": "email",
        "message_id": sent.message_id,
        "recipients": to,
        "accepted": sent.accepted,
        "refused": sent.refused,
        "answer": sent.answer,
        "relay": relay.shown,
        "sent_at": sent.at,
        "finding_ids": ids,
    }
    for finding_id in ids:
        record_notice(
            ctx, finding_id, lang=lang, subject=subject, body=body,
            recipient=", ".join(sent.accepted), by=by, deadline=deadline, delivery=delivery,
        )  # fmt: skip
    return SentNotice(sent.message_id, sent.accepted, sent.refused, sent.answer, len(ids), sent.at)


@dataclass(frozen=True)
class PreparedNotice:
    """A notice ready for a reviewer: its text, its findings, whom copytrack proposes (and
    the RDAP answers behind the proposals)."""

    domain: str
    lang: str
    subject: str
    body: str
    finding_ids: list[ObjectId]
    proposed: list[Recipient]
    rdap: list[RdapAnswer]


def prepare_notice(
    ctx: Context, *, lang: str, finding_id: ObjectId | None = None, domain: str | None = None
) -> PreparedNotice:
    """The notice of one confirmed finding, or of every confirmed finding of ``domain``,
    with the recipients to propose. WorkflowError when it cannot be written."""
    if (finding_id is None) == (domain is None):
        raise WorkflowError("a notice is of one finding or of one domain's findings")
    if finding_id is not None:
        notice = build_notice(ctx, finding_id, lang)
        subject, body, ids = notice.subject, notice.body, [finding_id]
    else:
        domain_notice = build_domain_notice(ctx, domain or "", lang)
        subject, body, ids = domain_notice.subject, domain_notice.body, domain_notice.finding_ids
    findings = list(ctx.db.findings.find({"_id": {"$in": ids}}, {"domain": 1, "page_id": 1}))
    proposed, answers = propose_recipients(ctx, findings)
    return PreparedNotice(findings[0]["domain"], lang, subject, body, ids, proposed, answers)
