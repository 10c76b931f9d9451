"""Long search input is refused with its limit, not a 500.

The attack: `/findings?q=<5,000 characters>`, `/findings?domain=…` and
`/api/v1/findings?domain=…` answered 500 (the embedded MongoDB takes at most 1,000
characters of ``$regex`` pattern), and the CSV export with such a domain was cut off
mid-download. The longest search and domain a filter takes are also the worst to escape
(every character a regex one): they still answer.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.admin_seed import PASSWORD, ZH, client, login, scanned_page
from tracker.accounts.users import add_user
from tracker.context import Context
from tracker.findings.queries import MAX_DOMAIN_CHARS, MAX_SEARCH_CHARS
from tracker.masters.library import Work, add_work

pytestmark = pytest.mark.security

LONG = "盗版" * 2500  # 5,000 characters


@pytest.fixture
def web(ctx: Context) -> TestClient:
    add_work(ctx, Work(text=ZH[0], title="新闻", external_id="news-1"))
    assert scanned_page(ctx, "http://www.pirate.example/1", "转载", ZH[0])  # one finding
    add_user(ctx, "vic", PASSWORD, "viewer")
    http = client(ctx)
    login(http, "vic")
    return http


@pytest.mark.parametrize("path", ["/findings", "/exports/findings.csv"])
@pytest.mark.parametrize(("name", "limit"), [("q", MAX_SEARCH_CHARS), ("domain", MAX_DOMAIN_CHARS)])
def test_the_pages_refuse_a_long_search_saying_the_limit(
    web: TestClient, path: str, name: str, limit: int
) -> None:
    answer = web.get(path, params={name: LONG})
    assert answer.status_code == 400, answer.text[:300]
    assert f"{name} has 5,000 characters: give at most {limit}" in answer.text
    assert "text/html" in answer.headers["content-type"]  # an error page, not a cut CSV


def test_the_api_refuses_a_long_search_with_422(web: TestClient) -> None:
    for name, limit in (("q", MAX_SEARCH_CHARS), ("domain", MAX_DOMAIN_CHARS)):
        answer = web.get("/api/v1/findings", params={name: LONG})
        assert answer.status_code == 422, answer.text
        assert any(f"at most {limit} characters" in line for line in answer.json()["detail"])


@pytest.mark.parametrize("path", ["/findings", "/exports/findings.csv", "/api/v1/findings"])
def test_the_longest_searches_still_answer(web: TestClient, path: str) -> None:
    for name, limit in (("q", MAX_SEARCH_CHARS), ("domain", MAX_DOMAIN_CHARS)):
        answer = web.get(path, params={name: ".*[" * (limit // 3)})  # all escaped: twice as long
        assert answer.status_code == 200, answer.text[:300]
    answer = web.get("/works", params={"q": ".*[" * (MAX_SEARCH_CHARS // 3)})
    assert answer.status_code == 200
