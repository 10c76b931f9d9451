"""The admin in 简体中文 and English: every marked text is in the catalog, the browser's
language is followed, the switch sticks, and a Chinese page has no English left."""

from __future__ import annotations

import html
import re
import socket
from collections.abc import Iterable
from functools import partial
from html.parser import HTMLParser
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po
from fastapi.testclient import TestClient

from admin import vocabulary
from admin.app import create_app
from admin.evidence_report import report_context
from admin.i18n import LOCALE_DIR, language, translations
from admin.routes.api import openapi_schema
from admin.sentences import TEMPLATES, _pattern
from admin.web import _work_title, templates
from crawler.fetch import fetch_page
from tests.admin_seed import Seeded, client, csrf_of, login, seed
from tests.pdf_layout import laid_out_text
from tracker.accounts.users import ROLES
from tracker.campaigns.outcomes import REASONS
from tracker.campaigns.runs import ACTIVE_STATES, DONE_STATES
from tracker.enforcement.deliveries import STATE_LABELS as DELIVERY_LABELS
from tracker.enforcement.recipients import SOURCE_LABELS
from tracker.enforcement.subscriptions import EVENT_LABELS
from tracker.enforcement.timeline import OUTCOMES, STEP_LABELS
from tracker.findings import (
    DISMISS_REASONS,
    KIND_LABELS,
    LABELS,
    OUTCOME_LABELS,
    STAGE_LABELS,
    capture,
    evidence,
)

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


#: Latin words a Chinese page may show: names, formats, standards, commands (copytrack worker).
ALLOWED = {"copytrack", "JSON", "OpenAPI", "HTTP", "Bearer", "Authorization", "cron", "JSONL",
           "robots", "DOWNLOAD_MAXSIZE", "sha256sum", "token", "create", "NAME", "recheck",
           "scheduler", "check", "FILE", "detail", "library", "text", "title", "author",
           "lang", "kind", "abuse", "Atom", "admin", "English", "html", "jsonl",
           "Chromium", "Google", "Bing", "Webhook", "http", "https", "Word", "EPUB", "epub",
           "docx", "DOCX", "worker", "Tesseract", "OCR"}  # fmt: skip


def _system_note(note: str) -> bool:
    """A history note copytrack writes ("zh notice sent to …"), not a reviewer."""
    return any(_pattern(template).fullmatch(note) for template in TEMPLATES)


