"""Evidence bundles: one ZIP per finding, per domain or per work, for a legal team.

Each finding brings its capture exactly as received (``capture.html``, or the extension
its type gives), the images OCR read part of its text from (``ocr-image-N.png``), the
capture's time-stamp token beside it (``capture.html.tsr``), the page
as a browser showed it (``screenshot.png``, taken offline from the capture), the evidence
report (``evidence-report.pdf``) and its facts (``finding.json``). ``manifest.json`` lists
every other file with its SHA-256 (``{"files": {name: sha256}}``) and is itself
time-stamped (``manifest.json.tsr``) when an authority is set. ``VERIFY.txt`` says how to
check all of it with sha256sum and OpenSSL.

The report and the screenshot are made by the caller's renderers (the admin's PDF, a
browser): the domain only assembles.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from bson import ObjectId

from ..context import Context
from ..core.times import iso, now
from ..findings import FindingNotFound, domain_query, evidence, parse_object_id
from ..findings.captures import page_image
from ..findings.evidence import Evidence, capture
from ..masters.library import find_masters
from ..scanning.pages import header
from .rfc3161 import TimestampError, stamp
from .timestamps import REQUEST_TIMEOUT, stamp_capture

MANIFEST = "manifest.json"
#: Findings one bundle holds at most (each brings a PDF and a screenshot).
MAX_FINDINGS = 500
#: The capture's file name by its media type (anything else: ``capture.bin``).
_EXTENSIONS = {"text/html": "html", "application/xhtml+xml": "html", "text/plain": "txt",
               "application/pdf": "pdf", "application/epub+zip": "epub",
               "application/zip": "zip", "image/png": "png", "image/jpeg": "jpg",
               "image/gif": "gif", "image/webp": "webp", "image/bmp": "bmp"}  # fmt: skip

ReportRenderer = Callable[[Evidence], bytes]
#: (capture bytes, its URL, its content type) -> a PNG, or None when it is no page.
Screenshotter = Callable[[bytes, str, str], bytes | None]


class BundleError(ValueError):
    """Nothing to bundle: no such finding, domain or work, or too many findings."""


@dataclass(frozen=True)
class Bundled:
    findings: int
    files: int
    manifest_sha256: str
    manifest_stamped: bool
    unstamped_captures: int  # captures still without a token (the authority did not answer)
    problems: tuple[str, ...]  # what is missing, and why


def findings_of(ctx: Context, kind: str, subject: str) -> list[ObjectId]:
    """The findings a bundle of ``kind`` (finding, domain, work) named ``subject`` holds."""
    if kind == "finding":
        try:
            finding_id = parse_object_id(subject)
        except ValueError:
            finding_id = None
        if finding_id is None or not ctx.db.findings.count_documents({"_id": finding_id}, limit=1):
            raise BundleError(f"no finding {subject!r}: an id of `copytrack findings --json`")
        return [finding_id]
    if kind == "domain":
        query = domain_query(subject.lower())
    else:
        masters = find_masters(ctx, subject)
        if not masters:
            raise BundleError(f"no work {subject!r} in the library")
        query = {"master_id": {"$in": [m["_id"] for m in masters]}}
    found = [f["_id"] for f in ctx.db.findings.find(query, {"_id": 1}).sort("_id", 1)]
    if not found:
        raise BundleError(f"no findings for the {kind} {subject!r}")
    if len(found) > MAX_FINDINGS:
        raise BundleError(
            f"{len(found)} findings for the {kind} {subject!r}, more than a bundle holds "
            f"({MAX_FINDINGS}): bundle them by work or one by one"
        )
    return found


def capture_name(page: dict[str, Any]) -> str:
    content_type = header(page.get("headers") or {}, "content-type") or "text/html"
    return f"capture.{_extension(content_type)}"


def _extension(content_type: str | None) -> str:
    media = (content_type or "").split(";")[0].strip().lower()
    return _EXTENSIONS.get(media, "bin")


def _image_names(page: dict[str, Any]) -> list[str]:
    """The bundle's names of the images the page's text was read from by OCR."""
    images = page.get("ocr_images") or []
    return [f"ocr-image-{n}.{_extension(image.get('content_type'))}"
            for n, image in enumerate(images, 1)]  # fmt: skip


def write_bundle(
    ctx: Context,
    finding_ids: list[ObjectId],
    out: IO[bytes] | Path,
    report: ReportRenderer,
    screenshot: Screenshotter,
    subject: dict[str, str],
) -> Bundled:
    """Write the bundle of ``finding_ids`` to ``out``; captures still due for a token are
    asked for one now (the authority may have been down when they were stored)."""
    files: dict[str, str] = {}
    problems: list[str] = []
    unstamped = 0
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:

        def add(name: str, data: bytes) -> None:
            archive.writestr(name, data)
            files[name] = hashlib.sha256(data).hexdigest()

        many = len(finding_ids) > 1
        for finding_id in finding_ids:
            prefix = f"{finding_id}/" if many else ""
            found = _evidence_stamped(ctx, finding_id)
            for name, data in _finding_files(ctx, found, report, screenshot, problems):
                add(prefix + name, data)
            unstamped += found.timestamp.state == "pending"
        add("VERIFY.txt", VERIFY_TEXT.encode())
        manifest = _manifest(ctx, files, finding_ids, subject)
        archive.writestr(MANIFEST, manifest)
        manifest_sha = hashlib.sha256(manifest).hexdigest()
        stamped = False
        if ctx.settings.tsa_url:
            try:
                token = stamp(ctx.settings.tsa_url, bytes.fromhex(manifest_sha), REQUEST_TIMEOUT)
            except TimestampError as err:
                problems.append(f"{MANIFEST} not time-stamped: {err}")
            else:
                archive.writestr(f"{MANIFEST}.tsr", token.der)
                stamped = True
    return Bundled(len(finding_ids), len(files) + 1 + stamped, manifest_sha, stamped,
                   unstamped, tuple(problems))  # fmt: skip


def _evidence_stamped(ctx: Context, finding_id: ObjectId) -> Evidence:
    try:
        found = evidence(ctx, finding_id)
    except FindingNotFound:
        raise BundleError(f"no finding {finding_id}") from None
    if found.timestamp.state == "pending" and ctx.settings.tsa_url:
        stamp_capture(ctx, found.page["_id"])
        found = evidence(ctx, finding_id)
    return found


def _finding_files(
    ctx: Context,
    found: Evidence,
    report: ReportRenderer,
    screenshot: Screenshotter,
    problems: list[str],
) -> Iterator[tuple[str, bytes]]:
    page = found.page
    raw = capture(ctx, found.finding["page_id"])
    name = capture_name(page)
    if raw is None:
        problems.append(f"finding {found.finding['_id']}: no capture stored")
    else:
        yield name, raw
        if found.timestamp.token is not None:
            yield f"{name}.tsr", found.timestamp.token
        elif found.timestamp.state == "pending":
            why = f" ({found.timestamp.error})" if found.timestamp.error else ""
            problems.append(f"finding {found.finding['_id']}: capture not yet time-stamped{why}")
        content_type = header(page.get("headers") or {}, "content-type") or "text/html"
        shot = screenshot(raw, page.get("final_url") or page["url"], content_type)
        if shot is not None:
            yield "screenshot.png", shot
    for n, image_name in enumerate(_image_names(page)):
        image = page_image(ctx, page, n)
        if image is None:
            problems.append(f"finding {found.finding['_id']}: {image_name} not stored")
        else:
            yield image_name, image[0]
    yield "evidence-report.pdf", report(found)
    yield "finding.json", json.dumps(_facts(found, name), ensure_ascii=False, indent=2).encode()


def _facts(found: Evidence, name: str) -> dict[str, Any]:
    finding, page, ts = found.finding, found.page, found.timestamp
    return {
        "finding": str(finding["_id"]),
        "status": finding.get("status"),
        "work": {
            "id": finding.get("master_external_id"),
            "title": finding.get("master_title"),
            "sha256": found.master.get("sha256"),
        },
        "page": {
            "url": finding.get("url"),
            "final_url": page.get("final_url"),
            "status": page.get("status"),
            "captured_at": iso(page.get("fetched_at")),
            "capture": name,
            "capture_sha256": page.get("raw_sha256"),
            "text_sha256": page.get("content_sha256"),
            "ip": page.get("ip"),
            # Part of its text was read by OCR from these images of its article.
            "ocr_images": [
                {
                    "file": file,
                    "url": image.get("url"),
                    "sha256": image.get("sha256"),
                    "chars_read": image.get("chars"),
                }
                for file, image in zip(
                    _image_names(page), page.get("ocr_images") or [], strict=True
                )
            ],
        },
        "score": finding.get("score"),
        "work_coverage": finding.get("master_coverage"),
        "timestamp": None
        if ts.state != "stamped"
        else {
            "authority": ts.authority,
            "tsa": ts.tsa,
            "serial": ts.serial,
            "time": iso(ts.time),
            "sha256": ts.sha256,
            "token": f"{name}.tsr",
        },
    }


def _manifest(
    ctx: Context, files: dict[str, str], finding_ids: list[ObjectId], subject: dict[str, str]
) -> bytes:
    document = {
        "files": files,
        "subject": subject,
        "findings": [str(f) for f in finding_ids],
        "generated_at": iso(now()),
        "time_stamping_authority": ctx.settings.tsa_url,
    }
    return json.dumps(document, ensure_ascii=False, indent=2).encode()


VERIFY_TEXT = """\
How to check this evidence bundle / 如何核验本证据包

