"""Where a page's big parts live. Its captured bytes (compressed) and its text sit in the
page's document while they are small; a whole-book download's go to GridFS (bucket
``captures``), since MongoDB refuses documents over 16 MB. `page_text` and
`page_capture` read them from wherever they are. The images a page's text was read from
by OCR are GridFS files of the same bucket, named by their hash (`stored_images`).

A part replaced by a new fetch is deleted once the page points at the new one; a process
killed in between leaves an unreferenced file behind, never a page without its parts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bson import Binary, ObjectId
from gridfs import GridFSBucket
from gridfs.errors import NoFile

from ..context import Context

BUCKET = "captures"
#: Past these sizes a part goes to GridFS (a capture's size once compressed).
INLINE_RAW_BYTES = 4 * 1024 * 1024
INLINE_TEXT_CHARS = 1_000_000
#: The page fields that may name a GridFS file.
FILE_FIELDS = ("raw_file", "text_file")


def _bucket(ctx: Context) -> GridFSBucket:
    return GridFSBucket(ctx.db, bucket_name=BUCKET)


def stored_parts(ctx: Context, raw: bytes, text: str, name: str) -> dict[str, Any]:
    """The page fields holding ``raw`` (compressed) and ``text``: in the document, or GridFS
    files the fields name (``name``: what the files are called, the capture's hash)."""
    raw_zlib = zlib.compress(raw, 6)
    fields: dict[str, Any] = {"raw_zlib": Binary(raw_zlib), "raw_file": None,
                              "text": text, "text_file": None}  # fmt: skip
    if len(raw_zlib) > INLINE_RAW_BYTES:
        fields["raw_zlib"] = None
        fields["raw_file"] = _bucket(ctx).upload_from_stream(f"{name}.raw.zlib", raw_zlib)
    if len(text) > INLINE_TEXT_CHARS:
        packed = zlib.compress(text.encode("utf-8", "surrogatepass"), 6)
        fields["text"] = ""
        fields["text_file"] = _bucket(ctx).upload_from_stream(f"{name}.text.zlib", packed)
    return fields


def drop_replaced(ctx: Context, before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
    """Delete the files a page named before an update and names no more."""
    for field in FILE_FIELDS:
        old = before.get(field)
        if old is not None and old != after.get(field):
            with contextlib.suppress(NoFile):  # deleted already (an update raced this one)
                _bucket(ctx).delete(old)


def _read(ctx: Context, file_id: ObjectId) -> bytes:
    return zlib.decompress(_bucket(ctx).open_download_stream(file_id).read())


def page_text(ctx: Context, page: Mapping[str, Any]) -> str:
    """A stored page's text (read with ``text`` and ``text_file``)."""
    if page.get("text_file") is not None:
        return _read(ctx, page["text_file"]).decode("utf-8", "surrogatepass")
    return page.get("text") or ""


def page_capture(ctx: Context, page: Mapping[str, Any]) -> bytes | None:
    """A stored page's captured bytes as fetched (read with ``raw_zlib`` and ``raw_file``);
    None when none were stored."""
    if page.get("raw_file") is not None:
        return _read(ctx, page["raw_file"])
    if page.get("raw_zlib") is not None:
        return zlib.decompress(page["raw_zlib"])
    return None


@dataclass(frozen=True)
class CapturedImage:
    """An image of a page whose text was read by OCR, kept with the page's capture."""

    url: str
    content_type: str | None
    body: bytes = dataclasses.field(repr=False)
    width: int = 0
    height: int = 0
    chars: int = 0  # characters of the page's text read from it


def stored_images(ctx: Context, images: Sequence[CapturedImage]) -> list[dict[str, Any]]:
    """The page's ``ocr_images`` field: each image in GridFS (once per content: a page
    fetched again, or another page showing the same image, names the same file), with its
    address, hash, size and what was read from it."""
    bucket = _bucket(ctx)
    out = []
    for image in images:
        sha = hashlib.sha256(image.body).hexdigest()
        name = f"image-{sha}"
        known = next(iter(bucket.find({"filename": name}).limit(1)), None)
        file_id = known._id if known is not None else bucket.upload_from_stream(name, image.body)
        out.append({"url": image.url, "sha256": sha, "bytes": len(image.body),
                    "content_type": image.content_type, "width": image.width,
                    "height": image.height, "chars": image.chars, "file": file_id})  # fmt: skip
    return out


def page_image(ctx: Context, page: Mapping[str, Any], n: int) -> tuple[bytes, str] | None:
    """The ``n``-th image read by OCR of a stored page and its media type; None if none."""
    images = page.get("ocr_images") or []
    if not 0 <= n < len(images):
        return None
    try:
        body = _bucket(ctx).open_download_stream(images[n]["file"]).read()
    except NoFile:
        return None
    return body, images[n].get("content_type") or "application/octet-stream"
