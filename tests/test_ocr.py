"""Chapters posted as images: a loopback pirate site whose chapters are
PNGs of library text, one of them speckled and watermarked, one page nothing but images.
With the campaign's ``ocr`` every chapter is a finding whose evidence keeps the image and
says its text was read by OCR; without it, nothing is found and no image is fetched. The
bounds: a decompression bomb and an oversized image are refused, each named in one line
on the run, and the page they sit on is found all the same.
"""

from __future__ import annotations

import base64
import io
import json
import shutil
import zipfile
from collections.abc import Callable
from functools import partial
from typing import Any
from urllib.parse import urlsplit

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse, Response
from scrapy.utils.test import get_crawler

from admin.campaigns import parse_form
from copytrack.commands.campaign import describe_run
from crawler.fetch import fetch_page
from crawler.image_downloads import PageCloseSpider
from crawler.images import article_images, parse_page
from crawler.middlewares import IMAGE
from extractor.ocr import ImageRefused, OcrLimits, read_image, tidy
from tests.admin_seed import PASSWORD, client, login
from tests.corpus import novel_chapters, texts
from tests.loopback import Handler, served
from tests.ocr_pictures import FONT, big_png, bomb_png, chapter_png, english_png
from tracker.accounts.users import add_user
from tracker.campaigns import Campaign, CampaignError, save_campaign, trigger_run, wait_for_run
from tracker.evidence.bundle import write_bundle
from tracker.findings.captures import BUCKET, CapturedImage, stored_images
from tracker.masters.library import Work, add_works
from tracker.scanning.rechecks import recheck_page

pytestmark = pytest.mark.skipif(
    shutil.which("tesseract") is None or not FONT.exists(),
    reason="needs Tesseract and Noto CJK: scripts/system-deps.sh runtime",
)

CHAPTERS = [text[:1000] for text in novel_chapters(3)]


def _pictures() -> dict[str, bytes]:
    return {
        "/img/1.png": chapter_png(CHAPTERS[0]),
        "/img/2.png": chapter_png(CHAPTERS[1], noisy=True, seed=2),
        # The third chapter in two pictures, on a page with no text at all.
        "/img/3a.png": chapter_png(CHAPTERS[2][:500]),
        "/img/3b.png": chapter_png(CHAPTERS[2][500:]),
        "/img/bomb.png": bomb_png(),
        "/img/huge.png": big_png(2.5),
        "/logo.png": chapter_png("笔趣阁"),
    }


def _chapter(n: int, images: list[str]) -> bytes:
    """A chapter page: the site's header and logo, the chapter's pictures in its content
    block (and nothing else: the text is only in the pictures)."""
    pictures = "".join(f'<p><img src="{src}" alt=""></p>' for src in images)
    return (
        f"<html><head><meta charset='utf-8'><title>第{n}章</title></head><body>"
        '<div class="header"><img src="/logo.png"> 笔趣阁 首页 排行 书架</div>'
        f'<div id="content">{pictures}</div>'
        '<div class="footer">本站所有小说均来自网友上传</div></body></html>'
    ).encode()


class _PictureSite(Handler):
    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        self.server.paths.append(path)  # type: ignore[attr-defined]
        pictures: dict[str, bytes] = self.server.pictures  # type: ignore[attr-defined]
        if path == "/":
            links = "".join(f'<a href="/ch/{n}.html">第{n}章</a> ' for n in (1, 2, 3))
            self.send_body(f"<html><body>{links}</body></html>".encode())
        elif path == "/ch/1.html":  # the bomb and the oversized image beside the chapter
            self.send_body(_chapter(1, ["/img/bomb.png", "/img/1.png", "/img/huge.png"]))
        elif path == "/ch/2.html":
            self.send_body(_chapter(2, ["/img/2.png"]))
        elif path == "/ch/3.html":  # only images, the second inlined in the page
            inline = base64.b64encode(pictures["/img/3b.png"]).decode()
            body = f"<html><body><img src='/img/3a.png'><img src='data:image/png;base64,{inline}'>"
            self.send_body(f"{body}</body></html>".encode())
        elif path in pictures:
            self.send_body(pictures[path], "image/png")
        else:
            self.send_error(404)


