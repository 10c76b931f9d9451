"""Operators behind several domains, on a local test web crawled for real (host names on
loopback addresses through the crawl's scripted DNS): the domains grouped as the web was
built, each tie shown with the capture that shows it; a wrong tie split by a reviewer
stays split after a re-crawl, and a new domain of the operator is marked."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.adding import add_all
from tests.admin_seed import PASSWORD, client, login
from tests.copies import ZH
from tests.operators.web import BAIDU_SHARED, OperatorWeb, operator_web
from tests.security.fakes import scripted_crawl
from tracker.accounts.users import add_user
from tracker.campaigns import Campaign, save_campaign
from tracker.masters.library import Work
from tracker.operators.grouping import update_operators

pytestmark = pytest.mark.slow  # two real crawls


@pytest.fixture
def web() -> Iterator[OperatorWeb]:
    with operator_web() as running:
        yield running


def crawl(ctx, web: OperatorWeb) -> None:
    save_campaign(ctx, Campaign.from_dict({"name": "pirates", "seeds": web.seeds(),
                                           "delay": 0, "max_depth": 2}), replace=True)  # fmt: skip
    run = scripted_crawl(ctx, "pirates", web.script(), allow_private=True)
    assert run["state"] == "finished", run


def domains_of(operator: dict) -> set[str]:
    return {d["domain"] for d in operator["domains"]}


def test_domains_grouped_by_shared_signals_and_a_split_kept_across_a_recrawl(crawl_ctx, web):
    ctx = crawl_ctx
    add_all(ctx, [Work(text=ZH[n], external_id=f"work-{n}", title=f"作品{n}") for n in range(6)])
    crawl(ctx, web)
    assert update_operators(ctx) > 0

    [operator] = list(ctx.db.operators.find())
    assert domains_of(operator) == {"alpha.test", "beta.test", "gamma.test", "delta.test"}
    ties = {(t["kind"], t["value"]): {s["domain"] for s in t["shown_by"]} for t in operator["ties"]}
    assert ties[("analytics", f"baidu:{BAIDU_SHARED}")] == {"alpha.test", "beta.test"}
    assert ties[("ip", "127.0.0.3")] == {"beta.test", "gamma.test"}
    assert ties[("redirect", "alpha.test")] == {"alpha.test", "delta.test"}
    assert ties[("favicon", "/static/op7/fav.ico")] == {"alpha.test", "beta.test"}
    template = [domains for (kind, _), domains in ties.items() if kind == "template"]
    assert {"alpha.test", "beta.test"} in template and not any("omega.test" in t for t in template)
    assert not any("omega.test" in domains for domains in ties.values())
    # Each tie names the capture that shows it: a page of that domain holding the signal.
    shown = next(t for t in operator["ties"] if t["kind"] == "ip")["shown_by"]
    gamma_page = ctx.db.pages.find_one({"_id": next(s["page_id"] for s in shown
                                                    if s["domain"] == "gamma.test")})  # fmt: skip
    assert gamma_page["ip"] == "127.0.0.3" and "gamma.test" in gamma_page["url"]
    assert not ctx.db.findings.count_documents({"operator_new_domain": True})

    add_user(ctx, "rui", PASSWORD, "reviewer")
    http = client(ctx)
    csrf = login(http, "rui")
    listing = http.get("/operators").text
    assert "gamma.test" in listing and "omega.test" not in listing
    page = http.get(f"/operators/{operator['_id']}")
    assert page.status_code == 200 and BAIDU_SHARED in page.text and "127.0.0.3" in page.text
    assert f"/pages/{gamma_page['_id']}/raw" in page.text  # the capture showing the tie
    # The address is a shared host, not the operator: split gamma off.
    split = {"domain": "gamma.test", "csrf_token": csrf}
    answer = http.post(f"/operators/{operator['_id']}/split", data=split, follow_redirects=False)
    assert answer.status_code == 303
    [operator] = list(ctx.db.operators.find())
    assert domains_of(operator) == {"alpha.test", "beta.test", "delta.test"}

    # A re-crawl: gamma's pages changed (read again, still on beta's address), and a new
    # domain sharing alpha's analytics id appeared.
    web.round = 2
    crawl(ctx, web)
    assert update_operators(ctx) > 0
    [again] = list(ctx.db.operators.find())
    assert again["_id"] == operator["_id"]
    assert domains_of(again) == {"alpha.test", "beta.test", "delta.test", "epsilon.test"}
    new = {d["domain"] for d in again["domains"] if d["new"]}
    assert new == {"epsilon.test"}
    marked = list(ctx.db.findings.find({"operator_new_domain": True}))
    assert marked and {f["domain"] for f in marked} == {"epsilon.test"}
    assert all(f["operator_id"] == again["_id"] for f in marked)
    assert not ctx.db.findings.count_documents(
        {"domain": "gamma.test", "operator_id": {"$exists": 1}}
    )

    finding = http.get(f"/findings/{marked[0]['_id']}").text
    assert "New domain of a known operator" in finding
    dashboard = http.get("/").text
    assert re.search(r'id="new-operator-domains".*epsilon\.test', dashboard, re.S)
