"""The JSON API /api/v1 on real servers: every endpoint, its auth failures and bad payloads."""

from __future__ import annotations

import hashlib
import os
import signal
import time
from datetime import UTC, date, datetime, timedelta

import pytest
from bson import ObjectId

from admin.routes import works as works_routes
from admin.routes.api import ReviewStatus
from admin.routes.works import register
from tests.admin_seed import PASSWORD, ZH, client, login, seed
from tests.processes import wait_until
from tracker.accounts.users import add_user, create_token, revoke_token
from tracker.celery_app import QUEUES
from tracker.core.config import Settings
from tracker.findings import TRANSITIONS
from tracker.masters.generation import open_ready
from tracker.masters.library import MAX_MASTER_CHARS, Work
from tracker.masters.loaders import Loaded, LoadError
from tracker.runtime.servers import VALKEY, server_status


@pytest.fixture
def api(ctx):
    """A client, the seeded data, and a bearer header per role."""
    seeded = seed(ctx, pages=6)
    headers = {
        role: {"Authorization": f"Bearer {create_token(ctx, name, f'{role} test')}"}
        for name, role in (("ada", "admin"), ("rui", "reviewer"), ("vic", "viewer"))
    }
    return client(ctx), seeded, headers


def test_the_api_offers_exactly_the_statuses_a_reviewer_may_set():
    targets = {target for targets in TRANSITIONS.values() for target in targets}
    assert {status.value for status in ReviewStatus} == targets


def test_the_schema_lists_every_operation_by_a_readable_id(api):
    http, _, auth = api
    # It describes the API and discloses nothing: no token needed (the reference page is).
    schema = http.get("/api/v1/openapi.json").json()
    assert http.get("/api/v1/docs").status_code == 401
    operations = {
        op["operationId"]: (method.upper(), path)
        for path, ops in schema["paths"].items()
        for method, op in ops.items()
    }
    assert operations == {
        "check_text": ("POST", "/api/v1/check"),
        "add_works": ("POST", "/api/v1/works"),
        "list_works": ("GET", "/api/v1/works"),
        "get_work": ("GET", "/api/v1/works/{master_id}"),
        "edit_work": ("PATCH", "/api/v1/works/{master_id}"),
        "delete_work": ("DELETE", "/api/v1/works/{master_id}"),
        "list_findings": ("GET", "/api/v1/findings"),
        "get_finding": ("GET", "/api/v1/findings/{finding_id}"),
        "update_finding": ("PATCH", "/api/v1/findings/{finding_id}"),
        "draft_notice": ("GET", "/api/v1/findings/{finding_id}/notice-draft"),
        "record_notice": ("POST", "/api/v1/findings/{finding_id}/notices"),
        "list_notices": ("GET", "/api/v1/findings/{finding_id}/notices"),
        "get_evidence_report": ("GET", "/api/v1/findings/{finding_id}/evidence.pdf"),
        "get_finding_timeline": ("GET", "/api/v1/findings/{finding_id}/timeline"),
        "get_funnel": ("GET", "/api/v1/funnel"),
        "list_subscriptions": ("GET", "/api/v1/subscriptions"),
        "create_subscription": ("POST", "/api/v1/subscriptions"),
        "delete_subscription": ("DELETE", "/api/v1/subscriptions/{name}"),
        "get_deliveries": ("GET", "/api/v1/deliveries"),
        "list_campaigns": ("GET", "/api/v1/campaigns"),
        "list_runs": ("GET", "/api/v1/campaigns/{name}/runs"),
        "run_campaign": ("POST", "/api/v1/campaigns/{name}/runs"),
        "stop_campaign": ("POST", "/api/v1/campaigns/{name}/stop"),
        "get_health": ("GET", "/api/v1/health"),
    }
    assert schema["components"]["securitySchemes"]["token"]["scheme"] == "bearer"
    schemas = schema["components"]["schemas"]
    # Statuses and states are named enums; so are the sort orders, members named too.
    assert schemas["FindingOut"]["properties"]["status"] == {
        "$ref": "#/components/schemas/FindingStatus"
    }
    assert schemas["RunOut"]["properties"]["state"] == {"$ref": "#/components/schemas/RunState"}
    assert (
        "cancelled" in schemas["RunState"]["enum"]
        and "confirmed" in schemas["FindingStatus"]["enum"]
    )
    sort = schemas["FindingSort"]
    assert dict(zip(sort["x-enum-varnames"], sort["enum"], strict=True))["score_desc"] == "-score"
    # Every request body comes with an example that the operation accepts as it is.
    bodies = [
        op["requestBody"]["content"]["application/json"]["schema"]["$ref"].split("/")[-1]
        for ops in schema["paths"].values()
        for op in ops.values()
        if "requestBody" in op
    ]
    assert sorted(bodies) == [
        "CheckIn", "NoticeIn", "StatusIn", "SubscriptionIn", "WorkEditIn", "WorksIn"
    ]  # fmt: skip
    assert all(schemas[name]["examples"] for name in bodies)
    assert all(schemas[name]["examples"] for name in ("FindingOut", "RunOut", "WorkOut"))
    page = http.get("/api/v1/docs", headers=auth["viewer"])
    assert "<code>list_findings</code>" in page.text and "FindingStatus" in page.text


