"""The fingerprinter: letters, fingerprints, shift robustness, invariances, bad input."""

from __future__ import annotations

import hashlib
import os
import random
import re
import subprocess
import sys
import unicodedata
from dataclasses import replace

import numpy as np
import opencc
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pypinyin import Style, lazy_pinyin

from fingerprinter import (
    DEFAULT_PARAMS,
    FingerprintParams,
    fingerprint,
    fit_reference,
    granule_check,
    index_array,
    query_array,
    query_fingerprints,
    sliding,
    to_letters,
    winnowing,
)
from fingerprinter import compiled as compiled_modules
from fingerprinter.align import (
    KgramIndex,
    _chain,
    _diagonal_runs,
    _linked_or_long,
    _matching_pairs,
    align_letters,
    kgram_codes,
)
from fingerprinter.fingerprint import _first_occurrences, granule_fingerprints, index_starts
from fingerprinter.granule_check import granule_checks
from fingerprinter.initials import (
    CJK_FLAG,
    DROP,
    _letter_of_pinyin,
    _traditional_pairs,
    common_letters_class,
    initial_table,
    pinyin_readings,
)
from fingerprinter.quantize import level_table
from fingerprinter.reference import load_reference
from fingerprinter.sliding import sliding_values
from fingerprinter.winnowing import winnow
from tests.corpus import texts

# The module, which `fingerprinter.align` (the function the package exports) hides.
align_module = sys.modules["fingerprinter.align"]

ZH = texts("zh_news", 60)
EN = texts("en_news", 60)


def values(fps) -> list[int]:
    return [fp.value for fp in fps]


# --- text → letters -------------------------------------------------------------------


def test_letters_agree_with_pypinyin_per_character():
    sample = "".join(ZH[:5])
    letters = to_letters(sample)
    agree = total = 0
    for code, offset in zip(letters.letters.tolist(), letters.offsets.tolist(), strict=True):
        char = sample[offset]
        if "\u4e00" <= char <= "\u9fff":
            total += 1
            reference = lazy_pinyin(char, style=Style.FIRST_LETTER)[0]
            agree += reference[:1] == chr(ord("a") + code)
    assert total > 1000
    # The few that differ are characters that are also traditional forms (乾 → 干).
    assert agree / total > 0.995


def test_every_read_character_gets_the_first_letter_of_its_first_reading():
    # Characters OpenCC pairs with a traditional or simplified form take their pair's.
    paired = {point for pair in _traditional_pairs() for point in pair}
    table, checked = initial_table(), 0
    for point, readings in pinyin_readings().items():
        letter = _letter_of_pinyin(readings.split(",", 1)[0])
        if point not in paired:
            expected = DROP if letter is None else letter | CJK_FLAG
            assert table[point] == expected, (chr(point), readings)
            checked += 1
    assert checked > 30_000


def test_readings_read_from_pypinyins_data_file_are_pypinyins_own():
    from pypinyin.pinyin_dict import pinyin_dict

    # Read without importing pypinyin (its phrases are not needed), the same readings.
    assert pinyin_readings() == pinyin_dict


def test_table_covers_cjk_blocks_compatibility_forms_and_full_width():
    table = initial_table()

    def coverage(lo: int, hi: int) -> float:
        return float(np.mean(table[lo:hi] != DROP))

    assert coverage(0x4E00, 0x9FA6) > 0.99  # CJK Unified Ideographs
    assert coverage(0x3400, 0x4DB6) > 0.85  # Extension A
    assert coverage(0xF900, 0xFA2E) > 0.95  # compatibility ideographs
    assert to_letters("ＡＢｃ").as_string() == "abc"
    assert to_letters("\uf900").as_string() == to_letters("豈").as_string()
    assert to_letters("Café naïve").as_string() == "cafenaive"


def test_traditional_characters_give_the_letters_of_simplified_ones():
    to_traditional = opencc.OpenCC("s2t")
    for text in ZH[:10]:
        assert to_letters(to_traditional.convert(text)).as_string() == to_letters(text).as_string()


