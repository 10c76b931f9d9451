"""The admin's findings catalogue answers as MongoDB does, and keeps in step with it."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from bson import ObjectId

from tracker.core.store import delete_findings
from tracker.findings import (
    STATUSES,
    Catalogue,
    MongoFindings,
    find_findings,
    neighbours,
    parse_filter,
    set_status,
)
from tracker.findings.catalogue import CLOCK_MARGIN

TITLES = ("红楼梦 第一回", "红楼梦 第二回", "西游记", "The Old Man and the Sea", "三国演义")


def _findings(ctx, n: int = 300, seed: int = 7) -> list[ObjectId]:
    rng = random.Random(seed)
    now = datetime.now(UTC)
    docs = []
    for i in range(n):
        master = rng.randrange(len(TITLES))
        domain = rng.choice(("a.example", "m.a.example", "b.example", "pirate.test"))
        seen = now - timedelta(days=rng.randrange(40), minutes=i)
        docs.append({
            "page_id": ObjectId(), "master_id": master + 1, "master_title": TITLES[master],
            "master_external_id": f"w{master}", "url": f"http://{domain}/p/{seed}-{i}.html",
            "domain": domain, "site": domain, "page_title": f"第{i}页 转载",
            "campaign": rng.choice(("c1", "c2", None)), "status": rng.choice(STATUSES[:4]),
            "score": round(rng.random(), 2), "hits": rng.randrange(1, 9),
            "master_coverage": rng.random(), "copied_chars": rng.randrange(10, 3000),
            "first_seen": seen, "last_seen": seen + timedelta(hours=1), "changed_at": now,
            "quotation": rng.random() < 0.3,
            "history": [],
        })  # fmt: skip
    ctx.db.pages.insert_many(
        [{"_id": d["page_id"], "url": d["url"], "title": d["page_title"]} for d in docs]
    )
    return list(ctx.db.findings.insert_many(docs).inserted_ids)


FILTERS = [
    {},
    {"status": "new,confirmed", "sort": "-score"},
    {"q": "红楼梦", "sort": "copied_chars"},
    {"q": "OLD MAN"},
    {"q": "第1", "sort": "-hits"},
    {"q": "pirate.test/p/7-2"},
    {"domain": "a.example", "sort": "domain"},
    {"domain": "b.example", "min_score": "0.5", "max_copied": "1000", "sort": "-first_seen"},
    {"campaign": "c1", "sort": "-master_coverage"},
    {"work": "w2", "since": (datetime.now(UTC) - timedelta(days=10)).date().isoformat()},
    {"until": (datetime.now(UTC) - timedelta(days=20)).date().isoformat(), "sort": "last_seen"},
]


def test_lists_counts_and_neighbours_are_those_mongodb_gives(ctx):
    ids = _findings(ctx)
    catalogue = Catalogue(MongoFindings(lambda: ctx.db))
    for params in FILTERS:
        flt = parse_filter(params)
        expected = find_findings(ctx, flt, 2, 20)
        got = find_findings(ctx, flt, 2, 20, catalogue)
        assert [f["_id"] for f in got.items] == [f["_id"] for f in expected.items], params
        assert got.total == expected.total, params
        assert got.items == expected.items  # the same documents, read by id
        for finding_id in ids[::37]:
            assert neighbours(ctx, flt, finding_id, catalogue) == neighbours(
                ctx, flt, finding_id
            ), params
    assert find_findings(ctx, parse_filter({"q": "no such words"}), 1, 20, catalogue).total == 0


def test_a_quotation_filter_splits_copies_from_quotations(ctx):
    _findings(ctx)
    catalogue = Catalogue(MongoFindings(lambda: ctx.db))
    everything = ctx.db.findings.count_documents({})
    quoted = ctx.db.findings.count_documents({"quotation": True})
    assert 0 < quoted < everything
    sizes = {size: parse_filter({"size": size}) for size in ("quotations", "copies", "any")}
    assert len(catalogue.ordered(sizes["quotations"])) == quoted
    assert len(catalogue.ordered(sizes["copies"])) == everything - quoted
    assert len(catalogue.ordered(sizes["any"])) == everything
    # The default is the queue: copies only, as MongoDB's query gives them.
    listed = find_findings(ctx, parse_filter({}), 1, 20, catalogue)
    assert listed.total == everything - quoted == find_findings(ctx, parse_filter({}), 1, 20).total


def test_changes_deletions_and_new_findings_show_at_the_next_answer(ctx):
    ids = _findings(ctx, 60)
    any_size = parse_filter({"size": "any"})  # quotation-sized findings too
    catalogue = Catalogue(MongoFindings(lambda: ctx.db))
    confirmed = parse_filter({"status": "confirmed", "size": "any"})
    before = len(catalogue.ordered(confirmed))
    moved = next(f["_id"] for f in ctx.db.findings.find({"status": "new"}))
    set_status(ctx, moved, "confirmed", "alice")
    assert len(catalogue.ordered(confirmed)) == before + 1
    assert moved in catalogue.ordered(confirmed)

    deleted = delete_findings(ctx.db, {"_id": {"$in": ids[:5]}})
    assert deleted == 5 and len(catalogue) == 55
    assert not set(ids[:5]) & set(catalogue.ordered(any_size))

    # A tombstone of a finding still there (a scan recorded it again meanwhile) keeps it.
    ctx.db.findings_gone.insert_one({"finding_id": ids[10], "gone_at": datetime.now(UTC)})
    assert ids[10] in catalogue.ordered(any_size)

    # A writer whose clock is a little behind the admin's is not missed.
    late = _findings(ctx, 1, seed=8)[0]
    ctx.db.findings.update_one(
        {"_id": late}, {"$set": {"changed_at": datetime.now(UTC) - CLOCK_MARGIN / 2}}
    )
    assert late in catalogue.ordered(any_size)
    searched = parse_filter({"q": "红楼梦", "size": "any"})
    assert catalogue.ordered(searched) == [
        f["_id"] for f in find_findings(ctx, searched, 1, 200).items
    ]


def test_dashboard_counts_from_the_catalogue_are_the_aggregations(ctx):
    from tracker.findings import dashboard

    _findings(ctx)
    catalogue = Catalogue(MongoFindings(lambda: ctx.db))
    counted = dashboard(ctx, catalogue=catalogue)
    aggregated = dashboard(ctx, max_age_s=1)
    for key in ("by_status", "open", "new_this_week", "quotations_hidden", "per_day",
                "top_domains", "top_works"):  # fmt: skip
        assert counted[key] == aggregated[key], key
    assert counted["notices"] == aggregated["notices"]


def test_the_findings_list_jumps_to_any_page_of_a_long_list(ctx):
    from tests.admin_seed import PASSWORD, client, login
    from tracker.accounts.users import add_user

    _findings(ctx, 130)
    add_user(ctx, "viewer", PASSWORD, "viewer")
    http = client(ctx)
    login(http, "viewer")
    first = http.get("/findings?per_page=10&sort=-score&size=any").text
    assert 'name="page" min="1" max="13"' in first and "page=13" in first  # the last page
    assert '<input type="hidden" name="sort" value="-score">' in first  # the jump keeps the sort
    seventh = http.get("/findings?per_page=10&sort=-score&size=any&page=7").text
    expected = find_findings(ctx, parse_filter({"sort": "-score", "size": "any"}), 7, 10).items
    shown = [f["_id"] for f in expected if f'href="/findings/{f["_id"]}' in seventh]
    assert len(shown) == 10 and "Page 7 of 13" in seventh
