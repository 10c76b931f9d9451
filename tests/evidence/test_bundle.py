"""Evidence bundles: unpacked, every file's SHA-256 is the manifest's, every token verifies
with ``openssl ts -verify``, the capture is the bytes as received, and the screenshot was
taken without a single request to the site."""

from __future__ import annotations

import hashlib
import io
import json
import struct
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from copytrack.cli import main
from tests.adding import add_all
from tests.admin_seed import PASSWORD, client, login
from tests.copies import ZH
from tests.evidence.authority import verify_with_openssl
from tests.security.fakes import listening
from tracker.accounts.users import add_user
from tracker.evidence.timestamps import stamp_due_captures
from tracker.findings import capture
from tracker.masters.library import Work, add_work
from tracker.scanning.pages import PageInput, scan_page, store_page

pytestmark = pytest.mark.slow  # Chromium takes the screenshots

UNSIGNED = {"manifest.json", "manifest.json.tsr"}


def pirate_page(ctx, url: str, text: str, pixel: str) -> None:
    """A page copying ``text`` whose image, style and script sit on the ``pixel`` server."""
    raw = (
        f"<html><head><meta charset='utf-8'><link rel='stylesheet' href='{pixel}/s.css'>"
        f"<script src='{pixel}/a.js'></script></head><body><h1>免费阅读</h1>"
        f"<img src='{pixel}/ad.png'><article><p>{text}</p></article></body></html>"
    ).encode()
    headers = {"Content-Type": "text/html; charset=utf-8"}
    page_id, _ = store_page(ctx, PageInput(url=url, text=text, raw=raw, headers=headers))
    scan_page(ctx, page_id)


def unpacked(data: bytes, directory: Path) -> tuple[dict[str, str], list[str]]:
    """The bundle written out to ``directory``: its manifest's files, and every name in it."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        archive.extractall(directory)
        names = archive.namelist()
    manifest = json.loads((directory / "manifest.json").read_bytes())
    return manifest["files"], names


def check_hashes_and_tokens(directory: Path, files: dict[str, str], names: list[str], ca: Path):
    assert set(names) - UNSIGNED == set(files)  # every other file is listed
    for name, sha256 in files.items():
        assert hashlib.sha256((directory / name).read_bytes()).hexdigest() == sha256, name
    tokens = [name for name in names if name.endswith(".tsr")]
    assert "manifest.json.tsr" in tokens
    for token in tokens:
        verify_with_openssl(directory / token.removesuffix(".tsr"), directory / token, ca)
    return tokens


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_a_finding_bundle_from_the_command_line(stamping_ctx, authority, tmp_path):
    ctx = stamping_ctx
    add_work(ctx, Work(text=ZH[1], external_id="news-1", title="长城新闻"))
    with listening() as site:
        pixel = f"http://127.0.0.1:{site.server_address[1]}"
        pirate_page(ctx, "https://copy.example/a.html", ZH[1], pixel)
        stamp_due_captures(ctx)
        runner = CliRunner()
        listed = runner.invoke(main, ["findings", "--json"], catch_exceptions=False)
        [finding] = [json.loads(line) for line in listed.output.splitlines()]
        out = tmp_path / "bundle.zip"
        made = runner.invoke(main, ["evidence", "bundle", finding["id"], "-o", str(out)])
        assert made.exit_code == 0, made.output
        assert site.connections == 0  # the screenshot asked the site for nothing

    files, names = unpacked(out.read_bytes(), tmp_path / "x")
    tokens = check_hashes_and_tokens(tmp_path / "x", files, names, authority.ca_file)
    assert sorted(tokens) == ["capture.html.tsr", "manifest.json.tsr"]
    page = ctx.db.pages.find_one({"_id": ctx.db.findings.find_one()["page_id"]})
    assert (tmp_path / "x" / "capture.html").read_bytes() == capture(ctx, page["_id"])
    assert files["capture.html"] == page["raw_sha256"]
    width, height = png_size((tmp_path / "x" / "screenshot.png").read_bytes())
    assert width == 1280 and height > 100
    assert (tmp_path / "x" / "evidence-report.pdf").read_bytes().startswith(b"%PDF")
    facts = json.loads((tmp_path / "x" / "finding.json").read_bytes())
    assert facts["finding"] == finding["id"] and facts["timestamp"]["sha256"] == page["raw_sha256"]
    assert "openssl ts -verify" in (tmp_path / "x" / "VERIFY.txt").read_text()

    missing = CliRunner().invoke(main, ["evidence", "bundle", "nothing", "-o", str(out)])
    assert missing.exit_code == 1 and "no finding 'nothing'" in missing.output
    assert not (tmp_path / "bundle.zip.part").exists()


def test_a_domain_bundle_downloaded_from_the_admin(stamping_ctx, authority, tmp_path):
    ctx = stamping_ctx
    add_all(ctx, [Work(text=ZH[n], external_id=f"news-{n}", title=f"新闻{n}") for n in (1, 2)])
    with listening() as site:
        pixel = f"http://127.0.0.1:{site.server_address[1]}"
        for n in (1, 2):
            pirate_page(ctx, f"https://www.copy.example/{n}.html", ZH[n], pixel)
        pirate_page(ctx, "https://elsewhere.example/3.html", ZH[1], pixel)
        add_user(ctx, "vic", PASSWORD, "viewer")
        web = client(ctx)
        login(web, "vic")
        # Not stamped before: the bundle asks the authority for the captures' tokens.
        zipped = web.get("/evidence/bundle", params={"domain": "copy.example"})
        assert zipped.status_code == 200, zipped.text
        assert site.connections == 0
    assert zipped.headers["content-type"] == "application/zip"
    files, names = unpacked(zipped.content, tmp_path / "d")
    tokens = check_hashes_and_tokens(tmp_path / "d", files, names, authority.ca_file)
    findings = {str(f["_id"]) for f in ctx.db.findings.find({"domain": "www.copy.example"})}
    assert len(findings) == 2 and {name.split("/")[0] for name in files} == findings | {
        "VERIFY.txt"
    }
    assert len(tokens) == 3  # each capture's, and the manifest's
    assert web.get("/evidence/bundle", params={"domain": "nowhere.example"}).status_code == 404
    assert web.get("/evidence/bundle").status_code == 400
