"""The matcher on real servers: edited copies found, negatives and boilerplate clean."""

from __future__ import annotations

import random
from difflib import SequenceMatcher

import numpy as np
import opencc
import pytest

from fingerprinter import CHECK_BITS, query_array, to_letters
from fingerprinter.initials import DROP, initial_table
from fingerprinter.params import VALUE_BITS
from tests.adding import add_all, add_texts
from tests.corpus import texts
from tracker.index import PLACE_LETTERS, PLACES, places_of
from tracker.masters.library import Work, add_work
from tracker.masters.master_cache import cached_masters
from tracker.matching.matcher import MatchSettings, candidates, match_text, match_texts

ZH = texts("zh_news", 120)
EN = texts("en_news", 60)
MASTERS = ZH[:60] + EN[:30]
UNRELATED = ZH[80:120] + EN[40:60]  # never added to the library
FOOTER = (
    "\n特别声明：本站所有文章均转载自网络，版权归原作者所有，如有侵权请联系我们删除。"
    "更多精彩内容请关注本站微信公众号，每日为您推送最新资讯。"
)


@pytest.fixture
def library(ctx):
    add_texts(ctx, MASTERS, "m")
    return ctx


def drop_chars(text: str, rate: float, rng: random.Random) -> str:
    return "".join(c for c in text if rng.random() >= rate)


def homophones(text: str, rate: float, rng: random.Random) -> str:
    table = initial_table()
    by_letter: dict[int, list[str]] = {}
    for char in sorted(set("".join(ZH))):
        by_letter.setdefault(int(table[ord(char)]), []).append(char)
    return "".join(
        rng.choice(by_letter[int(table[ord(c)])])
        if table[ord(c)] != DROP and rng.random() < rate
        else c
        for c in text
    )


def with_ads(text: str) -> str:
    return "\n".join(p + "\n【广告】扫码领取新人红包，立即下载APP" for p in text.split("\n"))


def shuffle_sentences(text: str, rng: random.Random) -> str:
    parts = text.replace("。", "。\n").split("\n")
    rng.shuffle(parts)
    return "".join(parts)


