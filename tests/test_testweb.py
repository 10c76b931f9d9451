"""The local test web: attacks, generation, and the loopback server (via urllib)."""

from __future__ import annotations

import difflib
import html
import json
import random
import re
import threading
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator
from email.message import Message
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin
from urllib.robotparser import RobotFileParser

import pytest

from fingerprinter import align, to_letters
from testbed.attacks import AD_LINES, homophone_table, sentences
from testbed.hiding import HIDING_ATTACKS
from testbed.testweb import ATTACKS, RunningWeb, TestWeb, build_site, reflow, serve
from testbed.testweb.listings import build_news_mirror
from tests.corpus import documents, texts
from tracker.core.jsonl import read_jsonl

SLOW_SECONDS = 1.0


# ---------------------------------------------------------------- attacks


@pytest.fixture(scope="module")
def zh_text() -> str:
    return reflow("\n".join(texts("zh_news", 40)[:20]))


@pytest.fixture(scope="module")
def en_text() -> str:
    return reflow("\n\n".join(texts("en_news", 10)))


def letters(text: str) -> str:
    return to_letters(text).as_string()


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_every_attack_is_deterministic(name: str, zh_text: str) -> None:
    kwargs = {"merge": {"other": "另一篇文章。"}, "excerpt": {"filler": "无关的文字。"}}.get(
        name, {}
    )
    first = ATTACKS[name](zh_text, random.Random(5), **kwargs)
    assert first == ATTACKS[name](zh_text, random.Random(5), **kwargs)


def test_reflow_keeps_letters_and_makes_paragraphs() -> None:
    for name in ("zh_news", "zh_novel", "en_novel"):
        text = texts(name, 3)[0]
        flowed = reflow(text)
        assert letters(flowed) == letters(text)
        assert all(len(p) <= 400 or len(sentences(p)) == 1 for p in flowed.split("\n"))


def test_homophones_keep_pinyin_initials_at_the_asked_rate(zh_text: str) -> None:
    out = ATTACKS["homophones"](zh_text, random.Random(1), rate=0.3)
    assert letters(out) == letters(zh_text)
    table = homophone_table()
    eligible = [a != b for a, b in zip(zh_text, out, strict=True) if a in table]
    assert 0.25 < sum(eligible) / len(eligible) < 0.35
    assert all(b in table[a] for a, b in zip(zh_text, out, strict=True) if a != b)
    # Common characters only, which a GBK page can carry.
    assert all(b.encode("gbk") for a, b in zip(zh_text, out, strict=True) if a != b)


def test_traditional_changes_characters_not_letters(zh_text: str) -> None:
    out = ATTACKS["traditional"](zh_text, random.Random(1))
    assert sum(a != b for a, b in zip(zh_text, out, strict=True)) > 0.1 * len(zh_text)
    assert letters(out) == letters(zh_text)


@pytest.mark.parametrize("source", ["zh_text", "en_text"])
def test_noise_keeps_letters(source: str, request: pytest.FixtureRequest) -> None:
    text = request.getfixturevalue(source)
    out = ATTACKS["noise"](text, random.Random(2), rate=0.1)
    assert out != text
    assert letters(out) == letters(text)


@pytest.mark.parametrize(
    ("insert_share", "sign"), [(0.0, -1), (1.0, 1), (0.5, 0)], ids=["delete", "insert", "mixed"]
)
def test_char_edits_at_the_asked_rate(zh_text: str, insert_share: float, sign: int) -> None:
    text = zh_text[:3000]
    out = ATTACKS["char_edits"](text, random.Random(3), rate=0.05, insert_share=insert_share)
    edits = sum(
        max(i2 - i1, j2 - j1)
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, text, out, False).get_opcodes()
        if tag != "equal"
    )
    assert 0.035 < edits / len(text) < 0.065
    if sign:
        assert 0.035 < sign * (len(out) - len(text)) / len(text) < 0.065


def test_excerpt_copies_the_asked_fraction_inside_the_filler(zh_text: str) -> None:
    master, filler = zh_text[:2000], reflow(texts("zh_news", 60)[50])
    for fraction in (0.2, 0.5):
        out = ATTACKS["excerpt"](master, random.Random(4), fraction=fraction, filler=filler)
        match = difflib.SequenceMatcher(None, master, out, False).find_longest_match()
        longest_sentence = max(len(s) for s in sentences(master))
        assert fraction * len(master) - 2 <= match.size <= fraction * len(master) + longest_sentence
        assert all(p in out for p in filler.split("\n"))