def test_offsets_point_at_the_characters_that_made_the_letters():
    text = "《红楼梦》第一回：甄士隐 dreams, 1792年。"
    letters = to_letters(text)
    chars = [text[i] for i in letters.offsets]
    assert "".join(chars) == "红楼梦第一回甄士隐dreams年"
    assert letters.as_string()[:3] == "hlm"


def test_latin_modes():
    assert to_letters("The quick brown fox", "letters").as_string() == "thequickbrownfox"
    assert to_letters("The quick brown fox", "initials").as_string() == "tqbf"
    with pytest.raises(ValueError, match="latin_mode"):
        to_letters("x", "words")


# --- fingerprints ---------------------------------------------------------------------


@pytest.mark.parametrize("text", [ZH[0], EN[0]])
def test_fingerprints_carry_original_offsets_and_fit_64_bits(text):
    fps = fingerprint(text)
    assert fps, "a news article yields fingerprints"
    letters = to_letters(text)
    for fp in fps:
        assert 0 <= fp.value < 2**DEFAULT_PARAMS.value_bits <= 2**64
        assert 0 <= fp.start < fp.end <= len(text)
        inside = (letters.offsets >= fp.start) & (letters.offsets < fp.end)
        assert inside.sum() == DEFAULT_PARAMS.granule
    strides = np.diff([int(np.searchsorted(letters.offsets, fp.start)) for fp in fps])
    # Content anchors: at least one granule start in every window of `stride` positions.
    assert strides.min() >= 1 and strides.max() <= DEFAULT_PARAMS.stride


def direct_values(letters, params, frame, starts) -> np.ndarray:
    """The fingerprint definition, granule by granule: count letters, look up levels, sum."""
    n, table = params.granule, level_table(params, frame).reshape(2, 26, params.granule + 1)
    out = []
    for s in starts.tolist():
        counts = np.bincount(letters.letters[s : s + n], minlength=26)
        script = int(2 * letters.is_cjk[s : s + n].sum() >= n)
        out.append(int(table[script, np.arange(26), counts].sum(dtype=np.uint64)))
    return np.array(out, dtype=np.uint64)


def test_the_install_builds_the_compiled_loops():
    # Optional in the build (a machine without a C compiler still installs), but this one
    # has one: the numpy passes would give the same values several times slower.
    loops = (
        (sliding, "_compiled_window_values"),
        (winnowing, "_compiled_anchors"),
        (granule_check, "_compiled_checks"),
        (align_module, "_compiled_matching_pairs"),
        (align_module, "_compiled_diagonal_runs"),
        (align_module, "_compiled_linked_or_long"),
        (align_module, "_compiled_shared_within"),
    )
    for module, loop in loops:
        assert getattr(module, loop) is not None, (
            f"{module.__name__}'s compiled loop was not built: run `make .venv/.installed` "
            "(needs gcc)"
        )


def test_a_numpy_fallback_says_so_once_as_a_warning(monkeypatch, caplog):
    monkeypatch.setattr(compiled_modules, "_warned", set())
    monkeypatch.setattr(winnowing, "_compiled_anchors", None)
    letters = np.arange(200, dtype=np.uint8) % 26
    with caplog.at_level("WARNING", logger="fingerprinter.compiled"):
        for _ in range(3):
            winnowing.anchors(letters, 8, 12)
    [record] = caplog.records
    assert record.levelname == "WARNING"
    assert "fingerprinter._winnowing is not compiled" in record.getMessage()
    assert "numpy fallback" in record.getMessage()
    # The compiled loop says nothing.
    caplog.clear()
    monkeypatch.undo()
    monkeypatch.setattr(compiled_modules, "_warned", set())
    winnowing.anchors(letters, 8, 12)
    assert not caplog.records