def _crawl(
    ctx: Any, name: str, ocr: bool, then: Callable[[str], None] | None = None
) -> tuple[dict[str, Any], str, list[str]]:
    """A run of a campaign crawling the site; ``then(base)`` while the site is still up."""
    with served(_PictureSite, paths=[], pictures=_pictures()) as server:
        base = f"http://127.0.0.1:{server.server_port}"
        # Room for robots.txt, the index and three chapters: the pictures are not pages.
        campaign = {"name": name, "seeds": [f"{base}/"], "delay": 0, "ocr": ocr, "max_pages": 5}
        save_campaign(ctx, Campaign.from_dict(campaign))
        run = wait_for_run(ctx, trigger_run(ctx, name), timeout=400)
        if then is not None:
            then(base)
        return run, base, list(server.paths)


def _recheck(ctx: Any, base: str) -> None:
    """Chapter 2's page re-checked as after a notice, the site unchanged."""
    page = ctx.db.pages.find_one({"url": f"{base}/ch/2.html"})
    recheck_page(ctx, page["_id"], partial(fetch_page, allow_private=True))


@pytest.mark.slow
def test_chapters_posted_as_images_are_found_only_with_ocr(crawl_ctx, monkeypatch):
    ctx = crawl_ctx
    monkeypatch.setenv("COPYTRACK_OCR_MAX_BYTES", str(1024 * 1024))  # the 2.5 MB image is over
    add_works(ctx, [Work(text=text, external_id=f"ch{n}") for n, text in enumerate(CHAPTERS, 1)])

    run, base, paths = _crawl(ctx, "plain", ocr=False)
    assert run["state"] == "finished", run
    assert ctx.db.findings.count_documents({}) == 0
    assert not any(path.endswith(".png") for path in paths), paths  # no image fetched
    assert not ctx.db.pages.count_documents({"ocr_images": {"$exists": True}})
    assert "read_by_ocr" not in run["pages"]
    assert ctx.db.pages.count_documents({"url": {"$regex": "/ch/"}}) == 3  # stored, unread

    run, base, paths = _crawl(ctx, "pictures", ocr=True, then=lambda base: _recheck(ctx, base))
    assert run["state"] == "finished", run
    assert run["pages"]["read_by_ocr"] == 3, run["pages"]
    assert "read by OCR 3" in describe_run(run)
    for n in (1, 2, 3):
        page = ctx.db.pages.find_one({"url": f"{base}/ch/{n}.html"})
        assert "skip_reason" not in page, page.get("skip_reason")
        found = ctx.db.findings.distinct("master_external_id", {"page_id": page["_id"]})
        assert found == [f"ch{n}"], (n, found, page["text"][:200])
    # The re-check read the images again: the copy is still there, not taken for removed.
    rechecked = ctx.db.findings.find_one({"master_external_id": "ch2"})
    assert rechecked["status"] != "removed", rechecked["status"]
    assert ctx.db.pages.find_one({"url": f"{base}/ch/2.html"})["ocr_images"]
    # The header's logo is not the article's: never fetched.
    assert "/logo.png" not in paths
    chapter3 = ctx.db.pages.find_one({"url": f"{base}/ch/3.html"})
    inline = len(_pictures()["/img/3b.png"])
    assert [image["url"] for image in chapter3["ocr_images"]] == [
        f"{base}/img/3a.png",
        f"data:image/png ({inline} bytes inline in the page)",
    ]
    assert "/img/3b.png" not in paths  # read from the page itself
    # The bounds: both refused, each named on the run with why, chapter 1 found anyway.
    assert run["skipped"].get("image_too_many_pixels") == 1, run
    assert run["skipped"].get("image_too_large") == 1, run
    problems = {p["url"]: p for p in ctx.db.run_problems.find({"run_id": run["_id"]})}
    bomb = problems[f"{base}/img/bomb.png"]
    assert "3600000000 pixels" in bomb["detail"] and "COPYTRACK_OCR_MAX_PIXELS" in bomb["detail"]
    assert "\n" not in bomb["detail"]
    assert f"{base}/img/huge.png" in problems
    chapter1 = ctx.db.pages.find_one({"url": f"{base}/ch/1.html"})
    assert [image["url"] for image in chapter1["ocr_images"]] == [f"{base}/img/1.png"]

    # The evidence keeps the image, byte for byte, and says the text was read by OCR.
    add_user(ctx, "vic", PASSWORD, "viewer")
    http = client(ctx)
    login(http, "vic")
    finding = ctx.db.findings.find_one({"master_external_id": "ch2"})
    for shown in (
        http.get(f"/findings/{finding['_id']}").text,
        http.get(f"/findings/{finding['_id']}/evidence").text,
    ):
        assert "read by OCR" in shown
        assert f"{base}/img/2.png" in shown
    page = ctx.db.pages.find_one({"_id": finding["page_id"]})
    image = http.get(f"/pages/{page['_id']}/images/0")
    assert image.status_code == 200 and image.content == _pictures()["/img/2.png"]
    assert image.headers["content-type"] == "image/png"
    # The evidence bundle carries the image too, hashed in its manifest.
    out = io.BytesIO()
    write_bundle(ctx, [finding["_id"]], out, lambda found: b"%PDF", lambda *a: None, {})
    with zipfile.ZipFile(out) as bundle:
        assert bundle.read("ocr-image-1.png") == _pictures()["/img/2.png"]
        facts = json.loads(bundle.read("finding.json"))
        manifest = json.loads(bundle.read("manifest.json"))
    [read] = facts["page"]["ocr_images"]
    assert read["url"] == f"{base}/img/2.png" and read["file"] == "ocr-image-1.png"
    assert manifest["files"]["ocr-image-1.png"] == read["sha256"]


