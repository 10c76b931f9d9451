"""Decoded HTML → article text and metadata.

trafilatura runs first (text); readability-lxml gives a second opinion when trafilatura's
own readability pass disagrees with its text, and a rule measured on the shared pages (see
``_combine``) decides per page which text to keep. Title,
author and date come from the page's markup (``_metadata``). Pages without main text return
``text=""`` and a ``reason``.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import re
from collections import Counter
from dataclasses import dataclass, replace
from functools import lru_cache

import lxml.html
import trafilatura
import trafilatura.external
from htmldate import find_date
from lxml import etree
from lxml_html_clean import Cleaner
from readability import Document as ReadabilityDocument
from readability.readability import REGEXES as READABILITY_REGEXES
from trafilatura.metadata import examine_meta, extract_meta_json, extract_title
from trafilatura.settings import Document
from trafilatura.xml import xmltotxt

__all__ = ["Extracted", "ExtractionOptions", "extract", "published_date"]


@dataclass(frozen=True)
class ExtractionOptions:
    """Every knob of the extraction pipeline, in one place."""

    # Non-space characters; less is no main text ("Loading", "Access denied").
    min_text_chars: int = 20
    include_comments: bool = False  # append reader comments to the text
    include_tables: bool = True
    fallback: bool = True  # run readability-lxml as a second extractor
    # ... unless trafilatura's text and its own readability pass agree: each holds this
    # share of the other's tokens (half the shared pages; F1 unchanged, see _agree).
    agreement_share: float = 0.95
    max_html_chars: int = 4_000_000  # longer pages are cut before parsing (CPU guard)
    # Table cells whose text is mostly link text are navigation, ads or "related" boxes.
    max_cell_link_density: float = 0.3
    # Readability's text replaces trafilatura's (token counts, see _combine) when
    # trafilatura has fewer than short_tokens and readability short_ratio times more,
    short_tokens: int = 100
    short_ratio: float = 1.5
    # ... when it holds superset_share of trafilatura's tokens and superset_ratio times
    # as many (trafilatura stopped early),
    superset_share: float = 0.9
    superset_ratio: float = 1.2
    # ... or when trafilatura holds subset_share of its tokens and at most 1/subset_ratio
    # times as many (trafilatura kept boilerplate around the same article).
    subset_share: float = 0.9
    subset_ratio: float = 0.6
    # A listing (a list of headlines, a tag, archive or search page) is a page whose main
    # text is mostly listing_items or more short blocks (listing_item_chars at most) led by
    # links, listing_share of it, with less than listing_prose_chars of plain paragraphs
    # (of prose_chars or more without links): measured on the shared real pages, 4 of
    # 779 that are not listings are taken for one (docs/accuracy.md, "Listing pages").
    listing_items: int = 5
    listing_item_chars: int = 200
    listing_share: float = 0.6
    prose_chars: int = 150
    listing_prose_chars: int = 300


@dataclass(frozen=True)
class Extracted:
    """Main text and metadata of one page; ``reason`` says why ``text`` is empty."""

    text: str
    title: str | None = None
    author: str | None = None
    date: str | None = None
    extractor: str = "none"
    reason: str | None = None
    #: No text, and the page is a shell its scripts may fill (text written by JavaScript).
    scripted: bool = False
    #: A listing page (headlines linking to articles, see ExtractionOptions.listing_items):
    #: it copies no article, and its pagination is no chapter cut over pages.
    listing: bool = False


_WRAPPER_LINE = re.compile(r"""\A\s*<text\b[^>]*>""", re.I)
_WRAPPER_TITLE = re.compile(r"""\btitle\s*=\s*"([^"]*)\"""", re.I)
# Characters libxml2 rejects (C0 controls except tab/newline/CR, lone surrogates).
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_PARSER = lxml.html.HTMLParser(
    encoding="utf-8",
    collect_ids=False,
    default_doctype=False,
    remove_comments=True,
    remove_pis=True,
)
# Every element as lxml.html's HtmlElement, chosen in C: lxml.html's own lookup is a
# Python call per element touched (6.5 million on the shared pages, 3.6% of extraction)
# that only adds form-field classes, which no extractor here uses.
_PARSER.set_element_class_lookup(
    etree.ElementDefaultClassLookup(
        element=lxml.html.HtmlElement,
        comment=lxml.html.HtmlComment,
        pi=lxml.html.HtmlProcessingInstruction,
        entity=lxml.html.HtmlEntity,
    )
)
# Tags a flattened page keeps (none of them nests); block tags become paragraph breaks,
# the other tags are dropped, and raw-text elements are dropped with their content.
_FLAT_KEEP = frozenset({"html", "head", "title", "meta", "body", "p", "br"})
_RAW_TEXT_END = {
    name: re.compile(rf"</{name}\b", re.I) for name in ("script", "style", "template", "noscript")
}
# No "<" inside a tag: a failed match then stops at the next "<" (linear on any input).
_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9]*)\b[^<>]*>")
_BREAKS = re.compile(r"(?:<p>\s*)+")
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
# One token per CJK character, one per run of other word characters.
_TOKEN = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+")
_SPACE = re.compile(r"\s+")
_BLOCK_TAGS = frozenset(
    {
        *("address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt"),
        *("figcaption", "footer", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr"),
        *("li", "main", "nav", "ol", "p", "pre", "section", "table", "td", "th", "tr", "ul"),
    }
)
_AUTHOR_META = (
    "author",
    "article:author",
    "byline",
    "dc.creator",
    "dcterms.creator",
    "sailthru.author",
    "parsely-author",
)
# "作者：张三", "文/张三", "By Jane Doe"; a bare 文 is kept (it starts names too).
_AUTHOR_PREFIX = re.compile(r"^\s*(?:(?:作者|by\b)\s*[:：/／]?|文\s*[:：/／])\s*", re.I)


def _tokens(text: str) -> Counter[str]:
    return Counter(_TOKEN.findall(text.lower()))


def _visible_len(text: str) -> int:
    return len(_SPACE.sub("", text))


def _prepare(html: str, options: ExtractionOptions) -> tuple[str, str | None]:
    """Cut oversize input, drop the crawler wrapper line, remove XML-invalid characters."""
    html = html[: options.max_html_chars]
    wrapper_title = None
    m = _WRAPPER_LINE.match(html)
    if m:
        # Some archived pages start with `<text id=URL title=.. encoding=..>`: not HTML,
        # and libxml2 then nests the whole page inside an unknown element.
        t = _WRAPPER_TITLE.search(m.group(0))
        wrapper_title = t.group(1).strip() if t else None
        html = html[m.end() :]
    return _INVALID_XML.sub("", html), wrapper_title


def _flatten(html: str) -> str:
    """The page's text and paragraph breaks without its element nesting.

    One pass (no regex backtracking over the page): an unclosed <script> drops the rest.
    """
    parts: list[str] = []
    pos = 0
    while (tag := _TAG.search(html, pos)) is not None:
        parts.append(html[pos : tag.start()])
        pos = tag.end()
        closing, name = tag.group(1), tag.group(2).lower()
        if name in _RAW_TEXT_END and not closing:
            end = _RAW_TEXT_END[name].search(html, pos)
            pos = end.start() if end else len(html)
        elif name in _FLAT_KEEP:
            parts.append(tag.group(0))
        elif name in _BLOCK_TAGS:
            parts.append("<p>")
    parts.append(html[pos:])
    # One break per run: thousands of empty paragraphs would cost trafilatura seconds.
    return _BREAKS.sub("<p>", "".join(parts))


def _document(html: str) -> lxml.html.HtmlElement | None:
    # Bytes, so an XML declaration with an encoding does not make lxml refuse the string;
    # document_fromstring always yields <html>, which trafilatura needs for pages that
    # start with a <script> or a fragment.
    try:
        return lxml.html.document_fromstring(html.encode("utf-8", "replace"), parser=_PARSER)
    except (etree.ParserError, ValueError):
        return None


def _parse(html: str) -> tuple[lxml.html.HtmlElement | None, str]:
    """The parsed page and the HTML it was parsed from.

    A page nested deeper than libxml2 parses (256 elements) is parsed flattened:
    libxml2 drops whatever sits deeper, which browsers still show, so a copy could hide
    there. (Its huge_tree option only moves the limit to 2048, and trafilatura takes
    seconds on tables nested that deep; none of the shared real pages nests past 100.)
    """
    tree = _document(html)
    if tree is not None and any(
        error.type == etree.ErrorTypes.ERR_RESOURCE_LIMIT for error in _PARSER.error_log
    ):
        html = _flatten(html)
        tree = _document(html)
    return tree, html


def _link_density(element: etree._Element) -> float:
    total = _visible_len("".join(element.itertext()))
    if not total:
        return 0.0
    links = sum(_visible_len("".join(ref.itertext())) for ref in element.iter("ref"))
    return links / total


# trafilatura runs a readability pass of its own (a fork of readability-lxml) inside
# bare_extraction; its text is kept, for the calls that ask, to decide whether
# readability-lxml's second opinion is needed (see _agree).
_own_readability = trafilatura.external.try_readability
_readability_texts: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "readability_texts", default=None
)


def _kept_readability(htmlinput: lxml.html.HtmlElement) -> lxml.html.HtmlElement:
    summary = _own_readability(htmlinput)
    texts = _readability_texts.get()
    if texts == []:  # asked for, and the first pass: it reads the whole page
        texts.append(_html_lines(summary))
    return summary


trafilatura.external.try_readability = _kept_readability


def _trafilatura_text(
    tree: lxml.html.HtmlElement, options: ExtractionOptions
) -> tuple[str, str | None, bool]:
    """trafilatura's text, the text of its own readability pass over the whole page (None
    when it made none), and whether the page is a listing (`_is_listing`)."""
    texts: list[str] = []
    asking = _readability_texts.set(texts)
    try:
        text, listing = _bare_text(tree, options)
    finally:
        _readability_texts.reset(asking)
    # Only the first pass is kept: a later one is a retry on a pruned copy.
    return text, texts[0] if texts else None, listing


def _is_listing(body: etree._Element, options: ExtractionOptions) -> bool:
    """Whether trafilatura's main text (links still in) is a listing: mostly short blocks
    with links in them (headlines with a date, 评论, 分享), hardly any plain paragraph."""
    total = _visible_len("".join(body.itertext()))
    if not total:
        return False
    items = prose = listed = 0
    for block in body.iter("p", "item", "head", "cell", "quote"):
        # A list item counts whole (headline, first line, date and links); another block
        # counts unless it is a container (its inner blocks count) or inside an item.
        inner = ("item",) if block.tag == "item" else ("p", "item", "cell")
        if any(el is not block for el in block.iter(*inner)) or (
            block.tag != "item" and any(up.tag == "item" for up in block.iterancestors())
        ):
            continue
        chars = _visible_len("".join(block.itertext()))
        linked = sum(_visible_len("".join(ref.itertext())) for ref in block.iter("ref"))
        if linked and chars <= options.listing_item_chars:
            items += 1
            listed += chars
        if chars - linked >= options.prose_chars:
            prose += chars - linked
    return (
        items >= options.listing_items
        and listed >= options.listing_share * total
        and prose < options.listing_prose_chars
    )


def _bare_text(tree: lxml.html.HtmlElement, options: ExtractionOptions) -> tuple[str, bool]:
    document = trafilatura.bare_extraction(
        tree,
        # No url: trafilatura would only make the links absolute (a twentieth of its time),
        # and they are stripped.
        # Comment capture on: on forum threads trafilatura then routes the posts into the
        # body (reposted texts live there); ordinary comments stay in commentsbody.
        include_comments=True,
        include_tables=options.include_tables,
        include_links=True,  # only to measure link density; links are stripped below
        with_metadata=False,  # see _metadata
    )
    if not isinstance(document, Document) or document.body is None:
        return "", False
    body = document.body
    listing = _is_listing(body, options)
    # trafilatura prunes link-heavy paragraphs and lists but keeps layout-table cells,
    # which on table-built portals (most older Chinese sites) hold menus and ads.
    for cell in list(body.iter("cell")):
        parent = cell.getparent()
        if parent is not None and _link_density(cell) > options.max_cell_link_density:
            parent.remove(cell)
    etree.strip_tags(body, "ref")
    text = xmltotxt(body, False)
    if options.include_comments and document.commentsbody is not None:
        etree.strip_tags(document.commentsbody, "ref")
        text = "\n".join(filter(None, (text, xmltotxt(document.commentsbody, False))))
    return text.strip(), listing


def _html_lines(element: lxml.html.HtmlElement) -> str:
    """Text of an HTML fragment, one line per block element."""
    parts: list[str] = []

    def walk(el: lxml.html.HtmlElement) -> None:
        block = isinstance(el.tag, str) and el.tag in _BLOCK_TAGS
        if block:
            parts.append("\n")
        if el.text:
            parts.append(el.text)
        for child in el:
            walk(child)
            if child.tail:
                parts.append(child.tail)
        if block:
            parts.append("\n")

    walk(element)
    lines = (_SPACE.sub(" ", line).strip() for line in "".join(parts).split("\n"))
    return "\n".join(line for line in lines if line)


# readability-lxml's own cleaner, without its javascript option: that one rewrites every
# link of the page to drop javascript: URLs (a third of readability's time) and changes
# no text.
_READABILITY_CLEANER = Cleaner(
    scripts=True, javascript=False, comments=True, style=True, links=True, meta=False,
    add_nofollow=False, page_structure=False, processing_instructions=True, embedded=False,
    frames=False, forms=False, annoying_tags=False, remove_unknown_tags=False,
    safe_attrs_only=False,
)  # fmt: skip


class _Readability(ReadabilityDocument):
    """readability-lxml on the tree already parsed, with the cheaper cleaner."""

    def _parse(self, input: lxml.html.HtmlElement) -> lxml.html.HtmlElement:
        # A copy each time: readability parses again for its second, less ruthless pass,
        # which must not see the tree its first pass pruned.
        document = copy.deepcopy(input)
        # As readability-lxml 0.8-0.9 does: hidden elements go before cleaning.
        for element in document.xpath("//*[@hidden]"):
            element.drop_tree()
        for element in document.xpath("//*[@style]"):
            if READABILITY_REGEXES["displayNoneRe"].search(element.get("style")):
                element.drop_tree()
        return _READABILITY_CLEANER.clean_html(document)


def _readability_text(tree: lxml.html.HtmlElement) -> str:
    """readability's main text of ``tree``."""
    try:
        # No url: readability only needs it to make links absolute, which costs time
        # (lxml rewrites every link) and leaves the text as it is.
        summary = _Readability(tree).summary(html_partial=True)
        return _html_lines(lxml.html.fragment_fromstring(summary, create_parent="div"))
    except Exception:  # readability raises bare Exceptions on unusable documents
        return ""