def test_check_finds_the_copied_work_and_refuses_bad_payloads(api):
    http, _, auth = api
    text = "转载：" + ZH[2]
    assert http.post("/api/v1/check", json={"text": text}).status_code == 401
    found = http.post("/api/v1/check", json={"text": text}, headers=auth["viewer"])
    assert found.status_code == 200
    match = found.json()["matches"][0]
    assert match["work_id"] == "news-002" and match["work_coverage"] > 0.9
    passage = match["passages"][0]
    assert passage["text"] == text[passage["text_start"] : passage["text_end"]]
    assert http.post("/api/v1/check", json={"text": ZH[9]}, headers=auth["viewer"]).json() == {
        "matches": []
    }
    for bad in ({}, {"text": ""}, {"text": 5}, {"text": "x", "lang": "zh"}):
        response = http.post("/api/v1/check", json=bad, headers=auth["viewer"])
        assert response.status_code == 422, bad
        assert isinstance(response.json()["detail"], list) and response.json()["detail"]
    not_json = http.post(
        "/api/v1/check",
        content=b"{oops",
        headers={**auth["viewer"], "Content-Type": "application/json"},
    )
    assert not_json.status_code == 422


def test_works_are_added_by_reviewers_and_too_short_texts_refused(api, ctx):
    http, _, auth = api
    good = {"id": "api-1", "title": "接口", "text": ZH[10]}
    body = {"works": [good, {"text": "太短了，只有几个字"}]}
    # The document states the minimum (a pattern); a batch with a text under it goes
    # nowhere, and the refusal names the item.
    refused = http.post("/api/v1/works", json=body, headers=auth["reviewer"])
    assert refused.status_code == 422
    assert refused.json()["detail"][0].startswith("works.1.text: Value error, too few letters")
    assert ctx.db.masters.find_one({"external_id": "api-1"}) is None
    body = {"works": [good]}
    assert http.post("/api/v1/works", json=body, headers=auth["viewer"]).status_code == 403
    added = http.post("/api/v1/works", json=body, headers=auth["reviewer"])
    assert added.status_code == 201
    result = added.json()
    master_id = result["results"][0]["master_id"]
    assert result == {
        "results": [{"work_id": "api-1", "master_id": master_id, "status": "added", "detail": ""}],
        "errors": [],
    }
    assert ctx.db.masters.find_one({"external_id": "api-1"})["source"] == "api"
    again = http.post("/api/v1/works", json=body, headers=auth["reviewer"]).json()
    assert again["results"][0]["status"] == "unchanged"
    # Twenty ASCII letters are enough, whatever surrounds them.
    letters = {"works": [{"id": "api-2", "text": "1. " + " ".join("abcdefghijklmnopqrst")}]}
    assert http.post("/api/v1/works", json=letters, headers=auth["admin"]).status_code == 201
    for bad in ({"works": []}, {"works": [{"title": "no text"}]}, {"work": []}):
        assert http.post("/api/v1/works", json=bad, headers=auth["admin"]).status_code == 422


