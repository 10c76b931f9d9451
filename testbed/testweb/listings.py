"""Pages that show many works and copy none: lists of headlines with their first lines
(paginated "第1页…第N页", the pagination a crawler must not join as a chapter), tag and
archive pages, search results (snippets), and articles with a "related articles" block.

``listing_page`` gives what extraction makes of one such page (``copytrack eval``'s
listing-page negatives); ``build_news_mirror`` a site of them around copied articles
(the suite's floor: no finding on a listing, every copy found).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from extractor.extraction import Extracted, extract
from testbed.attacks import is_cjk, reflow

from . import pages
from .generator import CORPUS_DIR, OFFSITE, Resource, TestWeb, _documents
from .pages import ListItem, SiteStyle

LISTING, TAG, SEARCH, RELATED = "listing page", "tag page", "search results", "related articles"
LISTING_KINDS = (LISTING, TAG, SEARCH, RELATED)
#: What an item shows of a work: a headline of this many characters, then a first line.
HEADLINE_CHARS, FIRST_LINE_CHARS, SNIPPET_CHARS = 24, 60, 60
_STYLES = {
    lang: SiteStyle(
        title="资讯镜像站" if lang == "zh" else "News Mirror",
        domain="news-mirror.example",
        lang=lang,
        nav=(("文章列表" if lang == "zh" else "All posts", "/news/list_1.html"),),
        banner="【推广】下载APP阅读更多资讯" if lang == "zh" else "Get the app for more news",
        footer=("本站内容来自互联网。" if lang == "zh" else "Content from around the web.",),
        friends=OFFSITE,
    )
    for lang in ("zh", "en")
}


def _flat(text: str) -> str:
    return "".join(reflow(text).split()) if is_cjk(text) else " ".join(reflow(text).split())


def show(
    work_id: str, text: str, path: str, date: datetime, search: bool, rng: random.Random
) -> ListItem:
    """How a list shows a work: its headline (its first characters, when it has no other)
    and its first line, or for a search result a snippet from anywhere in it."""
    flat = _flat(text)
    if search:
        at = rng.randrange(max(1, len(flat) - SNIPPET_CHARS))
        summary = "…" + flat[at : at + SNIPPET_CHARS] + "…"
    else:
        summary = flat[HEADLINE_CHARS : HEADLINE_CHARS + FIRST_LINE_CHARS] + "…"
    return ListItem(flat[:HEADLINE_CHARS], path, date, summary)


def listing_html(
    kind: str, items: Sequence[ListItem], article: str, lang: str, pager: Sequence[pages.Link] = ()
) -> str:
    """One page of ``kind`` (LISTING_KINDS) showing ``items``; a related-articles page is
    the unrelated ``article`` with them in its block."""
    style = _STYLES[lang]
    if kind == RELATED:
        paragraphs = [p for p in reflow(article, 200).split("\n") if p.strip()]
        return pages.article_page(
            style, "utf-8", path="/news/a.html", title=paragraphs[0][:20], paragraphs=paragraphs,
            author="", date=datetime(2024, 5, 1), related=[], prev_next=[],
            rng=random.Random(0), extra=pages.related_block(style, items),
        )  # fmt: skip
    headings = {
        "zh": {LISTING: "文章列表", TAG: "标签：社会", SEARCH: "搜索结果"},
        "en": {LISTING: "All posts", TAG: "Tag: business", SEARCH: "Search results"},
    }
    heading = headings[lang][kind]
    return pages.headline_list_page(style, "utf-8", heading=heading, items=items, pager=pager)


def listing_page(
    kind: str, works: Sequence[tuple[str, str]], article: str, lang: str, rng: random.Random
) -> Extracted:
    """What extraction makes of a page of ``kind`` showing ``works`` (id, text): its text,
    and whether it takes it for a listing."""
    start = datetime(2024, 5, 1)
    items = [
        show(wid, text, f"/news/{n}.html", start + timedelta(hours=n), kind == SEARCH, rng)
        for n, (wid, text) in enumerate(works)
    ]
    pager = [(f"第{n}页", f"/news/list_{n}.html") for n in range(1, 6)] + [
        ("下一页", "/news/list_2.html")
    ]
    return extract(listing_html(kind, items, article, lang, pager))


def build_news_mirror(
    seed: int = 7, n_headlines: int = 200, n_copies: int = 20, n_lists: int = 5
) -> TestWeb:
    """A news mirror: the library's headlines (with first lines) over ``n_lists``
    paginated listing pages ("第1页 … 下一页"), a tag, an archive and a search page, and
    ``n_copies`` whole copies of works, each with a related-articles block of others.

    The library: Chinese news documents of the corpus (as many as it has, up to
    ``n_headlines``); a list shows a work's first characters as its headline.
    """
    rng = random.Random(f"{seed}:news-mirror")
    docs = list(_documents(CORPUS_DIR, "zh_news"))
    rng.shuffle(docs)
    masters = [
        {
            "id": d["id"],
            "title": d["title"],
            "text": d["text"],
            "lang": "zh",
            "kind": d.get("kind", ""),
        }
        for d in docs[:n_headlines]
    ]
    style = _STYLES["zh"]
    resources: dict[str, Resource] = {}
    articles: list[dict[str, Any]] = []
    start = datetime(2024, 5, 1, 8, 0)
    items = [
        show(m["id"], m["text"], f"/news/{n}.html", start + timedelta(hours=n), False, rng)
        for n, m in enumerate(masters)
    ]

    def html(path: str, body: str) -> None:
        resources[path] = Resource(body.encode("utf-8"), templated=True)

    def page_truth(path: str, kind: str, copies: Sequence[str] = ()) -> None:
        articles.append({"site": "news-mirror", "path": path, "kind": kind, "reachable": True,
                         "copies": list(copies), "title": path, "others": []})  # fmt: skip

    per_list = -(-len(items) // n_lists)
    lists = [f"/news/list_{k}.html" for k in range(1, n_lists + 1)]
    for k, path in enumerate(lists):
        pager = [(f"第{n + 1}页", p) for n, p in enumerate(lists)]
        if k + 1 < len(lists):
            pager.append(("下一页", lists[k + 1]))
        chunk = items[k * per_list : (k + 1) * per_list]
        html(path, pages.headline_list_page(style, "utf-8", heading=f"文章列表 第{k + 1}页",
                                            items=chunk, pager=pager))  # fmt: skip
        page_truth(path, LISTING)
    searched = [show(m["id"], m["text"], f"/news/{n}.html", start, True, rng)
                for n, m in enumerate(masters[:15])]  # fmt: skip
    for path, kind, shown in (("/tag/shehui.html", TAG, items[::7][:15]),
                              ("/archive/2024-05.html", TAG, items[1::9][:15]),
                              ("/so/result.html", SEARCH, searched)):  # fmt: skip
        html(path, listing_html(kind, shown, "", "zh"))
        page_truth(path, kind)
    for n, master in enumerate(masters[:n_copies]):
        related = rng.sample([i for i in items if i.path != f"/news/{n}.html"], 5)
        paragraphs = [p for p in reflow(master["text"]).split("\n") if p.strip()]
        html(f"/news/{n}.html", pages.article_page(
            style, "utf-8", path=f"/news/{n}.html", title=master["title"], paragraphs=paragraphs,
            author="", date=start, related=[], prev_next=[], rng=random.Random(n),
            extra=pages.related_block(style, related),
        ))  # fmt: skip
        page_truth(f"/news/{n}.html", "article", [master["id"]])
    home = [ListItem(p, p, start) for p in [*lists, "/tag/shehui.html", "/archive/2024-05.html",
                                          "/so/result.html"]]  # fmt: skip
    html("/", pages.list_page(style, "utf-8", heading="首页", items=home, pager=[]))
    resources["/robots.txt"] = Resource(b"User-agent: *\nAllow: /\n", "text/plain; charset=utf-8")
    truth = {"seed": seed, "sites": {"news-mirror": {"lists": lists}}, "masters": masters,
             "articles": articles, "special": []}  # fmt: skip
    return TestWeb(seed, {"news-mirror": resources}, truth)