def _agree(primary: str, own_readability: str | None, options: ExtractionOptions) -> bool:
    """Whether trafilatura's text and its own readability pass hold the same tokens (each at
    least ``agreement_share`` of the other's). Measured on the shared pages: on such pages
    readability-lxml's opinion changes little (F1 zh 0.946 -> 0.944, en 0.903 either way),
    and half the pages are such pages."""
    if not primary or own_readability is None:
        return False
    p, s = _tokens(primary), _tokens(own_readability)
    common = sum((p & s).values())
    share = options.agreement_share
    return common >= share * sum(p.values()) and common >= share * sum(s.values())


def _combine(primary: str, second: str, options: ExtractionOptions) -> tuple[str, str]:
    """Keep trafilatura's text or take readability's; returns (text, extractor).

    Page-level choice, measured on ../shared/webpages (benchmarks/bench_extraction.py):
    readability wins when trafilatura found little, when readability holds all of
    trafilatura's text and more (trafilatura stopped early), or when trafilatura holds
    all of readability's text plus a moderate surplus (boilerplate around the article,
    typical of table-built pages). A paragraph-level union scored lower.
    """
    p, s = _tokens(primary), _tokens(second)
    n_p, n_s = sum(p.values()), sum(s.values())
    common = sum((p & s).values())
    ratio = n_s / max(n_p, 1)
    if n_p < options.short_tokens and ratio >= options.short_ratio:
        return second, "readability (trafilatura too short)"
    if common >= options.superset_share * n_p and ratio >= options.superset_ratio:
        return second, "readability (superset of trafilatura)"
    if common >= options.subset_share * n_s and options.subset_ratio <= ratio < 1:
        return second, "readability (trafilatura kept boilerplate)"
    return primary, "trafilatura"


