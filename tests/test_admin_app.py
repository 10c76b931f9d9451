"""The admin web app on real servers: access control, CSRF, CSP, hostile pages, the pages
(on the installation of tests/admin_seed.py)."""

from __future__ import annotations

import csv
import hashlib
import html
import io
import json
import re
import time
import zlib
from datetime import UTC, date, datetime, timedelta
from html.parser import HTMLParser
from typing import Any

import httpx
import pytest
from bson import ObjectId
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from pypdf import PdfReader
from starlette.routing import Mount

from admin.app import create_app
from admin.security import PUBLIC_ROUTES, SESSION_COOKIE
from admin.web import templates
from tests.admin_seed import (
    PASSWORD,
    ZH,
    Seeded,
    client,
    csrf_of,
    login,
    scanned_page,
    seed,
)
from tests.corpus import novel_chapters, texts
from tests.pdf_layout import overflowing_text
from tests.processes import wait_until
from tests.served_admin import served_admin
from tests.test_books import _epub
from tests.test_library import _docx
from tracker import campaigns as tracker_campaigns
from tracker.context import Context
from tracker.core.store import changed
from tracker.findings import REPORT_PAGE, domain_report, set_status, work_report
from tracker.masters.library import Work, add_work, add_works
from tracker.scanning.library_edits import delete_work
from tracker.scanning.pages import PageInput


@pytest.fixture
def seeded(ctx: Context) -> Seeded:
    return seed(ctx)


@pytest.fixture
def web(ctx: Context, seeded: Seeded) -> TestClient:
    return client(ctx)


# ------------------------------------------------------------------ access control


def _sample_path(path: str) -> str:
    values = {"finding_id": str(ObjectId()), "master_id": "1", "page_id": str(ObjectId())}
    return re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: values.get(m.group(1), "x"), path)


def _routes(routes: list[Any]) -> list[Any]:
    """Every route of the app, through included routers (FastAPI keeps those nested)."""
    flat = []
    for route in routes:
        included = getattr(route, "original_router", None)
        flat += _routes(included.routes) if included is not None else [route]
    return flat


def test_every_route_refuses_a_request_without_session_or_token(web):
    routes = _routes(web.app.routes)
    checked = set()
    for route in routes:
        if isinstance(route, Mount):
            assert route.path == "/static"  # the app's own CSS/JS, no data
            continue
        for method in sorted(route.methods - {"HEAD"}):
            path = _sample_path(route.path)
            response = web.request(method, path, follow_redirects=False)
            if route.path in PUBLIC_ROUTES:  # answered without asking anyone to log in
                assert response.status_code != 401, (method, path)
                assert not response.headers.get("location", "").startswith("/login"), path
                continue
            checked.add((method, route.path))
            if path.startswith("/api/"):
                assert response.status_code == 401, (method, path, response.text)
                assert response.headers["www-authenticate"] == "Bearer"
            else:
                assert response.status_code == 303, (method, path)
                assert response.headers["location"].startswith("/login?next=")
    assert len(checked) > 40  # every page, form and API route was tried
    assert {"/login", "/healthz", "/language", "/api/v1/openapi.json"} == PUBLIC_ROUTES
    api_routes = [r for r in routes if isinstance(r, APIRoute) and r.path.startswith("/api")
                  and r.path not in PUBLIC_ROUTES]  # fmt: skip
    for route in api_routes:
        for method in route.methods - {"HEAD"}:
            bad = web.request(
                method,
                _sample_path(route.path),
                headers={"Authorization": "Bearer ct_000000000000_" + "A" * 43},
            )
            assert bad.status_code == 401
    web.cookies.set(SESSION_COOKIE, "forged-session-id")
    assert web.get("/findings", follow_redirects=False).status_code == 303


def test_login_sets_a_safe_cookie_and_redirects_only_within_the_site(web):
    form = web.get("/login?next=https://evil.example/")
    assert 'value="/"' in form.text  # an absolute next URL is dropped
    response = web.post(
        "/login",
        data={"name": "rui", "password": PASSWORD, "csrf_token": csrf_of(form.text)},
        follow_redirects=False,
    )
    cookie = response.headers["set-cookie"].lower()
    assert f"{SESSION_COOKIE}=" in cookie and "httponly" in cookie and "samesite=lax" in cookie
    assert response.headers["location"] == "/"
    assert web.get("/").status_code == 200


def test_login_needs_its_csrf_token_and_is_rate_limited(web):
    no_cookie = web.post("/login", data={"name": "rui", "password": PASSWORD, "csrf_token": "x"})
    assert no_cookie.status_code == 403
    token = csrf_of(web.get("/login").text)
    forged = web.post("/login", data={"name": "rui", "password": PASSWORD, "csrf_token": "伪"})
    assert forged.status_code == 403
    for _ in range(5):
        wrong = web.post("/login", data={"name": "rui", "password": "nope", "csrf_token": token})
        assert wrong.status_code == 401 and "Wrong user name or password" in wrong.text
    # Locked out now, even with the right password.
    locked = web.post("/login", data={"name": "rui", "password": PASSWORD, "csrf_token": token})
    assert locked.status_code == 429 and int(locked.headers["retry-after"]) > 0
    assert SESSION_COOKIE not in locked.headers.get("set-cookie", "")
    login(web, "vic")  # other users are not locked out


def test_state_changes_need_the_session_csrf_token(ctx, web, seeded):
    token = login(web, "rui")
    finding = str(seeded.findings[7])
    url = f"/findings/{finding}/status"
    missing = web.post(url, data={"status": "confirmed"}, follow_redirects=False)
    forged = web.post(url, data={"status": "confirmed", "csrf_token": "伪造"})
    header = web.post(url, data={"status": "confirmed"}, headers={"X-CSRF-Token": "x"})
    assert missing.status_code == forged.status_code == header.status_code == 403
    assert ctx.db.findings.find_one({"_id": seeded.findings[7]})["status"] == "new"
    ok = web.post(url, data={"status": "confirmed", "csrf_token": token}, follow_redirects=False)
    assert ok.status_code == 303
    assert ctx.db.findings.find_one({"_id": seeded.findings[7]})["status"] == "confirmed"


