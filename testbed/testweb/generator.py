"""Build the local test web: pirate sites made from the shared corpus, with ground truth.

``build_site`` picks master works from the corpus (Chinese news, Chinese novel chapters,
some English), then lays out four sites, each served on its own port by ``server.serve``:

- ``pirate-news``: Chinese news copies (homophones, ads, excerpts, edits), mostly GBK, RSS.
- ``novel-mirror``: novel chapters (traditional, merged, shuffled, ads), some GBK, Atom,
  a slow page.
- ``mixed-blog``: English and Chinese posts, RSS with tracking tags, a huge page and PNG
  bytes served as text/html.
- ``clean-site``: unrelated texts only, plus real pages from ``../shared/webpages``.

Every site has a home page, paginated lists, sitemap.xml, a feed, robots.txt disallowing
``/private/`` (which holds copies that must never be fetched), 301s from ``/old/`` URLs,
a linked 404 and 500, tracking-parameter duplicates and off-site links to
``example.invalid``. Unrelated pages come from corpus documents outside the master set.
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache, partial
from itertools import cycle
from pathlib import Path
from typing import Any

from testbed.attacks import ATTACKS, copied_fraction, reflow, traditional
from testbed.corpus import SHARED_CORPUS, default_corpus_dir
from tracker.core.jsonl import BadLine, read_jsonl

from . import pages
from .pages import Link, ListItem, SiteStyle

CORPUS_DIR = default_corpus_dir()
# Real pages for clean-site, when the developers' shared folder is there (else none).
_SHARED_WEBPAGES = SHARED_CORPUS.parent / "webpages"
WEBPAGES_DIR = _SHARED_WEBPAGES if (_SHARED_WEBPAGES / "manifest.jsonl").exists() else None

#: Share of the master library taken from each corpus file.
MASTER_MIX = (("zh_news", 0.5), ("zh_novel", 0.3), ("en_news", 0.1), ("en_novel", 0.1))
#: Corpus documents outside this length range are left out (too thin, or pages too big).
MIN_CHARS, MAX_CHARS = 300, 20_000
PRIVATE = "/private/"
DISALLOW = (PRIVATE, "/search")
PER_PAGE = 10
FEED_QUERY = "?utm_source=rss&utm_medium=feed"
OFFSITE = (
    ("友情链接", "http://example.invalid/"),
    ("Partner", "http://www.example.invalid/p.html"),
)

_AUTHORS = {
    "zh": ("张伟", "王芳", "李娜", "刘洋", "陈静", "杨帆"),
    "en": ("Staff Writer", "Jane Doe", "Alex Morgan", "Sam Lee"),
}

Recipe = tuple[str, str, dict[str, Any]]  # (corpus file of the master, attack, strength)


@dataclass(frozen=True)
class Resource:
    """What the server answers for one path of a site."""

    body: bytes
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    location: str | None = None  # redirect target path
    delay: float = 0.0
    templated: bool = False  # body holds pages.BASE, replaced by the site's base URL


@dataclass(frozen=True)
class SiteSpec:
    """How one site is made: its chrome, size, what it copies and how."""

    name: str
    style: SiteStyle
    share: float  # of the generated article pages
    copy_share: float  # of its public pages that copy masters
    recipes: tuple[Recipe, ...]  # cycled over its copies; "combine" {} = DEFAULT_STEPS
    unrelated: tuple[str, ...]  # corpus files of its unrelated pages, cycled
    article_path: str  # format string with {n} and {date}
    gbk_share: float
    feed: str  # "rss" or "atom"
    start: datetime
    specials: tuple[str, ...] = ()  # "slow", "huge", "binary"


def _style(title: str, domain: str, lang: str, feed: str, banner: str, *footer: str) -> SiteStyle:
    latest = "最新" if lang == "zh" else "Latest"
    return SiteStyle(
        title=title,
        domain=domain,
        lang=lang,
        nav=((latest, "/list/1.html"), ("RSS" if feed == "rss" else "Atom", f"/{feed}.xml")),
        banner=banner,
        footer=footer,
        friends=OFFSITE,
    )


SITES = (
    SiteSpec(
        name="pirate-news",
        style=_style(
            "快讯天下网",
            "kuaixun.example",
            "zh",
            "rss",
            "【推广】新用户注册即送100元红包，点击立即领取",
            "更多精彩请关注快讯天下网官方微信：kuaixun123",
            "本站部分内容来自互联网，如有侵权请联系删除。",
            "京ICP备12345678号",
        ),
        share=0.34,
        copy_share=0.65,
        recipes=(
            ("zh_news", "exact", {}),
            ("zh_news", "homophones", {"rate": 0.1}),
            ("zh_news", "insert_ads", {"every": 1}),
            ("zh_news", "excerpt", {"fraction": 0.4}),
            ("zh_news", "noise", {"rate": 0.05}),
            ("zh_news", "char_edits", {"rate": 0.03}),
            ("zh_news", "sentence_shuffle", {}),
            ("zh_news", "homophones", {"rate": 0.3}),
            ("zh_news", "combine", {}),
            ("zh_news", "excerpt", {"fraction": 0.2}),
        ),
        unrelated=("zh_news",),
        article_path="/news/{date:%Y%m%d}/{n}.html",
        gbk_share=0.7,
        feed="rss",
        start=datetime(2011, 3, 1, 8, 0),
    ),
    SiteSpec(
        name="novel-mirror",
        style=_style(
            "笔趣小说网",
            "biqu-mirror.example",
            "zh",
            "atom",
            "【广告】热门手游，登录就送VIP，点击下载",
            "更多精彩小说请关注笔趣小说网，最快更新，无弹窗阅读。",
            "本站所有小说均来自网友上传，如有侵权请联系删除。",
        ),
        share=0.28,
        copy_share=0.65,
        recipes=(
            ("zh_novel", "traditional", {}),
            ("zh_novel", "insert_ads", {"every": 3}),
            ("zh_novel", "merge", {}),
            ("zh_novel", "paragraph_shuffle", {}),
            ("zh_novel", "exact", {}),
            ("zh_novel", "homophones", {"rate": 0.1}),
            ("zh_novel", "excerpt", {"fraction": 0.3}),
            ("zh_novel", "char_edits", {"rate": 0.02}),
        ),
        unrelated=("zh_novel",),
        article_path="/book/{n}.html",
        gbk_share=0.3,
        feed="atom",
        start=datetime(2016, 5, 1, 20, 0),
        specials=("slow",),
    ),
    SiteSpec(
        name="mixed-blog",
        style=_style(
            "The Mixed Bag",
            "mixedbag.example",
            "en",
            "rss",
            "Sponsored: Try our premium plan free for 30 days",
            "Subscribe to our newsletter for more stories like this.",
            "All content is for entertainment purposes only.",
        ),
        share=0.23,
        copy_share=0.6,
        recipes=(
            ("en_news", "exact", {}),
            ("en_novel", "sentence_shuffle", {}),
            ("en_news", "excerpt", {"fraction": 0.5}),
            ("en_novel", "noise", {"rate": 0.05}),
            ("en_news", "char_edits", {"rate": 0.02}),
            ("en_news", "insert_ads", {"every": 2}),
            ("zh_news", "traditional", {}),
            ("en_novel", "paragraph_shuffle", {}),
            ("zh_news", "combine", {}),
        ),
        unrelated=("en_news", "en_novel", "zh_news"),
        article_path="/{date:%Y/%m}/post-{n}/",
        gbk_share=0.0,
        feed="rss",
        start=datetime(2019, 6, 1, 9, 0),
        specials=("huge", "binary"),
    ),
    SiteSpec(
        name="clean-site",
        style=_style(
            "清风原创文学",
            "qingfeng.example",
            "zh",
            "atom",
            "清风文学征文大赛火热进行中",
            "本站内容均为原创，转载请注明出处。",
            "联系我们：editor@qingfeng.example",
        ),
        share=0.15,
        copy_share=0.0,
        recipes=(),
        unrelated=("zh_news", "en_news", "zh_novel"),
        article_path="/articles/{n}.html",
        gbk_share=0.2,
        feed="atom",
        start=datetime(2020, 1, 1, 10, 0),
    ),
)


@lru_cache(maxsize=8)
def _documents(corpus_dir: Path, name: str) -> tuple[dict, ...]:
    path = corpus_dir / f"{name}.jsonl.gz"
    if not path.exists():
        raise FileNotFoundError(
            f"{path} not found: pass corpus_dir= a folder with {name}.jsonl.gz "
            "(the shared corpus, or testbed/corpus)"
        )
    docs = []
    for item in read_jsonl(path):
        if isinstance(item, BadLine):
            raise ValueError(str(item))
        if MIN_CHARS <= len(item[1]["text"]) <= MAX_CHARS:
            docs.append(item[1])
    return tuple(docs)


class _Pools:
    """Masters and unrelated documents per corpus file, handed out round-robin."""

    def __init__(self, corpus_dir: Path, n_masters: int, rng: random.Random) -> None:
        self.masters: list[dict] = []
        self._masters: dict[str, Iterator[dict]] = {}
        self._unrelated: dict[str, Iterator[dict]] = {}
        if n_masters < len(MASTER_MIX):
            raise ValueError(f"n_masters must be at least {len(MASTER_MIX)}, one per corpus file")
        # At least one master per file: every site's recipes need masters of their kind.
        counts = {name: max(1, round(n_masters * share)) for name, share in MASTER_MIX[1:]}
        counts["zh_news"] = n_masters - sum(counts.values())
        for name, _ in MASTER_MIX:
            docs = list(_documents(corpus_dir, name))
            rng.shuffle(docs)
            chosen, rest = docs[: counts[name]], docs[counts[name] :]
            if not chosen or not rest:
                raise ValueError(f"{name}: too few documents for {counts[name]} masters")
            self.masters += chosen
            self._masters[name] = cycle(chosen)
            self._unrelated[name] = cycle(rest)

    def master(self, name: str) -> dict:
        return next(self._masters[name])

    def unrelated(self, name: str) -> dict:
        return next(self._unrelated[name])


@dataclass
class _Page:
    """An article before rendering, with its ground truth."""

    title: str
    text: str
    lang: str
    author: str
    copies: tuple[dict, ...] = ()
    others: tuple[str, ...] = ()
    attack: str | None = None
    strength: dict[str, Any] = field(default_factory=dict)
    reachable: bool = True
    path: str = ""
    date: datetime = datetime(2000, 1, 1)
    encoding: str | None = "utf-8"


def _author(doc: dict, rng: random.Random) -> str:
    return doc.get("author") or rng.choice(_AUTHORS[doc["lang"]])


def _copy_page(recipe: Recipe, pools: _Pools, rng: random.Random) -> _Page:
    name, attack, strength = recipe
    master = pools.master(name)
    copies, others, extra = [master], [], {}
    title = master["title"]
    if attack == "merge":
        other = pools.master(name)
        copies.append(other)
        extra["other"] = reflow(other["text"])
        title = f"{master['title']}（合并章节）"
    elif attack == "excerpt":
        filler = pools.unrelated(name)
        others.append(filler["id"])
        extra["filler"] = reflow(filler["text"])
        title = filler["title"]
    elif attack == "traditional":
        title = traditional(title, rng)
    return _Page(
        title=title,
        text=ATTACKS[attack](reflow(master["text"]), rng, **strength, **extra),
        lang=master["lang"],
        author=_author(master, rng),
        copies=tuple(copies),
        others=tuple(others),
        attack=attack,
        strength=dict(strength),  # the truth gets its own copy, SITES stays untouched
    )


def _unrelated_page(doc: dict, rng: random.Random) -> _Page:
    return _Page(
        title=doc["title"],
        text=reflow(doc["text"]),
        lang=doc["lang"],
        author=_author(doc, rng),
        others=(doc["id"],),
    )


def _plan(spec: SiteSpec, n_pages: int, pools: _Pools, rng: random.Random) -> list[_Page]:
    """The site's article pages, public ones first in shuffled order, then private copies."""
    total = round(n_pages * spec.share)
    n_private = max(2, round(0.06 * total)) if spec.recipes else 0
    n_copies = round(spec.copy_share * (total - n_private))
    recipes = cycle(spec.recipes)
    unrelated = cycle(spec.unrelated)
    kinds = [True] * n_copies + [False] * (total - n_private - n_copies)
    rng.shuffle(kinds)
    planned = [
        _copy_page(next(recipes), pools, rng)
        if is_copy
        else _unrelated_page(pools.unrelated(next(unrelated)), rng)
        for is_copy in kinds
    ]
    for _ in range(n_private):
        page = _copy_page(next(recipes), pools, rng)
        page.reachable = False
        planned.append(page)
    return planned


