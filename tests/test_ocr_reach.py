"""Reading images beyond an article's: a link straight to a picture of a
chapter (``chapter-3.png``) read like a page by a campaign with ``ocr``; `copytrack check
URL --ocr` reading a page's images as a crawl does and saying which text OCR read; and
no image left in the store once no page names it.
"""

from __future__ import annotations

import json
import shutil
from functools import partial
from typing import Any
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner
from gridfs import GridFSBucket

from copytrack.cli import main
from crawler.digest import Digest, image_page, ocr_spans
from crawler.fetch import fetch_page
from extractor.ocr import OcrLimits, image_type
from tests.admin_seed import PASSWORD, client, login
from tests.corpus import novel_chapters
from tests.loopback import Handler, served
from tests.ocr_pictures import FONT, chapter_png
from tracker.accounts.users import add_user
from tracker.campaigns import Campaign, save_campaign, trigger_run, wait_for_run
from tracker.findings import captures
from tracker.findings.captures import (
    BUCKET,
    CapturedImage,
    drop_orphaned_images,
    drop_unreferenced_images,
    page_image,
    restore_images,
    stored_images,
)
from tracker.masters.library import Work, add_works
from tracker.scanning.pages import PageInput, store_page
from tracker.scanning.rechecks import recheck_page

needs_tesseract = pytest.mark.skipif(
    shutil.which("tesseract") is None or not FONT.exists(),
    reason="needs Tesseract and Noto CJK: scripts/system-deps.sh runtime",
)

CHAPTERS = [text[:600] for text in novel_chapters(3)]


class _LinkedPictures(Handler):
    """A chapter list whose chapters are pictures: one linked as ``chapter-3.png``, one at
    an address without an extension, sent as ``application/octet-stream`` (its magic
    bytes say PNG); and a chapter page whose text is in its article's picture."""

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        self.server.paths.append(path)  # type: ignore[attr-defined]
        pictures: dict[str, bytes] = self.server.pictures  # type: ignore[attr-defined]
        if path == "/":
            links = '<a href="/book/chapter-3.png">第3章</a> <a href="/book/pic?n=2">第2章</a>'
            self.send_body(f"<html><body>{links}</body></html>".encode())
        elif path == "/book/chapter-3.png":
            self.send_body(pictures["3"], "image/png")
        elif path == "/book/pic":
            self.send_body(pictures["2"], "application/octet-stream")
        elif path == "/book/1.html":
            body = "<html><body><div id='content'><img src='/img/1.png'></div></body></html>"
            self.send_body(body.encode())
        elif path == "/img/1.png":
            self.send_body(pictures["1"], "image/png")
        else:
            self.send_error(404)


def _site() -> Any:
    pictures = {str(n): chapter_png(text) for n, text in enumerate(CHAPTERS, 1)}
    return served(_LinkedPictures, paths=[], pictures=pictures)


def _library(ctx: Any) -> None:
    add_works(ctx, [Work(text=text, external_id=f"ch{n}") for n, text in enumerate(CHAPTERS, 1)])


def _crawl(ctx: Any, base: str, name: str, ocr: bool) -> dict[str, Any]:
    campaign = {"name": name, "seeds": [f"{base}/"], "delay": 0, "ocr": ocr, "max_pages": 5}
    save_campaign(ctx, Campaign.from_dict(campaign))
    return wait_for_run(ctx, trigger_run(ctx, name), timeout=400)


