"""A served admin answers at once after it starts: its findings catalogue loads in the
background, and until it is loaded the pages that need it say the findings are being
prepared (and refresh by themselves) instead of holding the request for the whole load."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

from fastapi.testclient import TestClient

from admin.app import create_app
from tests.admin_seed import login
from tests.many_findings import seed_findings
from tracker.accounts.users import add_user, create_token
from tracker.context import Context
from tracker.findings import Catalogue, MongoFindings


class HeldLoad(MongoFindings):
    """The installation's findings, whose first full read waits until ``go`` is set (a
    load that takes long, without an installation that large)."""

    def __init__(self, ctx: Context, go: threading.Event, fail: bool = False) -> None:
        super().__init__(lambda: ctx.db)
        self.go, self.fail = go, fail

    def everything(self) -> Iterable[dict[str, Any]]:
        assert self.go.wait(30)
        if self.fail:
            self.fail = False
            raise ConnectionError("the database went away")
        return super().everything()


def _served(ctx: Context, source: MongoFindings) -> TestClient:
    """The admin as a server runs it (its start-up included), on ``source``."""
    app = create_app(ctx)
    app.state.catalogue = Catalogue(source)
    return TestClient(app, base_url="http://127.0.0.1")


def test_the_first_pages_say_the_findings_are_being_prepared_until_they_are(ctx):
    ids = seed_findings(ctx, 40, 4, lambda n: f"site{n % 3}.example")
    add_user(ctx, "rui", "a long enough password", "reviewer")
    token = create_token(ctx, "rui", "cold start")
    go = threading.Event()
    with _served(ctx, HeldLoad(ctx, go)) as http:
        login(http, "rui", "a long enough password")
        start = time.perf_counter()
        page = http.get("/findings")
        took = time.perf_counter() - start
        assert page.status_code == 503 and took < 5
        assert page.headers["Retry-After"] == "2"
        assert "The findings list is being prepared" in page.text
        assert '<meta http-equiv="refresh" content="2">' in page.text
        assert http.get("/").status_code == 503  # the dashboard counts from it too
        api = http.get("/api/v1/findings", headers={"Authorization": f"Bearer {token}"})
        assert api.status_code == 503 and "being prepared" in api.json()["detail"]
        assert http.get("/account").status_code == 200  # pages without it answer as ever

        go.set()
        deadline = time.monotonic() + 30
        while (page := http.get("/findings")).status_code == 503:
            assert time.monotonic() < deadline, "the catalogue never loaded"
            time.sleep(0.1)
        assert page.status_code == 200
        assert f"/findings/{ids[0]}" in page.text or f"/findings/{ids[-1]}" in page.text
        assert http.get("/").status_code == 200


def test_a_background_load_that_fails_is_done_again_by_the_next_request(ctx):
    seed_findings(ctx, 10, 2, lambda n: "site.example")
    add_user(ctx, "rui", "a long enough password", "reviewer")
    go = threading.Event()
    source = HeldLoad(ctx, go, fail=True)
    with _served(ctx, source) as http:
        login(http, "rui", "a long enough password")
        go.set()
        deadline = time.monotonic() + 30
        while http.app.state.catalogue.preparing():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        page = http.get("/findings")
        assert page.status_code == 200 and 'href="/findings/' in page.text