def test_works_are_registered_in_batches_with_each_problem_named(ctx, monkeypatch):
    # Batches of two, so a work and its twin, and a bad item, fall in different batches.
    monkeypatch.setattr(works_routes, "REGISTER_BATCH", 2)
    copies = MAX_MASTER_CHARS // sum(map(len, ZH)) + 2  # numbered: no two chapters alike
    long_text = "\n\n".join(f"{n}. {text}" for n in range(copies) for text in ZH)
    assert len(long_text) > MAX_MASTER_CHARS
    items = [
        Loaded("a.txt", Work(text=ZH[11], external_id="reg-1", title="甲")),
        LoadError("b.bin", "not text"),
        Loaded("c.txt", Work(text="太短了", external_id="reg-3")),
        Loaded("d.txt", Work(text=ZH[11], external_id="reg-4")),
        Loaded("e.txt", Work(text=long_text, external_id="reg-5")),
    ]
    intake = register(ctx, items)
    statuses = [(result.external_id, result.status) for result, _ in intake.results]
    assert statuses[:2] == [("reg-1", "added"), ("reg-4", "duplicate")]
    assert {status for _, status in statuses[2:]} == {"added"} and len(statuses) > 3
    assert intake.results[0][1] == "甲"
    assert intake.errors[0] == "b.bin: not text"
    assert intake.errors[1].startswith("c.txt: ") and "too short to fingerprint" in intake.errors[1]
    assert len(intake.errors) == 2
    assert intake.notes[0].startswith(f"e.txt: {len(long_text):,} characters")
    assert ctx.db.masters.count_documents({"external_id": {"$in": ["reg-1", "reg-3"]}}) == 1


def test_findings_are_listed_filtered_and_paginated(api, ctx):
    http, _, auth = api
    assert http.get("/api/v1/findings").status_code == 401
    everything = http.get("/api/v1/findings?per_page=200", headers=auth["viewer"]).json()
    assert everything["total"] == ctx.db.findings.count_documents({})
    first = everything["items"][0]
    assert set(first) >= {"id", "status", "work_id", "url", "domain", "score", "first_seen"}
    assert datetime.fromisoformat(first["first_seen"]).utcoffset() == timedelta(0)
    confirmed = http.get("/api/v1/findings?status=confirmed", headers=auth["viewer"]).json()
    assert confirmed["total"] == ctx.db.findings.count_documents({"status": "confirmed"})
    assert {f["status"] for f in confirmed["items"]} == {"confirmed"}
    by_work = http.get("/api/v1/findings?work=news-000&min_score=0.5", headers=auth["viewer"])
    assert all(f["work_id"] == "news-000" and f["score"] >= 0.5 for f in by_work.json()["items"])
    noticed = http.get("/api/v1/findings?notice=awaiting", headers=auth["viewer"]).json()
    assert noticed["total"] == ctx.db.findings.count_documents({"status": "notice_sent"}) > 0
    deadline = datetime.fromisoformat(noticed["items"][0]["notice_deadline"])
    assert deadline > datetime.now(UTC) and noticed["items"][0]["notice_check"] is None
    page = http.get("/api/v1/findings?per_page=2&page=2&sort=score", headers=auth["viewer"])
    assert page.json()["page"] == 2 and len(page.json()["items"]) == 2
    for query, status in (
        ("status=bogus", 422),  # enums and formats the document states
        ("sort=password", 422),
        ("notice=late", 422),
        ("since=yesterday", 422),
        ("page_id=nothex", 400),  # a filter the pages offer, not in the document
        ("per_page=1000", 422),
        ("min_score=abc", 422),
    ):
        response = http.get(f"/api/v1/findings?{query}", headers=auth["viewer"])
        assert response.status_code == status, query
        assert response.json()["detail"]


