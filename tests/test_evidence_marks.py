"""Copied passages marked in a copy of the captured page (admin.evidence)."""

from __future__ import annotations

from admin.evidence import FIRST_MARK_ID, marked_copy, sentences

PAGE = (
    "<html><head><title>他说今天的天气很好，大家都出门了。</title>"
    "<script>var s = '他说今天的天气很好，大家都出门了。';</script></head>"
    "<body><h1>转载</h1><p>前言。他说今天的天气很好，大家都出门了。然后<b>粗体</b>"
    "他们去了公园玩了一整天，非常开心。</p><p>与原文无关的一段话，不该被标出来。</p></body></html>"
)
PASSAGE = "他说今天的天气很好，大家都出门了。然后粗体\n他们去了公园玩了一整天，非常开心。"


def test_the_sentences_of_a_passage_are_marked_where_the_html_has_them():
    marked, count = marked_copy(PAGE, [PASSAGE])
    assert count == 2
    assert f'id="{FIRST_MARK_ID}">他说今天的天气很好，大家都出门了。</mark>然后' in marked
    assert "<b>粗体</b><mark" in marked and "非常开心。</mark></p>" in marked
    assert "<p>与原文无关的一段话，不该被标出来。</p>" in marked
    # Neither the title nor the script is touched (they are not the page's visible text).
    assert "<title>他说今天的天气很好，大家都出门了。</title>" in marked
    assert "var s = '他说今天的天气很好，大家都出门了。';" in marked
    assert marked.count(f'id="{FIRST_MARK_ID}"') == 1


def test_short_sentences_and_pages_without_the_passage_are_left_alone():
    assert sentences(["他说：好。\n这是一段足够长的句子啊。"]) == ["这是一段足够长的句子啊。"]
    assert marked_copy(PAGE, ["完全不同的一段文字，页面里没有。"])[1] == 0
    assert marked_copy("", [PASSAGE]) == ("<!DOCTYPE html>", 0)
    unmarked, count = marked_copy(PAGE, [])
    assert count == 0 and "<p>与原文无关的一段话，不该被标出来。</p>" in unmarked
