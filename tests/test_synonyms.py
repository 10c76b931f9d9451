"""The rewrite stream (fingerprinter.synonyms, fingerprinter.skeleton) and the matches it
finds."""

from __future__ import annotations

import dataclasses
import os
import random
import subprocess
import sys

import jieba
import numpy as np
import pytest
from click.testing import CliRunner

from copytrack.cli import main
from fingerprinter import (
    CHECK_BITS,
    DEFAULT_PARAMS,
    SYNONYM_BIT,
    index_array,
    kept_numbers,
    kept_share,
    synonym_index_array,
    synonym_letters,
    synonym_query,
    synonym_stream,
    to_letters,
)
from fingerprinter.params import VALUE_BITS, FingerprintParams
from fingerprinter.synonyms import canonical_words
from testbed import rewrite
from tests.adding import add_texts
from tests.admin_seed import PASSWORD, client, login
from tests.corpus import novel_chapters, texts
from tracker.accounts.users import add_user
from tracker.context import fingerprint_params, open_context
from tracker.core.config import Settings
from tracker.findings import differences, evidence, tally
from tracker.index import IndexVersionMismatch, places_of
from tracker.masters.generation import open_ready
from tracker.masters.library import Work, add_work, fingerprint_values
from tracker.masters.master_cache import cached_masters
from tracker.matching.matcher import MatchSettings, match_text
from tracker.scanning.pages import PageInput, scan_page, store_page

ZH = texts("zh_news", 40)
ON = FingerprintParams(synonyms=True)
#: The fingerprint version of the pinyin stream alone (letters version 2: hidden characters
#: read): the defaults keep it, so an installation that does not turn the synonym stream
#: on needs no reindex for it.
PINYIN_ONLY_VERSION = "fp1-a0a70fd86cbc"


def _class_swaps(text: str, rate: float, rng: random.Random) -> str:
    """Swap ``rate`` of the words that have a synonym in the matcher's own thesaurus."""
    members: dict[str, list[str]] = {}
    for word, head in sorted(canonical_words().items()):
        members.setdefault(head, []).append(word)
    out = []
    for word in jieba.cut(text, HMM=False):
        group = members.get(canonical_words().get(word, ""), [])
        others = [w for w in group if w != word]
        out.append(rng.choice(others) if others and rng.random() < rate else word)
    return "".join(out)


def test_a_swapped_word_leaves_the_skeleton_and_names_and_numbers_keep_their_letters() -> None:
    # Any common word for any other: the rewriting tool's word list does not matter.
    assert (
        synonym_letters("由于下雨，北京的航班3日取消。").as_string()
        == synonym_letters("因为下雨，北京的班机3日取消。").as_string()
        == synonym_letters("鉴于降雨，北京之航班3日撤销。").as_string()
    )
    # ... which the pinyin stream does not see through.
    assert to_letters("由于下雨").as_string() != to_letters("因为下雨").as_string()
    letters = synonym_letters("由于下雨，北京的航班3日取消。").as_string()
    assert letters == "iivbjiieiio"  # 北京 (a place) keeps its initials, 3 is a number
    # Another place, another number, other punctuation: another skeleton.
    assert synonym_letters("由于下雨，上海的航班4日取消！").as_string() != letters
    assert synonym_letters("由于下雨。北京的航班3日取消。").as_string() != letters
    # Latin words keep their letters.
    assert synonym_letters("copy 机器").as_string() == "copyi"


def test_offsets_point_at_the_characters_of_the_words_they_stand_for() -> None:
    text = "——由于下雨，北京的航班取消了。"
    letters = synonym_letters(text)
    assert np.all(np.diff(letters.offsets) > 0)
    assert letters.offsets.min() == text.index("由") and letters.offsets.max() < len(text)
    # A class letter at its word's first character, a place's initials at its characters.
    at = dict(zip(letters.offsets.tolist(), letters.as_string(), strict=True))
    assert at[text.index("由于")] == "i" and text.index("由于") + 1 not in at
    assert at[text.index("北")] == "b" and at[text.index("京")] == "j"
    assert at[text.index("，")] == "v" and at[text.index("。")] == "o"


def test_the_stream_is_off_when_the_parameters_say_so_or_the_text_has_no_chinese() -> None:
    assert synonym_stream("由于下雨，他离开了会场。", ON) is not None
    assert synonym_stream("由于下雨，他离开了会场。") is None  # off by default
    assert synonym_stream("由于下雨，他离开了会场。", FingerprintParams(synonyms=False)) is None
    assert synonym_stream("An English sentence has no Chinese words at all.", ON) is None


