"""Image bytes → text with Debian's Tesseract (``tesseract-ocr`` and its ``chi_sim``,
``chi_tra`` and ``eng`` data), for pages that post their chapters as pictures of text.

Every image is bounded before Tesseract sees it: its bytes, its pixels (read from its
header, before any decoding: Pillow's decompression-bomb guard is set to the same limit),
and the CPU seconds Tesseract may spend on it (``RLIMIT_CPU`` on the child, and a wall
clock timeout over it). An image refused says why (`ImageRefused`), in one line.
"""

from __future__ import annotations

import io
import os
import re
import resource
import shutil
import subprocess
import tempfile
import time
import warnings
from dataclasses import dataclass

from PIL import Image, UnidentifiedImageError

#: Tesseract's languages, tried in turn: an image read as Chinese (``chi_sim``, which reads
#: traditional characters too) is read again as English (``eng``) when what it gave is not
#: mostly Chinese. Measured on chapters of the test corpus drawn in Noto Sans CJK:
#: ``chi_sim`` read 93.5% of their characters (84% speckled and watermarked);
#: ``chi_sim+chi_tra+eng`` 76% (53%) at twice the CPU, ``chi_sim+eng`` 76% (44%): English
#: read into the Chinese lines. On an English page ``chi_sim`` ran its words together,
#: ``eng`` read 99.9% of its characters.
LANGUAGES = ("chi_sim", "eng")
#: Below this share of Chinese among its letters, a first reading is not Chinese.
_CHINESE_SHARE = 0.3
#: Tesseract reads with one thread: the crawl's extraction processes are the parallelism.
_ENV = {"OMP_THREAD_LIMIT": "1", "LC_ALL": "C"}
#: Tesseract writes a space between CJK characters and breaks lines where the image does;
#: neither is in the text the image shows.
_CJK = "\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef\u3000-\u303f"
_CJK_GAP = re.compile(rf"(?<=[{_CJK}])[ \t]+|[ \t]+(?=[{_CJK}])")
_LINE_BREAK = re.compile(rf"(?<=[{_CJK}])\n(?=[{_CJK}])")


@dataclass(frozen=True)
class OcrLimits:
    """What one image may cost (0: no limit, for each)."""

    max_bytes: int = 8 * 1024 * 1024
    max_pixels: int = 40_000_000
    min_pixels: int = 20_000  # smaller images are icons, buttons, logos: not read
    cpu_seconds: float = 60.0
    languages: tuple[str, ...] = LANGUAGES


@dataclass(frozen=True)
class ImageText:
    """What Tesseract read in one image."""

    text: str
    width: int
    height: int
    cpu_seconds: float