def test_roles_limit_what_a_user_may_do(ctx, web, seeded):
    token = login(web, "vic")
    assert web.get("/findings").status_code == 200
    url = f"/findings/{seeded.findings[7]}/status"
    assert web.post(url, data={"status": "confirmed", "csrf_token": token}).status_code == 403
    assert web.get("/works/new").status_code == 403
    web.cookies.clear()
    token = login(web, "rui")
    assert web.get("/users").status_code == 403
    assert web.get("/campaigns/new").status_code == 403
    assert (
        web.post("/whitelist", data={"domain": "a.example", "csrf_token": token}).status_code == 403
    )
    web.cookies.clear()
    login(web, "ada")
    assert web.get("/users").status_code == 200


def test_logout_and_password_change_end_sessions(ctx, web):
    new = "a new long password"
    token = login(web, "rui")
    other = client(ctx)
    login(other, "rui")
    changed = web.post(
        "/account/password",
        data={"current": PASSWORD, "password": new, "repeat": new, "csrf_token": token},
    )
    assert changed.status_code == 200 and "Password changed." in changed.text
    # The other browser's session ended; this one continues with a fresh session.
    assert other.get("/", follow_redirects=False).status_code == 303
    token = csrf_of(web.get("/account").text)
    web.post("/logout", data={"csrf_token": token})
    assert web.get("/", follow_redirects=False).status_code == 303


# ------------------------------------------------------------------ CSP and hostile input