def _meta_author(tree: lxml.html.HtmlElement) -> str | None:
    # trafilatura rejects short CJK names such as 张三 in <meta name="author">.
    for meta in tree.iter("meta"):
        key = (meta.get("name") or meta.get("property") or "").strip().lower()
        value = _SPACE.sub(" ", meta.get("content") or "").strip()
        if key in _AUTHOR_META and value and not value.startswith(("http:", "https:")):
            return _AUTHOR_PREFIX.sub("", value) or None
    return None


def _page_title(tree: lxml.html.HtmlElement) -> str | None:
    title = _SPACE.sub(" ", tree.findtext(".//title") or "").strip()
    return title or None


def _metadata(
    tree: lxml.html.HtmlElement, url: str | None
) -> tuple[str | None, str | None, str | None]:
    """Title, author and date from the page's markup: meta tags, JSON-LD, headings, dates
    in the markup (the page's text is searched by `published_date`, for the pages worth
    it: a tenth of extraction's CPU, for a date only the pages with findings show).

    Not trafilatura's full metadata pass: it also searches bylines, site names,
    categories, tags and licences, half of its time on a page, for fields not stored.
    """
    meta = examine_meta(tree)
    with contextlib.suppress(Exception):  # trafilatura's JSON-LD parser raises on bad data
        meta = extract_meta_json(tree, meta)
    title = meta.title or extract_title(tree) or _page_title(tree)
    # A one-word meta author is usually a site or desk name (as trafilatura decides), but
    # short CJK names such as 张三 have no space: _meta_author keeps those.
    author = meta.author if meta.author and " " in meta.author else _meta_author(tree)
    page_url = meta.url or url
    return title, author, _date(tree, page_url, from_text=False)