def test_compiled_anchors_are_the_numpy_winnowing_positions(monkeypatch):
    # Ties (a three-letter alphabet), streams shorter than a window or a k-gram, and
    # k-grams past 13 letters, whose codes wrap modulo 2**64.
    rng = np.random.default_rng(7)
    streams = [rng.integers(0, 26 if n % 3 else 3, n).astype(np.uint8)
               for n in [*range(0, 30), 200, 3000]]  # fmt: skip
    cases = [(letters, w, k) for letters in streams for w in (1, 2, 10, 16) for k in (1, 5, 14)]
    compiled = [winnowing.anchors(*case) for case in cases]
    monkeypatch.setattr(winnowing, "_compiled_anchors", None)
    for case, positions in zip(cases, compiled, strict=True):
        assert np.array_equal(winnowing.anchors(*case), positions), case[1:]


def _without_compiled_alignment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(align_module, "_compiled_matching_pairs", None)
    monkeypatch.setattr(align_module, "_compiled_diagonal_runs", None)
    monkeypatch.setattr(align_module, "_compiled_linked_or_long", None)


def test_compiled_alignment_loops_give_the_numpy_pairs_and_runs(monkeypatch):
    # Streams of few letters (k-grams repeated, some past the occurrences that count),
    # empty and one-letter streams, a suspect copying parts of the master.
    rng = np.random.default_rng(5)
    cases = []
    for n, alphabet in ((0, 26), (1, 26), (40, 2), (300, 3), (2000, 26), (2000, 4)):
        master = rng.integers(0, alphabet, n).astype(np.uint8)
        suspect = np.concatenate((rng.integers(0, alphabet, n // 3).astype(np.uint8),
                                  master[n // 4 : n // 2], master[: n // 5]))  # fmt: skip
        for k in (3, 8):
            cases.append((KgramIndex.of(master, k), kgram_codes(suspect, k), k))
    compiled = [_matching_pairs(*case) for case in cases]
    runs = [_diagonal_runs(*pairs, case[2]) for case, pairs in zip(cases, compiled, strict=True)]
    # Which runs may chain, with gaps and spans small and large against the runs found.
    weight = np.arange(2500, dtype=np.float64) * 0.75
    linked = [[_linked_or_long(case_runs, weight, case[2], gap, span)
               for gap, span in ((0, 3), (24, 24), (300, 1000))]
              for case, case_runs in zip(cases, runs, strict=True)]  # fmt: skip
    _without_compiled_alignment(monkeypatch)
    found_runs = 0
    for case, pairs, case_runs, case_linked in zip(cases, compiled, runs, linked, strict=True):
        reference = _matching_pairs(*case)
        assert all(np.array_equal(a, b) for a, b in zip(pairs, reference, strict=True))
        assert np.array_equal(case_runs, _diagonal_runs(*reference, case[2]))
        for (gap, span), kept in zip(((0, 3), (24, 24), (300, 1000)), case_linked, strict=True):
            assert np.array_equal(kept, _linked_or_long(case_runs, weight, case[2], gap, span))
        found_runs += len(case_runs)
    assert found_runs > 100
    assert any(0 < kept.sum() < len(kept) for case_linked in linked for kept in case_linked)


def test_compiled_alignment_aligns_the_corpus_as_the_numpy_passes(monkeypatch):
    # Each bundled text against a lightly edited copy of itself and against another text.
    pairs = []
    for script in (ZH, EN):
        for i, text in enumerate(script[:6]):
            copy = text[len(text) // 5 :].replace("的", "地")
            for other in (copy, script[(i + 1) % len(script)]):
                pairs.append((to_letters(text), to_letters(other)))
    compiled = [align_letters(master, suspect) for master, suspect in pairs]
    _without_compiled_alignment(monkeypatch)
    assert [align_letters(master, suspect) for master, suspect in pairs] == compiled
    assert sum(bool(alignment.spans) for alignment in compiled) >= 12


def test_compiled_granule_checks_are_the_numpy_ones(monkeypatch):
    rng = np.random.default_rng(11)
    cases = []
    for granule in (8, 9, 20, 64):
        for n in (granule, granule + 1, 300):
            letters = rng.integers(0, 26 if n % 2 else 3, n).astype(np.uint8)
            cases.append((letters, np.arange(n - granule + 1), granule))
    compiled = [granule_checks(*case) for case in cases]
    monkeypatch.setattr(granule_check, "_compiled_checks", None)
    for case, checks in zip(cases, compiled, strict=True):
        assert np.array_equal(granule_checks(*case), checks), case[2]


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled loop", "numpy passes"])
def test_incremental_values_equal_counting_each_granule(compiled, monkeypatch):
    if not compiled:
        monkeypatch.setattr(sliding, "_compiled_window_values", None)
    frame = load_reference(DEFAULT_PARAMS.reference)
    mixed = EN[1][:400] + ZH[1] + EN[2][:700]
    for params in (
        DEFAULT_PARAMS,
        FingerprintParams(granule=24, levels=3),
        FingerprintParams(granule=64, levels=2),
    ):
        for text in (ZH[0], EN[0], mixed):
            letters = to_letters(text, params.latin_mode)
            every = np.arange(len(letters) - params.granule + 1)
            expected = direct_values(letters, params, frame, every)
            assert np.array_equal(sliding_values(letters, params, frame), expected)
            anchors = index_starts(letters, params)
            assert np.array_equal(
                granule_fingerprints(letters, params, anchors, frame).values, expected[anchors]
            )


def test_the_compiled_loops_give_the_numpy_values_on_the_corpus(monkeypatch):
    # Stored fingerprints must not depend on whether the loop was built where they were
    # made: the whole bundled corpus, both scripts, through the public functions.
    compiled = [(index_array(text).tagged(), query_array(text).values) for text in ZH + EN]
    monkeypatch.setattr(sliding, "_compiled_window_values", None)
    monkeypatch.setattr(winnowing, "_compiled_anchors", None)
    monkeypatch.setattr(granule_check, "_compiled_checks", None)
    for text, (index_values, query_values) in zip(ZH + EN, compiled, strict=True):
        assert np.array_equal(index_array(text).tagged(), index_values)
        assert np.array_equal(query_array(text).values, query_values)


def test_chunk_boundaries_do_not_change_fingerprints(monkeypatch):
    # Long texts are processed in chunks (of granules, letters and winnowing windows);
    # tiny chunks put thousands of boundaries inside this text, and nothing may move.
    text = "".join(ZH[:8]) + "".join(EN[:4])
    expected_index, expected_query = index_array(text), query_array(text)
    monkeypatch.setattr(sliding, "CHUNK_LETTERS", 301)
    monkeypatch.setattr(winnowing, "_CHUNK", 97)
    for expected, got in ((expected_index, index_array(text)), (expected_query, query_array(text))):
        assert len(got) == len(expected) > 1000
        for field in ("values", "starts", "ends"):
            assert np.array_equal(getattr(got, field), getattr(expected, field))


def test_query_fingerprints_are_distinct_and_include_the_indexed_ones():
    text = ZH[3]
    query = query_fingerprints(text)
    assert len({fp.value for fp in query}) == len(query)
    assert set(values(fingerprint(text))) <= {fp.value for fp in query}


def test_fingerprints_are_identical_across_processes_and_hash_seeds():
    script = (
        "import hashlib, sys; from fingerprinter import index_array, query_array; "
        "t = sys.stdin.read(); "
        "print(hashlib.sha256(index_array(t).values.tobytes() + "
        "query_array(t).values.tobytes()).hexdigest())"
    )
    text = ZH[4] + EN[4]
    digests = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", script],
            input=text,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        digests.add(out.stdout.strip())
    here = hashlib.sha256(
        index_array(text).values.tobytes() + query_array(text).values.tobytes()
    ).hexdigest()
    assert digests == {here}


def test_params_version_is_stable_and_follows_content():
    assert FingerprintParams().version == DEFAULT_PARAMS.version
    assert FingerprintParams(granule=48).version != DEFAULT_PARAMS.version
    with pytest.raises(ValueError, match="granule"):
        FingerprintParams(granule=2)
    with pytest.raises(ValueError, match="levels"):
        FingerprintParams(levels=7)


def test_fit_reference_learns_letter_frequencies():
    frame = fit_reference(["aaab", "中中中国"], frame_id="t")
    latin, cjk = frame.as_array()
    assert latin[0] == pytest.approx(0.75) and latin[1] == pytest.approx(0.25)
    assert cjk[ord("z") - ord("a")] == pytest.approx(0.75)
    assert cjk[ord("g") - ord("a")] == pytest.approx(0.25)


# --- shift robustness -----------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    doc=st.integers(0, len(ZH) - 1),
    where=st.floats(0, 1),
    prefix=st.integers(0, 300),
    suffix=st.integers(0, 300),
)
def test_any_copied_stretch_of_the_guaranteed_length_is_found_anywhere(doc, where, prefix, suffix):
    master = ZH[doc]
    letters = to_letters(master)
    span = DEFAULT_PARAMS.guaranteed_span
    if len(letters) < span:
        return
    first = int(where * (len(letters) - span))
    start, end = letters.offsets[first], letters.offsets[first + span - 1] + 1
    # A copy holds whole Latin words: "ga" cut from "game2" reads as the pinyin syllable
    # ga, another letter than the work's (`fingerprinter.initials`).
    while start > 0 and _latin_pair(master[start - 1 : start + 1]):
        start -= 1
    while end < len(master) and _latin_pair(master[end - 1 : end + 1]):
        end += 1
    filler = ZH[(doc + 1) % len(ZH)] + ZH[(doc + 2) % len(ZH)]
    suspect = (
        filler[:prefix] + master[start:end] + filler[-suffix:]
        if suffix
        else filler[:prefix] + master[start:end]
    )
    # ... and keeps them whole at its edges (filler glued to a word changes its letters).
    copied = to_letters(master[start:end]).codes
    assume(_holds_run(to_letters(suspect).codes, copied))
    indexed = set(index_array(master).values.tolist())
    # Any query window up to the stride keeps the guarantee (the default is the stride).
    for window in (1, 3, DEFAULT_PARAMS.stride):
        params = replace(DEFAULT_PARAMS, query_window=window)
        assert indexed & set(query_array(suspect, params).values.tolist()), window


def _latin_pair(chars: str) -> bool:
    return len(chars) == 2 and all(c.isascii() and c.isalnum() for c in chars)


def _holds_run(codes: np.ndarray, run: np.ndarray) -> bool:
    """Whether ``run`` occurs in ``codes`` as a contiguous stretch."""
    if len(run) > len(codes):
        return False
    windows = np.lib.stride_tricks.sliding_window_view(codes, len(run))
    return bool((windows == run).all(axis=1).any())


def test_query_anchors_are_a_fraction_of_the_offsets():
    letters = to_letters(ZH[0])
    every = len(query_array(ZH[0], replace(DEFAULT_PARAMS, query_window=1)))
    anchored = len(query_array(ZH[0]))
    assert anchored < every / 3
    assert len(letters) - DEFAULT_PARAMS.granule + 1 >= every


def test_unrelated_texts_share_almost_no_fingerprints():
    indexed = [set(index_array(t).values.tolist()) for t in ZH[:30]]
    shared = sum(
        len(indexed[i] & set(query_array(ZH[j]).values.tolist()))
        for i in range(30)
        for j in range(30, 40)
        if i != j
    )
    assert shared <= 3


# --- invariances ----------------------------------------------------------------------


def _homophone_substitute(text: str, rate: float, rng: random.Random) -> str:
    """Replace characters by others with the same pinyin initial letter."""
    table = initial_table()
    by_letter: dict[int, list[str]] = {}
    for char in sorted(set("".join(ZH))):
        by_letter.setdefault(int(table[ord(char)]), []).append(char)
    out = []
    for char in text:
        code = int(table[ord(char)])
        if code != DROP and code & 0x80 and rng.random() < rate:
            char = rng.choice(by_letter[code])
        out.append(char)
    return "".join(out)


def _full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def _punctuation_noise(text: str, rng: random.Random, latin_words: bool = True) -> str:
    """Marks and spaces after a tenth of the characters; with ``latin_words`` false, not
    between two Latin letters."""
    out = []
    for c, after in zip(text, text[1:] + " ", strict=True):
        noisy = rng.random() < 0.1
        inside = unicodedata.normalize("NFKC", c + after).isascii() and (c + after).isalpha()
        out.append(
            c + (rng.choice(" ,。、\n\t！…") if noisy and (latin_words or not inside) else "")
        )
    return "".join(out)


def _is_zh(text: str) -> bool:
    return sum("\u4e00" <= c <= "\u9fff" for c in text) * 2 > len(text)


@settings(max_examples=40, deadline=None)
@given(doc=st.integers(0, 29), seed=st.integers(0, 10_000), rate=st.floats(0.05, 0.6))
def test_homophones_do_not_change_fingerprints(doc, seed, rate):
    text = ZH[doc]
    edited = _homophone_substitute(text, rate, random.Random(seed))
    assert values(fingerprint(edited)) == values(fingerprint(text))


@settings(max_examples=30, deadline=None)
@given(doc=st.integers(0, 29), seed=st.integers(0, 10_000))
def test_width_whitespace_and_punctuation_do_not_change_fingerprints(doc, seed):
    for text in (ZH[doc], EN[doc]):
        rng = random.Random(seed)
        # Not inside a Latin word of Chinese text, though: "Habor…house北京" has a word
        # that reads as pinyin (hou se) where "Haborhouse" had none.
        edited = _punctuation_noise(_full_width(text), rng, latin_words=not _is_zh(text))
        assert values(fingerprint(edited)) == values(fingerprint(text))
        nfkc = unicodedata.normalize("NFKC", text)
        assert values(fingerprint(nfkc)) == values(fingerprint(text))


def test_traditional_conversion_does_not_change_fingerprints():
    to_traditional = opencc.OpenCC("s2t")
    for text in ZH[:10]:
        assert values(fingerprint(to_traditional.convert(text))) == values(fingerprint(text))


def test_granule_checks_follow_the_letters_not_only_their_counts():
    to_traditional = opencc.OpenCC("s2t")
    for n, text in enumerate(ZH[:10]):
        rng = random.Random(n)
        copy = _homophone_substitute(to_traditional.convert(text), 0.3, rng)
        copy = _punctuation_noise(copy, rng)
        assert index_array(copy).tagged().tolist() == index_array(text).tagged().tolist()

    letters = to_letters("".join(ZH)).letters
    starts = np.arange(0, len(letters) - 40, 7)
    checks = granule_checks(letters, starts, 20)
    # A granule shifted by a letter mostly keeps its check (the checked letters are chosen
    # by content) ...
    assert np.mean(granule_checks(letters, starts + 1, 20) == checks) > 0.75
    # ... the same letters in another order (the same fingerprint) almost never do.
    rng = np.random.default_rng(0)
    shuffled = np.concatenate([rng.permutation(letters[s : s + 20]) for s in starts])
    same_counts = granule_checks(shuffled, np.arange(len(starts)) * 20, 20)
    assert len(checks) > 5000
    assert np.mean(same_counts == checks) < 0.03


# --- bad input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["", "   \n\t", "1234567890 ！？。…———", "\x00\x01\x02\x7f\u200b\ufeff" * 50, "短文本"]
)
def test_texts_without_enough_letters_have_no_fingerprints(text):
    assert fingerprint(text) == []
    assert query_fingerprints(text) == []


def test_lone_surrogates_and_control_characters_are_ignored():
    text = ZH[0]
    dirty = "\ud800" + text[:200] + "\x00\x07\udfff" + text[200:] + "\x1b"
    assert values(fingerprint(dirty)) == values(fingerprint(text))


def test_wrong_type_is_a_clear_error():
    with pytest.raises(TypeError, match="expected text as str"):
        fingerprint(b"bytes")  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_50_million_character_text_is_fingerprinted_whole():
    # Its speed is measured in benchmarks/bench_fingerprint.py; here: it completes, and
    # the result covers the whole text.
    huge = ("".join(ZH) + "".join(EN)) * 1
    huge = (huge * (50_000_000 // len(huge) + 1))[:50_000_000]
    indexed = index_array(huge)
    assert len(indexed) > 1_000_000
    assert indexed.ends[-1] <= len(huge)
    # Repeated text repeats its fingerprints: the distinct query set stays small.
    queried = query_array(huge[:5_000_000])
    assert 0 < len(queried) < 5_000_000


# --- golden tests from the seed documents ----------------------------------------------


def test_kgrams_of_the_seed_example():
    letters = to_letters("adorunrunrunadorunrun").letters
    codes = kgram_codes(letters, 5)
    decoded = []
    for code in codes.tolist():
        chars = []
        for _ in range(5):
            code, letter = divmod(code, 26)
            chars.append(chr(ord("a") + letter))
        decoded.append("".join(reversed(chars)))
    # The seed's list (Schleimer et al. 2003, fig. 2).
    seed = "adoru dorun orunr runru unrun nrunr runru unrun nruna runad unado nador adoru"
    assert decoded == [*seed.split(), "dorun", "orunr", "runru", "unrun"]


@pytest.mark.parametrize("k", range(1, 33))
def test_every_kgram_code_is_its_letters_as_a_base_26_number(k):
    # Codes are built by doubling k-gram lengths (1, 2, 4, 8, 16 letters) and joining them
    # by k's binary digits: every k the parameters allow, at every position; past 13
    # letters a code is the number modulo 2**64.
    letters = to_letters("\n".join(ZH[:3])).letters[:300]
    expected = [
        sum(int(letter) * 26 ** (k - 1 - j) for j, letter in enumerate(letters[i : i + k])) % 2**64
        for i in range(len(letters) - k + 1)
    ]
    assert kgram_codes(letters, k).tolist() == expected
    assert kgram_codes(letters[: k - 1], k).tolist() == []


@pytest.mark.parametrize("k", [5, 8, 13])
def test_sorted_kgrams_keep_every_position_in_text_order_among_equals(k):
    # k = 13 does not fit a position beside the code in 64 bits: the other way is taken.
    letters = to_letters("\n".join(ZH[:20])).letters
    letters = np.concatenate([letters, letters[:500]])  # repeated k-grams
    codes = kgram_codes(letters, k)
    order = np.argsort(codes, kind="stable")
    index = KgramIndex.of(letters, k)
    assert np.array_equal(index.codes, codes[order])
    assert np.array_equal(index.order, order)


@settings(max_examples=200, deadline=None)
@given(st.sets(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=120))
def test_diagonal_runs_are_the_maximal_runs_of_consecutive_matches(pairs):
    # The alignment's runs: k-gram matches one after the other on one diagonal, in either
    # text's order; any diagonal, the main one and those below it (master before suspect).
    k = 4
    master = np.array([m for m, _ in sorted(pairs)], dtype=np.int64)
    suspect = np.array([s for _, s in sorted(pairs)], dtype=np.int64)
    expected = []
    for m, s in sorted(pairs, key=lambda p: (p[1], p[0])):
        if (m - 1, s - 1) in pairs:
            continue  # not the first match of its run
        length = 1
        while (m + length, s + length) in pairs:
            length += 1
        expected.append([m, m + length - 1 + k, s, s + length - 1 + k])
    assert _diagonal_runs(master, suspect, k).tolist() == expected


@settings(max_examples=300, deadline=None)
@given(
    st.sets(st.tuples(st.integers(0, 300), st.integers(0, 300)), max_size=400),
    st.lists(st.floats(0.5, 1.0), min_size=320, max_size=320),
)
def test_runs_left_out_of_chaining_change_no_reported_chain(pairs, letter_weights):
    # Runs that can neither follow nor be followed by another, and are too short alone,
    # are not chained at all: the chains long enough to report are those of all runs.
    k, gap, min_span = 4, 12, 10.0
    master = np.array([m for m, _ in sorted(pairs)], dtype=np.int64)
    suspect = np.array([s for _, s in sorted(pairs)], dtype=np.int64)
    runs = _diagonal_runs(master, suspect, k)
    weight = np.concatenate(([0.0], np.cumsum(letter_weights)))

    def reported(chained: np.ndarray) -> list:
        chains = _chain(chained, k, gap)
        return [c for c in chains if weight[c[1]] - weight[c[0]] >= min_span]

    kept = _linked_or_long(runs, weight, k, gap, min_span)
    assert reported(runs[kept]) == reported(runs)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=0, max_size=80),
    st.lists(st.integers(0, 3), min_size=0, max_size=80),
    st.lists(st.tuples(st.integers(-10, 90), st.integers(-10, 90)), max_size=4),
)
def test_kgrams_shared_within_ranges_count_those_wholly_inside(master, text, ranges):
    # What the matcher asks before aligning a master whole: how many of the text's k-grams
    # near its hits the master holds. Plain definition: a k-gram starting at p counts when
    # p..p+k-1 all lie in some range (clipped to the text) and the master has it.
    k = 3
    index = KgramIndex.of(np.array(master, dtype=np.uint8), k)
    first = np.array([a for a, _ in ranges], dtype=np.int64)
    last = np.array([b for _, b in ranges], dtype=np.int64)
    inside = {i for a, b in ranges for i in range(max(a, 0), min(b, len(text)))}
    held = {tuple(master[i : i + k]) for i in range(len(master) - k + 1)}
    expected = sum(
        1
        for p in range(len(text) - k + 1)
        if all(p + j in inside for j in range(k)) and tuple(text[p : p + k]) in held
    )
    codes = kgram_codes(np.array(text, dtype=np.uint8), k)
    assert index.shared_within(codes, first, last) == expected
    with pytest.MonkeyPatch.context() as patch:  # and the numpy passes, without the loop
        patch.setattr(align_module, "_compiled_shared_within", None)
        assert index.shared_within(codes, first, last) == expected


def test_winnowing_selects_the_seed_example():
    hashes = np.array([77, 72, 42, 17, 98, 50, 17, 98, 8, 88, 67, 39, 77, 72, 42, 17, 98])
    positions = winnow(hashes, 4)
    assert positions.tolist() == [3, 6, 8, 11, 15]
    assert hashes[positions].tolist() == [17, 17, 8, 39, 17]


def test_a_passage_shared_by_two_texts_gets_the_same_fingerprints_in_both():
    passage = ZH[5][:400]
    first = set(index_array(ZH[6][:137] + passage).values.tolist())
    second = set(index_array(EN[3][:301] + "。" + passage + ZH[7][:50]).values.tolist())
    inside = set(index_array(passage).values.tolist())
    # Content anchors inside the passage are the same whatever precedes it.
    assert len(first & second) >= 0.8 * len(inside)


def test_the_common_letters_class_only_holds_characters_that_make_letters() -> None:
    """The API's schema counts letters with it: each character it matches is one letter."""
    pattern = re.compile(common_letters_class())
    matched = [chr(c) for c in range(0x10000) if pattern.fullmatch(chr(c))]
    assert len(matched) > 20_000 and "中" in matched and "a" in matched and "Z" in matched
    assert len(to_letters("".join(matched))) == len(matched)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 2**54 - 1)), max_size=300))
def test_a_text_with_unknown_letters_queries_each_value_once_at_its_first_granule(
    rows: list[tuple[int, int]],
) -> None:
    # Few distinct values (many repeats, as completions of neighbouring granules make),
    # and some of the full 54 bits.
    values = np.array([v if v % 3 else v % 7 for _, v in rows], dtype=np.uint64)
    starts = np.array([s for s, _ in rows], dtype=np.int64)
    distinct, first = np.unique(values, return_index=True)
    order = np.lexsort((distinct, starts[first]))
    got_values, got_starts = _first_occurrences(values, starts)
    assert got_values.tolist() == distinct[order].tolist()
    assert got_starts.tolist() == starts[first][order].tolist()