def test_one_finding_and_its_status_changes(api, ctx):
    http, seeded, auth = api
    finding_id = str(seeded.findings[4])
    got = http.get(f"/api/v1/findings/{finding_id}", headers=auth["viewer"])
    assert got.status_code == 200 and got.json()["history"][0]["status"] == "new"
    assert http.get("/api/v1/findings/nope", headers=auth["viewer"]).status_code == 404
    assert http.get(f"/api/v1/findings/{ObjectId()}", headers=auth["viewer"]).status_code == 404

    url = f"/api/v1/findings/{seeded.findings[5]}"  # dismissed by the seed
    change = {"status": "new", "note": "再看一下"}
    assert http.patch(url, json=change).status_code == 401
    assert http.patch(url, json=change, headers=auth["viewer"]).status_code == 403
    reopened = http.patch(url, json=change, headers=auth["reviewer"])
    assert reopened.status_code == 200 and reopened.json()["status"] == "new"
    assert reopened.json()["history"][-1] == {
        **reopened.json()["history"][-1],
        "status": "new",
        "by": "rui",
        "note": "再看一下",
    }
    refused = http.patch(url, json={"status": "removed"}, headers=auth["reviewer"])
    assert refused.status_code == 409 and "can become confirmed, dismissed" in refused.text
    for bad in ({"status": "licensed"}, {"status": "gone"}, {}, {"status": "new", "x": 1}):
        assert http.patch(url, json=bad, headers=auth["reviewer"]).status_code == 422, bad
    missing = http.patch(f"/api/v1/findings/{ObjectId()}", json=change, headers=auth["admin"])
    assert missing.status_code == 404


def test_campaigns_are_listed_and_admins_trigger_runs(api, ctx, monkeypatch):
    http, _, auth = api
    listed = http.get("/api/v1/campaigns", headers=auth["viewer"]).json()
    assert [c["name"] for c in listed] == ["pirate-sites"]
    assert listed[0]["schedule"] == "0 3 * * *"
    assert listed[0]["last_run"]["figures"]["fetched"] == 128
    runs = http.get("/api/v1/campaigns/pirate-sites/runs", headers=auth["viewer"]).json()
    assert runs[0]["state"] == "finished"
    assert http.get("/api/v1/campaigns/nope/runs", headers=auth["viewer"]).status_code == 404

    launched = []
    monkeypatch.setattr(
        "tracker.campaigns.dispatch.launch_crawl",
        lambda ctx, name, run_id: launched.append(run_id),
    )
    url = "/api/v1/campaigns/pirate-sites/runs"
    assert http.post(url).status_code == 401
    assert http.post(url, headers=auth["reviewer"]).status_code == 403
    started = http.post(url, headers=auth["admin"])
    assert started.status_code == 202 and started.json()["run_id"] == str(launched[0])
    busy = http.post(url, headers=auth["admin"])
    assert busy.status_code == 409 and "already running" in busy.json()["detail"]
    unknown = http.post("/api/v1/campaigns/nope/runs", headers=auth["admin"])
    assert unknown.status_code == 404


