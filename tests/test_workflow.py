"""The reviewers' workflow, licensed domains, notices and reports on real servers."""

from __future__ import annotations

import csv
import io
import tracemalloc
from datetime import date, timedelta

import pytest
from bson import ObjectId

from tests.adding import add_all
from tests.copies import ZH, found_on
from tracker.findings import (
    TRANSITIONS,
    FilterError,
    FindingFilter,
    FindingNotFound,
    NoSender,
    WorkflowError,
    add_licensed_domain,
    build_notice,
    bulk_set_status,
    dashboard,
    decisions_relabelled_by_adding,
    decisions_relabelled_by_removing,
    domain_report,
    find_findings,
    findings_csv,
    licensed_domain_of,
    normalize_domain,
    notices_of,
    parse_filter,
    record_notice,
    remove_licensed_domain,
    safe_cell,
    set_notice_sender,
    set_status,
    suppress_licensed,
    work_report,
)
from tracker.masters.library import Work
from tracker.scanning.pages import PageInput, scan_page, store_page


@pytest.fixture
def library(ctx):
    add_all(
        ctx,
        [
            Work(text=text, external_id=f"w{i}", title=f"作品{i}", author="记者")
            for i, text in enumerate(ZH[:3])
        ],
    )
    return ctx


def status(ctx, finding_id: ObjectId) -> str:
    return ctx.db.findings.find_one({"_id": finding_id})["status"]


def test_status_changes_follow_the_workflow_and_are_recorded(library):
    ctx = library
    finding = found_on(ctx, "https://a.example/1", 0)
    updated = set_status(ctx, finding, "confirmed", "rui", "verbatim")
    assert updated["status"] == "confirmed"
    assert updated["history"][-1]["by"] == "rui" and updated["history"][-1]["note"] == "verbatim"
    assert [h["status"] for h in updated["history"]] == ["new", "confirmed"]
    with pytest.raises(WorkflowError, match="can become notice_sent, dismissed, new"):
        set_status(ctx, finding, "removed", "rui")
    with pytest.raises(WorkflowError, match="whitelist"):
        set_status(ctx, finding, "licensed", "rui")
    with pytest.raises(WorkflowError, match="unknown status"):
        set_status(ctx, finding, "deleted", "rui")
    with pytest.raises(FindingNotFound):
        set_status(ctx, ObjectId(), "confirmed", "rui")
    for target in ("notice_sent", "removed", "new", "dismissed"):
        set_status(ctx, finding, target, "rui")
    assert status(ctx, finding) == "dismissed"
    assert set(TRANSITIONS) == {
        "new", "confirmed", "dismissed", "notice_sent", "removed", "licensed"
    }  # fmt: skip


def test_bulk_changes_move_only_what_the_workflow_allows(library):
    ctx = library
    ids = [found_on(ctx, f"https://b.example/{i}", i) for i in range(3)]
    set_status(ctx, ids[0], "dismissed", "rui")
    result = bulk_set_status(ctx, [*ids, ids[1], ObjectId()], "confirmed", "ada", "batch")
    assert (result.changed, result.refused) == (3, 1)  # the unknown id is refused
    assert {status(ctx, i) for i in ids} == {"confirmed"}
    again = bulk_set_status(ctx, ids, "removed", "ada")
    assert (again.changed, again.refused) == (0, 3)
    with pytest.raises(WorkflowError):
        bulk_set_status(ctx, ids, "licensed", "ada")