@needs_tesseract
@pytest.mark.slow
def test_a_link_to_a_picture_of_a_chapter_is_read_only_with_ocr(crawl_ctx):
    ctx = crawl_ctx
    _library(ctx)
    with _site() as server:
        base = f"http://127.0.0.1:{server.server_port}"
        run = _crawl(ctx, base, "plain", ocr=False)
        assert run["state"] == "finished", run
        # The .png link is not followed; the picture without an extension is a page with
        # no text, not read.
        assert "/book/chapter-3.png" not in server.paths, server.paths
        assert ctx.db.findings.count_documents({}) == 0
        unread = ctx.db.pages.find_one({"url": f"{base}/book/pic?n=2"})
        assert unread["skip_reason"].startswith("not_html"), unread["skip_reason"]
        assert "ocr_images" not in unread

        ctx.db.pages.delete_many({})  # fetched afresh, not reused as fresh
        run = _crawl(ctx, base, "pictures", ocr=True)
        # Re-checked as after a notice, the picture unchanged: read again, still a copy.
        picture = ctx.db.pages.find_one({"url": f"{base}/book/chapter-3.png"})
        recheck_page(ctx, picture["_id"], partial(fetch_page, allow_private=True))
        rechecked = ctx.db.findings.find_one({"page_id": picture["_id"]})
        assert rechecked is not None and rechecked["status"] != "removed", rechecked
    assert run["state"] == "finished", run
    assert run["pages"]["read_by_ocr"] == 2, run["pages"]
    for url, work in ((f"{base}/book/chapter-3.png", "ch3"), (f"{base}/book/pic?n=2", "ch2")):
        page = ctx.db.pages.find_one({"url": url})
        assert "skip_reason" not in page, page.get("skip_reason")
        assert page["extractor"] == "ocr"
        # The evidence keeps the picture, byte for byte, and says its text is OCR's.
        [kept] = page["ocr_images"]
        assert kept["url"] == url and kept["content_type"] == "image/png"
        assert page_image(ctx, page, 0) == (server.pictures[work[2:]], "image/png")
        found = ctx.db.findings.distinct("master_external_id", {"page_id": page["_id"]})
        assert found == [work], (url, found, page["text"][:200])
    # A reviewer's finding page and evidence report say the page is the picture OCR read.
    add_user(ctx, "vic", PASSWORD, "viewer")
    http = client(ctx)
    login(http, "vic")
    finding = ctx.db.findings.find_one({"master_external_id": "ch3"})
    for shown in (f"/findings/{finding['_id']}", f"/findings/{finding['_id']}/evidence"):
        answer = http.get(shown)
        assert answer.status_code == 200, (shown, answer.status_code)
        said = "The page is a picture: all its text was read from it by OCR"
        assert said in answer.text and f"{base}/book/chapter-3.png" in answer.text


def test_a_picture_is_told_by_its_type_or_its_magic_bytes():
    png = chapter_png("一二三") if FONT.exists() else b"\x89PNG\r\n\x1a\n" + b"\0" * 20
    assert image_type(png, "application/octet-stream") == "image/png"
    assert image_type(png, None) == "image/png"
    assert image_type(b"\xff\xd8\xff\xe0" + b"\0" * 20, "text/html") == "image/jpeg"
    assert image_type(b"RIFF\0\0\0\0WEBPVP8 ", None) == "image/webp"
    assert image_type(b"GIF89a....", None) == "image/gif"
    assert image_type(b"<html>a page</html>", "text/html") is None
    assert image_type(b"...", "image/svg+xml") is None  # markup, not a picture to read
    # Not a picture: the page's digest stands, nothing read.
    page = Digest(text="正文")
    assert image_page(page, b"<html></html>", "text/html", "http://x/", OcrLimits()) == (page, [])


@needs_tesseract
def test_check_ocr_reads_a_pages_images_and_a_picture_and_says_so(crawl_ctx):
    _library(crawl_ctx)
    runner = CliRunner()
    with _site() as server:
        base = f"http://127.0.0.1:{server.server_port}"
        # Without --ocr: a page whose text is in its picture has none; a picture is no page.
        plain = runner.invoke(main, ["check", f"{base}/book/1.html"])
        assert plain.exit_code != 0 and "ch1" not in plain.output, plain.output
        assert "Traceback" not in plain.output
        assert server.paths.count("/img/1.png") == 0
        for url, work in ((f"{base}/book/1.html", "ch1"), (f"{base}/book/chapter-3.png", "ch3")):
            read = runner.invoke(main, ["check", url, "--ocr"])
            assert read.exit_code == 0, read.output
            lines = read.output.splitlines()
            image = f"{base}/img/1.png" if work == "ch1" else url
            [said] = [line for line in lines if line.startswith("read by OCR: ")]
            assert said.endswith(f"from 1 image(s): {image}"), said
            assert any(line.startswith(work) for line in lines), read.output
            passages = [line for line in lines if line.lstrip().startswith("text [")]
            assert passages and all(f"(read by OCR from {image})" in p for p in passages)