def test_merge_contains_both_and_shuffles_keep_content(zh_text: str, en_text: str) -> None:
    merged = ATTACKS["merge"](zh_text, random.Random(5), other=en_text)
    assert zh_text in merged and en_text in merged
    shuffled = ATTACKS["paragraph_shuffle"](zh_text, random.Random(5))
    assert shuffled != zh_text
    assert sorted(shuffled.split("\n")) == sorted(zh_text.split("\n"))
    for text in (zh_text, en_text):
        out = ATTACKS["sentence_shuffle"](text, random.Random(5))
        assert out != text
        assert Counter(letters(out)) == Counter(letters(text))


def test_ads_after_every_k_paragraphs(zh_text: str, en_text: str) -> None:
    for text, lang in ((zh_text, "zh"), (en_text, "en")):
        out = ATTACKS["insert_ads"](text, random.Random(6), every=2).split("\n")
        n = len(text.split("\n"))
        assert len(out) == n + n // 2
        assert all(line in AD_LINES[lang] for line in out[2::3])


def test_combine_edits_but_keeps_the_copy_findable(zh_text: str) -> None:
    out = ATTACKS["combine"](zh_text, random.Random(7))
    assert letters(out) != letters(zh_text)
    assert align(zh_text, out).master_coverage > 0.9


# ---------------------------------------------------------------- generation


@pytest.fixture(scope="module")
def web() -> TestWeb:
    return build_site(slow_seconds=SLOW_SECONDS)