def test_whitelisting_suppresses_old_and_new_findings_and_lifting_it_restores(library):
    ctx = library
    partner = found_on(ctx, "https://partner.example/a", 0)
    sub = found_on(ctx, "https://news.partner.example/b", 1)
    other = found_on(ctx, "https://notpartner.example/c", 2)
    set_status(ctx, sub, "confirmed", "rui")
    # What to warn about first: a reviewer's decision the change would relabel.
    assert decisions_relabelled_by_adding(ctx, "partner.example") == {"confirmed": 1}
    assert add_licensed_domain(ctx, "https://Partner.example/path", "ada", "contract 2026") == 2
    assert decisions_relabelled_by_removing(ctx, "partner.example") == {"confirmed": 1}
    assert status(ctx, partner) == status(ctx, sub) == "licensed"
    assert status(ctx, other) == "new"
    history = ctx.db.findings.find_one({"_id": sub})["history"][-1]
    assert history["status"] == "licensed" and "partner.example" in history["note"]
    assert licensed_domain_of(ctx, "a.b.partner.example") == "partner.example"
    assert licensed_domain_of(ctx, "notpartner.example") is None

    # A page found after the domain was whitelisted is licensed by its scan itself.
    page_id, _ = store_page(ctx, PageInput(url="https://m.partner.example/d", text=ZH[2]))
    scan_page(ctx, page_id)
    assert ctx.db.findings.find_one({"page_id": page_id})["status"] == "licensed"
    assert suppress_licensed(ctx, page_id) == 0

    assert remove_licensed_domain(ctx, "partner.example", "ada") == 3
    assert status(ctx, partner) == "new" and status(ctx, sub) == "confirmed"
    with pytest.raises(WorkflowError, match="not on the whitelist"):
        remove_licensed_domain(ctx, "partner.example", "ada")
    # Licensed again without a note: the contract note comes back.
    add_licensed_domain(ctx, "partner.example", "ada")
    assert ctx.db.whitelist.find_one({"_id": "partner.example"})["note"] == "contract 2026"


def test_overlapping_whitelist_entries_keep_covered_findings_licensed(library):
    ctx = library
    sub = found_on(ctx, "https://news.partner.example/b", 1)
    add_licensed_domain(ctx, "partner.example", "ada")
    add_licensed_domain(ctx, "news.partner.example", "ada")
    assert remove_licensed_domain(ctx, "partner.example", "ada") == 0
    assert status(ctx, sub) == "licensed"
    assert ctx.db.findings.find_one({"_id": sub})["licensed_by"] == "news.partner.example"
    remove_licensed_domain(ctx, "news.partner.example", "ada")
    assert status(ctx, sub) == "new"


@pytest.mark.parametrize(
    ("value", "domain"),
    [
        ("Example.COM", "example.com"),
        ("*.example.com", "example.com"),
        ("https://news.example.com:8443/a?b", "news.example.com"),
        ("例子.中国", "xn--fsqu00a.xn--fiqs8s"),
    ],
)
def test_domains_are_normalized(value, domain):
    assert normalize_domain(value) == domain


@pytest.mark.parametrize("value", ["", "localhost", "exa mple.com", "a..b", "http://"])
def test_bad_domains_are_refused(value):
    with pytest.raises(WorkflowError):
        normalize_domain(value)


def test_notices_need_a_confirmed_finding_and_are_recorded_with_their_hash(library):
    ctx = library
    raw = b"<html><body>copied</body></html>"
    finding_id = found_on(ctx, "https://copy.example/n", 0, raw=raw)
    with pytest.raises(WorkflowError, match="confirmed"):
        build_notice(ctx, finding_id, "zh")
    set_status(ctx, finding_id, "confirmed", "rui")
    with pytest.raises(WorkflowError, match="no notice template"):
        build_notice(ctx, finding_id, "fr")
    # No notice without who sends it, nor with an address nobody can answer.
    with pytest.raises(NoSender, match=r"organization and email.*Settings"):
        build_notice(ctx, finding_id, "en")
    with pytest.raises(NoSender):
        record_notice(ctx, finding_id, lang="en", subject="s", body="b", recipient="x", by="r")
    with pytest.raises(WorkflowError, match="'legal at news' is not an e-mail address"):
        set_notice_sender(ctx, organization="示例报业集团", email="legal at news")
    set_notice_sender(ctx, organization="示例报业集团", email="legal@news.example")
    page = ctx.db.pages.find_one({"url": "https://copy.example/n"})
    for lang, phrase in (("zh", "侵权删除通知"), ("en", "Copyright infringement notice")):
        notice = build_notice(ctx, finding_id, lang)
        assert phrase in notice.subject and "作品0" in notice.subject
        assert "https://copy.example/n" in notice.body and page["raw_sha256"] in notice.body
        assert "示例报业集团" in notice.body and "legal@news.example" in notice.body
        assert notice.passages and notice.passages[0].page_text[:10] in notice.body
    # One passage copied: the English says so in the singular.
    assert len(notice.passages) == 1 and "in 1 matching passage. For" in notice.body
    with pytest.raises(WorkflowError, match="say where"):
        record_notice(ctx, finding_id, lang="en", subject="s", body="b", recipient=" ", by="r")
    record = record_notice(
        ctx, finding_id, lang="en", subject="s", body=notice.body, recipient="abuse@x", by="rui"
    )
    assert status(ctx, finding_id) == "notice_sent"
    assert len(record["sha256"]) == 64 and notices_of(ctx, finding_id)[0]["_id"] == record["_id"]
    record_notice(ctx, finding_id, lang="zh", subject="s", body="再次", recipient="form", by="rui")
    assert len(notices_of(ctx, finding_id)) == 2  # a reminder can be sent
    with pytest.raises(WorkflowError):
        set_notice_sender(ctx, password="x")