def _date(tree: lxml.html.HtmlElement, url: str | None, from_text: bool) -> str | None:
    # The markup first (meta, <time>, the URL); the text search, three times the work,
    # only for the pages whose markup has no date (about one in five).
    date = find_date(tree, False, original_date=True, url=url)
    if date is None and from_text:
        date = find_date(tree, True, original_date=True, url=url)
    return date


def published_date(html: str, url: str | None = None) -> str | None:
    """The date a decoded HTML page says it was published: from its markup, else from its
    text (htmldate's extensive search, which `extract` leaves out)."""
    html, _ = _prepare(html, ExtractionOptions())
    tree = _parse(html)[0] if html.strip() else None
    if tree is None:
        return None
    return _date(tree, examine_meta(tree).url or url, from_text=True)


# Private-use code points are characters a web font draws (pirate sites hide some of a
# copy's characters so; fingerprinter.unknown reads them): trafilatura drops them as
# unprintable, so while a page is extracted they stand in as Tangut characters, printable
# and absent from the pages copytrack reads (a page that has some keeps its own).
_PRIVATE_USE = re.compile("[\ue000-\uf8ff]")
_PRIVATE_USE_REFERENCE = re.compile(r"&#(?:[xX]([0-9a-fA-F]{1,6})|([0-9]{1,7}));")
_PRIVATE_USE_FIRST, _PRIVATE_USE_COUNT = 0xE000, 0x1900
_STAND_IN_SEARCH = (0x17000, 0x18D09)  # Tangut, its components and supplement, Khitan