def test_only_granules_with_names_or_numbers_in_them_are_fingerprinted() -> None:
    text = ZH[0]
    letters = synonym_letters(text)
    everything = dataclasses.replace(ON, skeleton_min_known=0)
    indexed, every = synonym_index_array(letters, ON), synonym_index_array(letters, everything)
    assert 0 < len(indexed) < len(every)
    # A text of common words only has a skeleton, but no granule of it is fingerprinted:
    # every text has such runs.
    plain = "我们认为这个问题十分重要，必须迅速解决，大家都同意这个看法。" * 20
    assert len(synonym_letters(plain)) > 100
    assert len(synonym_index_array(synonym_letters(plain), ON)) == 0


def test_a_skeleton_of_few_names_is_also_fingerprinted_where_granules_hold_one_fewer() -> None:
    dense = dataclasses.replace(ON, skeleton_sparse_granules=0)
    sizes = set()
    for text in ZH[:20]:
        letters = synonym_letters(text)
        default, strict = synonym_index_array(letters, ON), synonym_index_array(letters, dense)
        assert set(strict.values.tolist()) <= set(default.values.tolist())
        # Only a skeleton with fewer granules of 3 own letters than the threshold changes.
        sparse = len(strict) < ON.skeleton_sparse_granules
        sizes.add((sparse, len(default) > len(strict)))
        if not sparse:
            assert np.array_equal(default.values, strict.values)
    assert (True, True) in sizes and (False, False) in sizes


def test_a_brief_with_one_own_letter_is_fingerprinted_where_its_granules_hold_it() -> None:
    """A brief of common words and a single name (here a Latin letter) has no granule of
    two own letters: it is indexed at those holding its one, which a rewrite of it keeps
    and another brief of that shape with another name does not have."""
    brief = (
        "我们认为这个问题十分重要，必须迅速解决，大家都同意X的看法。"
        "会议随后结束，代表们陆续离开了会场。"
    )
    rewrite = (
        "我们觉得这个问题非常重要，必须快速解决，大家都赞同X的看法。"
        "会议然后结束，代表们相继离去了会场。"
    )
    other = brief.replace("X", "Y")
    indexed = set(synonym_index_array(synonym_letters(brief), ON).values.tolist())
    assert indexed
    assert indexed & set(synonym_query(synonym_letters(rewrite), ON).values.tolist())
    assert not indexed & set(synonym_query(synonym_letters(other), ON).values.tolist())
    # Without the name: class letters only, no granule (every brief has such runs).
    assert len(synonym_index_array(synonym_letters(brief.replace("X", "")), ON)) == 0


def test_a_rewrite_keeps_the_work_s_numbers_and_a_text_of_its_template_does_not() -> None:
    work = "3月20日统计的227只股票型基金中，188只基金净值下挫，占比82.82%。"
    rewritten = "3月20日统算的227只股票类基金里，188只基金净值下跌，占比82.82%。"
    template = "2月12日统计的225只股票型基金中，99只基金净值上扬，占比44.00%。"
    assert kept_numbers([(work, rewritten)]) == 1.0
    assert kept_numbers([(work, template)]) < 0.5
    # Full-width digits are the same numbers; a passage without any says nothing.
    assert kept_numbers([(work, "３月２０日")]) == 1.0
    assert kept_numbers([(work, "没有数字")]) == 1.0


def test_synonym_fingerprints_carry_their_bit_and_never_equal_pinyin_ones() -> None:
    text = ZH[1]
    letters = synonym_letters(text)
    indexed, queried = synonym_index_array(letters, ON), synonym_query(letters, ON)
    bit = np.uint64(1 << SYNONYM_BIT)
    assert len(indexed) and np.all(indexed.values & bit) and np.all(queried.values & bit)
    assert np.all(indexed.values < np.uint64(1 << VALUE_BITS))
    pinyin = index_array(text, DEFAULT_PARAMS)
    assert not np.any(pinyin.values & bit)
    assert not set(indexed.values.tolist()) & set(pinyin.values.tolist())
    # A copy is queried at its master's indexed granules (the fingerprint's guarantee).
    assert set(indexed.values.tolist()) <= set(queried.values.tolist())


def test_deterministic_across_calls() -> None:
    text = "".join(
        random.Random(1).choice("我们认为这个问题十分重要必须迅速解决北京上海，。")
        for _ in range(300)
    )
    first = synonym_letters(text)
    again = synonym_letters(text)
    assert np.array_equal(first.codes, again.codes) and np.array_equal(first.offsets, again.offsets)


