"""A seeded admin for the tests: a small library of Chinese news works, pirated copies on
several domains scanned by the real matcher, reviewers' decisions, a campaign with a run,
and three users (one per role); a client and a login for it."""

from __future__ import annotations

import dataclasses
import random
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from bson import ObjectId
from fastapi.testclient import TestClient

from admin.app import create_app
from testbed.attacks import combine, excerpt, insert_ads, reflow
from tests.adding import add_all
from tests.corpus import texts
from tracker import campaigns as tracker_campaigns
from tracker.accounts.users import add_user
from tracker.context import Context
from tracker.core.store import changed
from tracker.findings import record_notice, set_notice_sender, set_status
from tracker.masters.library import Work
from tracker.scanning.pages import PageInput, scan_page, store_page

PASSWORD = "correct horse battery"
XSS = '<script>alert("pwned")</script><img src=x onerror=alert(1)>'
ZH = [reflow(t, 160) for t in texts("zh_news", 40) if len(t) > 550][:12]
DOMAINS = (
    "www.pirate-news.example",
    "m.copycat.example",
    "bbs.reposter.example",
    "read.freetext.example",
)


def _html(title: str, text: str) -> bytes:
    # Deliberately unescaped, like a real pirate page: the evidence frame must stay inert.
    paragraphs = "".join(f"<p>{line}</p>" for line in text.split("\n"))
    return (
        f"<html><head><meta charset='utf-8'><title>{title}</title></head><body>"
        f"<h1>{title}</h1>{paragraphs}<script>document.title='owned'</script></body></html>"
    ).encode()


@dataclass
class Seeded:
    """What ``seed`` put in the database."""

    masters: list[int]
    findings: list[ObjectId] = field(default_factory=list)
    xss: ObjectId | None = None
    campaign: str = "pirate-sites"


def scanned_page(
    ctx: Context, url: str, title: str, text: str, days_ago: int = 0
) -> list[ObjectId]:
    """A pirate page stored and scanned; the ids of its findings."""
    page_id, _ = store_page(
        ctx,
        PageInput(url=url, text=text, raw=_html(title, text), title=title, campaign="pirate-sites"),
    )
    scan_page(ctx, page_id)
    if days_ago:
        # Spread first sightings over the past days, as weeks of crawling would.
        first_seen = datetime.now(UTC) - timedelta(days=days_ago, hours=1)
        ctx.db.findings.update_many(
            {"page_id": page_id}, changed({"$set": {"first_seen": first_seen}})
        )
    return [f["_id"] for f in ctx.db.findings.find({"page_id": page_id}, {"_id": 1})]


def seed(ctx: Context, pages: int = 12) -> Seeded:
    """A small, realistic installation: works, scanned pirate pages, decisions, a run."""
    rng = random.Random(5)
    works = [
        Work(
            text=text,
            external_id=f"news-{i:03d}",
            title=text.split("\n")[0][:20],
            author="本报记者",
            lang="zh",
            kind="news",
        )
        for i, text in enumerate(ZH[:8])
    ]
    masters = [results[0].master_id for results in add_all(ctx, works)]
    seeded = Seeded(masters)
    for n in range(pages):
        work = n % 5 if n < 8 else rng.randrange(8)
        domain = DOMAINS[n % len(DOMAINS)]
        master = ZH[work]
        if n % 3 == 2:
            text = excerpt(master, rng, 0.5, filler=ZH[9])
        else:
            text = insert_ads(combine(master, rng), rng)
        url = f"https://{domain}/{2024 + n % 2}/article-{1000 + n}.html"
        seeded.findings += scanned_page(ctx, url, f"{master[:14]}_免费阅读", text, days_ago=n % 9)
    seeded.xss = scanned_page(
        ctx, "https://evil.example/x", f"Hot {XSS}", f"{XSS}\n{ZH[0]}\n{XSS}"
    )[0]
    _decide(ctx, seeded)
    _campaign(ctx)
    for name, role in (("ada", "admin"), ("rui", "reviewer"), ("vic", "viewer")):
        add_user(ctx, name, PASSWORD, role)
    return seeded


def _decide(ctx: Context, seeded: Seeded) -> None:
    ids = seeded.findings
    for finding_id in ids[:5]:
        set_status(ctx, finding_id, "confirmed", "rui", "verbatim copy with ads")
    set_status(ctx, ids[5], "dismissed", "rui", "quotation within fair use")
    set_notice_sender(ctx, organization="示例报业集团", email="legal@news.example")
    record_notice(
        ctx, ids[0], lang="zh", subject="侵权通知", body="请删除。", recipient="abuse@x", by="rui"
    )
    set_status(ctx, ids[1], "notice_sent", "rui")
    set_status(ctx, ids[1], "removed", "rui", "gone when re-checked")


def _campaign(ctx: Context) -> None:
    # Loopback seeds need the private-network permission; no crawl is ever started here.
    local = dataclasses.replace(
        ctx, settings=dataclasses.replace(ctx.settings, allow_private_networks=True)
    )
    campaign = tracker_campaigns.Campaign.from_dict(
        {
            "name": "pirate-sites",
            "seeds": ["http://127.0.0.1:9/news/", "http://127.0.0.1:9/feed.xml"],
            "schedule": "0 3 * * *",
            "max_pages": 500,
            "max_depth": 3,
            "notes": "每日巡查盗版新闻站",
        }
    )
    tracker_campaigns.save_campaign(local, campaign)
    run_id = tracker_campaigns.start_run(ctx, "pirate-sites", "schedule")
    tracker_campaigns.join_run(ctx, run_id)
    tracker_campaigns.record_progress(
        ctx,
        run_id,
        {"pages.fetched": 128, "pages.changed": 31, "skipped.robots": 4, "failed.http_404": 2},
        "crawler-1",
    )
    tracker_campaigns.finish_crawl(ctx, run_id)


def client(ctx: Context) -> TestClient:
    return TestClient(create_app(ctx), base_url="http://127.0.0.1")


def csrf_of(html: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)


def login(http: TestClient, name: str, password: str = PASSWORD) -> str:
    """Log ``http`` in as ``name``; returns the session's CSRF token."""
    form = http.get("/login")
    response = http.post(
        "/login",
        data={"name": name, "password": password, "csrf_token": csrf_of(form.text)},
        follow_redirects=False,
    )
    assert response.status_code == 303, response.text
    return csrf_of(http.get("/account").text)
