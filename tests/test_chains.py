"""Chapters cut over pages ("第1页/共10页 … 下一页"): the crawl joins each chain, in order,
into one document found as the chapter it copies, each page still kept (real crawl)."""

from __future__ import annotations

from bson import ObjectId

from tests.admin_seed import PASSWORD, client, login
from tests.corpus import novel_chapters
from tests.loopback import Handler, served
from tracker.accounts.users import add_user
from tracker.campaigns import Campaign, save_campaign, trigger_run, wait_for_run
from tracker.masters.library import Work, add_works
from tracker.scanning.chains import JOINED, join_run_chains
from tracker.scanning.pages import PageInput, scan_page, store_page

PAGES = 10
CHAPTERS = [text[:700] for text in novel_chapters(3)]
#: How each chapter's site says where a page continues.
STYLES = ("rel", "words", "numbered")
BOILERPLATE = "<p>本站网址请牢记，手机用户请浏览阅读，更优质的阅读体验。</p>"


def _piece(chapter: str, n: int) -> str:
    size = -(-len(chapter) // PAGES)
    return chapter[n * size : (n + 1) * size]


def _page(style: str, chapter: int, n: int) -> bytes:
    """Page ``n`` (0-based) of a chapter: a tenth of its text, and the way to the next."""
    nxt = f"/{style}/{chapter}_{n + 2}.html" if n + 1 < PAGES else None
    head = f'<link rel="next" href="{nxt}">' if style == "rel" and nxt else ""
    link = ""
    if nxt and style == "words":
        link = f'<a href="{nxt}">下一页</a>'
    elif nxt and style == "numbered":
        link = f'<a href="{nxt}">{n + 2}</a>'
    body = (
        f"<html><head><title>第{chapter + 1}章（第{n + 1}页/共{PAGES}页）</title>{head}</head>"
        f"<body><h1>第{chapter + 1}章</h1>{BOILERPLATE}<div id='content'><p>"
        f"{_piece(CHAPTERS[chapter], n)}</p></div><p>第{n + 1}页/共{PAGES}页 {link}</p>"
        f"<a href='/'>返回目录</a></body></html>"
    )
    return body.encode()


class _CutChapters(Handler):
    def do_GET(self) -> None:
        if self.path == "/":
            links = "".join(
                f'<li><a href="/{style}/{c}.html">第{c + 1}章</a></li>'
                for c, style in enumerate(STYLES)
            )
            self.send_body(f"<html><body><ul>{links}</ul></body></html>".encode())
            return
        for c, style in enumerate(STYLES):
            for n in range(PAGES):
                name = f"/{style}/{c}.html" if n == 0 else f"/{style}/{c}_{n + 1}.html"
                if self.path == name:
                    self.send_body(_page(style, c, n))
                    return
        self.send_error(404)


def test_a_chapter_cut_into_pages_is_found_as_one(crawl_ctx):
    ctx = crawl_ctx
    add_works(ctx, [Work(text=text, external_id=f"ch{n}") for n, text in enumerate(CHAPTERS)])
    with served(_CutChapters) as server:
        base = f"http://127.0.0.1:{server.server_port}"
        save_campaign(ctx, Campaign.from_dict({"name": "cut", "seeds": [f"{base}/"], "delay": 0}))
        run = wait_for_run(ctx, trigger_run(ctx, "cut"), timeout=240)
    assert run["state"] == "finished", run
    for c, style in enumerate(STYLES):
        first = f"{base}/{style}/{c}.html"
        joined = ctx.db.pages.find_one({"url": first + JOINED})
        assert joined is not None, style
        pages = [first, *(f"{base}/{style}/{c}_{n + 1}.html" for n in range(1, PAGES))]
        assert joined["parts"] == pages, style  # every page, in order
        found = ctx.db.findings.distinct("master_external_id", {"page_id": joined["_id"]})
        assert found == [f"ch{c}"], style
        # Each page is kept as evidence, and alone holds too little to be found.
        for url in pages:
            page = ctx.db.pages.find_one({"url": url})
            assert page is not None and not ctx.db.findings.count_documents(
                {"page_id": page["_id"]}
            ), url
    # The finding names the pages its evidence is in.
    add_user(ctx, "vic", PASSWORD, "viewer")
    web = client(ctx)
    login(web, "vic")
    finding = ctx.db.findings.find_one({"master_external_id": "ch2"})  # the last chain's
    shown = web.get(f"/findings/{finding['_id']}").text
    assert 'id="page-parts"' in shown and all(f">{url}</a>" in shown for url in pages)
    assert f"{PAGES} pages, each stored on its own" in shown


def test_the_pages_of_a_chapter_do_not_count_against_the_depth(crawl_ctx):
    """A campaign of depth 0 seeded with a chapter's first page fetches its other nine
    pages (a reader's one page) and joins them, but no other link of them."""
    ctx = crawl_ctx
    add_works(ctx, [Work(text=text, external_id=f"ch{n}") for n, text in enumerate(CHAPTERS)])
    with served(_CutChapters) as server:
        base = f"http://127.0.0.1:{server.server_port}"
        seed = f"{base}/words/1.html"
        campaign = {"name": "one", "seeds": [seed], "delay": 0, "max_depth": 0}
        save_campaign(ctx, Campaign.from_dict(campaign))
        run = wait_for_run(ctx, trigger_run(ctx, "one"), timeout=240)
    assert run["state"] == "finished", run
    fetched = sorted(p["url"] for p in ctx.db.pages.find({"url": {"$not": {"$regex": "#"}}}))
    assert fetched == sorted([seed, *(f"{base}/words/1_{n}.html" for n in range(2, PAGES + 1))])
    joined = ctx.db.pages.find_one({"url": seed + JOINED})
    assert ctx.db.findings.distinct("master_external_id", {"page_id": joined["_id"]}) == ["ch1"]


def test_a_page_whose_next_page_never_came_is_matched_alone(ctx):
    """A page says it continues, but the crawl never stored its next page (gone, refused):
    at the crawl's end it is matched on its own after all."""
    add_works(ctx, [Work(text=CHAPTERS[0], external_id="ch0")])
    run_id = ObjectId()
    page = PageInput(url="http://pirate.example/1.html", text=CHAPTERS[0], run_id=run_id,
                     next_url="http://pirate.example/1_2.html", chained=True)  # fmt: skip
    page_id, _ = store_page(ctx, page)
    assert scan_page(ctx, page_id).matches == 0  # waiting for its chapter's other pages
    assert join_run_chains(ctx, run_id) == [page_id]
    assert scan_page(ctx, page_id).matches == 1
