"""Fuzzing the path page bytes → decoded text → article text → fingerprints → findings.

Random bytes and real pages of ../shared/webpages mutated the way broken servers and
evasive pirates mutate them (byte flips, truncation, splicing, swapped charset
declarations, deeply nested tags, huge attributes). Each case must end within a time cap,
either with text or with a clear reason (``Digest.skip``, a ValueError naming the
problem), never with another exception.

Deterministic (``derandomize``) and about half a minute in all; COPYTRACK_FUZZ_SCALE=20
runs twenty times as many cases (a deeper search, e.g. before a release).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from functools import cache
from pathlib import Path
from typing import Any, TypeVar
from xml.sax.saxutils import escape

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from scrapy import Request
from scrapy.http import HtmlResponse, Response, TextResponse, XmlResponse
from scrapy.utils.test import get_crawler

from benchmarks.bench_extraction import read_page
from crawler.digest import Digest, digest
from crawler.fetch import html_to_text
from crawler.items import DroppedLinks, FetchedPage, PageProblem
from crawler.spiders.campaign import CampaignSpider
from extractor.cpucap import CpuTimeExceeded, cpu_cap
from extractor.extraction import extract
from fingerprinter import fingerprint, query_fingerprints
from tests.adding import add_all
from tests.corpus import texts
from tracker.context import Context
from tracker.masters.library import Work
from tracker.matching.matcher import match_text

pytestmark = pytest.mark.slow

WEBPAGES = Path(__file__).parents[1] / ".." / "shared" / "webpages"
needs_webpages = pytest.mark.skipif(
    not (WEBPAGES / "manifest.jsonl").exists(),
    reason=f"shared web pages not found at {WEBPAGES}",
)
SCALE = int(os.environ.get("COPYTRACK_FUZZ_SCALE", "1"))
# Per case: Hypothesis' deadline (reported with the shrunk input) and an absolute cap on
# CPU time, which interrupts a runaway case instead of waiting for the test timeout.
# Pages take 0.01-0.5 s on this machine; the margins absorb a loaded CI runner.
DEADLINE = timedelta(seconds=10)
CPU_CAP_SECONDS = 30.0
MAX_PAGE_BYTES = 150_000  # keeps a case well under a second
PAGES_PER_LANGUAGE = 20
URL = "http://pirate.example/a.html"

T = TypeVar("T")


def fuzz_settings(max_examples: int) -> settings:
    return settings(
        max_examples=max_examples * SCALE,
        derandomize=True,
        deadline=DEADLINE,
        database=None,  # derandomized: the example database would only add noise
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            # The library fixture is only read, so its examples may share it.
            HealthCheck.function_scoped_fixture,
        ],
    )


class CaseTooSlow(Exception):
    """A case ran past CPU_CAP_SECONDS."""


@contextmanager
def checked_cpu_cap(what: str, seconds: float = CPU_CAP_SECONDS) -> Iterator[None]:
    """Interrupt the block after ``seconds`` of CPU time (the crawler's own cap); fail if
    it took longer anyway (code that swallowed the interruption, or digest's own report
    of it as a page too slow to extract)."""
    started = time.process_time()
    try:
        with cpu_cap(seconds):
            yield
    except CpuTimeExceeded as err:
        raise CaseTooSlow(f"{what}: {err}") from None
    used = time.process_time() - started
    if used > seconds:
        raise CaseTooSlow(f"{what}: took {used:.1f} s of CPU time (cap {seconds:.0f} s)")


def capped(what: str, call: Callable[[], T]) -> T:
    with checked_cpu_cap(what):
        return call()


# ---------------------------------------------------------------------- the real pages


@cache
def shared_pages() -> tuple[tuple[str, bytes], ...]:
    """(id, raw bytes) of small Chinese and English pages, spread over the sources."""
    with open(WEBPAGES / "manifest.jsonl", encoding="utf-8") as fh:
        entries = [json.loads(line) for line in fh if line.strip()]
    chosen: list[tuple[str, bytes]] = []
    for lang in ("zh", "en"):
        small = sorted(
            (e for e in entries if e["lang"] == lang and (e.get("bytes") or 0) <= MAX_PAGE_BYTES),
            key=lambda e: e["id"],
        )
        step = max(1, len(small) // PAGES_PER_LANGUAGE)
        chosen += [(e["id"], read_page(WEBPAGES, e)) for e in small[::step][:PAGES_PER_LANGUAGE]]
    return tuple(chosen)


# ---------------------------------------------------------------------- mutations

Mutation = Callable[[bytes], bytes]
_META_CHARSET = re.compile(rb"""charset\s*=\s*["']?[A-Za-z0-9_.:-]*""", re.I)
CHARSETS = (
    "utf-8", "gbk", "gb2312", "gb18030", "big5", "shift_jis", "euc-jp", "euc-kr",
    "iso-8859-1", "windows-1251", "utf-16", "utf-16be", "utf-32", "utf-7", "x-user-defined",
    "hz-gb-2312", "base64", "rot13", "idna", "unicode-escape", "bogus-charset", "",
)  # fmt: skip
NEST_TAGS = ("div", "b", "font", "span", "table><tr><td", "ul><li", "blockquote", "x-y")


def _at(body: bytes, where: float) -> int:
    return int(where * len(body))


fractions = st.floats(0, 1)


@st.composite
def byte_flips(draw: st.DrawFn) -> Mutation:
    flips = draw(st.lists(st.tuples(fractions, st.integers(1, 255)), min_size=1, max_size=30))

    def mutate(body: bytes) -> bytes:
        out = bytearray(body)
        for where, mask in flips:
            if out:
                out[min(_at(out, where), len(out) - 1)] ^= mask
        return bytes(out)

    return mutate


@st.composite
def truncations(draw: st.DrawFn) -> Mutation:
    keep = draw(fractions)
    return lambda body: body[: _at(body, keep)]


@st.composite
def splices(draw: st.DrawFn) -> Mutation:
    """This page's head and another page's tail: two encodings, two documents."""
    other = draw(st.integers(0, len(shared_pages()) - 1))
    cut, resume = draw(fractions), draw(fractions)
    tail = shared_pages()[other][1]
    return lambda body: body[: _at(body, cut)] + tail[_at(tail, resume) :]


@st.composite
def charset_swaps(draw: st.DrawFn) -> Mutation:
    label = draw(st.sampled_from(CHARSETS)).encode()

    def mutate(body: bytes) -> bytes:
        swapped = _META_CHARSET.sub(b"charset=" + label, body)
        if swapped != body:
            return swapped
        return (
            b'<meta http-equiv="Content-Type" content="text/html; charset=' + label + b'">' + body
        )

    return mutate


@st.composite
def nestings(draw: st.DrawFn) -> Mutation:
    """Thousands of unclosed wrappers: browsers still show what they hold."""
    opening = b"<" + draw(st.sampled_from(NEST_TAGS)).encode() + b">"
    depth = draw(st.integers(1, 5000))
    where = draw(fractions)
    return lambda body: body[: _at(body, where)] + opening * depth + body[_at(body, where) :]


@st.composite
def huge_attributes(draw: st.DrawFn) -> Mutation:
    size = draw(st.integers(1_000, 1_000_000))
    filler = draw(st.sampled_from([b"x", b"\xe4\xb8\xad", b" ", b"&amp;", b"<"]))
    element = draw(st.sampled_from([b'<a href="', b'<img alt="', b'<div class="', b"<p title='"]))
    where = draw(fractions)
    attribute = element + filler * (size // len(filler)) + element[-1:] + b">"
    return lambda body: body[: _at(body, where)] + attribute + body[_at(body, where) :]


@st.composite
def insertions(draw: st.DrawFn) -> Mutation:
    junk = draw(st.binary(min_size=1, max_size=2000))
    where = draw(fractions)
    return lambda body: body[: _at(body, where)] + junk + body[_at(body, where) :]


@st.composite
def prefixes(draw: st.DrawFn) -> Mutation:
    """What comes before the HTML: a BOM (maybe the wrong one) or a crawler wrapper line."""
    prefix = draw(
        st.sampled_from(
            [b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff", b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff",
             b'<text id="http://x" title="t" encoding="gbk">\n',
             b'<text id="x" encoding="utf-16">', b"\x00" * 8, b"\x1f\x8b\x08\x00"]
        )
    )  # fmt: skip
    return lambda body: prefix + body


MUTATIONS = st.one_of(
    byte_flips(), truncations(), splices(), charset_swaps(), nestings(), huge_attributes(),
    insertions(), prefixes(),
)  # fmt: skip
CONTENT_TYPES = st.one_of(
    st.none(),
    st.sampled_from(["text/html", "text/plain", "application/xhtml+xml; charset=utf-8"]),
    st.sampled_from(CHARSETS).map(lambda c: f"text/html; charset={c}"),
    st.text(max_size=60),
)


@st.composite
def mutated_pages(draw: st.DrawFn) -> tuple[str, bytes]:
    page_id, body = draw(st.sampled_from(shared_pages()))
    mutations = draw(st.lists(MUTATIONS, min_size=1, max_size=4))
    for mutate in mutations:
        body = mutate(body)
    return page_id, body


# ---------------------------------------------------------------------- invariants


def check_digest(found: Digest) -> None:
    """Text, or no text and the reason why: nothing in between."""
    if found.skip:
        assert found.text == "" and found.detail, found
    else:
        assert found.text.strip(), found
        assert not any("\ud800" <= c <= "\udfff" for c in found.text)


def check_html_to_text(body: bytes) -> None:
    """`copytrack check` and `library add` make of a file the text the crawler makes of
    the page, or raise a ValueError saying why when the crawler skips it."""
    found = digest(body, None, URL)
    try:
        text = html_to_text(body, None, URL)
    except ValueError as err:
        assert str(err) and found.skip, (err, found)
        return
    assert text == found.text, found


def check_fingerprints(text: str) -> None:
    indexed, queried = fingerprint(text), query_fingerprints(text)
    assert all(0 <= f.start < f.end <= len(text) for f in [*indexed, *queried])
    # Every indexed granule is also a query granule (same letters, same offset).
    assert {f.value for f in indexed} <= {f.value for f in queried}


def crawl_path(body: bytes, content_type: str | None, what: str) -> Digest:
    found = capped(what, lambda: digest(body, content_type, URL))
    check_digest(found)
    capped(what, lambda: check_fingerprints(found.text))
    return found


@fuzz_settings(300)
@given(body=st.binary(max_size=20_000), content_type=CONTENT_TYPES)
@example(body=b"\x00" * 10, content_type=None)
@example(body=b"\xef\xbb\xbf", content_type="text/html; charset=utf-7")
@example(body=b"<meta charset=base64>PGh0bWw+", content_type=None)
@example(body=bytes(range(1, 256)) * 20, content_type=None)  # check took mojibake as text
def test_random_bytes(body: bytes, content_type: str | None) -> None:
    crawl_path(body, content_type, f"{len(body)} random bytes")
    capped("html_to_text", lambda: check_html_to_text(body))


@fuzz_settings(200)
@given(st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=3000))
def test_random_text_through_extraction_and_fingerprints(html: str) -> None:
    found = capped("extract", lambda: extract(html, URL))
    assert bool(found.text) != bool(found.reason), found
    capped("fingerprints", lambda: check_fingerprints(html))  # lone surrogates included


@needs_webpages
@fuzz_settings(150)
@given(page=mutated_pages(), content_type=CONTENT_TYPES)
def test_mutated_real_pages(page: tuple[str, bytes], content_type: str | None) -> None:
    page_id, body = page
    crawl_path(body, content_type, f"{page_id} mutated ({len(body)} bytes)")
    capped(page_id, lambda: check_html_to_text(body))


# ---------------------------------------------------------------------- the spider

HOSTILE_URLS = st.one_of(
    st.text(max_size=30),
    st.sampled_from(
        ["http://[::1", "http://a.example:99999/", "http://a.example:-1/", "A://[", "mailto:x",
         "javascript:void(0)", "//b.example/x", "/relative", "http://", "data:,x", "ftp://x/",
         "http://\u00e9.example/", "http://a..b/", "http://a.example/ok"]
    ),
)  # fmt: skip
RESPONSES = {
    "page": (HtmlResponse, "http://a.example/", "<html><body>{}</body></html>",
             '<a href="{}">x</a>'),
    "sitemap": (XmlResponse, "http://a.example/s.xml", "<urlset>{}</urlset>",
                "<url><loc>{}</loc></url>"),
    "feed": (XmlResponse, "http://a.example/f.xml", "<rss><channel>{}</channel></rss>",
             "<item><link>{}</link></item>"),
    "robots": (TextResponse, "http://a.example/robots.txt", "{}", "Sitemap: {}\n"),
}  # fmt: skip
RAW_BODIES = st.one_of(
    st.binary(max_size=2000),
    *(st.binary(max_size=2000).map(lambda b, p=p: p + b)
      for p in (b"<urlset><url><loc>", b"<sitemapindex><sitemap><loc>", b"<rss><item><link>",
                b"\x1f\x8b\x08", b"<?xml version='1.0'?>")),
    st.binary(max_size=2000).map(lambda b: gzip.compress(b"<urlset><url><loc>" + b)),
)  # fmt: skip


@pytest.fixture(scope="module")
def spider() -> CampaignSpider:
    settings = {
        "COPYTRACK_CAMPAIGN": {"name": "fuzz", "seeds": ["http://a.example/"]},
        "COPYTRACK_MAX_LINKS_PER_PAGE": 5,
    }
    return CampaignSpider.from_crawler(get_crawler(CampaignSpider, settings))


def check_callback(spider: CampaignSpider, callback: str, response: Response) -> list[Any]:
    """Requests and items for the pipeline, whatever the body: a callback that raises
    loses the rest of its page and leaves no trace in the run's counts."""
    out = capped(callback, lambda: list(getattr(spider, callback)(response)))
    assert all(isinstance(x, (Request, FetchedPage, PageProblem, DroppedLinks)) for x in out)
    return out


@fuzz_settings(300)
@given(kind=st.sampled_from(sorted(RESPONSES)), urls=st.lists(HOSTILE_URLS, max_size=12))
@example(kind="sitemap", urls=["/relative", "http://a.example/ok"])  # lost the whole sitemap
@example(kind="page", urls=["http://a.example:99999/", "http://a.example/ok"])
@example(kind="feed", urls=["A://["])
@example(kind="page", urls=["\x00", "http://a.example/ok"])  # one NUL: no links followed
def test_spider_follows_the_usable_links_of_any_page(
    spider: CampaignSpider, kind: str, urls: list[str]
) -> None:
    """Links, sitemap entries, feed items and robots.txt sitemaps a request cannot be made
    of are skipped and counted; the usable ones are followed."""
    cls, url, template, entry = RESPONSES[kind]
    quote = escape if cls is XmlResponse else (lambda u: u.replace('"', ""))
    body = template.format("".join(entry.format(quote(u)) for u in urls))
    response = cls(url, body=body.encode(), encoding="utf-8", request=Request(url))
    out = check_callback(spider, "parse_page" if kind == "page" else "parse_seed", response)
    # A bad link must not cost the good ones (robots.txt: the first 5 are followed).
    if "http://a.example/ok" in urls[:5]:
        assert "http://a.example/ok" in {x.url for x in out if isinstance(x, Request)}


@fuzz_settings(300)
@given(
    body=RAW_BODIES,
    cls=st.sampled_from([Response, HtmlResponse, XmlResponse, TextResponse]),
    url=st.sampled_from(["http://a.example/", "http://a.example/s.xml", "http://a.example/s.xml.gz"]),
    callback=st.sampled_from(["parse_seed", "parse_sitemap", "parse_page"]),
)  # fmt: skip
@example(body=b"\x1f\x8b\x08\x00garbage", cls=Response, url="http://a.example/s.xml.gz",
         callback="parse_seed")  # gunzip's error escaped the callback  # fmt: skip
@example(body=b"<rss", cls=Response, url="http://a.example/s.xml", callback="parse_seed")
def test_spider_callbacks_on_any_body(
    spider: CampaignSpider, body: bytes, cls: type[Response], url: str, callback: str
) -> None:
    extra = {} if cls is Response else {"encoding": "utf-8"}
    check_callback(spider, callback, cls(url, body=body, request=Request(url), **extra))


# ---------------------------------------------------------------------- up to findings

LIBRARY_SIZES = {"zh_news": 4, "en_news": 2}  # works of the shared corpus, as zh0… en1
WORKS = tuple(f"{name[:2]}{n}" for name, size in LIBRARY_SIZES.items() for n in range(size))


@cache
def library_texts() -> dict[str, str]:
    """Read when a test needs it: without the corpus only these tests are skipped."""
    return {
        f"{name[:2]}{n}": text
        for name, size in LIBRARY_SIZES.items()
        for n, text in enumerate(texts(name, size))
    }


MARKUP_TRICKS = st.one_of(
    st.tuples(st.sampled_from(NEST_TAGS), st.integers(1, 5000)).map(lambda t: f"<{t[0]}>" * t[1]),
    st.tuples(st.sampled_from(["div", "span", "p"]), st.integers(1_000, 1_000_000)).map(
        lambda t: f'<{t[0]} title="{"x" * t[1]}">'
    ),
    st.integers(1, 3000).map(lambda n: "<!-- -->" * n),
    st.integers(1, 2000).map(lambda n: "".join(f'<a href="/{i}"></a>' for i in range(n))),
)


@pytest.fixture
def library(ctx: Context) -> Context:
    add_all(
        ctx,
        [Work(text=text, external_id=external_id) for external_id, text in library_texts().items()],
    )
    return ctx


def pirate_page(text: str, tricks: list[tuple[int, str]], charset: str) -> bytes:
    """A copy of ``text`` as an article, markup tricks between its paragraphs."""
    paragraphs = [f"<p>{p}</p>" for p in text.split("\n") if p.strip()]
    for where, trick in tricks:
        paragraphs.insert(where % (len(paragraphs) + 1), trick)
    html = (
        f'<html><head><meta charset="{charset}"><title>转载</title></head><body>'
        f'<nav><a href="/">首页</a></nav><article>{"".join(paragraphs)}</article></body></html>'
    )
    return html.encode(charset, "xmlcharrefreplace")


@fuzz_settings(60)
@given(
    work=st.sampled_from(WORKS),
    tricks=st.lists(st.tuples(st.integers(0, 1000), MARKUP_TRICKS), min_size=1, max_size=3),
    charset=st.sampled_from(["utf-8", "gb18030"]),
)
@example(work="zh0", tricks=[(0, "<div>" * 300)], charset="utf-8")  # hid the copy
def test_markup_tricks_do_not_hide_a_copy(
    library: Context, work: str, tricks: list[tuple[int, str]], charset: str
) -> None:
    """Markup a browser shows the text through must not hide the copy from the matcher."""
    body = pirate_page(library_texts()[work], tricks, charset)
    found = crawl_path(body, f"text/html; charset={charset}", f"{work} with tricks")
    matches = capped("match_text", lambda: match_text(library, found.text))
    assert work in {m.master.external_id for m in matches}, (found.skip, found.detail)


@needs_webpages
@fuzz_settings(40)
@given(page=mutated_pages(), work=st.sampled_from(WORKS), where=fractions)
def test_mutated_pages_through_the_matcher(
    library: Context, page: tuple[str, bytes], work: str, where: float
) -> None:
    """A copy spliced into a mutated real page: findings (or none), never an error."""
    page_id, body = page
    copy = "".join(f"<p>{p}</p>" for p in library_texts()[work].split("\n")).encode()
    body = body[: _at(body, where)] + copy + body[_at(body, where) :]
    found = crawl_path(body, None, f"{page_id} mutated with {work}")
    matches = capped("match_text", lambda: match_text(library, found.text))
    for match in matches:
        assert match.master.external_id in WORKS
        assert 0 < match.score <= 1 and match.spans
        assert all(0 <= s.suspect_start < s.suspect_end <= len(found.text) for s in match.spans)


# ---------------------------------------------------------------------- found by fuzzing

ZH_ARTICLE = "".join(
    f"<p>这是第{n}段正文，讲述了一个很长的故事，足够被识别为文章的主体内容。</p>" for n in range(8)
)


@pytest.mark.parametrize(
    "wrapper",
    ["<div>" * 300, "<b>" * 5000, "<table><tr><td>" * 3000, "<x-y>" * 100_000],
)
def test_text_nested_past_the_parser_limit_is_kept(wrapper: str) -> None:
    """libxml2 silently dropped everything nested deeper than 256 elements; browsers show
    it, so a pirate could hide a copy there. Such pages are now parsed flattened."""
    html = "<html><head><title>标题</title><script>var s = '<div>';</script></head><body>"
    found = capped("extract", lambda: extract(html + wrapper + ZH_ARTICLE, URL))
    assert "这是第0段正文" in found.text and "这是第7段正文" in found.text
    assert "var s" not in found.text and found.title == "标题"