def copied_of(findings: list[dict]) -> list[int]:
    return [f["copied_chars"] for f in findings]


def test_filters_parse_and_select_findings(library):
    ctx = library
    ids = [found_on(ctx, f"https://s{i}.filter.example/{i}", i) for i in range(3)]
    found_on(ctx, "https://elsewhere.example/x", 0)
    set_status(ctx, ids[0], "confirmed", "rui")
    flt = parse_filter({"status": "new,confirmed", "domain": "FILTER.example", "sort": "-score"})
    assert flt.status == ("new", "confirmed") and flt.domain == "filter.example"
    assert find_findings(ctx, flt).total == 3
    assert find_findings(ctx, parse_filter({"work": "w0"})).total == 2
    assert find_findings(ctx, parse_filter({"work": "nonexistent"})).total == 0
    today = date.today()
    assert find_findings(ctx, parse_filter({"since": str(today + timedelta(1))})).total == 0
    assert find_findings(ctx, parse_filter({"until": str(today + timedelta(1))})).total == 4
    assert find_findings(ctx, parse_filter({"min_score": "0.99", "max_score": "1"})).total >= 1
    # How much was copied: whole works here, so none is quotation-sized.
    copied = ctx.db.findings.distinct("copied_chars")
    assert copied and min(copied) > 200
    assert find_findings(ctx, parse_filter({"max_copied": "200"})).total == 0
    assert find_findings(ctx, parse_filter({"min_copied": str(min(copied))})).total == 4
    by_size = find_findings(ctx, parse_filter({"sort": "-copied_chars"})).items
    assert [f["copied_chars"] for f in by_size] == sorted(copied_of(by_size), reverse=True)
    paged = find_findings(ctx, FindingFilter(sort="domain"), page=2, per_page=3)
    assert paged.pages == 2 and len(paged.items) == 1 and paged.items[0]["domain"].startswith("s2")
    for bad in ({"status": "gone"}, {"sort": "text"}, {"min_score": "2"}, {"since": "soon"},
                {"min_copied": "-5"}, {"max_copied": "lots"}):  # fmt: skip
        with pytest.raises(FilterError):
            parse_filter(bad)
    assert FindingFilter(status=("new",), min_score=0.5).as_params() == {
        "status": "new",
        "min_score": "0.5",
    }


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ("=1+1", "'=1+1"),
        ("+cmd", "'+cmd"),
        ("-2", "'-2"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\t=x", "'\t'=x"),  # a tab-split cell after it too
        ("正常标题", "正常标题"),
        (0.5, "0.5"),
        (None, ""),
    ],
)
def test_csv_cells_are_never_formulas(value, cell):
    assert safe_cell(value) == cell