def test_a_rewrite_keeps_its_unswapped_words_in_order_and_a_stranger_does_not() -> None:
    work = ZH[3][:800]
    rewritten = _class_swaps(work, 1.0, random.Random(3))
    assert rewritten != work
    assert kept_share([(work, rewritten)]) > 0.5
    # The same characters shuffled, or another article: no runs in the work's order.
    shuffled = "".join(random.Random(3).sample(work, len(work)))
    assert kept_share([(work, shuffled)]) < 0.2
    assert kept_share([(work, ZH[4][:800])]) < 0.2
    assert kept_share([]) == 0.0


def test_a_rewritten_copy_is_found_and_rewritten_strangers_are_not(synonyms_ctx) -> None:
    ctx = synonyms_ctx
    masters = ZH[:20]
    add_texts(ctx, masters, "m")
    rng = random.Random(4)
    # The same index, queried in the pinyin stream alone.
    pinyin_only = dataclasses.replace(ctx, params=FingerprintParams(synonyms=False))
    found, found_by_pinyin = 0, 0
    for i, text in enumerate(masters[:10]):
        rewritten = _class_swaps(text[:600], 1.0, rng)
        assert rewritten != text[:600]
        matches = match_text(ctx, rewritten)
        found += bool(matches) and matches[0].master.external_id == f"m{i}"
        found_by_pinyin += bool(match_text(pinyin_only, rewritten))
    assert found >= 9 and found_by_pinyin <= 5, (found, found_by_pinyin)
    for text in ZH[20:40]:  # never added: their rewrites match nothing
        assert match_text(ctx, _class_swaps(text[:2500], 0.8, rng)) == []


def test_two_skeleton_hits_in_order_make_a_candidate_without_the_very_letters(
    synonyms_ctx,
) -> None:
    """A rewrite that splits or merges words shifts the class letters in a skeleton
    granule's middle while their counts, the fingerprint, stay: a work hit twice in the
    skeleton at the page's distance is read and aligned though neither hit's check agrees
    (the rewrite gates judge it), as it is not in the pinyin stream."""
    ctx = synonyms_ctx
    other = add_work(ctx, Work(text=ZH[6], external_id="other"))[0].master_id
    page = ZH[39]  # not in the library
    query = synonym_query(synonym_letters(page), ON)
    hit = [2, 6]
    other_letters = (query.checks[hit] + 1) % 2**CHECK_BITS
    ctx.index.add(other, query.values[hit] | other_letters << VALUE_BITS,
                  places_of(query.first_letters[hit]))  # fmt: skip
    read: list[int] = []

    def load(ctx, ids):
        read.extend(ids)
        return cached_masters(ctx, ids)

    assert match_text(ctx, page, MatchSettings(skeleton_exact_unneeded_hits=3), load) == []
    assert other not in read
    assert match_text(ctx, page, load_masters=load) == []  # read, but no rewrite of the page
    assert other in read


def test_rewritten_novel_chapters_the_skeleton_misses_are_found_in_pinyin_too(
    synonyms_ctx,
) -> None:
    """A novel's skeleton holds few letters of its own (names), and its runs of class
    letters align only near them: a chapter rewritten at 50% (the eval's attack) can be
    hit many times in the skeleton and still align on too little of it there, where the
    stretches the rewrite left whole align in the pinyin stream. Rewrites of chapters
    never registered match nothing either way."""
    ctx = synonyms_ctx
    chapters = novel_chapters(20)
    add_texts(ctx, chapters[:10], "m")
    rng = random.Random(5)
    skeleton_only = MatchSettings(rewrite_pinyin_hits=None)
    found = found_by_skeleton = 0
    for i, chapter in enumerate(chapters[:10]):
        rewritten = rewrite.rewrite(chapter, rng, 0.5)
        found += [m.master.external_id for m in match_text(ctx, rewritten)][:1] == [f"m{i}"]
        found_by_skeleton += bool(match_text(ctx, rewritten, skeleton_only))
    assert found >= 9 and found_by_skeleton < found, (found, found_by_skeleton)
    for chapter in chapters[10:]:
        assert match_text(ctx, rewrite.rewrite(chapter, rng, 0.5)) == []