def test_ocr_spans_are_where_with_images_put_the_readings():
    own = "页面自己的文字"
    images = (CapturedImage("a", "image/png", b"", chars=3), CapturedImage("b", None, b"", chars=2))
    text = "\n\n".join([own, "甲乙丙", "丁戊"])
    spans = ocr_spans(text, images)
    assert [text[start:end] for start, end, _ in spans] == ["甲乙丙", "丁戊"]
    assert [url for *_, url in spans] == ["a", "b"]
    assert ocr_spans(own, ()) == []


def _image(n: int) -> CapturedImage:
    return CapturedImage(f"http://pirate.example/{n}.png", "image/png", b"picture %d" % n * 50)


def _store(ctx: Any, url: str, *images: CapturedImage) -> Any:
    return store_page(ctx, PageInput(url=url, text=f"{url} 正文", raw=b"<html>", images=images))[0]


def _images_left(ctx: Any) -> list[bytes]:
    bucket = GridFSBucket(ctx.db, bucket_name=BUCKET)
    files = bucket.find({"filename": {"$regex": "^image-"}})
    return sorted(bucket.open_download_stream(f._id).read() for f in files)


def test_images_no_page_names_are_deleted(ctx):
    """On the real SecantusDB: an image goes when the last page showing it lets it go (a
    fetch with other images, a page now gone), and not before."""
    one, two, three = _image(1), _image(2), _image(3)
    _store(ctx, "http://pirate.example/a", one, two)
    _store(ctx, "http://pirate.example/b", two)
    assert _images_left(ctx) == [one.body, two.body]

    # Page a fetched again with another picture: 1 goes, 2 stays (page b shows it).
    _store(ctx, "http://pirate.example/a", three)
    assert _images_left(ctx) == [two.body, three.body]
    # Page b now gone (404): stored without images, and 2 goes with it.
    store_page(ctx, PageInput(url="http://pirate.example/b", text="", status=404))
    assert _images_left(ctx) == [three.body]
    # The same picture fetched again by its page is kept once.
    _store(ctx, "http://pirate.example/a", three)
    assert _images_left(ctx) == [three.body]


def test_the_sweep_deletes_only_images_no_page_names(ctx):
    kept, stray = _image(1), _image(2)
    _store(ctx, "http://pirate.example/a", kept)
    stored_images(ctx, [stray])  # a process killed before its page named it
    assert len(_images_left(ctx)) == 2
    assert drop_orphaned_images(ctx) == 1
    assert _images_left(ctx) == [kept.body]
    stored_images(ctx, [stray])
    swept = CliRunner().invoke(main, ["evidence", "sweep-images"])
    assert swept.exit_code == 0 and "deleted 1 image file(s)" in swept.output, swept.output
    assert _images_left(ctx) == [kept.body]
    assert drop_orphaned_images(ctx) == 0


def test_an_image_let_go_by_another_page_meanwhile_is_uploaded_again(ctx):
    image = _image(1)
    [entry] = stored_images(ctx, [image])
    GridFSBucket(ctx.db, bucket_name=BUCKET).delete(entry["file"])  # another page let it go
    restore_images(ctx, [entry], [image])
    page = {"ocr_images": [entry]}
    assert page_image(ctx, page, 0) == (image.body, "image/png")


@pytest.mark.skipif(not FONT.exists(), reason="needs Noto CJK: scripts/system-deps.sh runtime")
def test_check_ocr_without_tesseract_says_so_in_one_line(crawl_ctx, monkeypatch, tmp_path):
    """No Tesseract on the machine: the check fails naming the image and what to do, rather
    than find nothing (a re-check would take the copy for gone)."""
    monkeypatch.setenv("PATH", str(tmp_path))
    with _site() as server:
        url = f"http://127.0.0.1:{server.server_port}/book/1.html"
        result = CliRunner().invoke(main, ["check", url, "--ocr"])
    assert result.exit_code == 2, result.output
    assert "/img/1.png: tesseract is not installed: run scripts/system-deps.sh" in result.output
    assert "Traceback" not in result.output and "no match" not in result.output


