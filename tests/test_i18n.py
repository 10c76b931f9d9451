"""The admin in 简体中文 and English: every marked text is in the catalog, the browser's
language is followed, the switch sticks, and a Chinese page has no English left."""

from __future__ import annotations

import http
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po

from admin import vocabulary
from admin.i18n import LOCALE_DIR
from admin.web import _work_title
from tests.admin_seed import Seeded, client, login, seed
from tracker.campaigns.outcomes import REASONS
from tracker.campaigns.runs import ACTIVE_STATES, DONE_STATES
from tracker.enforcement.deliveries import STATE_LABELS as DELIVERY_LABELS
from tracker.enforcement.recipients import SOURCE_LABELS
from tracker.enforcement.subscriptions import EVENT_LABELS
from tracker.enforcement.timeline import OUTCOMES, STEP_LABELS
from tracker.findings import DISMISS_REASONS, KIND_LABELS, LABELS, OUTCOME_LABELS, STAGE_LABELS
from tracker.users import ROLES

ROOT = Path(__file__).resolve().parent.parent
CATALOG = LOCALE_DIR / "zh_CN" / "LC_MESSAGES" / "messages.po"
# A message's variables, markup and braces must survive translation.
_PLACEHOLDER = re.compile(r"%\([a-z_]+\)s|\{[a-z_]+\}|</?[a-z]+|%%")


def _extracted() -> set[str | tuple[str, str]]:
    """What Babel finds marked in the admin (babel.cfg's rules), as `pybabel extract` does."""
    methods = [
        ("admin/templates/**.html", "jinja2"),
        ("admin/**.py", "python"),
    ]
    found = extract_from_dir(
        ROOT,
        method_map=methods,
        options_map={"admin/templates/**.html": {"extensions": "jinja2.ext.i18n"}},
        keywords={
            "_": None,
            "gettext": None,
            "ngettext": (1, 2),
            "N_": None,
            "pgettext": ((1, "c"), 2),
        },
    )
    return {message for _, _, message, _, _ in found}


def test_every_marked_text_is_in_the_chinese_catalog_with_its_placeholders():
    with CATALOG.open("rb") as po:
        catalog = read_po(po)
    assert [m.id for m in catalog if m.id and m.fuzzy] == [], "fuzzy entries are not used"
    translated = {m.id: m.string for m in catalog if m.id}
    missing = sorted(str(m) for m in _extracted() if not translated.get(m))
    assert missing == [], f"not translated in {CATALOG.relative_to(ROOT)}: {missing}"
    for msgid, msgstr in translated.items():
        for source, target in zip(
            msgid if isinstance(msgid, tuple) else (msgid,),
            msgstr if isinstance(msgstr, tuple) else (msgstr,),
            strict=False,
        ):
            wanted = sorted(set(_PLACEHOLDER.findall(source)))
            assert sorted(set(_PLACEHOLDER.findall(target))) == wanted, (source, target)
    with (LOCALE_DIR / "messages.pot").open("rb") as pot:
        template = {m.id for m in read_po(pot) if m.id}
    assert template == _extracted(), "admin/locale/messages.pot is stale: run `make messages`"


def test_the_words_that_come_from_data_are_all_marked():
    words = set(vocabulary.WORDS)
    from_data = [
        *LABELS.values(), *DISMISS_REASONS.values(), *KIND_LABELS.values(),
        *STAGE_LABELS.values(), *OUTCOME_LABELS.values(), *REASONS.values(), *ROLES,
        *ACTIVE_STATES, *DONE_STATES, "scanning", *STEP_LABELS.values(), *OUTCOMES.values(),
        *EVENT_LABELS.values(), *DELIVERY_LABELS.values(), *SOURCE_LABELS.values(),
    ]  # fmt: skip
    assert [word for word in from_data if word not in words] == []


@pytest.fixture
def seeded(ctx) -> Seeded:
    return seed(ctx)


def test_titles_take_chinese_brackets_only_when_chinese():
    assert _work_title("红楼梦") == "《红楼梦》"
    assert _work_title("Bleak House") == "Bleak House"


@pytest.mark.parametrize(
    ("header", "speaks"),
    [
        ("zh-CN,zh;q=0.9,en;q=0.8", "zh-CN"),
        ("zh", "zh-CN"),
        ("zh-Hans-SG", "zh-CN"),
        ("fr-FR, zh-CN;q=0.5", "zh-CN"),
        ("en-US,zh;q=0.8", "en"),
        ("zh-TW", "en"),  # no traditional catalog: English, not simplified
        ("", "en"),
        ("*;q=oops", "en"),
    ],
)
def test_the_browsers_language_is_followed(ctx, header, speaks):
    page = client(ctx).get("/login", headers={"Accept-Language": header})
    assert f'<html lang="{speaks}">' in page.text
    assert ("用户名" in page.text) == (speaks == "zh-CN")