@lru_cache(maxsize=1)
def _stand_ins() -> tuple[dict[int, str], dict[int, str], re.Pattern[str]]:
    """Private use → stand-in and back (str.translate tables), and a search for stand-ins."""
    printable = [c for c in range(*_STAND_IN_SEARCH) if chr(c).isprintable()]
    chosen = printable[:_PRIVATE_USE_COUNT]
    to_stand_in = {_PRIVATE_USE_FIRST + i: chr(c) for i, c in enumerate(chosen)}
    back = {c: chr(_PRIVATE_USE_FIRST + i) for i, c in enumerate(chosen)}
    return to_stand_in, back, re.compile(f"[{chr(chosen[0])}-{chr(chosen[-1])}]")


def _private_use_reference(match: re.Match[str]) -> str:
    hexadecimal, decimal = match.groups()
    value = int(hexadecimal, 16) if hexadecimal else int(decimal)
    private = _PRIVATE_USE_FIRST <= value < _PRIVATE_USE_FIRST + _PRIVATE_USE_COUNT
    return chr(value) if private else match.group()


def _shelter_private_use(html: str) -> tuple[str, dict[int, str] | None]:
    """The page with its private-use characters (literal or character references) as
    stand-ins, and the table that restores them; the page as it is and None when it has
    none, or has stand-ins of its own."""
    references = "&#" in html
    resolved = _PRIVATE_USE_REFERENCE.sub(_private_use_reference, html) if references else html
    if not _PRIVATE_USE.search(resolved):
        return html, None
    to_stand_in, back, stand_in = _stand_ins()
    if stand_in.search(resolved):
        return html, None
    return resolved.translate(to_stand_in), back