def test_csv_export_and_reports(library):
    ctx = library
    first = found_on(ctx, "https://r.example/1", 0)
    found_on(ctx, "https://r.example/2", 1)
    found_on(ctx, "https://q.example/3", 0)
    set_status(ctx, first, "confirmed", "rui")
    csv_text = "".join(findings_csv(ctx, FindingFilter(), batch=1))
    assert csv_text.startswith("\ufeffid,status,work_id")
    assert csv_text.count("https://") == 3
    report = work_report(ctx, "w0")
    assert report.summary["total"] == 2 and report.summary["confirmed"] == 1
    assert [label for label, _ in report.groups] == ["q.example", "r.example"]
    by_domain = domain_report(ctx, "R.example", scope="all")
    assert by_domain.summary["total"] == 2 and by_domain.summary["pages"] == 2
    assert {label for label, _ in by_domain.groups} == {"作品0 (w0)", "作品1 (w1)"}
    assert work_report(ctx, "missing") is None


def test_dashboard_figures_are_cached_until_a_reviewer_acts(library):
    ctx = library
    finding = found_on(ctx, "https://d.example/1", 0)
    found_on(ctx, "https://d.example/2", 1)
    figures = dashboard(ctx)
    assert figures["open"] == 2 and figures["new_this_week"] == 2
    assert figures["per_day"][-1]["findings"] == 2
    assert figures["top_domains"][0] == {"domain": "d.example", "findings": 2, "works": 2}
    found_on(ctx, "https://d.example/3", 2)
    assert dashboard(ctx)["open"] == 2  # cached
    set_status(ctx, finding, "dismissed", "rui")
    fresh = dashboard(ctx)
    assert fresh["open"] == 2 and fresh["by_status"]["dismissed"] == 1


def test_a_dismissal_says_why_and_a_reopening_forgets_it(library):
    ctx = library
    finding = found_on(ctx, "https://quote.example/1", 0)
    dismissed = set_status(ctx, finding, "dismissed", "rui", "a cited paragraph", "quotation")
    assert dismissed["dismiss_reason"] == "quotation"
    assert dismissed["history"][-1]["reason"] == "quotation"
    with pytest.raises(WorkflowError, match="only when dismissing"):
        set_status(ctx, finding, "new", "rui", reason="other")
    with pytest.raises(WorkflowError, match="unknown dismiss reason 'boring'"):
        set_status(ctx, finding, "dismissed", "rui", reason="boring")
    csv_text = "".join(findings_csv(ctx, FindingFilter()))
    header, row = csv_text.lstrip("\ufeff").splitlines()[:2]
    assert "dismiss_reason" in header.split(",") and ",quotation," in row
    reopened = set_status(ctx, finding, "new", "rui")
    assert "dismiss_reason" not in reopened
    other = found_on(ctx, "https://quote.example/2", 1)
    assert bulk_set_status(ctx, [other], "dismissed", "rui", None, "false_positive").changed == 1
    assert ctx.db.findings.find_one({"_id": other})["dismiss_reason"] == "false_positive"


def test_sites_on_one_host_but_other_ports_are_told_apart(library):
    ctx = library
    found_on(ctx, "http://127.0.0.1:8001/a", 0)
    found_on(ctx, "http://127.0.0.1:8002/b", 1)
    found_on(ctx, "http://127.0.0.1:8002/c", 2)
    # A finding recorded before sites were kept counts under its host.
    found_on(ctx, "http://old.example/d", 0)
    ctx.db.findings.update_one({"url": "http://old.example/d"}, {"$unset": {"site": ""}})
    assert dashboard(ctx)["top_domains"] == [
        {"domain": "127.0.0.1:8002", "findings": 2, "works": 2},
        {"domain": "127.0.0.1:8001", "findings": 1, "works": 1},
        {"domain": "old.example", "findings": 1, "works": 1},
    ]
    one_site = find_findings(ctx, parse_filter({"domain": "127.0.0.1:8001"}))
    assert [f["url"] for f in one_site.items] == ["http://127.0.0.1:8001/a"]
    # The host alone still covers every port.
    assert find_findings(ctx, parse_filter({"domain": "127.0.0.1"})).total == 3