def test_an_image_is_read_and_tesseract_spacing_undone():
    read = read_image(chapter_png(CHAPTERS[0][:120]))
    assert read.width > 0 and read.height > 0
    # Most of the characters come back, without the spaces Tesseract puts between them.
    shared = set(read.text) & set(CHAPTERS[0][:120])
    assert len(shared) > 0.6 * len(set(CHAPTERS[0][:120])), read.text
    assert tidy("第 一 回\n甄 士 隐\n\nEnglish  words") == "第一回甄士隐\n\nEnglish  words"


def test_an_english_picture_is_read_as_english_words():
    """Read as Chinese first, it gives Latin letters run together; read again as English,
    its words come back apart (the fingerprint takes a letter per word)."""
    text = " ".join(texts("en_novel", 1)[0].split()[:80])
    read = " ".join(read_image(english_png(text)).text.split())
    opening = " ".join(text.split()[:8])
    assert opening in read, read[:200]
    assert len(read.split()) > 0.9 * len(text.split())


@pytest.mark.parametrize(
    ("data", "limits", "reason", "words"),
    [
        (bomb_png(), OcrLimits(), "image_too_many_pixels", "3600000000 pixels"),
        (
            bomb_png(5000, 5000),
            OcrLimits(max_pixels=10**7),
            "image_too_many_pixels",
            "25000000 pixels",
        ),
        (b"x" * 2000, OcrLimits(max_bytes=1000), "image_too_large", "2000 bytes"),
        (b"<html>not a picture</html>", OcrLimits(), "image_unreadable", "not an image"),
        (chapter_png("一"), OcrLimits(min_pixels=10**6), "image_too_small", "icon"),
    ],
)
def test_an_image_over_a_bound_is_refused_in_one_line(data, limits, reason, words):
    with pytest.raises(ImageRefused) as refused:
        read_image(data, limits)
    assert refused.value.reason == reason
    assert words in str(refused.value) and "\n" not in str(refused.value)


def test_tesseract_is_stopped_at_its_cpu_seconds():
    """A chapter takes Tesseract more than a second of CPU; capped at one, it is stopped."""
    with pytest.raises(ImageRefused) as refused:
        read_image(chapter_png(CHAPTERS[0] * 2), OcrLimits(cpu_seconds=1))
    assert refused.value.reason == "image_too_slow"
    assert "COPYTRACK_OCR_CPU_SECONDS" in str(refused.value)


