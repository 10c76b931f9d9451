"""Page bytes → text: choose the charset the way a careful browser would, then validate it.

Order: byte-order mark → HTTP ``Content-Type`` charset → the crawler wrapper line
(``<text id=.. encoding="..">``) → ``<meta charset>`` / ``<meta http-equiv>`` in the first
4 KB → strict UTF-8 → a declared charset decoded leniently → charset-normalizer.
Declared charsets are only hints: each one must decode the bytes strictly, and bytes that
are valid UTF-8 beat a legacy declaration whose decoding looks like mojibake.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from charset_normalizer import from_bytes

__all__ = ["Decoded", "UnusableContent", "decode_html", "normalize_charset", "sniff_binary"]

PRESCAN_BYTES = 4096
#: Share of replaced (undecodable) characters above which a decoding is unusable.
MAX_REPLACED_SHARE = 0.01
# How much of the body the binary sniffer and the charset detector look at.
SNIFF_BYTES = 8192
DETECTOR_BYTES = 65536


class UnusableContent(ValueError):
    """The body is not an HTML/text page we can decode (binary, empty)."""


@dataclass(frozen=True)
class Decoded:
    """Decoded page text, the Python codec used, and how that codec was chosen.

    ``source`` is one of "bom", "utf-16-sniff", "http-header", "wrapper-line", "meta"
    (a declaration that decoded strictly), "utf-8 (declared X by S rejected)",
    "utf-8-valid" (undeclared), "<declaration> (lenient)", "detector" or "fallback".
    """

    text: str
    encoding: str
    source: str
    replaced: int = 0  # undecodable byte sequences replaced by U+FFFD

    @property
    def undecodable(self) -> bool:
        """Too many replaced sequences for the text to be the page's (binary, wrong charset)."""
        return self.replaced > max(10, MAX_REPLACED_SHARE * len(self.text))


_BOMS: tuple[tuple[bytes, str], ...] = (
    # UTF-32 before UTF-16: the UTF-32-LE BOM starts with the UTF-16-LE one.
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "PNG image"),
    (b"GIF87a", "GIF image"),
    (b"GIF89a", "GIF image"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"%PDF-", "PDF document"),
    (b"PK\x03\x04", "ZIP archive"),
    (b"PK\x05\x06", "ZIP archive"),
    (b"\x1f\x8b", "gzip stream (body was not decompressed)"),
    (b"BZh", "bzip2 stream"),
    (b"\xfd7zXZ\x00", "xz stream"),
    (b"7z\xbc\xaf\x27\x1c", "7-Zip archive"),
    (b"Rar!\x1a\x07", "RAR archive"),
    (b"\x7fELF", "ELF executable"),
    (b"\x00asm", "WebAssembly module"),
    (b"wOFF", "WOFF font"),
    (b"wOF2", "WOFF2 font"),
    (b"OggS", "Ogg media"),
    (b"fLaC", "FLAC audio"),
    (b"ID3", "MP3 audio"),
    (b"II*\x00", "TIFF image"),
    (b"MM\x00*", "TIFF image"),
    (b"\x00\x00\x01\x00", "ICO image"),
    (b"SQLite format 3\x00", "SQLite database"),
    (b"\xca\xfe\xba\xbe", "Java class / Mach-O binary"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "OLE document (old MS Office)"),
)