def extract(
    html: str, url: str | None = None, options: ExtractionOptions | None = None
) -> Extracted:
    """Extract the main text, title, author and date of a decoded HTML page."""
    html, restore = _shelter_private_use(html)
    found = _extract(html, url, options)
    if restore is None:
        return found
    return replace(
        found,
        text=found.text.translate(restore),
        title=found.title.translate(restore) if found.title else found.title,
        author=found.author.translate(restore) if found.author else found.author,
    )


def _extract(html: str, url: str | None, options: ExtractionOptions | None) -> Extracted:
    options = options or ExtractionOptions()
    html, wrapper_title = _prepare(html, options)
    if not html.strip():
        return Extracted("", title=wrapper_title, reason="empty document")
    tree, html = _parse(html)
    if tree is None:
        return Extracted("", title=wrapper_title, reason="no parsable HTML")
    title, author, date = _metadata(tree, url)
    title = title or wrapper_title
    primary, own_readability, listing = _trafilatura_text(tree, options)  # on its own copy
    if options.fallback and not _agree(primary, own_readability, options):
        text, extractor = _combine(primary, _readability_text(tree), options)
    else:
        text, extractor = primary, "trafilatura"
    if _visible_len(text) < options.min_text_chars:
        found = _visible_len(text)
        reason = (
            "no main text found"
            if not found
            else f"main text too short ({found} < {options.min_text_chars} characters)"
        )
        scripted = _script_shell(tree)
        if scripted:
            reason += "; the page shows almost no text but runs scripts, which may write it"
        return Extracted("", title, author, date, "none", reason, scripted, listing)
    return Extracted(text, title, author, date, extractor, listing=listing)


#: A page showing less text than this, scripts apart, may be a shell its scripts fill.
_SHELL_CHARS = 1000


def _script_shell(tree: lxml.html.HtmlElement) -> bool:
    """Whether the page has scripts and, without them, almost no text (a list page, whose
    text is links, is not one)."""
    if not tree.xpath("//script[@src or normalize-space()]"):
        return False
    shown = tree.xpath(
        "//body//text()[not(ancestor::script or ancestor::style or ancestor::noscript"
        " or ancestor::template)]"
    )
    return _visible_len("".join(shown)) < _SHELL_CHARS