1. Every file's SHA-256 is listed in manifest.json ("files"). Recompute them:
   逐一核对 manifest.json 中列出的 SHA-256：
       sha256sum capture.html screenshot.png evidence-report.pdf finding.json

2. capture.html is the page exactly as the site sent it; capture.html.tsr is an RFC 3161
   time-stamp token over its SHA-256 from a third-party time-stamping authority. It proves
   the capture existed, with these bytes, no later than the time it states. Show and
   verify it (tsa-chain.pem: the authority's CA certificates, from the authority):
   capture.html 为网站发送的原始字节；capture.html.tsr 为可信时间戳机构对其 SHA-256 签发的
   RFC 3161 时间戳，证明该内容不晚于其所载时间已经存在。查看与验证：
       openssl ts -reply -in capture.html.tsr -text
       openssl ts -verify -data capture.html -in capture.html.tsr -CAfile tsa-chain.pem

3. manifest.json.tsr time-stamps the manifest itself, and so the hashes of the screenshot
   and the report, at the time the bundle was made:
   manifest.json.tsr 为清单本身的时间戳（涵盖截图与报告的哈希值）：
       openssl ts -verify -data manifest.json -in manifest.json.tsr -CAfile tsa-chain.pem

screenshot.png shows the capture as Chromium displayed it, rendered offline from the
stored bytes (no request reached the site; scripts off, images not stored show as empty).
screenshot.png 为离线渲染的存档页面截图（未访问原网站；不执行脚本，未存档的图片显示为空白）。
"""
