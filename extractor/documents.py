"""Whole documents as bytes → text: an HTML page's article, a plain-text file.

What `copytrack library add` and `copytrack check` do with the files they are given, and
what `check URL` does with a fetched page.
"""

from __future__ import annotations

import codecs

from .decoding import UnusableContent, decode_html
from .extraction import extract

__all__ = ["NoArticleText", "decode_text_file", "html_to_text"]


class NoArticleText(ValueError):
    """The page decoded, but extraction found no article text in it."""


def html_to_text(body: bytes, content_type: str | None = None, url: str | None = None) -> str:
    """Article text of an HTML page given as bytes.

    Raises UnusableContent for binary, empty or undecodable bodies and NoArticleText when
    the page holds no article (both ValueErrors with the reason).
    """
    decoded = decode_html(body, content_type)
    if decoded.undecodable:
        raise UnusableContent(
            f"{decoded.replaced} byte sequences are not valid {decoded.encoding}: a binary "
            "file, or a page in a charset it does not declare (add a <meta charset> tag)"
        )
    found = extract(decoded.text, url)
    if not found.text:
        raise NoArticleText(f"no article text found ({found.reason})")
    return found.text


def mostly_chinese(text: str) -> bool:
    """Whether a text decoded from a legacy Chinese encoding reads as Chinese: bytes of
    another encoding decode too, but as noise with few common ideographs."""
    return sum("\u4e00" <= ch <= "\u9fff" for ch in text) >= 0.3 * len(text.strip() or "x")


#: Byte-order marks of the wide Unicode encodings, UTF-32 first: the UTF-32-LE mark starts
#: with the UTF-16-LE one. Their text holds NUL bytes (every ASCII character has one).
_WIDE_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def decode_text_file(data: bytes) -> str:
    """Decode a plain-text file: UTF-16 or UTF-32 by its byte-order mark, UTF-8 (with or
    without BOM), else GB18030 for Chinese files."""
    for bom, codec in _WIDE_BOMS:
        if data.startswith(bom):
            try:
                return data[len(bom) :].decode(codec)
            except UnicodeDecodeError as err:
                raise ValueError(
                    f"not {codec.upper()} text as its byte-order mark says (invalid bytes at "
                    f"offset {err.start + len(bom)}); convert the file to UTF-8"
                ) from None
    if b"\x00" in data[:8192]:
        raise ValueError(
            "binary file (contains NUL bytes), not text; a UTF-16 text needs its byte-order "
            "mark, or convert it to UTF-8"
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        problem = ValueError(
            f"not UTF-8 text (invalid byte at offset {err.start}); convert the file to UTF-8"
        )
    try:
        text = data.decode("gb18030")
    except UnicodeDecodeError:
        raise problem from None
    # Legacy Chinese files are GB18030-compatible; other bytes decode too, but as noise.
    if mostly_chinese(text):
        return text
    raise problem
