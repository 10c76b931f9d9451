"""extractor.decoding: charset choice, validation of declared charsets, unusable bodies."""

from __future__ import annotations

import codecs

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extractor.decoding import Decoded, UnusableContent, decode_html, normalize_charset

ZH = "北京时间昨天晚上，国家统计局发布了最新的经济数据。专家认为，今年的经济增长将保持稳定。"
ZH_TRADITIONAL = "繁體中文測試，這是一個臺灣的網頁，內容關於經濟與文化。"


def page(text: str, head: str = "") -> str:
    return f"<html><head>{head}</head><body><p>{text}</p></body></html>"


def meta(charset: str) -> str:
    return f'<meta http-equiv="Content-Type" content="text/html; charset={charset}">'


@pytest.mark.parametrize("label", ["gbk", "GB2312", "x-gbk", "gb18030"])
def test_gbk_page_with_declared_charset(label: str) -> None:
    body = page(ZH, meta(label)).encode("gbk")
    decoded = decode_html(body)
    assert ZH in decoded.text
    assert (decoded.encoding, decoded.source) == ("gb18030", "meta")


def test_gb2312_declaration_covers_characters_only_gb18030_has() -> None:
    # 镕 is GBK-only and 𠀀 is gb18030-only: browsers read "gb2312" as gb18030.
    text = ZH + "朱镕基𠀀"
    decoded = decode_html(page(text, '<meta charset="gb2312">').encode("gb18030"))
    assert text in decoded.text


def test_big5_page() -> None:
    decoded = decode_html(page(ZH_TRADITIONAL, '<meta charset="big5">').encode("big5"))
    assert ZH_TRADITIONAL in decoded.text
    assert decoded.encoding == "big5hkscs"


def test_utf8_page_declaring_gb2312_is_read_as_utf8() -> None:
    decoded = decode_html(page(ZH, '<meta charset="gb2312">').encode("utf-8"))
    assert ZH in decoded.text
    assert decoded.encoding == "utf-8"
    assert "rejected" in decoded.source


def test_utf8_page_declaring_gb2312_whose_gb_decoding_is_mojibake() -> None:
    # An even number of CJK characters per run: the UTF-8 bytes are then also valid
    # gb18030, so only the mojibake check can reject the declaration.
    text = "中文测试内容"
    body = page(text, '<meta charset="gb2312">').encode("utf-8")
    assert body.decode("gb18030") != body.decode("utf-8")  # precondition: both decode
    decoded = decode_html(body)
    assert text in decoded.text
    assert decoded.encoding == "utf-8"


def test_wrapper_line_declares_the_encoding() -> None:
    html = f'<text id="http://example.cn/a.html" title="标题" encoding="gb2312">\n{page(ZH)}'
    decoded = decode_html(html.encode("gbk"))
    assert ZH in decoded.text
    assert (decoded.encoding, decoded.source) == ("gb18030", "wrapper-line")


def test_undeclared_gbk_page_is_detected() -> None:
    decoded = decode_html(page(ZH * 3).encode("gbk"))
    assert ZH in decoded.text


def test_declared_charset_with_a_stray_bad_byte_is_kept() -> None:
    good = page(ZH * 5, meta("gbk")).encode("gbk")
    body = good.replace("。".encode("gbk"), b"\xff\x20", 1)  # one invalid sequence
    decoded = decode_html(body)
    assert decoded.encoding == "gb18030"
    assert "lenient" in decoded.source
    assert decoded.replaced >= 1
    assert ZH[:10] in decoded.text


@pytest.mark.parametrize(
    ("bom", "codec", "encoding"),
    [
        (codecs.BOM_UTF8, "utf-8", "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16-le", "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be", "utf-16-be"),
    ],
)
def test_bom_wins_over_declarations(bom: bytes, codec: str, encoding: str) -> None:
    body = bom + page(ZH, meta("gbk")).encode(codec)
    decoded = decode_html(body, content_type="text/html; charset=big5")
    assert (decoded.encoding, decoded.source) == (encoding, "bom")
    assert decoded.text.startswith("<html>")
    assert ZH in decoded.text