def test_the_language_switch_sticks_over_the_browsers_choice(ctx, seeded):
    http = client(ctx)
    http.headers["Accept-Language"] = "zh-CN"
    login(http, "vic")
    assert "待处理发现" in http.get("/").text
    switched = http.get("/language", params={"lang": "en", "next": "/findings?status=new"})
    assert switched.url.path == "/findings" and "Findings" in switched.text
    assert "Open findings" in http.get("/").text  # the cookie wins over Accept-Language
    http.get("/language", params={"lang": "zh_CN", "next": "https://evil.example/"})
    assert "待处理发现" in http.get("/").text
    assert http.get("/language", params={"lang": "xx"}).url.path == "/"


#: An example address in a placeholder (partner.example.com, legal@example-news.com).
_ADDRESS = re.compile(r"@|\.(com|org|net)\b")


class _VisibleText(HTMLParser):
    """The words a reader sees (and the titles a pointer shows), without scripts, styles,
    code, and the data the page shows (URLs, ids, hashes, seeded texts)."""

    SKIPPED = frozenset({"script", "style", "code", "textarea", "option"})

    def __init__(self) -> None:
        super().__init__()
        self.depth: list[str] = []
        self.words: list[str] = []

    def handle_starttag(self, tag, attrs):
        classes = (dict(attrs).get("class") or "").split()
        data = {"mono", "url", "sub", "stats", "pre", "text-col", "note"} & set(classes)
        if tag not in ("br", "input", "meta", "link", "img"):
            self.depth.append("skip" if tag in self.SKIPPED or data or self._skipping() else tag)
        for name in ("title", "placeholder", "aria-label"):
            value = dict(attrs).get(name) or ""
            if value and not self._skipping() and not _ADDRESS.search(value):
                self.words += re.findall(r"[A-Za-z]{4,}", value)

    def handle_endtag(self, tag):
        if self.depth:
            self.depth.pop()

    def _skipping(self) -> bool:
        return "skip" in self.depth

    def handle_data(self, data):
        if not self._skipping():
            self.words += re.findall(r"[A-Za-z]{4,}", data)


#: Latin words a Chinese page may show: names, formats, standards.
ALLOWED = {"copytrack", "JSON", "OpenAPI", "HTTP", "Bearer", "Authorization", "cron", "JSONL",
           "robots", "DOWNLOAD_MAXSIZE", "sha256sum", "token", "create", "NAME", "recheck",
           "scheduler", "check", "FILE", "detail", "library", "text", "title", "author",
           "lang", "kind", "abuse", "Atom", "admin", "English", "html", "jsonl",
           "Chromium", "Google", "Bing", "Webhook"}  # fmt: skip


def _data_words(ctx) -> set[str]:
    """Latin words of the data the seeded admin shows (domains, titles, names)."""
    texts = [
        *(f[key] or "" for f in ctx.db.findings.find() for key in ("url", "master_title")),
        *(m.get(key) or "" for m in ctx.db.masters.find() for key in ("title", "author", "text")),
        *(p.get("title") or "" for p in ctx.db.pages.find({}, {"title": 1})),
        *ctx.db.campaigns.distinct("name"),
        *(h.get("note") or "" for f in ctx.db.findings.find() for h in f["history"]),
        *(http.HTTPStatus(code).phrase for code in (404, 410, 500, 503)),  # HTTP's own words
    ]
    return {word for text in texts for word in re.findall(r"[A-Za-z]{4,}", text)}


@pytest.mark.parametrize(
    "path",
    ["/", "/findings", "/finding", "/works", "/work", "/works/new", "/check", "/campaigns",
     "/campaigns/pirate-sites", "/campaigns/new", "/run", "/whitelist", "/settings", "/users",
     "/account", "/notice", "/evidence", "/report", "/work/edit", "/work/delete",
     "/enforcement", "/subscriptions", "/deliveries"],
)  # fmt: skip
def test_a_chinese_page_has_no_english_left(ctx, seeded, path):
    http = client(ctx)
    http.headers["Accept-Language"] = "zh-CN"
    login(http, "ada")
    confirmed = seeded.findings[2]  # the seed confirmed it
    path = {
        "/finding": f"/findings/{seeded.findings[0]}",
        "/work": f"/works/{seeded.masters[0]}",
        "/work/edit": f"/works/{seeded.masters[0]}/edit",
        "/work/delete": f"/works/{seeded.masters[0]}/delete",
        "/run": f"/runs/{ctx.db.runs.find_one()['_id']}",
        "/notice": f"/findings/{confirmed}/notice?lang=zh",
        "/evidence": f"/findings/{confirmed}/evidence",
        "/report": "/reports/work?work=news-000",
    }.get(path, path)
    page = http.get(path)
    assert page.status_code == 200
    reader = _VisibleText()
    reader.feed(page.text)
    shown = ALLOWED | _data_words(ctx)
    english = sorted({word for word in reader.words if word not in shown})
    assert english == [], f"{path} in Chinese still shows: {english}"