class ImageRefused(Exception):
    """An image not read: ``reason`` is a short key (``image_too_large``,
    ``image_too_many_pixels``, ``image_too_small``, ``image_unreadable``,
    ``image_too_slow``, ``ocr_failed``), the message says why in one line."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


#: The media types of a response read as a picture of text (a chapter posted as an image).
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
#: Their magic bytes, for a server that sends them under another type (or none).
_MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"),
          (b"GIF87a", "image/gif"), (b"GIF89a", "image/gif"))  # fmt: skip


def image_type(body: bytes, content_type: str | None) -> str | None:
    """The media type of a response that is a picture (PNG, JPEG, GIF, WebP), by its
    Content-Type or, whatever that says, its magic bytes; None for anything else."""
    for magic, media in _MAGIC:
        if body.startswith(magic):
            return media
    if body[:4] == b"RIFF" and body[8:12] == b"WEBP":
        return "image/webp"
    media = (content_type or "").split(";")[0].strip().lower()
    return media if media in IMAGE_TYPES and body else None


def tesseract_path() -> str | None:
    """Where the ``tesseract`` binary is, or None when it is not installed."""
    return shutil.which("tesseract")


def read_image(data: bytes, limits: OcrLimits = OcrLimits()) -> ImageText:
    """The text Tesseract reads in ``data`` (PNG, JPEG, GIF, WebP, BMP, TIFF); raises
    `ImageRefused` for an image over a limit, under ``min_pixels``, or not an image."""
    if limits.max_bytes and len(data) > limits.max_bytes:
        raise ImageRefused(
            "image_too_large",
            f"{len(data)} bytes, over COPYTRACK_OCR_MAX_BYTES ({limits.max_bytes})",
        )
    png, width, height = _grey_png(data, limits)
    binary = tesseract_path()
    if binary is None:
        raise ImageRefused(
            "ocr_failed", "tesseract is not installed: run scripts/system-deps.sh runtime"
        )
    spent = 0.0
    with tempfile.TemporaryDirectory(prefix="copytrack-ocr-") as tmp:
        path = os.path.join(tmp, "image.png")
        with open(path, "wb") as out:
            out.write(png)
        for n, language in enumerate(limits.languages):
            # The image's CPU seconds are for all its readings together.
            left = limits.cpu_seconds - spent if limits.cpu_seconds > 0 else 0.0
            if n and limits.cpu_seconds > 0 and left < 0.5:
                break  # the first reading stands: no time for another
            text, cpu = _tesseract(binary, path, language, left, limits.cpu_seconds)
            spent += cpu
            if n + 1 == len(limits.languages) or _chinese(text) or not language.startswith("chi"):
                break
    return ImageText(tidy(text), width, height, spent)


def _chinese(text: str) -> bool:
    """Whether most of the letters read are Chinese characters."""
    letters = [c for c in text if c.isalpha()]
    han = sum(1 for c in letters if "\u3400" <= c <= "\u9fff" or "\uf900" <= c <= "\ufaff")
    return bool(letters) and han >= _CHINESE_SHARE * len(letters)


def _grey_png(data: bytes, limits: OcrLimits) -> tuple[bytes, int, int]:
    """The image's first frame as a greyscale PNG, once its header's size passed the
    limits (nothing is decoded before)."""
    try:
        with warnings.catch_warnings():
            # Pillow warns (then raises) past MAX_IMAGE_PIXELS: here both refuse.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            Image.MAX_IMAGE_PIXELS = limits.max_pixels or None
            with Image.open(io.BytesIO(data)) as image:
                width, height = image.size
                _check_size(width, height, limits)
                image.seek(0)
                grey = image.convert("L")
    except ImageRefused:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as bomb:
        # Pillow's guard, at open: its message gives the pixels its header claims.
        claimed = re.search(r"\((\d+) pixels\)", str(bomb))
        size = f"{claimed[1]} pixels" if claimed else "its pixels"
        raise ImageRefused(
            "image_too_many_pixels",
            f"{size}, over COPYTRACK_OCR_MAX_PIXELS ({limits.max_pixels}): a decompression "
            "bomb or a picture too big to read",
        ) from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as err:
        raise ImageRefused("image_unreadable", f"not an image Pillow can read ({err})") from None
    out = io.BytesIO()
    grey.save(out, "PNG")
    return out.getvalue(), width, height


def _check_size(width: int, height: int, limits: OcrLimits) -> None:
    pixels = width * height
    if limits.max_pixels and pixels > limits.max_pixels:
        raise ImageRefused(
            "image_too_many_pixels",
            f"{width}×{height} = {pixels} pixels, over COPYTRACK_OCR_MAX_PIXELS "
            f"({limits.max_pixels}): a decompression bomb or a picture too big to read",
        )
    if pixels < limits.min_pixels:
        raise ImageRefused(
            "image_too_small",
            f"{width}×{height} pixels, under COPYTRACK_OCR_MIN_PIXELS ({limits.min_pixels}): "
            "an icon or a button, not read",
        )


def _tesseract(
    binary: str, path: str, language: str, cap: float, budget: float
) -> tuple[str, float]:
    """Tesseract's text for the image at ``path`` in ``language`` and the CPU seconds it
    spent, stopped at ``cap`` seconds (0: none) of the image's ``budget`` (page
    segmentation 6, one block of text: a chapter's picture; measured 93% of characters
    read against 91% with the automatic layout)."""

    def limit_cpu() -> None:  # in the child, before exec: the kernel stops it at the cap
        if cap > 0:
            seconds = max(1, int(cap + 0.999))
            resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    try:
        done = subprocess.run(
            [binary, path, "stdout", "-l", language, "--psm", "6"],
            capture_output=True,
            env={**os.environ, **_ENV},
            preexec_fn=limit_cpu,
            # Waiting for a core counts too: a machine busy with other work gets its turn.
            timeout=cap * 4 + 10 if cap > 0 else None,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ImageRefused(
            "image_too_slow", f"OCR still running after {time.monotonic() - start:.0f} s"
        ) from None
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode < 0 or (cap > 0 and cpu >= cap):
        raise ImageRefused(
            "image_too_slow", f"OCR over COPYTRACK_OCR_CPU_SECONDS ({budget:g} s of CPU time)"
        )
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise ImageRefused(
            "ocr_failed", f"tesseract failed: {message[-1] if message else done.returncode}"
        )
    return done.stdout.decode("utf-8", "replace"), cpu


def tidy(text: str) -> str:
    """Tesseract's output as the image's text: no spaces between Chinese characters, a
    line broken by the image's width joined again, paragraphs kept, form feeds gone."""
    text = text.replace("\f", "\n")
    text = _CJK_GAP.sub("", text)
    text = _LINE_BREAK.sub("", text)
    lines = [line.strip() for line in text.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