def _data_words(ctx) -> set[str]:
    """Latin words of the data the seeded admin shows (domains, titles, names)."""
    texts = [
        *(f[key] or "" for f in ctx.db.findings.find() for key in ("url", "master_title")),
        *(m.get(key) or "" for m in ctx.db.masters.find() for key in ("title", "author", "text")),
        *(p.get("title") or "" for p in ctx.db.pages.find({}, {"title": 1})),
        *ctx.db.campaigns.distinct("name"),
        # What reviewers wrote; what copytrack wrote there (a notice sent) is translated.
        *(
            h.get("note") or ""
            for f in ctx.db.findings.find()
            for h in f["history"]
            if not _system_note(h.get("note") or "")
        ),
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
    assert _english_left(ctx, page.text) == [], f"{path} in Chinese still shows English"


def _english_left(ctx, html: str, inputs: Iterable[str] = ()) -> list[str]:
    """The English words a page shows a Chinese reader, beside its data and the
    ``inputs`` the reader gave (an error names them)."""
    reader = _VisibleText()
    reader.feed(html)
    shown = ALLOWED | _data_words(ctx)
    shown |= {word for text in inputs for word in re.findall(r"[A-Za-z]{4,}", text)}
    return sorted({word for word in reader.words if word not in shown})


def _chinese(ctx, fetch_page=None) -> TestClient:
    http = TestClient(create_app(ctx, fetch_page=fetch_page), base_url="http://127.0.0.1")
    http.headers["Accept-Language"] = "zh-CN"
    return http


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # closed again when the probe is: refused


def test_a_failed_login_and_a_missing_page_speak_chinese_with_the_menu(ctx, seeded):
    http = _chinese(ctx)
    form = http.get("/login")
    failed = http.post(
        "/login", data={"name": "ada", "password": "wrong", "csrf_token": csrf_of(form.text)}
    )
    assert failed.status_code == 401 and "用户名或密码错误" in failed.text
    assert _english_left(ctx, failed.text) == []
    login(http, "ada")
    missing = http.get("/no-such-page")
    assert missing.status_code == 404 and "未找到" in missing.text
    assert 'class="mainnav"' in missing.text, "a signed-in reader keeps the menu on a 404"
    assert _english_left(ctx, missing.text) == []


def _unresolved(host: str) -> list[str]:
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


def test_checks_errors_keep_the_address_and_say_the_rest_in_chinese(ctx, seeded):
    fetch = partial(fetch_page, allow_private=True)
    http = _chinese(ctx, fetch)
    token = login(http, "vic")
    refused = f"http://127.0.0.1:{_closed_port()}/article.html"
    for url, said in [
        ("ftp://files.example.org/book.txt", "只能抓取 http 和 https 网址"),
        (refused, "无法抓取：连接被拒绝"),
    ]:
        page = http.post("/check", data={"csrf_token": token, "url": url})
        problem = re.search(r'id="check-problem">([^<]*)<', page.text).group(1)
        assert page.status_code == 400 and said in problem and url in problem, problem
        assert _english_left(ctx, page.text, [url]) == [], problem
    unresolved = _chinese(ctx, partial(fetch_page, allow_private=False, lookup=_unresolved))
    token = login(unresolved, "vic")
    page = unresolved.post("/check", data={"csrf_token": token, "url": "http://pirate.test/1"})
    assert "pirate.test 无法解析" in page.text and "域名或服务未知" in page.text
    assert _english_left(ctx, page.text, ["http://pirate.test/1"]) == []


def test_upload_edit_campaign_and_licensing_errors_speak_chinese(ctx, seeded):
    http = _chinese(ctx)
    token = login(http, "ada")
    files = [
        ("files", ("works.jsonl", b'{"id": "a", "text": "\xe4\xb8\x80"\n{oops}\n', "text/plain")),
        ("files", ("short.txt", "太短了，八个字。".encode(), "text/plain")),
        ("files", ("notes.doc", b"\xd0\xcf\x11\xe0", "application/msword")),
    ]
    upload = http.post("/works/new", data={"csrf_token": token}, files=files)
    errors = re.search(r'<ul class="errors">(.*?)</ul>', upload.text, re.S).group(1)
    assert "JSON 无效" in errors and "文本太短" in errors and "不支持的文件类型" in errors
    assert "works.jsonl:1" in errors and "notes.doc" in errors, "the input is kept"
    assert _english_left(ctx, upload.text, ["works.jsonl", "short.txt", "notes.doc"]) == []

    edit = http.post(
        f"/works/{seeded.masters[0]}/edit", data={"csrf_token": token, "text": "八个字太短了吧"}
    )
    assert edit.status_code == 400 and "文本太短" in edit.text
    assert _english_left(ctx, edit.text) == []

    form = {"csrf_token": token, "name": "巡查 新站!", "seeds": "not-a-url"}
    campaign = http.post("/campaigns/new", data=form)
    assert "不是有效的名称" in campaign.text and "'巡查 新站!'" in html.unescape(campaign.text)
    assert _english_left(ctx, campaign.text, ["not-a-url"]) == []
    form = {"csrf_token": token, "name": "good", "seeds": "mailto:x"}
    seeds = http.post("/campaigns/new", data=form)
    assert "不是带主机名的 http(s) 网址" in seeds.text and "'mailto:x'" in html.unescape(seeds.text)
    assert _english_left(ctx, seeds.text, ["mailto"]) == []

    licensed = http.post("/whitelist", data={"csrf_token": token, "domain": "127.0.0.1:37055"})
    assert "'127.0.0.1:37055' 不是域名" in html.unescape(licensed.text)
    assert _english_left(ctx, licensed.text, ["partner.example.com"]) == []  # an example


def test_the_live_badge_the_copy_button_and_the_works_words_are_chinese(ctx, seeded):
    http = _chinese(ctx)
    login(http, "ada")
    run = ctx.db.runs.find_one()
    progress = http.get(f"/runs/{run['_id']}/progress").json()
    assert progress["state_label"] == translations("zh_CN").gettext(progress["state"])
    assert progress["state_label"] != progress["state"]
    token_page = (
        http.get("/account").text + http.get(f"/findings/{seeded.findings[2]}/notice?lang=zh").text
    )
    assert 'data-copied="已复制"' in token_page
    work = http.get(f"/works/{seeded.masters[0]}").text
    assert "中文 · 新闻" in work


def test_the_chinese_evidence_pdf_says_its_history_in_chinese(ctx, seeded):
    http = _chinese(ctx)
    login(http, "ada")
    noticed = seeded.findings[0]  # the seed sent it a notice
    pdf = http.get(f"/findings/{noticed}/evidence", params={"format": "pdf"})
    assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF-")
    found = evidence(ctx, noticed)
    with language("zh_CN"):  # the PDF's HTML, as evidence_pdf lays it out for this request
        html = templates.get_template("evidence.html").render(
            pdf=True, **report_context(ctx, found, capture(ctx, found.finding["page_id"]))
        )
    text = laid_out_text(html)
    assert "已向 abuse@x 发送通知（zh）" in text
    assert "notice sent to" not in text


def test_the_api_pages_operations_and_their_answers_are_described_in_chinese(ctx, seeded):
    http = _chinese(ctx)
    login(http, "vic")
    page = http.get("/api/v1/docs")
    assert page.status_code == 200
    endpoints = re.findall(r'<section class="card endpoint">(.*?)</section>', page.text, re.S)
    assert len(endpoints) >= 18
    for endpoint in endpoints:
        heading = re.search(r'<span class="muted">([^<]*)</span>', endpoint).group(1)
        answers = re.search(r"<p class=\"muted\">(.*?)</p>", endpoint, re.S).group(1)
        said = html.unescape(re.sub(r"<code>.*?</code>", "", heading + answers))
        # Names of headers and fields stay as the protocol spells them.
        said = re.sub(r"Retry-After|X-CSRF-Token|JSON|PDF", "", said)
        assert not re.search(r"[A-Za-z]{3,}", said), said


def _schema_names(schema: dict) -> set[str]:
    """The names a description may quote as the protocol spells them: schemas, fields,
    parameters and enum values."""
    names = set(schema["components"]["schemas"])
    for spec in schema["components"]["schemas"].values():
        names |= set(spec.get("properties") or {}) | {str(v) for v in spec.get("enum") or ()}
    for operations in schema["paths"].values():
        names |= {p["name"] for op in operations.values() for p in op.get("parameters", [])}
    return {word for name in names for word in re.findall(r"[A-Za-z]+", name)}


#: Names of standards and systems the API's descriptions mention.
PROTOCOL_WORDS = {"ASCII", "UTF", "SHA", "HMAC", "SMTP", "URL", "URLs", "MongoDB", "Redis",
                  "Celery", "ping", "webhook", "numpy", "null", "false", "Message", "mongo",
                  "redis", "dns", "api", "upload", "FILE", "English"}  # fmt: skip


def test_the_api_pages_fields_and_parameters_are_described_in_chinese(ctx, seeded):
    http = _chinese(ctx)
    login(http, "vic")
    page = http.get("/api/v1/docs").text
    schema = openapi_schema()
    outcomes = {word for value in OUTCOMES for word in value.split("_")}  # a step's values
    shown = ALLOWED | PROTOCOL_WORDS | outcomes | _schema_names(schema)
    described = re.findall(r'<td class="mono">[^<]*</td><td>([^<]*)</td></tr>', page)
    described += re.findall(r"<td>(?:query|path)</td><td>([^<]*)</td></tr>", page)
    described += re.findall(r'<p>([^<]*) <span class="mono">', page)  # enums
    assert len(described) > 100
    english = {
        word
        for cell in described
        for word in re.findall(
            r"[A-Za-z]{3,}", html.unescape(re.sub(r"<code>.*?</code>", "", cell))
        )
        if word not in shown
    }
    assert english == set(), sorted(english)
    # A description with a figure in it keeps its figure.
    assert "至少 20 个汉字或 ASCII 字母。" in page


@pytest.mark.parametrize(
    ("name", "data", "said"),
    [
        ("坏.docx", b"PK\x03\x04garbage", "坏.docx: 已损坏的 DOCX 文件（不是 ZIP 文件）"),
        ("坏.pdf", b"%PDF-1.4 broken", "坏.pdf: 无法读取的 PDF（"),
        ("坏.epub", b"not a zip", "坏.epub: 不是可下载的图书（没有媒体类型）"),
    ],
)
def test_a_broken_word_epub_or_pdf_master_is_refused_in_chinese(ctx, seeded, name, data, said):
    http = _chinese(ctx)
    token = login(http, "rui")
    files = [("files", (name, data, "application/octet-stream"))]
    page = http.post("/works/new", data={"csrf_token": token}, files=files)
    assert page.status_code == 400
    errors = html.unescape(re.search(r'<ul class="errors">(.*?)</ul>', page.text, re.S).group(1))
    assert said in errors, errors
    if name.endswith(".pdf"):  # pypdf's own words stay as pypdf says them
        errors = errors.split("（")[0]
    assert _english_left(ctx, errors, [name]) == [], errors