def test_same_seed_same_bytes(web: TestWeb, tmp_path: Path) -> None:
    small = {"n_masters": 20, "n_pages": 40, "n_real_pages": 4, "huge_bytes": 100_000}
    first, second = build_site(tmp_path / "a", seed=11, **small), build_site(seed=11, **small)
    assert first.sites == second.sites and first.truth == second.truth
    second.write(tmp_path / "b")
    for name in ("truth.json", "masters.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    other = build_site(seed=12, **small)
    assert other.truth["articles"] != first.truth["articles"]


def test_truth_describes_masters_and_pages(web: TestWeb, tmp_path: Path) -> None:
    assert len(web.masters) == 60
    # Masters from each of the corpus's four files (kinds as the corpus names them).
    assert {m["kind"] + "/" + m["lang"] for m in web.masters} == {
        documents(name, 1)[0]["kind"] + "/" + name[:2]
        for name in ("zh_news", "zh_novel", "en_news", "en_novel")
    }
    articles = web.articles()
    assert 140 <= len(articles) <= 180
    master_ids = {m["id"] for m in web.masters}
    for article in articles:
        assert set(article["copies"]) <= master_ids
        assert not set(article["others"]) & master_ids  # unrelated text is never a master
    attacks = {a["attack"] for a in articles if a["copies"]}
    # Every attack but the short excerpt, which `copytrack eval` measures on news briefs:
    # the test web's masters are whole articles and chapters.
    # Hidden characters are measured by the eval and tests/test_initials_hidden.py, not served.
    assert attacks == set(ATTACKS) - {"short_excerpt"} - set(HIDING_ATTACKS)
    assert any(len(a["copies"]) == 2 for a in articles)
    assert web.articles(reachable=False)
    assert all(a["path"].startswith("/private/") for a in web.articles(reachable=False))
    assert {a["encoding"] for a in articles} >= {"gbk", "utf-8"}
    web.write(tmp_path)
    assert json.loads((tmp_path / "truth.json").read_text("utf-8")) == web.truth
    library = [item[1] for item in read_jsonl(tmp_path / "masters.jsonl")]
    assert library == web.masters
    assert all(set(m) == {"id", "title", "text", "lang", "kind"} for m in library)


# ---------------------------------------------------------------- serving


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def fetch(url: str, method: str = "GET") -> tuple[int, Message, bytes]:
    """Status, headers and body, without following redirects or raising on errors."""
    try:
        with _OPENER.open(urllib.request.Request(url, method=method), timeout=30) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers, err.read()


class _ArticleText(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.depth = {"article": 0, "p": 0}
        self.paragraphs: list[str] = []

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag in self.depth:
            self.depth[tag] += 1
            if tag == "p" and self.depth["article"]:
                self.paragraphs.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.depth:
            self.depth[tag] -= 1

    def handle_data(self, data: str) -> None:
        if self.depth["article"] and self.depth["p"]:
            self.paragraphs[-1] += data


def article_text(html: str) -> str:
    parser = _ArticleText()
    parser.feed(html)
    return "\n".join(parser.paragraphs)


@pytest.fixture(scope="module")
def running(web: TestWeb) -> Iterator[RunningWeb]:
    with serve(web) as sites:
        yield sites
    assert not [t for t in threading.enumerate() if t.name.startswith("testweb-")]


def test_serve_binds_loopback_only(web: TestWeb) -> None:
    with pytest.raises(ValueError, match="loopback"):
        serve(web, host="0.0.0.0")


def test_every_article_is_served_and_copies_its_masters(web: TestWeb, running: RunningWeb) -> None:
    masters = {m["id"]: m["text"] for m in web.masters}
    for article in web.articles():
        status, headers, body = fetch(running.url(article["site"], article["path"]))
        assert status == 200, article["path"]
        assert headers.get_content_charset() == article["encoding"]
        if any(other.startswith("webpages:") for other in article["others"]):
            continue  # a real page, served as stored
        page = body.decode(article["encoding"])
        assert re.search(f'charset="?{article["encoding"]}"', page[:300])
        text = article_text(page)
        # Shuffled sentences shorter than the alignment's shortest span are not found
        # again (classical Chinese has many): a shuffle keeps less of what it copied.
        kept = 0.6 if article["attack"] == "sentence_shuffle" else 0.8
        for master_id in article["copies"]:
            coverage = align(masters[master_id], text).master_coverage
            assert coverage >= kept * article["coverage"][master_id], (article, coverage)
        if not article["copies"]:
            assert text


def test_robots_txt(web: TestWeb, running: RunningWeb) -> None:
    for site, base in running.base_urls.items():
        status, headers, body = fetch(f"{base}/robots.txt")
        assert status == 200 and headers.get_content_type() == "text/plain"
        robots = body.decode()
        assert "Disallow: /private/" in robots
        assert f"Sitemap: {base}/sitemap.xml" in robots
        parser = RobotFileParser()
        parser.parse(robots.splitlines())
        for article in web.articles():
            if article["site"] == site:
                allowed = parser.can_fetch("copytrack", f"{base}{article['path']}")
                assert allowed == article["reachable"]
        assert not parser.can_fetch("BadBot", f"{base}/")


def special(web: TestWeb, kind: str) -> list[dict]:
    found = [s for s in web.truth["special"] if s["kind"] == kind]
    assert found, kind
    return found


def test_redirects_are_301_to_the_canonical_url(web: TestWeb, running: RunningWeb) -> None:
    for entry in special(web, "redirect"):
        status, headers, _ = fetch(running.url(entry["site"], entry["path"]))
        assert status == 301
        assert headers["Location"] == running.url(entry["site"], entry["target"])
        with urllib.request.urlopen(running.url(entry["site"], entry["path"])) as resp:
            assert resp.status == 200 and resp.url == headers["Location"]


def test_odd_endpoints(web: TestWeb, running: RunningWeb) -> None:
    for kind, status in (("not_found", 404), ("server_error", 500)):
        for entry in special(web, kind):
            assert fetch(running.url(entry["site"], entry["path"]))[0] == status
    assert fetch(running.url("pirate-news", "/no/such/page.html"))[0] == 404

    (slow,) = special(web, "slow")
    started = time.monotonic()
    status, _, body = fetch(running.url(slow["site"], slow["path"]))
    assert status == 200 and body
    assert time.monotonic() - started >= SLOW_SECONDS

    (huge,) = special(web, "huge")
    status, headers, body = fetch(running.url(huge["site"], huge["path"]))
    assert status == 200 and len(body) >= web.truth["params"]["huge_bytes"] >= 3_000_000
    assert headers.get_content_type() == "text/html"

    (binary,) = special(web, "binary")
    status, headers, body = fetch(running.url(binary["site"], binary["path"]))
    assert status == 200 and headers.get_content_type() == "text/html"
    assert body.startswith(b"\x89PNG\r\n\x1a\n")


def test_tracking_duplicates_and_head(web: TestWeb, running: RunningWeb) -> None:
    article = web.articles(reachable=True)[0]
    canonical = fetch(running.url(article["site"], article["path"]))
    for alias in article["aliases"]:
        if alias.startswith("/old/"):
            continue
        assert fetch(running.url(article["site"], alias.split("#")[0]))[2] == canonical[2]
    status, headers, body = fetch(running.url(article["site"], article["path"]), "HEAD")
    assert status == 200 and body == b""
    assert int(headers["Content-Length"]) == len(canonical[2])


def _linked_paths(xml: bytes, base: str) -> set[str]:
    """Site paths of a sitemap's <loc>s, an RSS <link>s or Atom <link href>s."""
    urls = [
        element.get("href") or element.text or ""
        for element in ET.fromstring(xml).iter()
        if element.tag.rpartition("}")[2] in ("loc", "link")
    ]
    return {url.removeprefix(base).split("?")[0] for url in urls if url.startswith(base)}


def test_sitemap_and_feed_list_articles(web: TestWeb, running: RunningWeb) -> None:
    for site, info in web.truth["sites"].items():
        base = running.base_urls[site]
        paths = {a["path"] for a in web.articles() if a["site"] == site}
        public = {a["path"] for a in web.articles(reachable=True) if a["site"] == site}
        status, _, sitemap = fetch(base + info["sitemap"])
        assert status == 200
        assert _linked_paths(sitemap, base) == paths | set(info["lists"]) | {"/"}
        status, headers, feed = fetch(base + info["feed"])
        assert status == 200 and headers.get_content_type().endswith("+xml")
        linked = _linked_paths(feed, base) - {"/"}
        assert linked and linked <= public


def _links(base: str, path: str, body: bytes) -> Iterator[str]:
    """Absolute URLs of a page's links, fragments and queries dropped."""
    # Links are ASCII and '"' never occurs inside a GBK character, so latin-1 is enough here.
    for href in re.findall(r'href="([^"]+)"', body.decode("latin-1")):
        url = urljoin(base + path, html.unescape(href))
        if url.startswith("http"):
            yield url.split("#")[0].split("?")[0]


def test_a_polite_crawl_reaches_every_public_article(web: TestWeb, running: RunningWeb) -> None:
    """Follow links from the home page, obeying robots.txt: all reachable articles, no more."""
    for site, base in running.base_urls.items():
        robots = RobotFileParser()
        robots.parse(fetch(f"{base}/robots.txt")[2].decode().splitlines())
        seen, queue, offsite, blocked = {"/"}, ["/"], set(), set()
        log_start = len(running.requests)
        while queue:
            path = queue.pop()
            status, _, body = fetch(base + path)
            if status != 200 or path.startswith("/archive/"):  # real pages link elsewhere
                continue
            for url in _links(base, path, body):
                target = url.removeprefix(base)
                if target == url:
                    offsite.add(url)
                elif not robots.can_fetch("copytrack", url):
                    blocked.add(target)
                elif target not in seen and not target.startswith("/slow/"):
                    seen.add(target)
                    queue.append(target)
        articles = [a for a in web.articles() if a["site"] == site]
        assert {a["path"] for a in articles if a["reachable"]} <= seen
        assert {a["path"] for a in articles if not a["reachable"]} <= blocked
        assert offsite == {entry["url"] for entry in special(web, "offsite")}
        fetched = [r for r in running.requests[log_start:] if r.site == site]
        assert fetched and not [r for r in fetched if r.path.startswith("/private/")]


def test_the_news_mirror_lists_the_librarys_headlines_over_paginated_listings():
    """5 listing pages of 40 headlines with first lines, each but the last linking its
    next page (下一页, the pagination a crawler could take for a chapter's), tag, archive
    and search pages, and 20 whole copies with related-articles blocks."""
    web = build_news_mirror()
    site = web.sites["news-mirror"]
    kinds = Counter(a["kind"] for a in web.articles())
    assert len(web.masters) == 200 and kinds["article"] == 20 and kinds["listing page"] == 5
    lists = web.truth["sites"]["news-mirror"]["lists"]
    for n, path in enumerate(lists):
        body = site[path].body.decode("utf-8")
        assert body.count('<p class="summary">') == 40 and ("下一页" in body) == (
            n < len(lists) - 1
        )
        assert "评论" in body and "分享" in body and "第5页" in body
    for article in web.articles():
        if article["copies"]:
            body = site[article["path"]].body.decode("utf-8")
            assert 'class="related-articles"' in body and body.count("<li><a") >= 5