# Canonical Python codec name → the superset browsers actually use for it (WHATWG
# Encoding Standard); gb2312/gbk pages routinely contain characters only gb18030 covers.
_SUPERSET = {
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "big5": "big5hkscs",
    "cp950": "big5hkscs",
    "shift_jis": "cp932",
    "euc_kr": "cp949",
    "iso8859-1": "cp1252",
    "ascii": "cp1252",
    "iso8859-9": "cp1254",
    "iso8859-11": "cp874",
    "tis-620": "cp874",
}
# Labels Python's codec registry does not know.
_LABEL_ALIASES = {
    "x-gbk": "gbk",
    "gb_2312-80": "gb2312",
    "csgb2312": "gb2312",
    "x-sjis": "shift_jis",
    "x-euc-jp": "euc_jp",
    "x-big5": "big5",
}
# 8-bit multi-byte legacy codecs, each with the common-character repertoire its real
# text stays inside; UTF-8 bytes misread in the codec spill outside it (or into private
# use, the only test left for EUC-JP, whose repertoire is its own).
_LEGACY_CJK_CORE = {
    "gb18030": "gb2312",
    "big5hkscs": "big5",
    "cp932": "shift_jis",
    "euc_jp": "euc_jp",
    "cp949": "euc_kr",
}
MOJIBAKE_SHARE = 0.15
# Codecs that are not character encodings of a web page (escapes, and UTF-7, which
# browsers refuse because it smuggles markup past filters).
_NOT_PAGE_ENCODINGS = frozenset(
    {"idna", "punycode", "unicode-escape", "raw-unicode-escape", "undefined", "utf-7"}
)
_ASCII_BYTES = bytes(range(0x80))