def _first_look_misses(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first look for pages naming an image finds none: the page's write lands after it."""
    looks = iter([False])
    real = captures._named
    monkeypatch.setattr(captures, "_named", lambda c, f: next(looks, real(c, f)))


def test_an_image_a_page_names_while_it_is_deleted_is_put_back_whole(ctx, monkeypatch):
    """The page's write lands between the first look for pages naming the image and its
    deletion: the second look puts it back, under its id, byte for byte; putting it back
    twice (two processes at once) leaves one whole file."""
    image = _image(1)
    page_id = _store(ctx, "http://pirate.example/a", image)
    page = ctx.db.pages.find_one({"_id": page_id})
    _first_look_misses(monkeypatch)
    assert drop_unreferenced_images(ctx, [page["ocr_images"][0]["file"]]) == 0
    assert page_image(ctx, page, 0) == (image.body, "image/png")
    big = CapturedImage("http://pirate.example/big.png", "image/png", bytes(range(256)) * 3000)
    [entry] = stored_images(ctx, [big])
    GridFSBucket(ctx.db, bucket_name=BUCKET).delete(entry["file"])
    restore_images(ctx, [entry], [big])
    restore_images(ctx, [entry], [big])
    ctx.db[f"{BUCKET}.files"].delete_one({"_id": entry["file"]})  # as if the first had not
    restore_images(ctx, [entry], [big])  # finished: its chunks there, its file not yet
    assert page_image(ctx, {"ocr_images": [entry]}, 0) == (big.body, "image/png")


def test_an_image_put_back_while_another_process_deletes_it_is_left_whole(ctx, monkeypatch):
    """Two processes let go of one image as a page comes to name it: the other one deleted
    it and is putting it back (its chunks written, its file document not yet) when this
    one's delete finds no file document, yet deletes those chunks all the same. This one
    puts it back too, or the page would name an image without its bytes."""
    image = _image(1)
    page = ctx.db.pages.find_one({"_id": _store(ctx, "http://pirate.example/c", image)})
    files = ctx.db[f"{BUCKET}.files"]
    real_delete = GridFSBucket.delete

    def delete_racing_a_put_back(bucket: GridFSBucket, file_id: Any) -> None:
        putting_back = files.find_one({"_id": file_id})
        files.delete_one({"_id": file_id})  # the other process's delete, its chunks rewritten
        try:
            real_delete(bucket, file_id)
        finally:
            files.insert_one(putting_back)  # the other process's putting back ends

    _first_look_misses(monkeypatch)
    monkeypatch.setattr(GridFSBucket, "delete", delete_racing_a_put_back)
    assert drop_unreferenced_images(ctx, [page["ocr_images"][0]["file"]]) == 0
    monkeypatch.undo()
    assert page_image(ctx, page, 0) == (image.body, "image/png")


def test_a_sweep_goes_past_an_image_another_process_deletes_as_it_is_read(ctx, monkeypatch):
    """Another process deletes an image between this one finding its file and reading its
    bytes: the sweep leaves it to that one and goes on with the others, rather than stop
    on a 'corrupt' file."""
    stored_images(ctx, [_image(1), _image(2)])  # neither named by a page
    real_open = GridFSBucket.open_download_stream
    raced: list[Any] = []

    def deleted_once_open(bucket: GridFSBucket, file_id: Any) -> Any:
        grid = real_open(bucket, file_id)
        if not raced:
            raced.append(file_id)
            bucket.delete(file_id)  # the other process
        return grid

    monkeypatch.setattr(GridFSBucket, "open_download_stream", deleted_once_open)
    assert drop_orphaned_images(ctx) == 1
    monkeypatch.undo()
    assert _images_left(ctx) == []


def test_check_refuses_ocr_with_jsonl_rather_than_ignore_it(ctx, tmp_path):
    """--ocr reads the images of a URL; a file of JSON lines holds texts: the check says
    so, rather than match them without OCR as if asked to read it."""
    suspects = tmp_path / "suspects.jsonl"
    suspects.write_text(json.dumps({"id": "s1", "text": CHAPTERS[0]}) + "\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["check", "--jsonl", str(suspects), "--ocr"])
    assert result.exit_code == 2, result.output
    assert "--ocr" in result.output and "--jsonl" in result.output
