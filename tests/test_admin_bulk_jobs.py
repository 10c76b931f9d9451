"""A change of very many matching findings runs off the request: the confirmation sends
the reviewer to a page of its progress, which refreshes itself until every finding is
changed (through the workflow, history kept), on real servers."""

from __future__ import annotations

import html
import re
import time

from admin import bulk_jobs
from tests.admin_seed import PASSWORD, client, login
from tests.many_findings import seed_findings
from tracker.accounts.users import add_user


def _hidden(page: str, name: str) -> str:
    found = re.search(rf'<input type="hidden" name="{name}" value="([^"]*)"', page)
    assert found, name
    return html.unescape(found.group(1))


def test_a_change_of_more_findings_than_a_request_holds_runs_with_its_progress(ctx, monkeypatch):
    ids = seed_findings(ctx, 60, 6, lambda n: "hit.example" if n < 45 else "other.example")
    add_user(ctx, "rui", PASSWORD, "reviewer")
    add_user(ctx, "vera", PASSWORD, "viewer")
    monkeypatch.setattr(bulk_jobs, "BATCH", 10)  # several batches, so progress moves
    web = client(ctx)
    web.app.state.bulk_jobs.in_request = 20  # 45 matching: more than a request holds
    token = login(web, "rui")
    listed = web.get("/findings?domain=hit.example").text
    form = {
        "filter": _hidden(listed, "filter"),
        "status": "confirmed",
        "note": "whole site copies",
        "back": _hidden(listed, "back"),
        "csrf_token": token,
        "count": "45",
        "confirm": "true",
    }
    started = web.post("/findings/bulk/all", data=form, follow_redirects=False)
    assert started.status_code == 303
    job_page = started.headers["location"]
    assert job_page.startswith("/findings/bulk/jobs/")

    deadline = time.monotonic() + 60
    while 'id="bulk-job-done"' not in (page := web.get(job_page).text):
        assert "Marking 45 findings as confirmed" in page
        assert '<meta http-equiv="refresh" content="2">' in page
        assert time.monotonic() < deadline, "the change never finished"
        time.sleep(0.1)
    assert "Done: 45 changed, 0 could not change" in page
    assert '<meta http-equiv="refresh"' not in page  # finished: it stops refreshing
    statuses = {f["_id"]: f for f in ctx.db.findings.find({"_id": {"$in": ids}})}
    assert [statuses[i]["status"] for i in ids] == ["confirmed"] * 45 + ["new"] * 15
    last = statuses[ids[0]]["history"][-1]
    assert last["by"] == "rui" and last["note"] == "whole site copies"

    assert web.get("/findings/bulk/jobs/no-such-job").status_code == 404
    viewer = client(ctx)
    login(viewer, "vera")
    assert viewer.get(job_page).status_code == 403  # reviewers' work, not a viewer's


def test_a_change_a_request_holds_is_made_at_once(ctx):
    seed_findings(ctx, 12, 3, lambda n: "hit.example")
    add_user(ctx, "rui", PASSWORD, "reviewer")
    web = client(ctx)
    token = login(web, "rui")
    listed = web.get("/findings?domain=hit.example").text
    done = web.post("/findings/bulk/all", data={
        "filter": _hidden(listed, "filter"), "status": "confirmed",
        "back": _hidden(listed, "back"), "csrf_token": token, "count": "12", "confirm": "true",
    })  # fmt: skip
    assert done.status_code == 200 and "12 finding(s) marked confirmed." in done.text