_CONTENT_TYPE_CHARSET = re.compile(rb"""charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
_META_CHARSET = re.compile(rb"""<meta\b[^>]*?\bcharset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
# The line some archived pages start with: <text id="URL" title=".." encoding="..">
_WRAPPER_ENCODING = re.compile(
    rb"""\A\s*<text\b[^>]*?\bencoding\s*=\s*["']([A-Za-z0-9_.:-]*)""", re.I
)


def normalize_charset(label: str | bytes | None) -> str | None:
    """Map a declared charset label to the Python codec to decode it with, None if unknown."""
    if not label:
        return None
    if isinstance(label, bytes):
        label = label.decode("ascii", "replace")
    label = label.strip().strip("\"'").lower()
    label = _LABEL_ALIASES.get(label, label)
    try:
        info = codecs.lookup(label)
    except LookupError:
        return None
    name = info.name
    # _is_text_encoding is False for bytes-to-bytes codecs such as base64 or zlib.
    if not getattr(info, "_is_text_encoding", True) or name in _NOT_PAGE_ENCODINGS:
        return None
    if name.startswith(("utf-16", "utf-32")):
        # A real UTF-16/32 body is caught by its BOM or its NUL pattern; a declaration in
        # an ASCII-compatible body is a lie (WHATWG treats it as UTF-8).
        return "utf-8"
    return _SUPERSET.get(name, name)


def sniff_binary(body: bytes) -> str | None:
    """What binary file ``body`` is (magic number, NUL bytes), None if it may be text."""
    for magic, what in _MAGIC:
        if body.startswith(magic):
            return what
    if body[8:12] == b"WEBP" and body.startswith(b"RIFF"):
        return "WebP image"
    if body[4:8] == b"ftyp":
        return "MP4/QuickTime media"
    head = body[:SNIFF_BYTES]
    nuls = head.count(0)
    # HTML never contains NUL bytes; a handful can be stray, more mean a binary file.
    if nuls > max(4, len(head) // 100):
        return f"binary data ({nuls} NUL bytes in the first {len(head)} bytes)"
    return None


def _sniff_utf16_without_bom(body: bytes) -> str | None:
    # An HTML page in UTF-16 without BOM starts with "<" (or whitespace) and a NUL.
    head = body[:2]
    if len(body) >= 4 and len(body) % 2 == 0:
        if head[1:] == b"\x00" and head[:1] in (b"<", b" ", b"\n", b"\r", b"\t"):
            return "utf-16-le"
        if head[:1] == b"\x00" and head[1:] in (b"<", b" ", b"\n", b"\r", b"\t"):
            return "utf-16-be"
    return None


def _declared(body: bytes, content_type: str | None) -> list[tuple[str, str]]:
    """Declared (codec, source) pairs in precedence order, unknown labels dropped."""
    found: list[tuple[bytes | None, str]] = []
    if content_type:
        m = _CONTENT_TYPE_CHARSET.search(content_type.encode("latin-1", "replace"))
        found.append((m.group(1) if m else None, "http-header"))
    head = body[:PRESCAN_BYTES]
    m = _WRAPPER_ENCODING.search(head)
    found.append((m.group(1) if m else None, "wrapper-line"))
    m = _META_CHARSET.search(head)
    found.append((m.group(1) if m else None, "meta"))
    out: list[tuple[str, str]] = []
    for label, source in found:
        codec = normalize_charset(label)
        if codec and codec not in (c for c, _ in out):
            out.append((codec, source))
    return out


def _strict(body: bytes, codec: str) -> str | None:
    try:
        return body.decode(codec)
    except (UnicodeDecodeError, LookupError):
        return None


def _looks_like_mojibake(text: str, codec: str) -> bool:
    """True if many non-ASCII characters fall outside the codec's common repertoire."""
    core = _LEGACY_CJK_CORE.get(codec)
    if core is None:
        # Single-byte charsets: text that happens to be valid UTF-8 is UTF-8.
        return True
    foreign = total = 0
    for ch in text[:DETECTOR_BYTES]:
        if ch < "\x80":
            continue
        total += 1
        if "\ue000" <= ch <= "\uf8ff":  # private use: user-defined code points
            foreign += 1
            continue
        try:
            ch.encode(core)
        except UnicodeEncodeError:
            foreign += 1
    return total > 0 and foreign > MOJIBAKE_SHARE * total


def _lenient(body: bytes, codec: str) -> tuple[str, int]:
    text = body.decode(codec, errors="replace")
    return text, text.count("\ufffd")


def _tolerable(replaced: int, body: bytes) -> bool:
    # A truncated page or a stray byte should not throw away a declared charset that is
    # right everywhere else; many errors mean the declaration is wrong.
    non_ascii = len(body.translate(None, _ASCII_BYTES))
    return replaced <= max(2, non_ascii // 200)


def _detect(body: bytes) -> tuple[str, str] | None:
    best = from_bytes(body[:DETECTOR_BYTES]).best()
    if best is None:
        return None
    codec = normalize_charset(best.encoding)
    return (codec, "detector") if codec else None


def decode_html(body: bytes, content_type: str | None = None) -> Decoded:
    """Decode a fetched page; raise UnusableContent for empty or binary bodies."""
    if not body:
        raise UnusableContent("empty page")
    for bom, codec in _BOMS:
        if body.startswith(bom):
            text, replaced = _lenient(body[len(bom) :], codec.removesuffix("-sig"))
            return Decoded(text, codec, "bom", replaced)
    utf16 = _sniff_utf16_without_bom(body)
    if utf16:
        text, replaced = _lenient(body, utf16)
        return Decoded(text, utf16, "utf-16-sniff", replaced)
    binary = sniff_binary(body)
    if binary:
        raise UnusableContent(f"not a text page: {binary}")
    if not body.strip():
        raise UnusableContent("empty page (whitespace only)")

    utf8 = _strict(body, "utf-8")
    declared = _declared(body, content_type)
    for codec, source in declared:
        strict = _strict(body, codec)
        if codec == "utf-8" or utf8 is None or utf8.isascii():
            if strict is not None:
                return Decoded(strict, codec, source)
        elif strict is None or _looks_like_mojibake(strict, codec):
            return Decoded(utf8, "utf-8", f"utf-8 (declared {codec} by {source} rejected)")
        else:
            return Decoded(strict, codec, source)
    if utf8 is not None:
        return Decoded(utf8, "utf-8", "utf-8-valid")
    # No declaration decodes strictly: a declared charset with a few bad bytes is still a
    # better guess than a detector, which misreads old GB2312 pages as Cyrillic.
    for codec, source in declared:
        text, replaced = _lenient(body, codec)
        if _tolerable(replaced, body):
            return Decoded(text, codec, f"{source} (lenient)", replaced)
    guess = _detect(body)
    codec, source = guess if guess else ("utf-8", "fallback")
    text, replaced = _lenient(body, codec)
    return Decoded(text, codec, source, replaced)