ATTACKS = {
    "exact": lambda t, rng: t,
    "drop 5%": lambda t, rng: drop_chars(t, 0.05, rng),
    "homophones 30%": lambda t, rng: homophones(t, 0.3, rng),
    "traditional": lambda t, rng: opencc.OpenCC("s2t").convert(t),
    "ads": lambda t, rng: with_ads(t),
    "sentence shuffle": shuffle_sentences,
    "30% excerpt in other text": lambda t, rng: (
        UNRELATED[0][:300] + t[: len(t) * 3 // 10] + UNRELATED[1][:300]
    ),
}


@pytest.mark.parametrize("attack", ATTACKS)
def test_pirated_copies_are_attributed_to_their_master(library, attack):
    rng = random.Random(attack)
    # Articles, not briefs: a 30% excerpt of a 100-character brief is one sentence.
    targets = [i for i in range(60) if len(ZH[i]) >= 400][:10]
    top = [match_text(library, ATTACKS[attack](ZH[i], rng)) for i in targets]
    correct = sum(
        bool(m) and m[0].master.external_id == f"m{i}" for i, m in zip(targets, top, strict=True)
    )
    assert correct >= len(targets) - 1, attack


def test_english_copies_are_found(library):
    rng = random.Random(3)
    for i in range(0, 30, 5):
        edited = drop_chars(EN[i], 0.03, rng)
        assert match_text(library, edited)[0].master.external_id == f"m{60 + i}"


def test_unrelated_texts_match_nothing(library):
    assert [t for t in UNRELATED if match_text(library, t)] == []


def test_boilerplate_shared_by_masters_does_not_match_on_its_own(ctx):
    add_all(
        ctx,
        [
            Work(text=text + (FOOTER if i % 4 == 0 else ""), external_id=f"m{i}")
            for i, text in enumerate(ZH[:40])
        ],
    )
    assert match_text(ctx, UNRELATED[3] + FOOTER) == []
    # A real copy of a master with the footer is still found.
    assert match_text(ctx, ZH[8] + FOOTER)[0].master.external_id == "m8"


def test_the_df_cut_grows_with_the_library(ctx):
    """A story in six masters (syndicated, each with its own byline) is past a cut of four
    masters; once the library is big enough for that to be a small share of it, its copy
    is found in each of the six."""
    story = ZH[30]
    add_all(
        ctx, [Work(text=f"本报记者{i}号报道：\n{story}", external_id=f"s{i}") for i in range(6)]
    )
    add_texts(ctx, ZH[:34], "m")
    fixed = MatchSettings(max_df=4, max_df_share=0.0)
    scaled = MatchSettings(max_df=4, max_df_share=0.2)  # 20% of 40 works: 8
    assert fixed.df_cut(40) == 4 and scaled.df_cut(40) == 8 and scaled.df_cut(10) == 4
    copy = story[: len(story) // 2]
    assert match_text(ctx, copy, fixed) == []
    found = {m.master.external_id for m in match_text(ctx, copy, scaled)}
    assert found == {f"s{i}" for i in range(6)} | {"m30"}


def test_merged_masters_are_both_reported_with_passages(library):
    merged = ZH[10] + "\n" + ZH[20]
    matches = match_text(library, merged)
    assert {m.master.external_id for m in matches} == {"m10", "m20"}
    for match in matches:
        master = ZH[int(match.master.external_id[1:])]
        assert match.master_coverage > 0.95
        for span in match.spans:
            copied = to_letters(master[span.master_start : span.master_end]).as_string()
            shown = to_letters(merged[span.suspect_start : span.suspect_end]).as_string()
            assert SequenceMatcher(None, copied, shown, autojunk=False).ratio() > 0.9


def test_texts_matched_together_get_what_each_gets_alone(library):
    # check --jsonl matches a batch of pages with one index lookup and one read of works:
    # copies, a merge, unrelated pages, an empty one and a repeat, in any order.
    rng = random.Random(3)
    batch = [
        drop_chars(ZH[5], 0.05, rng),
        UNRELATED[0],
        "",
        ZH[7] + "\n" + EN[3],
        homophones(ZH[9], 0.3, rng),
        UNRELATED[45],
        ZH[7] + "\n" + EN[3],
    ]
    together = match_texts(library, batch)
    assert together == [match_text(library, text) for text in batch]
    assert [sorted(m.master.external_id for m in found) for found in together] == [
        ["m5"],
        [],
        [],
        ["m63", "m7"],
        ["m9"],
        [],
        ["m63", "m7"],
    ]


def test_results_are_deterministic(library):
    query = ZH[5][:300] + ZH[6][100:500] + ZH[7]
    assert match_text(library, query) == match_text(library, query)


def _brief(text: str) -> str:
    """A news brief: the article's first sentences, up to 600 characters."""
    head = "".join(text.split())[:600]
    return head[: head.rfind("。") + 1] or head


# Short works made of articles used nowhere else here (not masters, not fillers).
BRIEFS = [brief for brief in map(_brief, ZH[60:80]) if len(brief) >= 200]


def _brief_library(ctx):
    add_texts(ctx, BRIEFS, "b")
    return ctx


def test_a_short_excerpt_of_a_brief_is_reported_with_its_size(ctx):
    """50 characters of a news brief quoted inside an unrelated article: found, and the
    finding says how much was copied (so reviewers tell a quotation from a copy)."""
    _brief_library(ctx)
    found = 0
    for i, brief in enumerate(BRIEFS):
        piece = brief[len(brief) // 3 : len(brief) // 3 + 50]
        page = UNRELATED[i % 20] + "\n" + piece + "\n" + UNRELATED[(i + 1) % 20]
        matches = {m.master.external_id: m for m in match_text(ctx, page)}
        # Another brief is reported only if it has the piece too (briefs rewrite each other).
        for name in set(matches) - {f"b{i}"}:
            other = BRIEFS[int(name[1:])]
            common = SequenceMatcher(None, other, piece, autojunk=False).find_longest_match()
            assert common.size >= 24, (name, piece)
        if f"b{i}" in matches:
            found += 1
            # the piece, give or take its edges
            assert 40 <= matches[f"b{i}"].copied_chars <= 60
    assert len(BRIEFS) >= 15 and found >= 0.9 * len(BRIEFS)


def test_names_and_stock_phrases_shorter_than_the_minimum_are_not_reported(ctx):
    """The longest stretch a page shares with a work decides: 20 characters of a brief (a
    name, a stock phrase) are below the minimum; the same page with 40 is reported."""
    _brief_library(ctx)
    flat = BRIEFS[0]
    filler = UNRELATED[0] + "\n{}\n" + UNRELATED[1]
    assert match_text(ctx, filler.format(flat[60:80])) == []
    assert [m.master.external_id for m in match_text(ctx, filler.format(flat[60:110]))] == ["b0"]
    strict = MatchSettings(min_excerpt_chars=60)
    assert match_text(ctx, filler.format(flat[60:110]), strict) == []


def test_an_english_quotation_of_twenty_words_is_found_and_one_fingerprint_costs_nothing(library):
    """Twenty words of an English article quoted in an unrelated one are reported (more when
    twenty short words hold fewer than 100 letters: the shortest reported is
    ``min_excerpt_latin_chars``, 80). A work sharing one fingerprint only with an English
    page (five words, or chance) is not even a candidate: a copied English stretch of the
    minimum (~15 words) holds several fingerprints, so one in common is chance, and no text
    is loaded to check it."""
    for i in range(0, 30, 3):
        words = EN[i].split()
        middle = len(words) // 2
        page = UNRELATED[40 + i % 20] + "\n{}\n" + UNRELATED[41 + i % 19]
        end = middle + 20
        while sum(map(str.isalnum, "".join(words[middle:end]))) < 100:
            end += 1
        quoted = page.format(" ".join(words[middle:end]))
        assert f"m{60 + i}" in [m.master.external_id for m in match_text(library, quoted)]
        phrase = page.format(" ".join(words[middle : middle + 5]))
        assert [c.master_id for c in candidates(library, phrase) if c.hits == 1] == []


def test_a_work_hit_twice_at_places_apart_from_the_pages_is_no_candidate(ctx):
    """Two granules of a page that a work has at places in it whose distance is not theirs
    in the page (fingerprints colliding by chance, in a large library) do not make the work
    a candidate: its text is not read. At the page's distance they do."""
    other = add_work(ctx, Work(text=ZH[6], external_id="other"))[0].master_id
    page = ZH[100]  # not in the library
    query = query_array(page, ctx.params)
    hit = [10, 40]
    letters = query.first_letters[hit]

    def candidate_ids(settings: MatchSettings | None = None) -> list[int]:
        return [c.master_id for c in candidates(ctx, page, settings or MatchSettings())]

    far = letters + np.array([0, 20 * PLACE_LETTERS])  # the second hit 640 letters further
    ctx.index.add(other, query.tagged()[hit], places_of(far))
    assert other not in candidate_ids()
    assert other in candidate_ids(MatchSettings(ordered_hits_below=0))  # the rule off
    ctx.index.remove(other, query.tagged()[hit])
    ctx.index.add(other, query.tagged()[hit], places_of(letters + 5 * PLACE_LETTERS))
    assert other in candidate_ids()


def test_a_work_hit_only_by_colliding_letter_counts_is_not_read(ctx):
    """Two granules of a page whose counts a work has in other letters (the fingerprints
    agree, the checks do not: most chance hits in a large library) do not make the work a
    candidate: its text is not even read. A copy is still found."""
    add_work(ctx, Work(text=ZH[5], external_id="copied"))
    other = add_work(ctx, Work(text=ZH[6], external_id="other"))[0].master_id
    page = ZH[100]  # not in the library
    query = query_array(page, ctx.params)
    other_letters = (query.checks + 1) % 2**CHECK_BITS
    ctx.index.add_many([(other, (query.values | other_letters << VALUE_BITS)[10:12])])
    read: list[int] = []

    def load(ctx, ids):
        read.extend(ids)
        return cached_masters(ctx, ids)

    assert match_text(ctx, page, load_masters=load) == []
    assert other not in read
    # Without the rule it is a candidate, read and aligned for nothing.
    assert match_text(ctx, page, MatchSettings(min_exact_hits=0), load) == []
    assert other in read
    assert [m.master.external_id for m in match_text(ctx, ZH[5][:600])] == ["copied"]


def test_a_few_hits_deep_in_a_long_work_are_aligned_where_their_places_put_them(ctx):
    """A page quoting 40 characters from far into a long work (past the first cycle of
    places: each place names stretches of the work 8,160 letters apart) shares only a few
    fingerprints with it: the work is aligned on the part its hits' places name, and the
    finding points at the quoted passage, with the same spans and coverage of the whole
    work as an alignment of the whole work."""
    book = "\n".join(ZH[:40])
    work = add_work(ctx, Work(text=book, external_id="book"))[0].master_id
    letters = len(to_letters(book))
    assert letters > 3 * PLACES * PLACE_LETTERS
    whole = MatchSettings(ordered_hits_below=0)
    found = 0
    for at in range(len(book) // 3, len(book) - 100, len(book) // 8):
        at = book.index("。", at) + 1  # a sentence's start
        piece = book[at : at + 40]
        page = UNRELATED[at % 20] + "\n" + piece + "\n" + UNRELATED[(at + 1) % 20]
        hits = {c.master_id: c.hits for c in candidates(ctx, page)}
        matches = match_text(ctx, page)
        assert matches == match_text(ctx, page, whole)
        if 2 <= hits.get(work, 0) < MatchSettings().ordered_hits_below:
            found += 1
            (match,) = matches
            span = match.spans[0]
            assert abs(span.master_start - at) <= 5 and abs(span.master_end - (at + 40)) <= 5
    assert found >= 3


def _headed_library(ctx):
    """Works of the brief kind that open with a headline line, as news articles do."""
    add_all(
        ctx,
        [
            Work(text=f"{text[:36]}\n{text[36:]}", external_id=f"h{i}")
            for i, text in enumerate(BRIEFS)
        ],
    )
    return ctx


def test_a_match_confined_to_a_works_headline_is_no_finding(ctx):
    """A page quoting a work's first line (its headline, 36 characters) copies nothing of
    it: no match, where the same page matches once the rule is off (heading_chars=0). The
    same length from the work's body is a quotation, reported."""
    _headed_library(ctx)
    filler = UNRELATED[0] + "\n{}\n" + UNRELATED[1]
    headlines = 0
    for i, brief in enumerate(BRIEFS):
        page = filler.format(brief[:36])
        off = match_text(ctx, page, MatchSettings(heading_chars=0))
        if f"h{i}" in [m.master.external_id for m in off]:
            headlines += 1
            assert f"h{i}" not in [m.master.external_id for m in match_text(ctx, page)]
    assert headlines >= 10
    quoted = match_text(ctx, filler.format(BRIEFS[0][100:140]))
    assert [m.master.external_id for m in quoted] == ["h0"] and quoted[0].quotation


def test_short_stretches_of_many_works_are_a_listing_not_findings(ctx):
    """A search-result page: 40-character snippets from the body of six works, one a line.
    Quotation-sized matches of three works or more are a listing: none reported, while a
    copy of a whole work on the same page still is."""
    _brief_library(ctx)
    snippets = [BRIEFS[i][len(BRIEFS[i]) // 2 :][:40] for i in range(6)]
    page = (
        UNRELATED[2]
        + "\n"
        + "\n".join(f"{s}…  2024-05-0{n} 评论 分享" for n, s in enumerate(snippets))
    )
    assert match_text(ctx, page) == []
    each = match_text(ctx, page, MatchSettings(listing_works=99))
    assert len({m.master.external_id for m in each}) >= 5 and all(m.quotation for m in each)
    with_copy = match_text(ctx, page + "\n" + BRIEFS[10])
    assert [m.master.external_id for m in with_copy] == ["b10"] and not with_copy[0].quotation