def test_works_are_listed_read_edited_and_deleted_by_role(api, ctx):
    http, _, auth = api
    listed = http.get("/api/v1/works?per_page=3", headers=auth["viewer"]).json()
    assert listed["total"] == 8 and listed["pages"] == 3 and len(listed["items"]) == 3
    assert listed["items"][0] == {**listed["items"][0], "work_id": "news-007", "lang": "zh"}
    found = http.get("/api/v1/works?q=news-002", headers=auth["viewer"]).json()
    assert [w["work_id"] for w in found["items"]] == ["news-002"]
    master_id = found["items"][0]["master_id"]
    url = f"/api/v1/works/{master_id}"
    work = http.get(url, headers=auth["viewer"]).json()
    assert work["text"] == ZH[2] and work["chars"] == len(ZH[2]) and work["findings"] > 0
    assert http.get("/api/v1/works/99999", headers=auth["viewer"]).status_code == 404

    assert http.patch(url, json={"title": "新标题"}, headers=auth["viewer"]).status_code == 403
    edited = http.patch(url, json={"title": "新标题", "author": ""}, headers=auth["reviewer"])
    assert edited.status_code == 200
    assert edited.json()["work"] == {**edited.json()["work"], "title": "新标题", "author": None}
    assert edited.json()["text_status"] is None
    assert ctx.db.findings.find_one({"master_id": master_id})["master_title"] == "新标题"
    new_text = ZH[2] + "\n本文有补充。"
    changed = http.patch(url, json={"text": new_text}, headers=auth["reviewer"]).json()
    assert changed["text_status"] == "updated" and changed["rescanned"] > 0
    assert http.get(url, headers=auth["viewer"]).json()["text"] == new_text
    too_short = http.patch(url, json={"text": "太短"}, headers=auth["reviewer"])
    assert too_short.status_code == 422 and "too few letters" in too_short.json()["detail"][0]

    fate = {"deleted": ctx.db.findings.count_documents({"master_id": master_id})}
    assert http.delete(url, headers=auth["reviewer"]).status_code == 403  # admins only
    deleted = http.delete(url, headers=auth["admin"])
    assert deleted.status_code == 200 and deleted.json()["work_id"] == "news-002"
    assert sum(deleted.json()[k] for k in ("findings_deleted", "findings_kept")) == fate["deleted"]
    assert http.get(url, headers=auth["viewer"]).status_code == 404
    assert http.delete(url, headers=auth["admin"]).status_code == 404


def test_notices_are_drafted_recorded_and_listed(api, ctx):
    http, seeded, auth = api
    confirmed, new = seeded.findings[2], seeded.xss
    draft_url = f"/api/v1/findings/{confirmed}/notice-draft"
    assert http.get(draft_url, headers=auth["viewer"]).status_code == 403
    draft = http.get(f"{draft_url}?lang=en", headers=auth["reviewer"]).json()
    assert draft["subject"].startswith("Copyright infringement notice")
    assert "示例报业集团" in draft["body"] and draft["passages"] >= 1
    assert date.fromisoformat(draft["deadline"]) > datetime.now(UTC).date()
    assert http.get(f"{draft_url}?lang=fr", headers=auth["reviewer"]).status_code == 422
    unconfirmed = http.get(f"/api/v1/findings/{new}/notice-draft", headers=auth["reviewer"])
    assert unconfirmed.status_code == 409 and "confirmed" in unconfirmed.json()["detail"]
    assert ctx.db.notices.count_documents({"finding_id": confirmed}) == 0  # a draft records nothing

    notices_url = f"/api/v1/findings/{confirmed}/notices"
    sent = {"lang": "en", "subject": draft["subject"], "body": draft["body"],
            "recipient": "abuse@pirate.example", "deadline": "2099-01-30"}  # fmt: skip
    assert http.post(notices_url, json=sent, headers=auth["viewer"]).status_code == 403
    recorded = http.post(notices_url, json=sent, headers=auth["reviewer"])
    assert recorded.status_code == 201
    notice = recorded.json()
    assert notice == {**notice, "by": "rui", "recipient": "abuse@pirate.example", "lang": "en"}
    assert notice["sha256"] == hashlib.sha256(draft["body"].strip().encode()).hexdigest()
    assert notice["deadline"].startswith("2099-01-30T23:59:59")
    finding = http.get(f"/api/v1/findings/{confirmed}", headers=auth["viewer"]).json()
    assert finding["status"] == "notice_sent"
    listed = http.get(notices_url, headers=auth["viewer"]).json()
    assert [n["id"] for n in listed] == [notice["id"]]
    again = http.post(notices_url, json=sent, headers=auth["reviewer"])
    assert again.status_code == 201  # a reminder: the newest comes first
    assert [n["id"] for n in http.get(notices_url, headers=auth["viewer"]).json()][1] == notice[
        "id"
    ]
    past = http.post(notices_url, json={**sent, "deadline": "2001-01-01"}, headers=auth["reviewer"])
    assert past.status_code == 409 and "has passed" in past.json()["detail"]
    for bad in ({**sent, "recipient": " "}, {**sent, "lang": "de"}, {**sent, "to": "x"}):
        assert http.post(notices_url, json=bad, headers=auth["reviewer"]).status_code == 422
    assert (
        http.get(f"/api/v1/findings/{ObjectId()}/notices", headers=auth["viewer"]).status_code
        == 404
    )