def test_csv_keeps_the_site_port_says_statuses_in_words_and_names_the_notice(library):
    ctx = library
    finding_id = found_on(ctx, "http://127.0.0.1:8002/n", 0)
    found_on(ctx, "http://127.0.0.1:8001/m", 1)
    set_status(ctx, finding_id, "confirmed", "rui")
    set_notice_sender(ctx, organization="示例报业集团", email="legal@news.example")
    body = build_notice(ctx, finding_id, "en").body
    for recipient in ("abuse@host.example", "form: https://host.example/complain"):
        record_notice(ctx, finding_id, lang="en", subject="s", body=body,
                      recipient=recipient, by="rui")  # fmt: skip
    rows = {
        row["url"]: row
        for row in csv.DictReader(io.StringIO("".join(findings_csv(ctx, FindingFilter()))[1:]))
    }
    sent, other = rows["http://127.0.0.1:8002/n"], rows["http://127.0.0.1:8001/m"]
    assert (sent["site"], other["site"]) == ("127.0.0.1:8002", "127.0.0.1:8001")
    assert (sent["status"], other["status"]) == ("Notice sent", "New")
    deadline = ctx.db.findings.find_one({"_id": finding_id})["notice_deadline"]
    assert sent["notice_deadline"][:10] == f"{deadline:%Y-%m-%d}"
    assert sent["notice_recipients"] == "abuse@host.example; form: https://host.example/complain"
    assert other["notice_deadline"] == other["notice_recipients"] == ""


def test_a_domain_report_lists_reviewed_findings_by_default_a_page_at_a_time(library):
    ctx = library
    made = [found_on(ctx, f"https://p.example/{n}", n % 3) for n in range(7)]
    for finding in made[:5]:
        set_status(ctx, finding, "confirmed", "rui")
    set_status(ctx, made[1], "notice_sent", "rui")
    set_status(ctx, made[5], "dismissed", "rui")

    def rows(report):
        return [f["_id"] for _, group in report.groups for f in group]

    reviewed = domain_report(ctx, "p.example", per_page=2)
    # The summary counts every finding; the detail only the five a reviewer judged copies.
    assert reviewed.summary["total"] == 7 and reviewed.summary["pages"] == 7
    assert reviewed.summary["dismissed"] == 1 and reviewed.summary["new"] == 1
    assert reviewed.listed == 5 and reviewed.pages == 3
    pages = [rows(domain_report(ctx, "p.example", page=n, per_page=2)) for n in (1, 2, 3)]
    assert [len(p) for p in pages] == [2, 2, 1]
    assert sorted(f for p in pages for f in p) == sorted(made[:5])
    # Groups are as big as their work's findings over every page, biggest first.
    assert reviewed.group_sizes == {"作品0 (w0)": 2, "作品1 (w1)": 2, "作品2 (w2)": 1}
    assert domain_report(ctx, "p.example", page=99, per_page=2).page == 3
    everything = domain_report(ctx, "p.example", scope="all", per_page=None)
    assert sorted(rows(everything)) == sorted(made) and everything.pages == 1


def test_the_csv_export_holds_a_batch_of_findings_never_all_of_them(library):
    ctx = library
    original = ctx.db.findings.find_one({"_id": found_on(ctx, "https://lazy.example/0", 0)})
    # Copies of a real finding, each on its own page URL: 5,000 rows as a scan would leave.
    ctx.db.findings.insert_many(
        [
            {
                **original,
                "_id": ObjectId(),
                "page_id": ObjectId(),
                "url": f"https://lazy.example/{n:05d}" + "x" * 200,
            }
            for n in range(1, 5000)
        ]
    )
    assert "".join(findings_csv(ctx, FindingFilter(), batch=7)) == "".join(
        findings_csv(ctx, FindingFilter())
    )

    def peak(run) -> int:
        tracemalloc.start()
        try:
            run()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    rows = 0

    def stream() -> None:
        nonlocal rows
        for chunk in findings_csv(ctx, FindingFilter(), batch=200):
            rows += chunk.count("https://lazy.example/")

    streamed = peak(stream)
    held = peak(lambda: list(ctx.db.findings.find({}, {"history": 0, "spans": 0})))
    assert rows == 5000
    # Streaming all 5,000 takes a fraction of what holding them (without CSV) would.
    assert streamed < held / 4, (streamed, held)
