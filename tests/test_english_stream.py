"""The English rewrite stream (fingerprinter.english) and the heavy revisions it finds."""

from __future__ import annotations

import dataclasses
import random

import numpy as np

from fingerprinter import (
    DEFAULT_PARAMS,
    english_letters,
    english_synonyms,
    rewrite_letters,
    rewrite_stream,
    synonym_letters,
    synonym_stream,
)
from fingerprinter.english import MIN_WORDS
from fingerprinter.params import FingerprintParams
from testbed.paraphrase import paraphrase
from tests.corpus import texts
from tracker.findings import differences, evidence
from tracker.masters.library import Work, add_work
from tracker.matching.matcher import match_text
from tracker.scanning.pages import PageInput, scan_page, store_page

EN = [text for text in texts("en_news", 120) if len(text) >= 1500]
ON = FingerprintParams(synonyms=True)


def test_synonyms_inflections_and_dropped_adjectives_leave_the_stream_as_it_was() -> None:
    work = "The minister announced that the new tax would be paid by the biggest firms in March."
    revised = (
        "The official declared that the fresh levy will be paid by the large companies in June."
    )
    assert english_letters(work).as_string() == english_letters(revised).as_string()
    dropped = "The minister announced that the tax would be paid by the firms in March."
    assert english_letters(dropped).as_string() == english_letters(work).as_string()
    # Other grammar gives other letters: the stream is no constant.
    other = "In March, firms paid a tax for which no minister had asked."
    assert english_letters(other).as_string() != english_letters(work).as_string()


def test_each_letter_points_at_the_word_it_stands_for() -> None:
    text = "It was   the best of times, it was the worst of times."
    letters = english_letters(text)
    words = [text[at:].split(" ", 1)[0] for at in letters.offsets.tolist()]
    assert words == ["It", "was", "the", "best", "of", "times,", "it", "was", "the", "worst",
                     "of", "times."]  # fmt: skip
    # One letter a word: each counts as a pinyin initial does in the alignment.
    assert letters.is_cjk.all()


def test_the_stream_is_on_with_the_synonym_setting_for_english_of_some_length() -> None:
    text = EN[0]
    assert rewrite_stream(text) is None  # off by default
    on = rewrite_stream(text, ON)
    assert on is not None and on.as_string() == english_letters(text).as_string()
    words = ("the", "cat", "sat", "on", "a", "mat") * MIN_WORDS
    assert rewrite_stream(" ".join(words[: MIN_WORDS - 1]), ON) is None  # too short to tell
    assert rewrite_stream(" ".join(words[:MIN_WORDS]), ON) is not None
    assert rewrite_letters(text, ON).as_string() == on.as_string()
    # Chinese text keeps its own synonym stream.
    chinese = "由于下雨，他离开了会场。" * 5
    assert rewrite_stream(chinese, ON) is not None
    assert np.array_equal(rewrite_stream(chinese, ON).codes, synonym_stream(chinese, ON).codes)
    assert np.array_equal(rewrite_letters(chinese, ON).codes, synonym_letters(chinese).codes)


def test_the_version_changes_only_with_the_stream_on() -> None:
    # An index built with the Chinese-only synonym stream is told apart from this one.
    assert DEFAULT_PARAMS.version == FingerprintParams(synonyms=False).version
    assert ON.version != DEFAULT_PARAMS.version


def test_heavy_revisions_are_found_with_the_stream_and_strangers_are_not(synonyms_ctx) -> None:
    ctx = synonyms_ctx
    masters = EN[:20]
    for i, text in enumerate(masters):
        add_work(ctx, Work(text=text[:3000], external_id=f"m{i}"))
    letters_only = dataclasses.replace(ctx, params=FingerprintParams(synonyms=False))
    found, found_by_letters = 0, 0
    for i, text in enumerate(masters[:10]):
        revised = paraphrase(text[:3000], random.Random(i), 1.0)
        matches = match_text(ctx, revised)
        found += bool(matches) and matches[0].master.external_id == f"m{i}"
        found_by_letters += bool(match_text(letters_only, revised))
    assert found >= 9 and found_by_letters <= 5, (found, found_by_letters)
    for i, text in enumerate(EN[20:40]):  # never added: their revisions match nothing
        assert match_text(ctx, paraphrase(text[:3000], random.Random(i), 1.0)) == []


def test_the_evidence_names_english_synonym_swaps_apart_from_other_changes() -> None:
    work = "The minister announced that the big firms would pay."
    page = "The minister declared that the large firms would pay."
    kinds = [(p.kind, p.work, p.page) for p in differences(work, page) if p.kind != "same"]
    assert kinds == [("synonym", "announced", "declared"), ("synonym", "big", "large")]
    # Another inflection of the same word, or a word of another meaning, is a change.
    for other in ("The minister announces that the big firms would pay.",
                  "The minister announced that the big dogs would pay."):  # fmt: skip
        found = {p.kind for p in differences(work, other)} - {"same"}
        assert found == {"changed"}, (other, found)
    assert english_synonyms("stopped", "halted") and not english_synonyms("house", "tax")


def test_a_heavily_revised_page_is_a_finding_whose_evidence_names_its_swaps(synonyms_ctx) -> None:
    ctx = synonyms_ctx
    work = EN[3][:2500]
    add_work(ctx, Work(text=work, external_id="en-3", title="News"))
    revised = paraphrase(work, random.Random(8), 1.0)
    raw = f"<html><body><article><p>{revised}</p></article></body></html>".encode()
    page = PageInput(url="https://copy.example/en.html", text=revised, raw=raw, status=200)
    page_id, _ = store_page(ctx, page)
    scan_page(ctx, page_id)
    finding = ctx.db.findings.find_one({"page_id": page_id})
    assert finding is not None
    counted = evidence(ctx, finding["_id"]).tally
    assert counted["synonym"] >= 1 and counted["changed"] > counted["synonym"], counted