def test_subscriptions_are_listed_created_and_deleted_by_role_secret_unshown(api, ctx):
    http, _, auth = api
    url = "/api/v1/subscriptions"
    to_hook = {"channel": "webhook", "url": "http://127.0.0.1:9/in", "secret": "s3cret"}
    hook = {"name": "press hook", "when": ["confirmed", "run_failed"], "every": "hour",
            "to": to_hook}  # fmt: skip
    assert http.post(url, json=hook, headers=auth["viewer"]).status_code == 403
    made = http.post(url, json=hook, headers=auth["reviewer"])
    assert made.status_code == 201
    shown = made.json()
    assert shown["channel"] == "webhook" and shown["secret_set"] is True and shown["by"] == "rui"
    assert shown["when"] == ["confirmed", "run_failed"] and shown["every"] == "hour"
    assert "s3cret" not in made.text
    assert ctx.db.subscriptions.find_one({"name": "press hook"})["secret"] == "s3cret"
    mail = {"name": "team", "to": {"channel": "email", "emails": ["a@press.example"]},
            "lang": "zh", "domain": "Pirate.Example", "min_score": 0.5}  # fmt: skip
    assert http.post(url, json=mail, headers=auth["reviewer"]).status_code == 201
    taken = http.post(url, json=mail, headers=auth["admin"])
    assert taken.status_code == 409 and "exists" in taken.json()["detail"]
    listed = http.get(url, headers=auth["viewer"])
    assert [s["name"] for s in listed.json()] == ["press hook", "team"]
    assert listed.json()[1]["domain"] == "pirate.example" and listed.json()[1]["when"] == ["new"]
    assert "s3cret" not in listed.text and "secret" not in listed.json()[0]
    for bad in (
        {**hook, "to": {"channel": "webhook", "url": "http://127.0.0.1:9/in"}},  # no secret
        {**hook, "to": {"channel": "webhook", "url": "ftp://x", "secret": "s"}},
        {**mail, "to": {"channel": "email", "emails": []}},
        {**mail, "to": {"channel": "email", "emails": ["not-an-address"]}},
        {**mail, "name": "bad/name"},
        {**mail, "when": ["sometimes"]},
        {**mail, "min_score": 50},
    ):
        assert http.post(url, json=bad, headers=auth["reviewer"]).status_code == 422, bad
    assert http.delete(f"{url}/team", headers=auth["viewer"]).status_code == 403
    gone = http.delete(f"{url}/team", headers=auth["reviewer"])
    assert gone.status_code == 200 and gone.json()["emails"] == ["a@press.example"]
    assert http.delete(f"{url}/team", headers=auth["reviewer"]).status_code == 404
    assert [s["name"] for s in http.get(url, headers=auth["viewer"]).json()] == ["press hook"]


