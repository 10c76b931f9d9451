"""Trusted time-stamps of captures from a real RFC 3161 authority on loopback (OpenSSL's
``ts -reply``), checked with ``openssl ts -verify``; an authority that is down leaves the
capture "not yet time-stamped" until a later sweep."""

from __future__ import annotations

import hashlib
import io
import re
from datetime import timedelta
from pathlib import Path

import pytest
from pypdf import PdfReader

from tests.admin_seed import PASSWORD, client, login
from tests.copies import ZH
from tests.evidence.authority import make_ca, verify_with_openssl
from tests.processes import wait_until, worker_process
from tracker.accounts.users import add_user
from tracker.core.config import Settings
from tracker.core.times import now
from tracker.evidence.timestamps import stamp_due_captures
from tracker.findings import capture as stored_capture
from tracker.findings import evidence
from tracker.masters.generation import open_ready
from tracker.masters.library import Work, add_work
from tracker.scanning.pages import PageInput, scan_page, store_page

TEXT = ZH[1]


def stored(ctx, url: str, raw: bytes, text: str = TEXT):
    page_id, _ = store_page(ctx, PageInput(url=url, text=text, raw=raw, status=200))
    return page_id


def token_file(ctx, page_id, directory: Path) -> tuple[Path, Path]:
    """The page's capture and its stored token, written out as a verifier gets them."""
    page = ctx.db.pages.find_one({"_id": page_id})
    capture = directory / f"{page_id}.html"
    capture.write_bytes(stored_capture(ctx, page_id))
    token = directory / f"{page_id}.html.tsr"
    token.write_bytes(bytes(page["timestamp"]["token"]))
    return capture, token


def test_every_stored_capture_is_time_stamped_and_openssl_verifies_it(stamping_ctx, tmp_path):
    ctx = stamping_ctx
    raws = [f"<html><body><p>{TEXT}</p><i>{n}</i></body></html>".encode() for n in range(3)]
    pages = [stored(ctx, f"https://copy{n}.example/a.html", raw) for n, raw in enumerate(raws)]
    assert all("timestamp_due" in ctx.db.pages.find_one({"_id": p}) for p in pages)

    assert stamp_due_captures(ctx).stamped == 3
    for page_id, raw in zip(pages, raws, strict=True):
        page = ctx.db.pages.find_one({"_id": page_id})
        assert "timestamp_due" not in page
        assert page["timestamp"]["sha256"] == hashlib.sha256(raw).hexdigest()
        capture, token = token_file(ctx, page_id, tmp_path)
        assert "Verification: OK" in verify_with_openssl(capture, token, ctx.settings.tsa_ca_file)

    # A new capture of a page (its bytes changed) drops the old token and is stamped anew.
    stored(ctx, "https://copy0.example/a.html", raws[0] + b"<!-- ad -->")
    page = ctx.db.pages.find_one({"_id": pages[0]})
    assert "timestamp" not in page and "timestamp_due" in page
    assert stamp_due_captures(ctx).stamped == 1
    capture, token = token_file(ctx, pages[0], tmp_path)
    verify_with_openssl(capture, token, ctx.settings.tsa_ca_file)
    # The same bytes fetched again keep their token: nothing to ask.
    stored(ctx, "https://copy1.example/a.html", raws[1])
    assert "timestamp_due" not in ctx.db.pages.find_one({"_id": pages[1]})


@pytest.fixture
def finding_of(stamping_ctx):
    ctx = stamping_ctx
    add_work(ctx, Work(text=TEXT, external_id="wall-1", title="长城"))
    raw = f"<html><body><article><p>{TEXT}</p></article></body></html>".encode()
    page_id = stored(ctx, "https://copy.example/wall.html", raw)
    scan_page(ctx, page_id)
    add_user(ctx, "vic", PASSWORD, "viewer")
    return ctx, ctx.db.findings.find_one({"page_id": page_id})


def test_an_authority_that_is_down_leaves_the_capture_pending_until_a_later_sweep(
    finding_of, authority
):
    ctx, finding = finding_of
    authority.answering = False
    assert stamp_due_captures(ctx).failed == 1
    page = ctx.db.pages.find_one({"_id": finding["page_id"]})
    assert "HTTP 503" in page["timestamp_error"]["reason"]
    assert page["timestamp_due"] > now() + timedelta(seconds=20)  # asked again later
    assert stamp_due_captures(ctx).failed == 0 and authority.requests == 1  # not yet due

    assert evidence(ctx, finding["_id"]).timestamp.state == "pending"
    web = client(ctx)
    login(web, "vic")
    report = web.get(f"/findings/{finding['_id']}/evidence").text
    assert "Not yet time-stamped." in report and "HTTP 503" in report

    authority.answering = True
    ctx.db.pages.update_one({"_id": page["_id"]}, {"$set": {"timestamp_due": now()}})
    assert stamp_due_captures(ctx).stamped == 1
    stamp = evidence(ctx, finding["_id"]).timestamp
    assert stamp.state == "stamped" and stamp.sha256 == page["raw_sha256"]
    report = web.get(f"/findings/{finding['_id']}/evidence").text
    assert re.search(rf'id="timestamp-sha256">{page["raw_sha256"]}', report)
    assert re.search(rf'id="timestamp-serial">{stamp.serial}<', report)
    assert (
        "O=copytrack tests, CN=Test TSA" in report and '<b class="status-removed">Valid' in report
    )
    assert "openssl ts -verify -data capture.html -in capture.html.tsr" in report
    token = web.get(f"/pages/{page['_id']}/timestamp.tsr")
    assert token.status_code == 200 and token.content == stamp.token
    pdf = web.get(f"/findings/{finding['_id']}/evidence?format=pdf")
    attached = PdfReader(io.BytesIO(pdf.content)).attachments
    tokens = [data for name, data in attached.items() if name.endswith(".html.tsr")]
    assert tokens == [[stamp.token]]  # the token travels with the report and the capture


def test_a_token_the_configured_chain_did_not_issue_is_shown_as_not_verified(
    finding_of, tmp_path, monkeypatch
):
    ctx, finding = finding_of
    stamp_due_captures(ctx)
    other_ca = make_ca(tmp_path / "other-ca", "someone else's CA")
    monkeypatch.setenv("COPYTRACK_TSA_CA_FILE", str(other_ca))
    elsewhere = open_ready(Settings.from_env())
    try:
        web = client(elsewhere)
        login(web, "vic")
        report = web.get(f"/findings/{finding['_id']}/evidence").text
    finally:
        elsewhere.close()
    assert "Not verified</b>: certificate verify error" in report


@pytest.mark.slow
def test_a_worker_time_stamps_captures_a_few_seconds_after_they_are_stored(
    stamping_ctx, authority, tmp_path
):
    ctx = stamping_ctx
    log = tmp_path / "worker.log"
    env = {"COPYTRACK_TSA_URL": authority.url, "COPYTRACK_TSA_CA_FILE": str(authority.ca_file)}
    with worker_process(ctx, log, queues="maintenance", extra_env=env):
        page_id = stored(ctx, "https://copy.example/late.html", b"<html><p>late</p></html>")
        wait_until(
            lambda: ctx.db.pages.find_one({"_id": page_id, "timestamp": {"$exists": True}}),
            60, "time-stamp of the capture", log,
        )  # fmt: skip
    capture, token = token_file(ctx, page_id, tmp_path)
    verify_with_openssl(capture, token, authority.ca_file)