def test_ocr_is_a_campaign_option_off_by_default():
    seeds = {"name": "pics", "seeds": ["http://pirate.example/"]}
    assert Campaign.from_dict(seeds).ocr is False
    assert Campaign.from_dict({**seeds, "ocr": True}).ocr is True
    with pytest.raises(CampaignError, match="ocr: expected true or false"):
        Campaign.from_dict({**seeds, "ocr": "yes"})
    form = {"name": "pics", "seeds": "http://pirate.example/", "kind": "sites", "ocr": "on"}
    assert parse_form(form).ocr is True
    assert parse_form({**form, "ocr": ""}).ocr is False


def _images(body: str, limit: int) -> tuple[list[str], int]:
    return article_images(parse_page(body), "http://pirate.example/ch/1.html", limit, 20_000)


def test_the_images_read_are_the_articles_not_the_sites_chrome():
    page = (
        "<html><body><div class='header'><img src='/logo.png'></div>"
        "<nav><img src='/nav.png'></nav>"
        "<div id='chapter-content'><img src='/p/1.png'>"
        "<img data-original='/p/2.png' src='/blank.gif'>"
        "<img src='data:image/png;base64,AAAA'><img src='/p/1.png'>"
        "<img src='/smiley.gif' width='16' height='16'></div>"
        "<a href='/book/2'><img src='/cover.jpg'></a>"
        "<div class='ads'><img src='/ad.gif'></div><img src='/stray.png'></body></html>"
    )
    inline = "data:image/png;base64,AAAA"
    assert _images(page, 10) == (
        ["http://pirate.example/p/1.png", "http://pirate.example/p/2.png", inline],
        0,
    )
    assert _images(page, 1) == (["http://pirate.example/p/1.png"], 2)
    # A page that names no article block: its images outside the chrome.
    bare = "<html><body><img src='a.png'><footer><img src='f.png'></footer></body></html>"
    assert _images(bare, 10) == (["http://pirate.example/ch/a.png"], 0)


def test_an_articles_images_do_not_count_against_the_campaigns_max_pages():
    """``max_pages`` 3 with five pictures a page: the pictures leave the count alone."""
    crawler = get_crawler(settings_dict={"CLOSESPIDER_PAGECOUNT": 3})
    closer = PageCloseSpider(crawler)
    for n in range(2):
        page = Request(f"http://pirate.example/ch/{n}.html")
        closer.page_count(HtmlResponse(page.url, request=page), page, None)  # type: ignore[arg-type]
        for k in range(5):
            image = Request(f"http://pirate.example/img/{n}-{k}.png", meta={IMAGE: True})
            closer.page_count(Response(image.url, request=image), image, None)  # type: ignore[arg-type]
    assert closer.counter["pagecount"] == 2


def test_a_stored_image_is_served_as_a_picture_never_as_markup(ctx):
    """A pirate's "image" sent as SVG (markup that runs scripts) comes back to a reviewer
    as bytes to download; a PNG as a PNG."""
    svg = b"<svg xmlns='http://www.w3.org/2000/svg' onload='alert(1)'/>"
    png = chapter_png("一二三四五六七八九十")
    images = (
        CapturedImage("http://pirate.example/a.svg", "image/svg+xml", svg),
        CapturedImage("http://pirate.example/b.png", "image/png", png),
    )
    page_id = ctx.db.pages.insert_one(
        {"url": "http://pirate.example/", "ocr_images": stored_images(ctx, images)}
    ).inserted_id
    add_user(ctx, "vera", PASSWORD, "viewer")
    http = client(ctx)
    login(http, "vera")
    first = http.get(f"/pages/{page_id}/images/0")
    assert first.content == svg
    assert first.headers["content-type"] == "application/octet-stream"
    assert first.headers["x-content-type-options"] == "nosniff"
    assert http.get(f"/pages/{page_id}/images/1").headers["content-type"] == "image/png"
    assert http.get(f"/pages/{page_id}/images/2").status_code == 404
    # An image whose chunks are gone (the store damaged, or a clean-up under way) is no
    # image to show: a 404 that says so, not a server error.
    stored = ctx.db.pages.find_one({"_id": page_id})["ocr_images"][1]["file"]
    ctx.db[f"{BUCKET}.chunks"].delete_many({"files_id": stored})
    broken = http.get(f"/pages/{page_id}/images/1")
    assert broken.status_code == 404 and "no such image" in broken.text, broken.text