def test_the_delivery_log_comes_in_pages_newest_first(api, ctx):
    http, seeded, auth = api
    at = datetime(2024, 6, 10, 9, 0, tzinfo=UTC)
    for i in range(5):
        ctx.db.deliveries.insert_one({
            "subscription_id": ObjectId(), "subscription": "team" if i % 2 else "hook",
            "channel": "email", "to": ["a@press.example"], "lang": "en",
            "subject": f"alert {i}", "text": "…", "body": "{}", "secret": "never",
            "finding_ids": [seeded.findings[0]], "run_ids": [], "events": {"new": 1},
            "state": "delivered" if i < 4 else "failed", "created_at": at + timedelta(hours=i),
            "attempts": [{"at": at + timedelta(hours=i), "ok": i < 4, "answer": "250 Ok"}],
            "answer": "250 Ok",
        })  # fmt: skip
    url = "/api/v1/deliveries"
    first = http.get(f"{url}?per_page=2", headers=auth["viewer"]).json()
    assert first["total"] == 5 and [d["subject"] for d in first["items"]] == ["alert 4", "alert 3"]
    third = http.get(f"{url}?per_page=2&page=3", headers=auth["viewer"]).json()
    assert [d["subject"] for d in third["items"]] == ["alert 0"]
    assert third["items"][0]["finding_ids"] == [str(seeded.findings[0])]
    assert third["items"][0]["attempts"][0]["answer"] == "250 Ok"
    team = http.get(f"{url}?subscription=team", headers=auth["viewer"]).json()
    assert [d["subject"] for d in team["items"]] == ["alert 3", "alert 1"]
    failed = http.get(f"{url}?state=failed", headers=auth["viewer"]).json()
    assert [d["subject"] for d in failed["items"]] == ["alert 4"]
    assert http.get(f"{url}?state=lost", headers=auth["viewer"]).status_code == 422
    assert "never" not in http.get(url, headers=auth["viewer"]).text


def test_the_evidence_report_comes_as_a_pdf(api):
    http, seeded, auth = api
    url = f"/api/v1/findings/{seeded.findings[0]}/evidence.pdf"
    assert http.get(url).status_code == 401
    report = http.get(url, headers=auth["viewer"])
    assert report.status_code == 200 and report.headers["content-type"] == "application/pdf"
    assert report.content.startswith(b"%PDF-")
    missing = http.get(f"/api/v1/findings/{ObjectId()}/evidence.pdf", headers=auth["viewer"])
    assert missing.status_code == 404 and missing.json()["detail"].startswith("no finding")


def test_admins_stop_a_run_recorded_cancelled_with_who_and_when(api, ctx, monkeypatch):
    http, _, auth = api
    monkeypatch.setattr("tracker.campaigns.dispatch.launch_crawl", lambda ctx, name, run_id: None)
    stop = "/api/v1/campaigns/pirate-sites/stop"
    nothing = http.post(stop, headers=auth["admin"])
    assert nothing.status_code == 409 and "no run under way" in nothing.json()["detail"]
    run_id = http.post("/api/v1/campaigns/pirate-sites/runs", headers=auth["admin"]).json()[
        "run_id"
    ]
    assert http.post(stop, headers=auth["reviewer"]).status_code == 403
    stopped = http.post(stop, headers=auth["admin"])
    assert stopped.status_code == 200
    run = stopped.json()
    assert run["id"] == run_id and run["state"] == "cancelled"
    assert run["cancelled"]["by"] == "ada"
    at = datetime.fromisoformat(run["cancelled"]["at"])
    assert abs(at - datetime.now(UTC)) < timedelta(minutes=5)
    runs = http.get("/api/v1/campaigns/pirate-sites/runs", headers=auth["viewer"]).json()
    assert runs[0]["state"] == "cancelled" and runs[0]["cancelled"]["by"] == "ada"
    # The campaign is free again at once.
    assert (
        http.post("/api/v1/campaigns/pirate-sites/runs", headers=auth["admin"]).status_code == 202
    )
    assert http.post("/api/v1/campaigns/nope/stop", headers=auth["admin"]).status_code == 404