def test_utf16_without_bom_is_sniffed() -> None:
    decoded = decode_html(page(ZH).encode("utf-16-le"))
    assert ZH in decoded.text


def test_header_charset_beats_meta() -> None:
    # Bytes valid in both codecs: the header decides.
    body = page("abc", meta("big5")).encode("ascii") + "中文".encode("gbk")
    decoded = decode_html(body, content_type="text/html; charset=GBK")
    assert (decoded.encoding, decoded.source) == ("gb18030", "http-header")
    assert decoded.text.endswith("中文")


def test_wrong_header_charset_falls_back_to_meta() -> None:
    body = page(ZH, meta("gbk")).encode("gbk")
    decoded = decode_html(body, content_type='text/html; charset="utf-8"')
    assert (decoded.encoding, decoded.source) == ("gb18030", "meta")


def test_header_without_charset_is_ignored() -> None:
    decoded = decode_html(page(ZH, meta("gbk")).encode("gbk"), content_type="text/html")
    assert decoded.source == "meta"


def test_meta_charset_of_a_script_tag_is_not_a_declaration() -> None:
    head = '<script charset="utf-8" src="a.js"></script><meta charset="gbk">'
    assert decode_html(page(ZH, head).encode("gbk")).source == "meta"


@pytest.mark.parametrize(
    ("body", "what"),
    [
        (b"\x89PNG\r\n\x1a\n" + b"\x00" * 40, "PNG"),
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj", "PDF"),
        (b"PK\x03\x04\x14\x00\x00\x00\x08\x00", "ZIP"),
        (b"\x1f\x8b\x08\x00\x00\x00\x00\x00", "gzip"),
        (b"\x7fELF\x02\x01\x01", "ELF"),
        (b"<html>" + b"\x00\x01\x02\x03" * 500, "NUL bytes"),
    ],
)
def test_binary_content_is_unusable_with_a_clear_message(body: bytes, what: str) -> None:
    with pytest.raises(UnusableContent, match=what):
        decode_html(body)


@pytest.mark.parametrize("body", [b"", b" \r\n\t "])
def test_empty_page_is_unusable(body: bytes) -> None:
    with pytest.raises(UnusableContent, match="empty page"):
        decode_html(body)


def test_unusable_content_is_a_value_error() -> None:
    assert issubclass(UnusableContent, ValueError)


@pytest.mark.parametrize(
    ("label", "codec"),
    [
        ("gb2312", "gb18030"),
        ("GBK", "gb18030"),
        ("x-gbk", "gb18030"),
        ("big5", "big5hkscs"),
        ("utf8", "utf-8"),
        ("UTF-16", "utf-8"),
        ("iso-8859-1", "cp1252"),
        ("shift_jis", "cp932"),
        ("unset", None),
        ("base64", None),
        ("utf-7", None),
        ("", None),
        (None, None),
    ],
)
def test_normalize_charset(label: str | None, codec: str | None) -> None:
    assert normalize_charset(label) == codec


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=3000), content_type=st.none() | st.text(max_size=60))
def test_never_crashes_on_arbitrary_bytes(body: bytes, content_type: str | None) -> None:
    try:
        decoded = decode_html(body, content_type)
    except UnusableContent:
        return
    assert isinstance(decoded, Decoded)
    assert isinstance(decoded.text, str)


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=200),
    label=st.sampled_from(["utf-8", "gbk", "big5", "windows-1252", "shift_jis", "euc-kr"]),
)
def test_declared_charset_round_trips_unless_bytes_are_utf8(text: str, label: str) -> None:
    # Markup-free text in a page encoded in the codec its declaration maps to.
    text = text.replace("<", "").replace("\x00", "")
    codec = normalize_charset(label)
    assert codec is not None
    try:
        body = page(text, f'<meta charset="{label}">').encode(codec)
    except UnicodeEncodeError:
        return
    decoded = decode_html(body)
    # The only deviation allowed: bytes that are valid UTF-8 are read as UTF-8.
    if decoded.encoding != "utf-8" or codec == "utf-8":
        # Some codecs do not round-trip every character (cp932 reads ¬ back as ￢).
        assert text.encode(codec).decode(codec) in decoded.text
