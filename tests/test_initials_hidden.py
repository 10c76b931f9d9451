"""Characters that hide: words written in pinyin and private-use code points (web fonts)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from extractor.extraction import extract
from fingerprinter import DEFAULT_PARAMS, align, index_array, query_array, to_letters
from fingerprinter import initials as initials_module
from fingerprinter.fingerprint import index_starts
from fingerprinter.pinyin_runs import parse, syllables
from fingerprinter.reference import load_reference
from fingerprinter.sliding import sliding_values
from fingerprinter.unknown import MAX_COMPLETIONS, MAX_UNKNOWN, completed_values
from testbed.attacks import ATTACKS, reflow
from tests.adding import add_texts
from tests.corpus import texts
from tracker.matching.matcher import match_text


def _private(text: str) -> bool:
    return any("\ue000" <= c <= "\uf8ff" for c in text)


def letters_of(text: str) -> str:
    return to_letters(text).as_string()


@pytest.mark.parametrize(
    ("pinyin", "chinese"),
    [("xiaoshuo", "小说"), ("zhuangshi", "装饰"), ("lvse", "绿色"), ("fangan", "方案")],
)
def test_a_word_in_pinyin_inside_chinese_text_gives_its_characters_letters(pinyin, chinese):
    written = to_letters(f"他看了一本{pinyin}，觉得很好。")
    assert written.as_string() == letters_of(f"他看了一本{chinese}，觉得很好。")
    assert written.is_cjk.all()  # counted as Chinese letters, not Latin ones


def test_pinyin_with_spaces_apostrophes_or_full_width_letters_reads_the_same():
    expected = letters_of("我们去西安看小说吧")
    assert letters_of("我们去xi'an看 xiao shuo 吧") == expected
    assert letters_of("我们去西安看ｘｉａｏｓｈｕｏ吧") == expected


def test_the_offsets_of_pinyin_initials_point_at_their_syllables():
    text = "一本xiaoshuo。"
    assert to_letters(text).offsets.tolist() == [0, 1, 2, 6]


@pytest.mark.parametrize(
    "text",
    [
        "访问www.xiaoshuo.com下载全本",  # a URL: its words touch dots
        "我买了一部iPhone和一双Nike鞋",  # brands are written with capitals
        "他说：“I love you forever”",  # an English sentence quoted in Chinese
        "每天跑5km，周末跑half marathon。",  # units after digits, English that is no pinyin
        "第3zhang开始了",  # after a digit
    ],
)
def test_latin_words_that_are_not_pinyin_in_chinese_text_keep_their_letters(text):
    latin = [c.lower() for c in text if c.isascii() and c.isalpha()]
    stream = to_letters(text)
    kept = [chr(c + ord("a")) for c, cjk in zip(stream.letters, stream.is_cjk, strict=True)
            if not cjk]  # fmt: skip
    assert kept == latin


def test_pinyin_outside_chinese_text_stays_latin():
    for text in ("the word xiaoshuo means novel", "xiaoshuo", "Huawei and Xiaomi phones"):
        stream = to_letters(text)
        assert stream.as_string() == "".join(c.lower() for c in text if c.isalpha())
        assert not stream.is_cjk.any()


def test_parsing_takes_fewest_syllables_and_refuses_what_is_not_pinyin():
    assert parse("xian") == [0]
    assert parse("xiaoshuo") == [0, 4]
    assert parse("zhuangshi") == [0, 6]
    assert parse("hello") is None
    assert parse("ng") is None  # interjections without a vowel are no syllables here
    assert {"zhuang", "lve", "lue", "a", "er"} <= syllables()


def test_plain_chinese_and_english_texts_give_the_letters_they_gave(monkeypatch):
    """Only Chinese text with words in pinyin (or private-use code points, which the few
    texts that have them lose to no reading otherwise) changes: every other text keeps its
    fingerprints."""
    chinese = [t for t in texts("zh_news", 60) + texts("zh_novel", 5) if not _private(t)]
    sample = chinese + texts("en_news", 60)
    now = [index_array(text) for text in sample]
    monkeypatch.setattr(initials_module, "_read_pinyin", lambda *args: None)
    before = [index_array(text) for text in sample]
    changed = [
        i
        for i, (a, b) in enumerate(zip(now, before, strict=True))
        if not np.array_equal(a.values, b.values) or not np.array_equal(a.starts, b.starts)
    ]
    english = range(len(chinese), len(sample))
    assert not set(changed) & set(english)
    # The Chinese ones that changed hold a lowercase Latin word between Chinese characters.
    assert len(changed) <= 2


def test_a_private_use_code_point_is_an_unknown_letter_in_its_place():
    hidden = to_letters("他看了一本\ue123说")
    plain = to_letters("他看了一本小说")
    assert len(hidden) == len(plain)
    assert hidden.offsets.tolist() == plain.offsets.tolist()
    assert hidden.as_string()[5] == "u"  # the letter no Chinese reading starts with


def test_completed_granules_hold_the_masters_fingerprint():
    params = DEFAULT_PARAMS
    frame = load_reference(params.reference)
    master = reflow(texts("zh_novel", 2)[1][:1500], 200)
    copy = ATTACKS["private_use"](master, random.Random(3), rate=0.05)
    letters = to_letters(copy)
    found = completed_values(letters, params, frame)
    assert found is not None
    values, starts = found
    got: dict[int, set[int]] = {}
    for value, start in zip(values.tolist(), starts.tolist(), strict=True):
        got.setdefault(start, set()).add(value)
    # Every granule the master indexes is queried with its value, unknown letters and all.
    plain = to_letters(master)
    indexed = index_starts(plain, params)
    truth = sliding_values(plain, params, frame, indexed)
    checked = 0
    for start, value in zip(indexed.tolist(), truth.tolist(), strict=True):
        held = sum(c == "u" for c in letters.as_string()[start : start + params.granule])
        if 0 < held <= MAX_UNKNOWN:
            assert value in got[start]
            checked += 1
    assert checked > len(indexed) // 4
    # Offsets no reading makes an anchor get their own value only: unknown letters as they
    # are, as a copy of a text that has them is indexed.
    assert sum(len(v) == 1 for v in got.values()) > len(got) // 4
    assert set(index_array(copy).values.tolist()) <= set(values.tolist())


def test_a_long_text_with_unknown_letters_is_queried_within_bounds():
    book = reflow("".join(texts("zh_novel", 40)), 200)
    copy = ATTACKS["private_use"](book[:60_000], random.Random(4), rate=0.05)
    assert len(query_array(copy)) <= MAX_COMPLETIONS
    # A whole book is queried as any text (at its anchors), its unknown letters as letters.
    assert (
        completed_values(
            to_letters(copy + book), DEFAULT_PARAMS, load_reference(DEFAULT_PARAMS.reference)
        )
        is None
    )


def test_fingerprints_of_hidden_text_are_deterministic():
    copy = ATTACKS["private_use"](texts("zh_news", 3)[2], random.Random(1), rate=0.2)
    first, second = query_array(copy), query_array(copy)
    assert np.array_equal(first.values, second.values)
    assert np.array_equal(first.starts, second.starts)


def test_unknown_letters_read_from_the_master_join_the_copied_passage():
    master = reflow(texts("zh_news", 10)[9], 200)
    copy = ATTACKS["private_use"](master, random.Random(2), rate=0.2)
    alignment = align(master, copy)
    assert alignment.master_coverage > 0.9
    unrelated = ATTACKS["private_use"](texts("zh_news", 20)[19], random.Random(2), rate=0.2)
    assert align(master, unrelated).exact_weight < 50


@pytest.fixture
def chapters(ctx):
    # Pages of 600 characters, as sites cut chapters: without reading hidden characters,
    # most of these copies share no fingerprint with their work at these rates.
    works = [reflow(text[:600], 200) for text in texts("zh_novel", 12)]
    add_texts(ctx, works, "ch")
    return ctx, works


@pytest.mark.parametrize(("attack", "rate"), [("private_use", 0.2), ("pinyin_words", 0.25)])
def test_a_chapter_with_hidden_characters_still_matches_its_work(chapters, attack, rate):
    ctx, works = chapters
    for i, work in enumerate(works):
        copy = ATTACKS[attack](work, random.Random(i), rate=rate)
        found = [m.master.external_id for m in match_text(ctx, copy)]
        assert found[:1] == [f"ch{i}"], (i, found)


def test_hidden_characters_in_an_unrelated_text_match_nothing(chapters):
    ctx, _ = chapters
    other = reflow(texts("zh_news", 100)[99], 200)
    for attack, rate in (("private_use", 0.2), ("pinyin_words", 0.4)):
        assert match_text(ctx, ATTACKS[attack](other, random.Random(0), rate=rate)) == []


def test_a_page_drawing_characters_with_a_web_font_keeps_them_through_extraction(chapters):
    """trafilatura drops private-use code points as unprintable: extraction keeps them (as
    characters and as character references), so the page still matches its work."""
    ctx, works = chapters
    copy = ATTACKS["private_use"](works[5], random.Random(5), rate=0.2)
    hidden = sum(_private(c) for c in copy)
    paragraphs = "".join(
        "<p>" + "".join(f"&#x{ord(c):x};" if _private(c) and i % 2 else c for c in line) + "</p>"
        for i, line in enumerate(copy.split("\n"))
    )
    page = f"<html><head><title>第五章</title></head><body><article>{paragraphs}</article></body>"
    text = extract(page).text
    assert sum(_private(c) for c in text) == hidden
    assert [m.master.external_id for m in match_text(ctx, text)][:1] == ["ch5"]
    # A page without private-use characters is extracted as it was.
    plain = f"<html><body><article><p>{works[5]}</p><p>&#x4e2d;&#20013;</p></article></body>"
    assert extract(plain).text == extract(plain.replace("&#x4e2d;", "中")).text