@dataclass(frozen=True)
class _Options:
    """Odd-endpoint settings of ``build_site``."""

    slow_seconds: float
    huge_bytes: int


@dataclass(frozen=True)
class RealPage:
    """A page from ``../shared/webpages``, served byte for byte."""

    id: str
    title: str
    lang: str
    encoding: str | None  # as declared by the page; may be wrong, as on the real web
    body: bytes


def real_pages(webpages_dir: Path, n: int, rng: random.Random) -> list[RealPage]:
    """``n`` real pages, half Chinese and half English, with their declared charsets."""
    by_lang: dict[str, list[dict]] = {"zh": [], "en": []}
    for item in read_jsonl(webpages_dir / "manifest.jsonl"):
        if not isinstance(item, BadLine) and item[1]["lang"] in by_lang:
            by_lang[item[1]["lang"]].append(item[1])
    chosen = rng.sample(by_lang["zh"], n // 2) + rng.sample(by_lang["en"], n - n // 2)
    out = []
    for entry in chosen:
        raw = (webpages_dir / entry["file"]).read_bytes()
        if entry["file"].endswith(".gz"):
            raw = gzip.decompress(raw)
        encoding = entry["encoding"] if entry["encoding"] != "unset" else None
        title = entry.get("truth_title") or entry["id"]
        out.append(RealPage(entry["id"], title, entry["lang"], encoding, raw))
    return out


def _page_truth(site: str, page: _Page, aliases: list[str]) -> dict[str, Any]:
    fraction = copied_fraction(page.attack, page.strength) if page.attack else 0.0
    return {
        "site": site,
        "path": page.path,
        "title": page.title,
        "lang": page.lang,
        "encoding": page.encoding,
        "reachable": page.reachable,
        "copies": [m["id"] for m in page.copies],
        "coverage": {m["id"]: fraction for m in page.copies},
        "attack": page.attack,
        "strength": page.strength,
        "others": list(page.others),
        "aliases": aliases,
    }


def _list_aliases(path: str) -> list[str]:
    """The other links every list page gives to an article (comments anchor, share URL)."""
    return [f"{path}#comments", pages.tracking_variant(path)]


class _SiteBuilder:
    """Lays out one site (articles, lists, home, feed, sitemap, robots, odd endpoints)."""

    def __init__(self, spec: SiteSpec, seed: int, pools: _Pools) -> None:
        self.spec = spec
        self.style = spec.style
        self.labels = spec.style.labels
        self.pools = pools
        self.rng = random.Random(f"{seed}:{spec.name}:layout")
        self.charset = "gbk" if spec.gbk_share >= 0.5 else "utf-8"
        self.resources: dict[str, Resource] = {}
        self.articles: list[dict[str, Any]] = []
        self.special: list[dict[str, Any]] = []
        self.home_links: list[Link] = [
            (self.labels["list"], "/list/1.html"),
            (self.labels["feed"], f"/{spec.feed}.xml"),
        ]
        self.lists: list[str] = []
        self._next_n = 1001

    def number(self) -> int:
        self._next_n += 1
        return self._next_n - 1

    def html(self, path: str, render: Callable[[str], str], charset: str, **resource: Any) -> None:
        """Store a generated HTML page in ``charset``.

        Characters the charset lacks (no-break spaces, ®, … in GBK) become character
        references, as CMSs write them, so every page is readable under its declared charset.
        """
        body = render(charset).encode(charset, "xmlcharrefreplace")
        self.resources[path] = Resource(
            body, f"text/html; charset={charset}", templated=True, **resource
        )

    def add_special(self, kind: str, path: str, status: int | None, **info: Any) -> None:
        self.special.append(
            {"site": self.spec.name, "path": path, "kind": kind, "status": status, **info}
        )

    def build(self, planned: list[_Page], real: list[RealPage], options: _Options) -> None:
        ordered = self._place(planned)
        public = [p for p in ordered if p.reachable]
        aliases = {p.path: _list_aliases(p.path) for p in ordered}
        self._render_articles(ordered, public)
        for page in public[:2]:
            aliases[page.path].append(self._redirect(page))
        for path in self._feed(public[:15]):
            aliases[path].append(path + FEED_QUERY)
        # Private copies sit among the public articles on the list pages, as on a sloppy site.
        items = [ListItem(p.title, p.path, p.date) for p in ordered]
        for real_page in real:
            items.insert(self.rng.randrange(len(items) + 1), self._real_page(real_page))
        self._odd_endpoints(options)
        self._lists(items)
        self._home(public)
        self._sitemap(items)
        self.resources["/robots.txt"] = Resource(
            pages.robots_txt(DISALLOW).encode(), "text/plain; charset=utf-8", templated=True
        )
        self.articles += [_page_truth(self.spec.name, p, aliases[p.path]) for p in ordered]

    def info(self) -> dict[str, Any]:
        return {
            "title": self.style.title,
            "lang": self.style.lang,
            "encoding": self.charset,
            "robots_disallow": list(DISALLOW),
            "feed": f"/{self.spec.feed}.xml",
            "sitemap": "/sitemap.xml",
            "lists": self.lists,
        }

    def _place(self, planned: list[_Page]) -> list[_Page]:
        """Give pages numbers, dates and paths; return them newest first."""
        for page in planned:
            n = self.number()
            minutes = self.rng.randrange(365 * 24 * 60)
            page.date = self.spec.start + timedelta(minutes=minutes)
            page.path = (
                self.spec.article_path.format(n=n, date=page.date)
                if page.reachable
                else f"{PRIVATE}{n}.html"
            )
        return sorted(planned, key=lambda p: (p.date, p.path), reverse=True)

    def _article(self, page: _Page, related: list[Link], prev_next: list[Link]) -> partial[str]:
        return partial(
            pages.article_page,
            self.style,
            path=page.path,
            title=page.title,
            paragraphs=[p for p in page.text.split("\n") if p.strip()],
            author=page.author,
            date=page.date,
            related=related,
            prev_next=prev_next,
            rng=random.Random(page.path),
        )

    def _render_articles(self, ordered: list[_Page], public: list[_Page]) -> None:
        for i, page in enumerate(ordered):
            others = [p for p in self.rng.sample(public, min(5, len(public))) if p is not page]
            # One related link carries tracking parameters: another duplicate URL.
            related = [
                (p.title, pages.tracking_variant(p.path) if j == 0 else p.path)
                for j, p in enumerate(others[:4])
            ]
            prev_next = [
                (f"{self.labels['prev' if k < i else 'next']}{ordered[k].title}", ordered[k].path)
                for k in (i - 1, i + 1)
                if 0 <= k < len(ordered) and ordered[k].reachable
            ]
            page.encoding = "gbk" if self.rng.random() < self.spec.gbk_share else "utf-8"
            self.html(page.path, self._article(page, related, prev_next), page.encoding)

    def _redirect(self, page: _Page) -> str:
        old = "/old/" + page.path.strip("/").replace("/", "-")
        self.resources[old] = Resource(b"", status=301, location=page.path)
        self.add_special("redirect", old, 301, target=page.path)
        self.home_links.append((page.title, old))
        return old

    def _real_page(self, real: RealPage) -> ListItem:
        path = f"/archive/{real.id}.html"
        ctype = f"text/html; charset={real.encoding}" if real.encoding else "text/html"
        self.resources[path] = Resource(real.body, ctype)
        page = _Page(
            title=real.title,
            text="",
            lang=real.lang,
            author="",
            others=(f"webpages:{real.id}",),
            path=path,
            date=self.spec.start,
            encoding=real.encoding,
        )
        self.articles.append(_page_truth(self.spec.name, page, _list_aliases(path)))
        return ListItem(real.title, path, self.spec.start)

    def _odd_endpoints(self, options: _Options) -> None:
        """Slow, huge and binary pages where the spec asks; a 404, a 500, off-site links."""
        if "slow" in self.spec.specials:
            slow = _unrelated_page(self.pools.unrelated(self.spec.unrelated[0]), self.rng)
            slow.path, slow.date = "/slow/latest.html", self.spec.start
            self.html(slow.path, self._article(slow, [], []), "utf-8", delay=options.slow_seconds)
            self.add_special("slow", slow.path, 200, delay=options.slow_seconds)
            self.home_links.append((slow.title, slow.path))
        if "huge" in self.spec.specials:
            huge = _Page(
                title="Everything we ever posted",
                text="\n".join(_filler(self.pools, self.spec.unrelated, options.huge_bytes)),
                lang=self.style.lang,
                author="Archive bot",
                path="/archive/all.html",
                date=self.spec.start,
            )
            self.html(huge.path, self._article(huge, [], []), "utf-8")
            self.add_special("huge", huge.path, 200)
            self.home_links.append((huge.title, huge.path))
        if "binary" in self.spec.specials:
            # PNG bytes under a text/html Content-Type, as misconfigured servers send them.
            self.resources["/media/cover.html"] = Resource(pages.png_bytes(self.rng))
            self.add_special("binary", "/media/cover.html", 200)
            self.home_links.append(("Cover", "/media/cover.html"))
        missing = f"/gone/{self.number()}.html"
        self.add_special("not_found", missing, 404)
        self.home_links.append((self.labels["comments"], missing))
        error = pages.error_page(500, "Internal Server Error").encode()
        self.resources["/error/500.html"] = Resource(error, status=500)
        self.add_special("server_error", "/error/500.html", 500)
        self.home_links.append(("500", "/error/500.html"))
        for label, url in OFFSITE:
            self.add_special("offsite", "/", None, url=url, label=label)

    def _lists(self, items: list[ListItem]) -> None:
        """Paginated lists /list/1.html …, each linking every list page and its neighbours."""
        chunks = [items[i : i + PER_PAGE] for i in range(0, len(items), PER_PAGE)] or [[]]
        self.lists = [f"/list/{k}.html" for k in range(1, len(chunks) + 1)]
        page_label = self.labels["page"]
        numbers = [(page_label.format(n=k), path) for k, path in enumerate(self.lists, start=1)]
        for k, chunk in enumerate(chunks, start=1):
            pager = (
                ([(self.labels["prev_page"], self.lists[k - 2])] if k > 1 else [])
                + numbers
                + ([(self.labels["next_page"], self.lists[k])] if k < len(chunks) else [])
            )
            render = partial(
                pages.list_page,
                self.style,
                heading=f"{self.labels['list']} {page_label.format(n=k)}",
                items=chunk,
                pager=pager,
            )
            self.html(self.lists[k - 1], render, self.charset)

    def _home(self, public: list[_Page]) -> None:
        latest = [ListItem(p.title, p.path, p.date) for p in public[:PER_PAGE]]
        render = partial(
            pages.list_page,
            self.style,
            heading=self.labels["latest"],
            items=latest,
            pager=[(self.labels["next_page"], "/list/1.html")],
            extra_links=self.home_links,
        )
        self.html("/", render, self.charset)

    def _feed(self, latest: list[_Page]) -> list[str]:
        """The RSS or Atom feed; returns the paths it links with tracking tags (RSS only)."""
        items = [ListItem(p.title, p.path, p.date, p.text[:120]) for p in latest]
        if self.spec.feed == "rss":
            body, ctype = pages.rss_xml(self.style, items, FEED_QUERY), "application/rss+xml"
        else:
            body, ctype = pages.atom_xml(self.style, items), "application/atom+xml"
        self.resources[f"/{self.spec.feed}.xml"] = Resource(
            body.encode(), f"{ctype}; charset=utf-8", templated=True
        )
        return [p.path for p in latest] if self.spec.feed == "rss" else []

    def _sitemap(self, items: list[ListItem]) -> None:
        # It lists the private copies too: only robots.txt keeps a crawler out of them.
        entries: list[tuple[str, datetime | None]] = [("/", None)]
        entries += [(path, None) for path in self.lists]
        entries += [(item.path, item.date) for item in items]
        self.resources["/sitemap.xml"] = Resource(
            pages.sitemap_xml(entries).encode(), "application/xml; charset=utf-8", templated=True
        )


def _filler(pools: _Pools, names: tuple[str, ...], size: int) -> list[str]:
    """Unrelated paragraphs adding up to at least ``size`` bytes of UTF-8."""
    out: list[str] = []
    total = 0
    for name in cycle(names):
        for paragraph in reflow(pools.unrelated(name)["text"]).split("\n"):
            out.append(paragraph)
            total += len(paragraph.encode("utf-8"))
        if total >= size:
            return out
    raise AssertionError("unreachable: cycle() never ends")


@dataclass
class TestWeb:
    """The generated sites (path → resource per site) and their ground truth.

    ``truth`` holds ``seed``, ``params``, ``sites`` (per-site info), ``masters`` (the
    library: id, title, text, lang, kind), ``articles`` (one entry per article page) and
    ``special`` (redirects, 404, 500, slow, huge, binary, off-site links).
    """

    __test__ = False  # not a pytest test class despite the name

    seed: int
    sites: dict[str, dict[str, Resource]]
    truth: dict[str, Any]

    @property
    def masters(self) -> list[dict[str, Any]]:
        return self.truth["masters"]

    def articles(self, reachable: bool | None = None) -> list[dict[str, Any]]:
        """Article entries of the truth, optionally only the (un)reachable ones."""
        return [
            a for a in self.truth["articles"] if reachable is None or a["reachable"] == reachable
        ]

    def write(self, out_dir: Path) -> None:
        """Save ``truth.json`` and ``masters.jsonl`` (for ``copytrack library add``)."""
        out_dir.mkdir(parents=True, exist_ok=True)
        truth = json.dumps(self.truth, ensure_ascii=False, indent=1)
        (out_dir / "truth.json").write_text(truth + "\n", encoding="utf-8")
        lines = "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in self.masters)
        (out_dir / "masters.jsonl").write_text(lines, encoding="utf-8")


def build_site(
    out_dir: Path | None = None,
    corpus_dir: Path = CORPUS_DIR,
    seed: int = 7,
    n_masters: int = 60,
    n_pages: int = 150,
    *,
    webpages_dir: Path | None = WEBPAGES_DIR,
    n_real_pages: int = 10,
    slow_seconds: float = 3.0,
    huge_bytes: int = 4_000_000,
) -> TestWeb:
    """Generate the test web from the corpus; deterministic for a given seed and parameters.

    ``n_pages`` article pages built from the corpus are shared out among the sites (plus
    ``n_real_pages`` real pages from ``webpages_dir`` on clean-site; ``None`` leaves them
    out). With ``out_dir``, truth.json and masters.jsonl are written there.
    """
    pools = _Pools(corpus_dir, n_masters, random.Random(f"{seed}:pools"))
    real = (
        real_pages(webpages_dir, n_real_pages, random.Random(f"{seed}:real"))
        if webpages_dir is not None and n_real_pages > 0
        else []
    )
    options = _Options(slow_seconds, huge_bytes)
    sites: dict[str, dict[str, Resource]] = {}
    truth: dict[str, Any] = {
        "seed": seed,
        "params": {
            "n_masters": n_masters,
            "n_pages": n_pages,
            "n_real_pages": len(real),
            "slow_seconds": slow_seconds,
            "huge_bytes": huge_bytes,
        },
        "sites": {},
        "masters": [
            {key: m[key] for key in ("id", "title", "text", "lang", "kind")}
            for m in sorted(pools.masters, key=lambda m: m["id"])
        ],
        "articles": [],
        "special": [],
    }
    for spec in SITES:
        planned = _plan(spec, n_pages, pools, random.Random(f"{seed}:{spec.name}:plan"))
        builder = _SiteBuilder(spec, seed, pools)
        builder.build(planned, real if not spec.recipes else [], options)
        sites[spec.name] = builder.resources
        truth["sites"][spec.name] = builder.info()
        truth["articles"] += builder.articles
        truth["special"] += builder.special
    web = TestWeb(seed, sites, truth)
    if out_dir is not None:
        web.write(out_dir)
    return web
