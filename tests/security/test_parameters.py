"""Out-of-range and odd parameters answer 4xx, never 500: huge integer
ids and pages, and non-ASCII digits as a work key (which also cut the CSV export off after
its header); dates at the calendar's ends are answered."""

from __future__ import annotations

import pytest

from tests.admin_seed import client, login, seed

pytestmark = pytest.mark.security

HUGE = "99999999999999999999999"


@pytest.fixture
def web(ctx):
    """An admin signed in to a seeded installation."""
    seed(ctx)
    http = client(ctx)
    login(http, "ada")
    return http


@pytest.mark.parametrize(
    "url",
    [
        f"/works/{HUGE}",
        "/works/-1",
        f"/works?page={HUGE}",
        f"/findings?page={HUGE}",
        f"/api/v1/findings?page={HUGE}",
    ],
)
def test_out_of_range_parameters_are_refused(web, url: str) -> None:
    response = web.get(url, follow_redirects=False)
    assert 400 <= response.status_code < 500, (url, response.status_code)


@pytest.mark.parametrize(
    ("query", "found"),
    [("until=9999-12-31", True), ("since=0001-01-01", True), ("since=9999-12-31", False),
     ("until=0001-01-01", False)],
)  # fmt: skip
def test_dates_at_the_calendars_ends_are_answered(web, query: str, found: bool) -> None:
    listed = web.get(f"/api/v1/findings?{query}").json()
    assert (listed["total"] > 0) == found
    assert web.get(f"/findings?{query}").status_code == 200


def test_a_work_key_of_non_ascii_digits_matches_nothing(web) -> None:
    assert web.get("/findings?work=²").status_code == 200
    export = web.get("/exports/findings.csv?work=²")
    assert export.status_code == 200
    assert export.text.splitlines()[1:] == []  # the header, no rows, no cut-off
    assert web.get(f"/findings?work={HUGE}").status_code == 200