def test_token_rights_follow_their_user_and_revocation(api, ctx):
    http, _, _ = api
    read_only = create_token(ctx, "rui", "dashboards", role="viewer")
    header = {"Authorization": f"Bearer {read_only}"}
    assert http.get("/api/v1/findings", headers=header).status_code == 200
    refused = http.post("/api/v1/works", json={"works": [{"text": ZH[11]}]}, headers=header)
    assert refused.status_code == 403
    revoke_token(ctx, read_only.split("_")[1])
    assert http.get("/api/v1/findings", headers=header).status_code == 401
    for bad in ("Bearer", "Bearer nonsense", "Basic cnVpOnB3", read_only.replace("ct_", "xx_")):
        assert http.get("/api/v1/findings", headers={"Authorization": bad}).status_code == 401


def test_a_browser_session_may_call_the_api_with_its_csrf_header(api):
    http, seeded, _ = api
    token = login(http, "rui")
    url = f"/api/v1/findings/{seeded.xss}"
    assert http.get(url).status_code == 200  # reads need no CSRF token
    assert http.patch(url, json={"status": "confirmed"}).status_code == 403
    ok = http.patch(url, json={"status": "confirmed"}, headers={"X-CSRF-Token": token})
    assert ok.status_code == 200


def test_healthz_follows_the_servers_and_tokens_get_the_full_report(own: Settings) -> None:
    ctx = open_ready(own)
    try:
        for name, role in (("ada", "admin"), ("vic", "viewer")):
            add_user(ctx, name, PASSWORD, role)
        admin = {"Authorization": f"Bearer {create_token(ctx, 'ada', 'monitoring')}"}
        viewer = {"Authorization": f"Bearer {create_token(ctx, 'vic', 'dashboards')}"}
        http = client(ctx)

        up = http.get("/healthz")
        assert up.status_code == 200 and up.json() == {"ok": True}
        assert up.headers["cache-control"] == "no-store"
        assert http.get("/api/v1/health").status_code == 401
        # Monitoring needs no admin: any token reads the report.
        assert http.get("/api/v1/health", headers=viewer).json()["ok"] is True
        report = http.get("/api/v1/health", headers=admin).json()
        assert report["ok"] is True and report["last_scan_at"] is None
        assert {name: s["ok"] for name, s in report["servers"].items()} == {
            "mongo": True,
            "redis": True,
        }
        assert report["queues"] == dict.fromkeys(QUEUES, 0) and report["in_progress"] == 0
        assert report["workers"] == []
        assert report["problems"] == ["no worker answered a ping within 1 s"]

        [valkey] = [s for s in server_status(own.data_dir) if s.name == VALKEY]
        os.kill(valkey.pid, signal.SIGTERM)
        wait_until(
            lambda: not any(s.alive for s in server_status(own.data_dir) if s.name == VALKEY),
            20,
            "valkey exit",
        )

        start = time.monotonic()
        down = http.get("/healthz")
        assert time.monotonic() - start < 3
        # A load balancer takes this admin out; nobody unauthenticated learns why.
        assert down.status_code == 503 and down.json() == {"ok": False}
        assert str(valkey.port) not in down.text and "redis" not in down.text
        report = http.get("/api/v1/health", headers=admin).json()  # tokens live in MongoDB
        assert report["ok"] is False
        assert report["servers"]["mongo"]["ok"] is True
        assert report["servers"]["redis"]["ok"] is False
        assert [p.split(":")[0] for p in report["problems"]] == ["redis does not answer"]
        assert report["queues"] is None and report["workers"] is None
    finally:
        ctx.close()


def test_findings_by_size_copies_by_default(api, ctx):
    """``size``: copies by default, quotation-sized findings or any on asking."""
    http, _, auth = api
    ctx.db.findings.update_one({}, {"$set": {"quotation": True}})
    total = ctx.db.findings.count_documents({})
    get = lambda query: http.get(f"/api/v1/findings?{query}", headers=auth["viewer"])  # noqa: E731
    assert get("per_page=200").json()["total"] == total - 1
    quotations = get("size=quotations").json()
    assert quotations["total"] == 1 and quotations["items"][0]["quotation"] is True
    assert get("size=any").json()["total"] == total
    assert get("size=huge").status_code == 422