def test_the_evidence_names_synonym_swaps_apart_from_other_changes() -> None:
    work = "由于下雨，他离开了会场，大家都很吃惊。"
    page = "因为下雨，他离开了会场，大家都很吃惊。"
    kinds = [(p.kind, p.work, p.page) for p in differences(work, page) if p.kind != "same"]
    assert kinds == [("synonym", "由于", "因为")]
    # A word that is no synonym stays a change, and homophones stay homophones.
    other = [
        p.kind
        for p in differences(work, "由于下雨，他走进了会场，大家都很吃惊。")
        if p.kind != "same"
    ]
    assert "synonym" not in other and "changed" in other
    counted = tally(differences(work, page))
    assert counted["synonym"] == 2 and counted["changed"] == 0


def test_a_rewritten_copy_s_evidence_report_marks_its_synonym_swaps(synonyms_ctx) -> None:
    ctx = synonyms_ctx
    text = ZH[2][:1500]
    add_work(ctx, Work(text=text, external_id="news-2", title="新闻"))
    copied = _class_swaps(text, 0.5, random.Random(5))
    raw = f"<html><body><article><p>{copied}</p></article></body></html>".encode()
    page_id, _ = store_page(
        ctx, PageInput(url="https://copy.example/r.html", text=copied, raw=raw, status=200)
    )
    scan_page(ctx, page_id)
    finding = ctx.db.findings.find_one({"page_id": page_id})
    assert finding is not None  # the rewrite is found
    assert evidence(ctx, finding["_id"]).tally["synonym"] >= 20
    add_user(ctx, "vic", PASSWORD, "viewer")
    web = client(ctx)
    login(web, "vic")
    html = web.get(f"/findings/{finding['_id']}/evidence")
    assert html.status_code == 200
    assert '<span class="d-synonym" title="Synonym">' in html.text


def test_the_defaults_fingerprint_as_before_the_stream_and_the_setting_turns_it_on(
    ctx, tracker_env
) -> None:
    assert ctx.params == DEFAULT_PARAMS and ctx.params.version == PINYIN_ONLY_VERSION
    text = ZH[0][:2000]
    pinyin = index_array(text, DEFAULT_PARAMS)
    _, first = np.unique(pinyin.values, return_index=True)
    default = fingerprint_values(ctx, text)
    # Exactly the pinyin stream's fingerprints, as indexes built before the stream hold.
    assert np.array_equal(default.values, pinyin.tagged()[first])
    turned_on = Settings.from_env({**tracker_env, "COPYTRACK_SYNONYMS": "true"})
    params = fingerprint_params(turned_on)
    assert params.synonyms and params.version != PINYIN_ONLY_VERSION
    widened = fingerprint_values(dataclasses.replace(ctx, params=params), text)
    assert len(widened) > len(default)
    # The index built without the stream refuses the installation that turned it on.
    add_work(ctx, Work(text=text, external_id="w"))
    with pytest.raises(IndexVersionMismatch, match="copytrack reindex"):
        open_context(turned_on)


def test_turning_the_stream_on_takes_a_reindex_and_finds_rewrites_after_it(
    ctx, tracker_env, monkeypatch
) -> None:
    masters = ZH[:5]
    add_texts(ctx, masters, "m")
    before = ctx.index.stats().postings
    monkeypatch.setenv("COPYTRACK_SYNONYMS", "true")
    turned_on = Settings.from_env({**tracker_env, "COPYTRACK_SYNONYMS": "true"})
    with pytest.raises(IndexVersionMismatch, match="copytrack reindex"):
        open_context(turned_on)
    result = CliRunner().invoke(main, ["reindex"])
    assert result.exit_code == 0, result.output
    assert "reindexed 5 masters" in result.output
    on = open_ready(turned_on)
    try:
        assert on.index.stats().postings > before  # the synonym stream's postings too
        rewritten = _class_swaps(masters[1][:600], 1.0, random.Random(2))
        matches = match_text(on, rewritten)
        assert matches and matches[0].master.external_id == "m1"
    finally:
        on.close()


def test_segmenting_writes_and_reads_nothing_in_the_temp_directory(tmp_path) -> None:
    """The fingerprinter does no I/O: jieba's own start reads and writes a marshal cache in
    the temp directory, a file another user of the machine could plant."""
    script = (
        "from fingerprinter.synonyms import segment_words; "
        "print('|'.join(segment_words('小说的作者今天发表了新的章节')))"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip().split("|")[:3] == ["小说", "的", "作者"]
    assert list(tmp_path.iterdir()) == []


def test_private_use_characters_do_not_make_a_granule_worth_indexing() -> None:
    """A custom web font's private-use code points are unknown letters, which align with
    any letter: granules of them would match every skeleton."""
    hidden = "".join(f"我们的{chr(0xE000 + i)}在" for i in range(80)) + "。"
    assert len(synonym_index_array(synonym_letters(hidden), ON)) == 0
