"""Chapters as pictures of text, the way pirate sites post them to get past text matching:
rendered with the CJK font the project installs (fonts-noto-cjk), optionally with noise
and a watermark; and images made to hurt (a decompression bomb, an oversized file)."""

from __future__ import annotations

import io
import random
import struct
import zlib
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

#: Noto Sans CJK, installed by scripts/system-deps.sh (fonts-noto-cjk).
FONT = Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")
PER_LINE = 30
SIZE = 24


def chapter_png(text: str, noisy: bool = False, seed: int = 0) -> bytes:
    """``text`` drawn 30 characters a line, as a greyscale PNG; ``noisy``: speckled, and
    a pirate site's name written large across it in light grey."""
    font = ImageFont.truetype(str(FONT), SIZE)
    lines = [
        para[i : i + PER_LINE] for para in text.split("\n") for i in range(0, len(para), PER_LINE)
    ]
    image = Image.new("L", (PER_LINE * SIZE + 40, 40 + int(SIZE * 1.5) * len(lines)), 255)
    draw = ImageDraw.Draw(image)
    for n, line in enumerate(lines):
        draw.text((20, 20 + int(SIZE * 1.5) * n), line, font=font, fill=0)
    if noisy:
        rng = random.Random(seed)
        pixels = image.load()
        assert pixels is not None
        for _ in range(image.width * image.height // 50):  # 2% of the pixels speckled
            pixels[rng.randrange(image.width), rng.randrange(image.height)] = rng.choice((0, 140))
        mark = Image.new("L", image.size, 0)
        big = ImageFont.truetype(str(FONT), 64)
        ImageDraw.Draw(mark).text(
            (40, image.height // 3), "笔趣阁 www.biquge.test", font=big, fill=255
        )
        mark = mark.rotate(20, center=(image.width // 2, image.height // 3))
        image.paste(Image.new("L", image.size, 200), (0, 0), mark)  # light grey letters
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def english_png(text: str) -> bytes:
    """English ``text`` drawn 60 characters a line (in the same font: it has Latin letters)."""
    font = ImageFont.truetype(str(FONT), 22)
    lines: list[str] = [""]
    for word in text.split():
        if len(lines[-1]) + len(word) >= 60:
            lines.append("")
        lines[-1] = f"{lines[-1]} {word}".strip()
    image = Image.new("L", (800, 40 + 34 * len(lines)), 255)
    draw = ImageDraw.Draw(image)
    for n, line in enumerate(lines):
        draw.text((20, 20 + 34 * n), line, font=font, fill=0)
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def bomb_png(width: int = 60_000, height: int = 60_000) -> bytes:
    """A PNG of a few hundred bytes whose header says ``width`` × ``height`` pixels (its
    data all zeros, which inflate a thousandfold): decoded, it would take gigabytes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit greyscale
    rows = zlib.compress(b"\0" * (width + 1) * 16, 9)  # the first rows; enough to open it
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")
    )


def big_png(megabytes: float, seed: int = 1) -> bytes:
    """A PNG of random grey pixels, about ``megabytes`` large (noise does not compress)."""
    side = int((megabytes * 1024 * 1024) ** 0.5) + 1
    rng = random.Random(seed)
    image = Image.frombytes("L", (side, side), rng.randbytes(side * side))
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()