class _ScriptAudit(HTMLParser):
    """Collects inline scripts and inline event handlers of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.problems: list[str] = []
        self._in_inline_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = dict(attrs)
        self.problems += [f"{tag} {k}=" for k in names if k.startswith("on")]
        self.problems += [f"{tag} javascript:" for v in names.values() if v and "javascript:" in v]
        if tag == "script" and "src" not in names and names.get("type") != "application/json":
            self.problems.append("inline <script>")
        if tag == "iframe" and names.get("sandbox") != "":
            self.problems.append("unsandboxed iframe")


def audit(html: str) -> list[str]:
    parser = _ScriptAudit()
    parser.feed(html)
    return parser.problems


def test_pages_carry_a_strict_csp_no_inline_script_and_csrf_on_every_form(web, seeded):
    login(web, "ada")
    finding = seeded.findings[0]
    for path in (
        "/",
        "/findings",
        f"/findings/{finding}",
        f"/findings/{finding}/notice?lang=en",
        "/works",
        f"/works/{seeded.masters[0]}",
        "/works/new",
        "/campaigns",
        "/campaigns/pirate-sites",
        "/campaigns/pirate-sites/edit",
        "/whitelist",
        "/users",
        "/settings",
        "/account",
        "/api/v1/docs",
        "/reports/work?work=news-000",
        "/reports/domain?domain=m.copycat.example",
    ):
        response = web.get(path)
        assert response.status_code == 200, path
        csp = response.headers["content-security-policy"]
        script_src = re.search(r"script-src ([^;]+)", csp).group(1)
        assert script_src.strip() == "'self'", path
        assert "frame-ancestors 'none'" in csp and "object-src 'none'" in csp
        assert response.headers["x-content-type-options"] == "nosniff"
        assert audit(response.text) == [], path
        forms = response.text.count('method="post"')
        tokens = re.findall(r'name="csrf_token" value="([^"]+)"', response.text)
        assert len(tokens) == forms, path


def test_a_hostile_page_is_shown_inert(ctx, web, seeded):
    login(web, "rui")
    page = web.get(f"/findings/{seeded.xss}")
    assert page.status_code == 200
    assert audit(page.text) == []
    assert "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;" in page.text
    assert "onerror=alert" not in page.text.replace("onerror=alert(1)&gt;", "")
    listing = web.get("/findings")
    assert "<script>alert" not in listing.text and audit(listing.text) == []
    finding = ctx.db.findings.find_one({"_id": seeded.xss})
    raw = web.get(f"/pages/{finding['page_id']}/raw")
    assert raw.status_code == 200 and b"<script>" in raw.content  # the evidence, unchanged…
    csp = raw.headers["content-security-policy"]
    assert csp.startswith("sandbox;") and "default-src 'none'" in csp  # …but inert
    assert raw.headers["x-frame-options"] == "SAMEORIGIN"
    assert 'sandbox=""' in page.text
    marked = web.get(f"/pages/{finding['page_id']}/raw?mark={seeded.xss}")
    assert marked.status_code == 200 and 'id="copytrack-first-mark"' in marked.text
    assert "<script>" in marked.text and marked.headers["content-security-policy"] == csp
    stored = ctx.db.pages.find_one({"_id": finding["page_id"]})
    assert hashlib.sha256(raw.content).hexdigest() == stored["raw_sha256"]  # never altered
    other = web.get(f"/pages/{finding['page_id']}/raw?mark={seeded.findings[0]}")
    assert other.status_code == 404


# ------------------------------------------------------------------ pages


def test_dashboard_shows_counts_chart_data_and_runs(web, seeded):
    login(web, "vic")
    page = web.get("/")
    assert page.status_code == 200
    # The chart is drawn by the server: a bar per day, its count in the bar and its tooltip.
    bars = re.findall(r'<rect class="point" data-day="([\d-]+)" data-value="(\d+)"', page.text)
    assert len(bars) == 30 and sum(int(n) for _, n in bars) == len(seeded.findings) + 1
    assert [day for day, _ in bars] == sorted(day for day, _ in bars)
    busiest = max(bars, key=lambda bar: int(bar[1]))
    assert f"<title>{busiest[0]}: {busiest[1]} new findings</title>" in page.text
    assert "<script" not in page.text.replace('<script src="/static/app.js" defer></script>', "")
    assert 'id="kpi-confirmed">3<' in page.text  # 5 confirmed, 1 then noticed, 1 removed
    assert 'id="kpi-removed">1<' in page.text
    assert "www.pirate-news.example" in page.text and "pirate-sites" in page.text


def test_findings_filter_sort_paginate_and_bulk_change(ctx, web, seeded):
    token = login(web, "rui")
    page = web.get("/findings?status=confirmed&sort=-score")
    assert page.text.count('name="ids"') == 3
    one_domain = web.get("/findings?domain=copycat.example")
    assert one_domain.text.count('name="ids"') == ctx.db.findings.count_documents(
        {"domain": "m.copycat.example"}
    )
    paged = web.get("/findings?per_page=10&page=2")
    assert paged.status_code == 200 and "Page 2 of" in paged.text
    last = -(-ctx.db.findings.count_documents({}) // 10)
    beyond = web.get("/findings?per_page=10&page=999").text  # an old link: the last page
    assert f"Page {last} of {last}" in beyond and 'name="ids"' in beyond
    works = web.get("/works?page=999")
    assert works.status_code == 200 and "/works/" in works.text
    assert web.get("/findings?status=bogus").status_code == 400
    assert web.get("/findings?min_score=2").status_code == 400
    new = [str(f["_id"]) for f in ctx.db.findings.find({"status": "new"}, {"_id": 1})]
    removed = [str(seeded.findings[1])]
    done = web.post(
        "/findings/bulk",
        data={"ids": new + removed, "status": "dismissed", "note": "syndicated",
              "csrf_token": token, "back": "/findings?status=new"},
    )  # fmt: skip
    assert done.status_code == 200
    assert (
        f"{len(new)} finding(s) marked dismissed" in done.text and "1 could not change" in done.text
    )
    assert ctx.db.findings.count_documents({"status": "new"}) == 0


def test_finding_detail_aligns_highlighted_passages_and_shows_evidence(ctx, web, seeded):
    login(web, "rui")
    finding = ctx.db.findings.find_one({"_id": seeded.findings[2]})
    page = web.get(f"/findings/{finding['_id']}").text
    assert len(finding["spans"]) >= 1
    for index in range(len(finding["spans"])):
        assert f'id="master-{index}"' in page and f'id="page-{index}"' in page
    stored = ctx.db.pages.find_one({"_id": finding["page_id"]})
    assert stored["raw_sha256"] in page and f"{finding['master_coverage']:.0%}" in page
    assert "verbatim copy with ads" in page  # the history, with its note
    ctx.db.pages.update_one({"_id": finding["page_id"]}, {"$set": {"published": "2021-03-03"}})
    dated = web.get(f"/findings/{finding['_id']}").text
    assert '<dd id="page-published">2021-03-03</dd>' in dated
    ctx.db.pages.update_one({"_id": finding["page_id"]}, {"$set": {"published": None}})
    assert 'id="page-published"' not in web.get(f"/findings/{finding['_id']}").text  # no row


def test_notice_is_generated_in_both_languages_and_recorded(ctx, web, seeded):
    finding_id = seeded.findings[3]
    finding = ctx.db.findings.find_one({"_id": finding_id})
    # No sender (any more): an administrator is sent to Settings, where a bad e-mail is
    # refused.
    ctx.db.settings.delete_many({})
    token = login(web, "ada")
    blocked = web.get(f"/findings/{finding_id}/notice?lang=zh")
    assert blocked.url.path == "/settings" and "needs its sender" in blocked.text
    sender = {"organization": "Example Press", "email": "legal at press", "csrf_token": token}
    refused = web.post("/settings", data=sender)
    assert refused.status_code == 400 and "is not an e-mail address" in refused.text
    assert 'value="Example Press"' in refused.text  # the form keeps what was typed
    web.post("/settings", data={**sender, "email": "legal@press.example"})
    token = login(web, "rui")
    zh = web.get(f"/findings/{finding_id}/notice?lang=zh").text
    assert "侵权删除通知" in zh and finding["url"] in zh and finding["master_external_id"] in zh
    en = web.get(f"/findings/{finding_id}/notice?lang=en").text
    assert "Copyright infringement notice" in en
    sha = ctx.db.pages.find_one({"_id": finding["page_id"]})["raw_sha256"]
    assert sha in zh and sha in en
    not_confirmed = web.get(f"/findings/{seeded.findings[8]}/notice?lang=en")
    assert "a notice needs a confirmed finding" in not_confirmed.text
    sent = web.post(
        f"/findings/{finding_id}/notice",
        data={"lang": "en", "subject": "Notice", "body": "Please remove it.",
              "recipient": "abuse@m.copycat.example", "csrf_token": token},
    )  # fmt: skip
    assert sent.status_code == 200 and "notice sent" in sent.text.lower()
    assert ctx.db.findings.find_one({"_id": finding_id})["status"] == "notice_sent"
    notice = ctx.db.notices.find_one({"finding_id": finding_id})
    text = web.get(f"/notices/{notice['_id']}")
    assert "Please remove it." in text.text and text.headers["x-content-sha256"] == notice["sha256"]


def test_a_notice_has_a_deadline_and_a_reviewer_can_recheck_the_page(ctx, seeded):
    finding_id = seeded.findings[3]
    page = ctx.db.pages.find_one({"_id": ctx.db.findings.find_one({"_id": finding_id})["page_id"]})
    answers = {page["url"]: page["text"]}

    def fetch(url: str) -> PageInput:
        if url not in answers:
            raise ValueError(f"{url}: cannot fetch: connection refused")
        return PageInput(url, answers[url], raw=b"<p>again</p>")

    http = TestClient(create_app(ctx, fetch_page=fetch), base_url="http://127.0.0.1")
    token = login(http, "rui")
    form = http.get(f"/findings/{finding_id}/notice?lang=en").text
    default = re.search(r'id="notice-deadline" type="date"[^>]*value="([^"]+)"', form)
    assert date.fromisoformat(default.group(1)) > date.today() + timedelta(days=4)
    chosen = date.today() + timedelta(days=10)
    http.post(
        f"/findings/{finding_id}/notice",
        data={"lang": "en", "subject": "Notice", "body": "Please remove it.",
              "recipient": "abuse@x.example", "deadline": chosen.isoformat(), "csrf_token": token},
    )  # fmt: skip
    noticed = ctx.db.findings.find_one({"_id": finding_id})
    assert noticed["notice_deadline"].date() == chosen
    shown = http.get(f"/findings/{finding_id}").text
    assert f"{chosen.isoformat()} 23:59" in shown and "the site still has time" in shown
    awaiting = http.get("/findings?notice=awaiting").text
    waiting = ctx.db.findings.count_documents({"notice_deadline": {"$gt": datetime.now(UTC)}})
    assert f'href="/findings/{finding_id}' in awaiting
    assert f'Findings <span class="muted">{waiting}</span>' in awaiting

    # The deadline passes; the page is still there, then it cannot be fetched.
    ctx.db.findings.update_one(
        {"_id": finding_id},
        changed({"$set": {"notice_deadline": datetime.now(UTC) - timedelta(days=1)}}),
    )
    still = http.post(f"/findings/{finding_id}/recheck", data={"csrf_token": token})
    assert "still copies the work" in still.text and "Still there" in still.text
    dashboard_page = http.get("/").text
    assert re.search(r'href="/findings\?notice=still_there"><b>1</b>', dashboard_page)
    answers.clear()
    down = http.post(f"/findings/{finding_id}/recheck", data={"csrf_token": token})
    assert "could not be fetched: " + page["url"] in down.text
    no_fetcher = client(ctx)
    login(no_fetcher, "rui")
    assert 'id="recheck-now"' not in no_fetcher.get(f"/findings/{finding_id}").text


def test_whitelisting_a_domain_marks_its_findings_licensed_and_back(ctx, web, seeded):
    token = login(web, "ada")
    domain = "copycat.example"
    on_domain = ctx.db.findings.find_one({"domain": "m." + domain, "status": "new"})
    set_status(ctx, on_domain["_id"], "confirmed", "rui")  # a reviewer's decision
    before = {f["_id"]: f["status"] for f in ctx.db.findings.find({"domain": "m." + domain})}
    form = {"domain": domain, "note": "partner", "csrf_token": token}
    # Reviewers' decisions would be relabelled: the admin asks first, nothing changes yet.
    asked = web.post("/whitelist", data=form)
    assert asked.status_code == 200 and f"License {domain}?" in asked.text
    assert "will be marked licensed" in asked.text
    now = {f["_id"]: f["status"] for f in ctx.db.findings.find({"domain": "m." + domain})}
    assert now == before
    web.post("/whitelist", data={**form, "confirm": "true"})
    statuses = {f["status"] for f in ctx.db.findings.find({"domain": "m." + domain})}
    assert statuses == {"licensed"}
    listed = web.get(f"/findings/{next(iter(before))}")
    assert "Licensed" in listed.text
    asked = web.post(f"/whitelist/{domain}/delete", data={"csrf_token": token})
    assert f"Stop licensing {domain}?" in asked.text
    web.post(f"/whitelist/{domain}/delete", data={"csrf_token": token, "confirm": "true"})
    after = {f["_id"]: f["status"] for f in ctx.db.findings.find({"domain": "m." + domain})}
    assert after == before


def test_works_upload_list_and_detail(ctx, web, seeded):
    token = login(web, "rui")
    jsonl = "\n".join(
        json.dumps({"id": f"up-{i}", "title": f"上传{i}", "text": ZH[10 + i]}, ensure_ascii=False)
        for i in range(2)
    )
    files = [
        ("files", ("稿件.txt", ZH[8].encode("gb18030"), "text/plain")),
        ("files", ("batch.jsonl", (jsonl + "\n{broken").encode(), "application/json")),
        ("files", ("photo.png", b"\x89PNG", "image/png")),
    ]
    result = web.post("/works/new", data={"csrf_token": token}, files=files)
    assert result.status_code == 200
    assert "up-0" in result.text and "up-1" in result.text
    assert "batch.jsonl:3" in result.text and "unsupported file type" in result.text
    assert "/tmp" not in result.text  # problems name the reviewer's file, not ours
    pasted = web.post("/works/new", data={"csrf_token": token, "text": "太短", "title": "x"})
    assert pasted.status_code == 400 and "too short" in pasted.text
    assert "up-1" in web.get("/works?q=up-").text
    detail = web.get(f"/works/{seeded.masters[0]}").text
    assert "www.pirate-news.example" in detail


def test_word_and_epub_masters_upload_whole_or_one_work_per_chapter(ctx, web, seeded):
    token = login(web, "rui")
    chapters = [text[:800] for text in texts("zh_novel", 3)]
    files = [("files", ("合集.docx", _docx(chapters), "application/octet-stream"))]
    per_chapter = web.post("/works/new", data={"csrf_token": token, "chapters": "true"},
                           files=files)  # fmt: skip
    assert per_chapter.status_code == 200
    for n in (1, 2, 3):
        assert f"合集-00{n}" in per_chapter.text
    files = [("files", ("全本.epub", _epub(chapters), "application/epub+zip"))]
    whole = web.post("/works/new", data={"csrf_token": token}, files=files)
    assert ">全本<" in whole.text and "全本-001" not in whole.text
    stored = ctx.db.masters.find_one({"external_id": "全本"})
    assert all(text[:200] in stored["text"] for text in chapters)
    assert ".docx" in web.get("/works/new").text  # the form says what it takes


def test_works_list_pages_the_library_newest_first(ctx, web, seeded):
    login(web, "rui")
    added = add_works(ctx, [Work(text=f"{ZH[i % len(ZH)]}第{i}篇", external_id=f"bulk-{i}",
                                 title=f"bulk {i}") for i in range(60)])  # fmt: skip
    ids = [results[0].master_id for results in added]
    delete_work(ctx, ids[30], "test")
    newest_first = sorted({*seeded.masters, *ids} - {ids[30]}, reverse=True)

    def listed(page: int) -> list[int]:
        text = web.get(f"/works?page={page}").text
        return [int(i) for i in re.findall(r'href="/works/(\d+)"', text)]

    assert max(ids) <= 100  # two pages of 50 numbers
    assert listed(1) + listed(2) == newest_first
    assert len(listed(1)) == 50 - 1  # the removed work leaves its page shorter
    last = web.get("/works?page=999").text  # past the last page: the last
    assert "Page 2 of 2" in last and f'href="/works/{min(seeded.masters)}"' in last
    assert f">{len(newest_first)}<" in web.get("/works").text  # the library's size, now


def test_works_are_edited_and_deleted_with_their_findings_fate_stated(ctx, web, seeded):
    master_id = seeded.masters[0]
    master = ctx.db.masters.find_one({"_id": master_id})
    findings = list(ctx.db.findings.find({"master_id": master_id}))
    login(web, "vic")
    assert 'id="edit-work"' not in web.get(f"/works/{master_id}").text  # viewers only read
    assert web.get(f"/works/{master_id}/edit").status_code == 403
    token = login(web, "rui")
    form = web.get(f"/works/{master_id}/edit").text
    assert master["text"][:50] in form
    renamed = web.post(
        f"/works/{master_id}/edit",
        data={"csrf_token": token, "title": "改过的标题", "author": "",
              "text": master["text"].replace("\n", "\r\n")},  # a browser's line ends
    )  # fmt: skip
    assert "Saved." in renamed.text and "改过的标题" in renamed.text
    assert ctx.db.masters.find_one({"_id": master_id})["sha256"] == master["sha256"]
    assert ctx.db.findings.find_one({"_id": findings[0]["_id"]})["master_title"] == "改过的标题"
    too_short = web.post(
        f"/works/{master_id}/edit", data={"csrf_token": token, "title": "t", "text": "短"}
    )
    assert too_short.status_code == 400 and "too short" in too_short.text
    assert 'value="t"' in too_short.text  # the form keeps what was typed
    rewritten = web.post(
        f"/works/{master_id}/edit",
        data={"csrf_token": token, "title": "改过的标题", "text": ZH[11]},
    )
    pages = len({f["page_id"] for f in findings})
    assert f"The {pages} page(s) that copied the work were scanned again" in rewritten.text

    decided = ctx.db.findings.count_documents(
        {"master_id": master_id, "history": {"$elemMatch": {"by": {"$ne": "copytrack"}}}}
    )
    total = ctx.db.findings.count_documents({"master_id": master_id})
    # Reviewers edit works; only admins delete them (as in the API).
    assert 'id="delete-work"' not in web.get(f"/works/{master_id}").text
    assert web.get(f"/works/{master_id}/delete").status_code == 403
    refused = web.post(f"/works/{master_id}/delete", data={"csrf_token": token})
    assert refused.status_code == 403 and ctx.db.masters.find_one({"_id": master_id})
    token = login(web, "ada")
    assert 'id="delete-work"' in web.get(f"/works/{master_id}").text
    confirm = web.get(f"/works/{master_id}/delete").text
    assert f"<b>{total - decided}</b> finding(s) nobody" in confirm
    assert f"<b>{decided}</b> finding(s) a reviewer decided on" in confirm
    deleted = web.post(f"/works/{master_id}/delete", data={"csrf_token": token})
    assert f"{decided} reviewed finding(s) are kept as records" in deleted.text
    assert deleted.url.path == "/works"
    assert web.get(f"/works/{master_id}").status_code == 410
    kept = ctx.db.findings.find_one({"master_id": master_id})
    assert decided and kept is not None  # the seed's reviewers decided on some of them
    record = web.get(f"/findings/{kept['_id']}").text
    assert 'id="work-deleted"' in record and '<mark class="hl' in record


def test_campaign_form_validates_and_run_now_starts_a_run(ctx, web, seeded, monkeypatch):
    token = login(web, "ada")
    form = {"name": "blogs", "seeds": "https://93.184.215.14/\n", "schedule": "every day",
            "max_pages": "100", "enabled": "on", "csrf_token": token}  # fmt: skip
    bad_cron = web.post("/campaigns/new", data=form)
    assert bad_cron.status_code == 400 and "is not a cron expression" in bad_cron.text
    private = web.post(
        "/campaigns/new", data={**form, "schedule": "0 4 * * *", "seeds": "http://10.1.2.3/"}
    )
    assert private.status_code == 400 and "COPYTRACK_ALLOW_PRIVATE_NETWORKS" in private.text
    saved = web.post("/campaigns/new", data={**form, "schedule": "0 4 * * 1"})
    assert saved.status_code == 200 and "Campaign blogs saved." in saved.text
    assert tracker_campaigns.get_campaign(ctx, "blogs").schedule == "0 4 * * 1"
    edited = web.post("/campaigns/blogs/edit", data={**form, "schedule": "", "max_pages": "7"})
    assert "Campaign blogs saved." in edited.text
    assert tracker_campaigns.get_campaign(ctx, "blogs").max_pages == 7

    launched = []
    monkeypatch.setattr(
        "tracker.campaigns.dispatch.launch_crawl",
        lambda ctx, name, run_id: launched.append(run_id),
    )
    ran = web.post("/campaigns/blogs/run", data={"csrf_token": token})
    assert ran.status_code == 200 and "started" in ran.text and len(launched) == 1
    assert ctx.db.runs.find_one({"_id": launched[0]})["campaign"] == "blogs"
    busy = web.post("/campaigns/blogs/run", data={"csrf_token": token})
    assert "already running" in busy.text


def test_csv_export_is_safe_against_formula_injection(ctx, web, seeded):
    login(web, "vic")
    add_work(ctx, Work(text=ZH[9], external_id="formula", title='=HYPERLINK("http://x","y")'))
    scanned_page(ctx, "https://mirror.example/f", "t", ZH[9])
    response = web.get("/exports/findings.csv?domain=mirror.example")
    assert response.headers["content-type"].startswith("text/csv")
    assert "attachment" in response.headers["content-disposition"]
    body = response.content.decode("utf-8-sig")
    assert body.splitlines()[0].startswith("id,status,work_id,work_title")
    assert "'=HYPERLINK" in body and ",=HYPERLINK" not in body
    everything = web.get("/exports/findings.csv").content.decode("utf-8-sig")
    rows = list(csv.reader(io.StringIO(everything)))
    assert len(rows) == ctx.db.findings.count_documents({}) + 1
    # Each hash is labelled for what it hashes: the captured bytes, the extracted text.
    header, first = rows[0], dict(zip(rows[0], rows[1], strict=True))
    assert "page_sha256" not in header
    page = ctx.db.pages.find_one({"url": first["url"]})
    raw = zlib.decompress(page["raw_zlib"])
    assert first["page_capture_sha256"] == hashlib.sha256(raw).hexdigest()
    assert first["page_text_sha256"] == hashlib.sha256(page["text"].encode()).hexdigest()


def test_reports_per_work_and_domain_as_html_and_pdf(web, seeded):
    login(web, "vic")
    html = web.get("/reports/work?work=news-000")
    assert html.status_code == 200 and "www.pirate-news.example" in html.text
    domain = web.get("/reports/domain?domain=https://www.pirate-news.example/x&scope=all")
    assert domain.status_code == 200 and "news-000" in domain.text
    pdf = web.get("/reports/domain?domain=www.pirate-news.example&format=pdf")
    assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF")
    assert pdf.headers["content-type"] == "application/pdf"
    assert pdf.headers["content-disposition"].startswith("attachment;")  # "Download PDF" downloads
    assert web.get("/reports/work?work=nope").status_code == 404
    assert web.get("/reports/domain?domain=not a domain").status_code == 400


def test_a_domain_report_shows_reviewed_findings_and_pages_its_detail(ctx, web, seeded):
    login(web, "vic")
    domain = ctx.db.findings.find_one({"_id": seeded.findings[0]})["domain"]
    on_domain = list(ctx.db.findings.find({"domain": domain}))
    reviewed = [f for f in on_domain if f["status"] in ("confirmed", "notice_sent", "removed")]
    assert 0 < len(reviewed) < len(on_domain)

    def listed(page: str) -> set[str]:
        return set(re.findall(r'<td class="url">([^<]+)</td>', page))

    default = web.get(f"/reports/domain?domain={domain}").text
    assert listed(default) == {html.escape(f["url"]) for f in reviewed}
    # The summary still counts every finding of the domain.
    assert f"<td><b>{len(on_domain)}</b></td>" in default
    assert f"/reports/domain?domain={domain}&amp;scope=all" in default
    everything = web.get(f"/reports/domain?domain={domain}&scope=all").text
    assert listed(everything) == {html.escape(f["url"]) for f in on_domain}

    # Past a page of findings the detail is paged, with a link to each page.
    extra = [
        {
            **reviewed[0],
            "_id": ObjectId(),
            "page_id": ObjectId(),
            "url": f"https://{domain}/more/{n}",
        }
        for n in range(REPORT_PAGE + 10)
    ]
    ctx.db.findings.insert_many(extra)
    first = web.get(f"/reports/domain?domain={domain}").text
    assert len(listed(first)) == REPORT_PAGE and 'id="report-pager"' in first
    assert f"/reports/domain?domain={domain}&amp;page=2" in first
    second = web.get(f"/reports/domain?domain={domain}&page=2").text
    assert listed(first) | listed(second) == {
        html.escape(f["url"]) for f in reviewed + extra
    } and not listed(first) & listed(second)
    # Its PDF is built off the request (test_a_long_domain_report_pdf_...).
    pdf = web.get(f"/reports/domain?domain={domain}&format=pdf")
    assert pdf.status_code == 200 and 'id="report-pdf"' in pdf.text


def test_a_long_domain_report_pdf_is_built_while_the_admin_answers(ctx, seeded):
    domain = ctx.db.findings.find_one({"_id": seeded.findings[0]})["domain"]
    base = ctx.db.findings.find_one({"_id": seeded.findings[0]})
    ctx.db.findings.insert_many(
        [
            {
                **base,
                "_id": ObjectId(),
                "page_id": ObjectId(),
                "status": "confirmed",
                "url": f"https://{domain}/long/{n}",
            }
            for n in range(3 * REPORT_PAGE + 50)
        ]
    )
    with served_admin(ctx) as port:
        reader = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)
        other = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)
        login(reader, "vic")
        asked = reader.get(f"/reports/domain?domain={domain}&format=pdf")
        assert asked.status_code == 200 and "The PDF is being prepared" in asked.text
        # Another reader logs in and opens the dashboard while the PDF is being built.
        started = time.monotonic()
        login(other, "rui")
        assert other.get("/").status_code == 200
        answered = time.monotonic() - started
        still = reader.get(f"/reports/domain.pdf?domain={domain}")
        assert "The PDF is being prepared" in still.text, "built before the other request"
        assert answered < 5, answered
        assert re.search(r"prepared… \d+%", still.text)

        def ready() -> bool:
            page = reader.get(f"/reports/domain?domain={domain}&format=pdf").text
            assert "could not be made" not in page
            return 'id="report-pdf-download"' in page

        wait_until(ready, 180, "the domain report's PDF")
        made = reader.get(f"/reports/domain.pdf?domain={domain}")
        reader.close()
        other.close()
    assert made.headers["content-type"] == "application/pdf"
    assert made.headers["content-disposition"].startswith("attachment;")
    pages = PdfReader(io.BytesIO(made.content)).pages
    # Four pages of findings, one report: the domain's heading once, at the start.
    assert len(pages) >= 4
    text = "".join(page.extract_text() for page in pages)
    assert text.upper().count("DOMAIN REPORT") == 1
    assert f"1 / {len(pages)}" in text and f"{len(pages)} / {len(pages)}" in text


def test_users_page_manages_users(ctx, web):
    token = login(web, "ada")
    added = web.post(
        "/users",
        data={"name": "mei", "role": "viewer", "password": PASSWORD, "repeat": PASSWORD,
              "csrf_token": token},
    )  # fmt: skip
    assert "User mei added." in added.text
    web.post("/users/mei/role", data={"role": "reviewer", "csrf_token": token})
    assert ctx.db.users.find_one({"_id": "mei"})["role"] == "reviewer"
    last_admin = web.post("/users/ada/role", data={"role": "viewer", "csrf_token": token})
    assert "last admin" in last_admin.text
    web.post("/users/mei/delete", data={"csrf_token": token})
    assert ctx.db.users.find_one({"_id": "mei"}) is None


def test_account_page_creates_a_token_shown_once(ctx, web):
    token = login(web, "vic")
    created = web.post(
        "/account/tokens",
        data={"label": "CMS", "role": "viewer", "password": PASSWORD, "csrf_token": token},
    )
    value = re.search(r'id="new-token" value="([^"]+)"', created.text).group(1)
    api = web.get("/api/v1/findings", headers={"Authorization": f"Bearer {value}"})
    assert api.status_code == 200
    again = web.get("/account").text
    assert value not in again and "CMS" in again
    too_much = web.post(
        "/account/tokens",
        data={"label": "x", "role": "admin", "password": PASSWORD, "csrf_token": token},
    )
    assert "more rights than its user" in too_much.text


def test_a_whole_book_page_lists_its_many_findings_and_shows_the_part_of_the_page(ctx, web, seeded):
    chapters = [text[:1200] for text in novel_chapters(150)]
    added = add_works(
        ctx, [Work(text=text, external_id=f"book-ch{n:03d}") for n, text in enumerate(chapters)]
    )
    assert all(result[0].status == "added" for result in added)
    # Each chapter with the pirate site's boilerplate, as such downloads come: a book longer
    # than the page shows at once (also with the bundled corpus's shorter chapters).
    boilerplate = "本站提供全本小说免费阅读与下载，请收藏本站网址，方便下次阅读。" * 12
    book = "\n".join(f"第{n + 1}章\n{text}\n{boilerplate}" for n, text in enumerate(chapters))
    ids = scanned_page(ctx, "https://read.freetext.example/full-book.txt", "全本", book)
    assert len(ids) == len(chapters)

    login(web, "vic")
    finding = ctx.db.findings.find_one({"_id": {"$in": ids}, "master_external_id": "book-ch140"})
    html = web.get(f"/findings/{finding['_id']}").text
    assert f"This page copies {len(chapters) - 1} other works" in html
    assert html.count('<li><a href="/findings/') == 20
    assert f"All {len(chapters)} findings of this page" in html
    # The book is longer than a page shows: the side-by-side starts near chapter 141.
    assert "characters before, not shown" in html
    assert 'id="page-0"' in html
    assert len(html) < 200_000

    listed = web.get(f"/findings?page_id={finding['page_id']}&per_page=200").text
    assert all(f"book-ch{n:03d}" in listed for n in range(len(chapters)))
    assert web.get("/findings?page_id=nonsense").status_code == 400


def test_pdf_reports_stay_within_their_margins(ctx, seeded):
    for report in (work_report(ctx, "news-000"), domain_report(ctx, "www.pirate-news.example")):
        html = templates.get_template("report.html").render(report=report, pdf=True)
        past = overflowing_text(html)
        assert past == [], past


def test_findings_search_by_work_title_page_title_or_url(ctx, web, seeded):
    login(web, "vic")

    def listed(**params: str) -> set[str]:
        page = web.get("/findings", params={**params, "per_page": "200"})
        assert page.status_code == 200
        return set(re.findall(r'href="/findings/([0-9a-f]{24})[?"]', page.text))

    finding = ctx.db.findings.find_one({"_id": seeded.findings[0]})
    title_words = finding["master_title"][3:9]  # a stretch of a Chinese title
    by_title = listed(q=title_words)
    assert str(finding["_id"]) in by_title
    assert by_title == {
        str(f["_id"]) for f in ctx.db.findings.find({"master_title": {"$regex": title_words}})
    }
    # Words of the page's title (the pirate's "免费阅读"), which no work has.
    assert listed(q="免费阅读") == {str(i) for i in seeded.findings}
    assert listed(q="COPYCAT") == listed(domain="m.copycat.example")  # any case, in URLs
    assert listed(q="红楼梦没有这一章") == set()
    api = web.get("/api/v1/findings", params={"q": title_words, "per_page": 200}).json()
    assert {item["id"] for item in api["items"]} == by_title


def test_findings_sort_by_column_and_filter_scores_in_percent(ctx, web, seeded):
    login(web, "vic")
    page = web.get("/findings").text
    by_score = re.search(r'<th class="num sortable"><a href="\?([^"]*)">Score</a>', page)
    assert by_score and "sort=-score" in by_score.group(1)  # highest first, then lowest
    sorted_page = web.get(f"/findings?{html.unescape(by_score.group(1))}").text
    assert 'aria-sort="descending"' in sorted_page and "Score ▼" in sorted_page
    assert "sort=score" in re.search(
        r'sortable sorted[^>]*><a href="\?([^"]*)"', sorted_page
    ).group(1)

    high = ctx.db.findings.count_documents({"score": {"$gte": 0.8}})
    in_percent = web.get("/findings", params={"min_pct": "80", "per_page": "200"}).text
    assert in_percent.count('class="finding-link"') == high
    assert 'name="min_pct" type="number" min="0" max="100" step="5" value="80"' in in_percent
    assert "give a percentage" in web.get("/findings?min_pct=180").text


def test_check_a_text_or_a_url_in_the_admin(ctx, seeded):
    pages = {"https://news.example/a": f"转载：\n{ZH[2]}\n（完）"}

    def fetch(url: str) -> PageInput:
        if url not in pages:
            raise ValueError(f"{url}: HTTP 500")
        return PageInput(url, pages[url])

    http = TestClient(create_app(ctx, fetch_page=fetch), base_url="http://127.0.0.1")
    token = login(http, "vic")
    work = ctx.db.masters.find_one({"text": ZH[2]})
    pasted = http.post("/check", data={"csrf_token": token, "text": ZH[2][40:400]})
    assert pasted.status_code == 200 and f'href="/works/{work["_id"]}"' in pasted.text
    assert "1 work copied" in pasted.text and '<mark class="hl' in pasted.text
    by_url = http.post("/check", data={"csrf_token": token, "url": "https://news.example/a"})
    assert by_url.status_code == 200 and f'href="/works/{work["_id"]}"' in by_url.text
    missing = http.post("/check", data={"csrf_token": token, "url": "https://news.example/b"})
    assert missing.status_code == 400 and "https://news.example/b: HTTP 500" in missing.text
    unrelated = http.post(
        "/check", data={"csrf_token": token, "text": "与任何作品都无关的一句话。" * 5}
    )
    assert "No work of the library is copied in it." in unrelated.text
    assert ctx.db.findings.count_documents({"url": "https://news.example/a"}) == 0  # nothing kept
    no_fetcher = client(ctx)
    login(no_fetcher, "vic")
    refused = no_fetcher.post(
        "/check",
        data={"csrf_token": csrf_of(no_fetcher.get("/check").text), "url": "https://x.example/"},
    )
    assert refused.status_code == 400 and "paste the page&#39;s text" in refused.text


def test_quotation_sized_findings_are_hidden_counted_and_shown_on_asking(ctx, web, seeded):
    """A page quoting 60 characters of a work: kept out of the list and the dashboard's
    counts, both saying "1 quotation-sized finding hidden" with a link that lists it."""
    login(web, "rui")
    before = web.get("/").text
    work = ctx.db.masters.find_one({}, sort=[("_id", 1)])
    flat = "".join(work["text"].split())
    [quoted] = scanned_page(ctx, "http://quoting.example/1", "A quotation",
                            ZH[-1] + "\n" + flat[120:180] + "\n" + ZH[-2])  # fmt: skip
    assert ctx.db.findings.find_one({"_id": quoted})["quotation"]
    ctx.redis.delete(ctx.keys.dashboard)
    dashboard = web.get("/").text
    assert (
        "1 quotation-sized finding hidden" in dashboard and "/findings?size=quotations" in dashboard
    )
    kpi = re.compile(r'id="kpi-open">(\d+)<')
    assert kpi.search(dashboard)[1] == kpi.search(before)[1]
    listed = web.get("/findings?per_page=200").text
    assert str(quoted) not in listed and "1 quotation-sized finding hidden" in listed
    shown = web.get("/findings?size=quotations").text
    assert shown.count('name="ids"') == 1 and str(quoted) in shown
    assert "quotation-sized finding hidden" not in shown
    assert str(quoted) in web.get("/findings?size=any&per_page=200").text
    assert web.get("/findings?size=huge").status_code == 400
    # The export holds what the list shows.
    assert str(quoted) not in web.get("/exports/findings.csv").text
    assert str(quoted) in web.get("/exports/findings.csv?size=quotations").text


def test_check_with_a_url_and_a_text_checks_both_and_labels_each(ctx, seeded):
    """Both inputs given: each is checked and reported under its own input, and the form
    keeps them (the 5-character text was checked alone, the box cleared, and its empty
    result labelled with the URL of a page that copies a work)."""
    url = "https://news.example/1046.html"

    def fetch(asked: str) -> PageInput:
        return PageInput(asked, f"转载：\n{ZH[2]}\n（完）")

    http = TestClient(create_app(ctx, fetch_page=fetch), base_url="http://127.0.0.1")
    token = login(http, "vic")
    work = ctx.db.masters.find_one({"text": ZH[2]})
    both = http.post("/check", data={"csrf_token": token, "url": url, "text": "短短五个字"})
    assert both.status_code == 200
    page = both.text
    by_url, by_text = page.split('data-input="url"')[1].split('data-input="text"')
    assert f"from {url}" in by_url and "1 work copied" in by_url
    assert f'href="/works/{work["_id"]}"' in by_url
    assert "of the pasted text" in by_text and "0 works copied" in by_text
    assert f"from {url}" not in by_text
    assert ">短短五个字</textarea>" in page and f'value="{url}"' in page  # nothing cleared


def test_the_sibling_list_gives_scores_in_percent_like_elsewhere(ctx, web, seeded):
    login(web, "vic")
    first, second = scanned_page(ctx, "https://two.example/p", "两篇", f"{ZH[1]}\n{ZH[2]}")
    page = web.get(f"/findings/{first}").text
    siblings = page.split('id="siblings"')[1].split("</section>")[0]
    score = ctx.db.findings.find_one({"_id": second})["score"]
    assert f"score {score:.0%}" in siblings
    assert not re.search(r"score \d\.\d\d", siblings)  # not "1.00"


def test_the_campaign_form_reports_every_invalid_field_at_once(ctx, web, seeded):
    token = login(web, "ada")
    bad = web.post(
        "/campaigns/new",
        data={"name": "no spaces please", "seeds": "ftp://files.example/", "schedule": "every day",
              "max_pages": "lots", "allow": "([", "csrf_token": token},
    )  # fmt: skip
    assert bad.status_code == 400
    page = html.unescape(bad.text)
    for said in ("is not a valid name", "is not an http(s) URL with a host",
                 "is not a cron expression", "give a number, or leave it empty",
                 "allow:"):  # fmt: skip
        assert said in page, said
    assert 'value="no spaces please"' in page  # the form keeps what was typed
    assert all(c.name != "no spaces please" for c in tracker_campaigns.list_campaigns(ctx))
