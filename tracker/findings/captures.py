"""Where a page's big parts live. Its captured bytes (compressed) and its text sit in the
page's document while they are small; a whole-book download's go to GridFS (bucket
``captures``), since MongoDB refuses documents over 16 MB. `page_text` and
`page_capture` read them from wherever they are. The images a page's text was read from
by OCR are GridFS files of the same bucket, named by their hash (`stored_images`).

A part replaced by a new fetch is deleted once the page points at the new one, an image
once no page names it (`drop_replaced`); a process killed in between leaves an
unreferenced file behind (`drop_orphaned_images`, `copytrack evidence sweep-images`, sweeps
images), never a page without its parts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bson import Binary, ObjectId
from gridfs import DEFAULT_CHUNK_SIZE, GridFSBucket
from gridfs.errors import CorruptGridFile, NoFile
from pymongo.errors import DuplicateKeyError

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
    """Delete the files a page named before an update and names no more (its images once
    no other page shows them either)."""
    for field in FILE_FIELDS:
        old = before.get(field)
        if old is not None and old != after.get(field):
            with contextlib.suppress(NoFile):  # deleted already (an update raced this one)
                _bucket(ctx).delete(old)
    dropped = _image_files(before) - _image_files(after)
    drop_unreferenced_images(ctx, dropped)


def _image_files(page: Mapping[str, Any]) -> set[Any]:
    return {image["file"] for image in page.get("ocr_images") or [] if image.get("file")}


def drop_unreferenced_images(ctx: Context, file_ids: Iterable[Any]) -> int:
    """Delete those of the image files ``file_ids`` no page names any more (a page fetched
    again with other images, or gone); how many were deleted. An image is one file for
    every page showing it (`stored_images`): it goes with the last of them."""
    bucket = _bucket(ctx)
    deleted = 0
    for file_id in file_ids:
        if _named(ctx, file_id):
            continue
        try:
            grid = bucket.open_download_stream(file_id)
            body = grid.read()
        except (NoFile, CorruptGridFile):
            # Deleted already, or as it was read, by another process letting it go: that
            # one puts it back should a page name it.
            continue
        try:
            bucket.delete(file_id)
            gone = True
        except NoFile:
            # Deleted by another process meanwhile: this delete still took the chunks, and
            # they may be those of that process putting it back, so it is looked at again.
            gone = False
        if _named(ctx, file_id):
            # A page came to name it meanwhile (its `stored_images` found it before the
            # delete, its write came after the first look): it is put back.
            _upload(ctx, file_id, grid.filename or "image", body)
        elif gone:
            deleted += 1
    return deleted


def _named(ctx: Context, file_id: Any) -> bool:
    return ctx.db.pages.find_one({"ocr_images.file": file_id}, {"_id": 1}) is not None


def _upload(ctx: Context, file_id: Any, name: str, body: bytes) -> None:
    """An image file put back under its id, written as GridFS writes one but chunk by
    chunk, each kept if there already (a file holds one image, the one its name's hash
    names: a chunk there is this one's): two processes putting it back at once leave it
    whole (GridFS's own upload, failing on the other's chunk, would delete them all)."""
    chunks = ctx.db[f"{BUCKET}.chunks"]
    for n, at in enumerate(range(0, len(body), DEFAULT_CHUNK_SIZE)):
        with contextlib.suppress(DuplicateKeyError):
            piece = Binary(body[at : at + DEFAULT_CHUNK_SIZE])
            chunks.insert_one({"files_id": file_id, "n": n, "data": piece})
    with contextlib.suppress(DuplicateKeyError):
        ctx.db[f"{BUCKET}.files"].insert_one({
            "_id": file_id, "length": len(body), "chunkSize": DEFAULT_CHUNK_SIZE,
            "uploadDate": datetime.now(UTC), "filename": name,
        })  # fmt: skip


def drop_orphaned_images(ctx: Context) -> int:
    """Delete every image file no page names (pages removed by hand, or a process killed
    between a page's update and its clean-up); how many were deleted."""
    images = ctx.db[f"{BUCKET}.files"].find({"filename": {"$regex": "^image-"}}, {"_id": 1})
    return drop_unreferenced_images(ctx, [image["_id"] for image in images])


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


def restore_images(
    ctx: Context, stored: Sequence[Mapping[str, Any]], images: Sequence[CapturedImage]
) -> None:
    """Upload again, under the same id, any of a page's images (``stored``: its
    ``ocr_images``, written) that another page let go of between `stored_images` finding
    it and the page naming it."""
    for entry, image in zip(stored, images, strict=True):
        if ctx.db[f"{BUCKET}.files"].find_one({"_id": entry["file"]}, {"_id": 1}) is None:
            _upload(ctx, entry["file"], f"image-{entry['sha256']}", image.body)


def page_image(ctx: Context, page: Mapping[str, Any], n: int) -> tuple[bytes, str] | None:
    """The ``n``-th image read by OCR of a stored page and its media type; None if none."""
    images = page.get("ocr_images") or []
    if not 0 <= n < len(images):
        return None
    try:
        body = _bucket(ctx).open_download_stream(images[n]["file"]).read()
    except (NoFile, CorruptGridFile):  # gone, or its chunks are (a damaged store)
        return None
    return body, images[n].get("content_type") or "application/octet-stream"
