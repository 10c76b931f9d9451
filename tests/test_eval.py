"""`copytrack eval`: the benchmark, its ground truth, and accuracy floors on real servers.

The floors sit slightly under what the defaults measure on this benchmark (200 masters,
800 suspects, seed 7; see docs/accuracy.md), so a change that costs accuracy fails here.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

import pytest
from click.testing import CliRunner

from copytrack.cli import main
from fingerprinter import DEFAULT_PARAMS
from testbed.attacks import AD_LINES
from testbed.evaluation import (
    HARD,
    HARD_ADS,
    LANGS,
    LISTING_NEGATIVES,
    LISTING_PAGES,
    NEGATIVES,
    POSITIVES,
    Benchmark,
    Document,
    Score,
    build_benchmark,
    evaluate,
    report_json,
    report_markdown,
    reuse,
    score,
    sweep,
    sweep_markdown,
    sweep_settings,
    to_document,
)
from tests.built_once import made_once
from tests.corpus import documents
from tracker.matching.matcher import DEFAULT_MATCH_SETTINGS

pytestmark = pytest.mark.slow

CORPUS = (("zh_news", 300), ("zh_novel", 60), ("en_news", 300), ("en_novel", 40))

# The defaults measure F1, precision and recall 1.000 in both languages on this benchmark,
# with no false positive; one miss per attack (of ~12 suspects) stays above the floor.
FLOORS = {"f1": 0.985, "precision": 0.99, "recall": 0.98}
ATTACK_RECALL_FLOOR = 0.9
# 30 characters hold a whole indexed granule about 70% of the time (docs/accuracy.md,
# "Short excerpts"): the measured limit of the fingerprint, not a miss to fix here.
SHORTEST_EXCERPT_FLOOR = {"short excerpt 30 chars": 0.5}
# Beyond the target of hidden characters (20% of them, docs/accuracy.md): at 30% a granule
# holds more unknown letters than are completed (2) four times in five, and short briefs
# are lost (0.949 on seed 0's 39 copies, 5 of 7 here).
HIDDEN_BEYOND_TARGET_FLOOR = {"private use 30%": 0.5}
# The 洗稿 rewrites (testbed.rewrite, Chinese only) have floors of their own, the recall
# measured on this benchmark (docs/accuracy.md, "Rewrites") less one miss of 8 suspects:
# by default (the pinyin stream alone), and with the synonym stream (COPYTRACK_SYNONYMS).
_REWRITES_KEPT = {
    "synonyms 20%": 0.9,
    "synonyms 35%": 0.9,
    "clause reorder": 0.9,
    "names scrubbed": 0.9,
}
REWRITE_FLOOR: dict[bool, dict[str, float | None]] = {
    False: {
        **_REWRITES_KEPT,
        "synonyms 50%": 0.3,
        "synonyms 70%": 0.1,
        "rewrite 50%": 0.1,
        "rewrite 70%": None,  # beyond the pinyin stream alone: measured, not held
    },
    True: {
        **_REWRITES_KEPT,
        "synonyms 50%": 0.87,
        "synonyms 70%": 0.75,
        "rewrite 50%": 0.75,
        "rewrite 70%": 0.62,
    },
}
# The English heavy revisions (testbed.paraphrase) likewise: measured on this benchmark (15
# suspects a level; docs/accuracy.md, "English heavy revision") less one miss, without and
# with the English rewrite stream (on with the synonym stream).
PARAPHRASE_FLOOR: dict[bool, dict[str, float]] = {
    False: {"paraphrase 50%": 0.93, "paraphrase 70%": 0.93, "paraphrase 90%": 0.53,
            "paraphrase 100%": 0.2},
    True: {"paraphrase 50%": 0.93, "paraphrase 70%": 0.93, "paraphrase 90%": 0.93,
           "paraphrase 100%": 0.86},
}  # fmt: skip
#: Enough for ~7 suspects per Chinese attack with the rewrites among them.
SUSPECTS = 800
MAX_HARD_FALSE_POSITIVES = 1  # of 60 hard negatives per language
#: Listing-page negatives on top of the suspects: each kind, per language.
LISTINGS = len(LANGS) * len(LISTING_NEGATIVES) * LISTING_PAGES


def small_corpus() -> list[Document]:
    return [
        to_document(obj, f"{name}:{i}")
        for name, limit in CORPUS
        for i, obj in enumerate(documents(name, limit))
    ]


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Benchmark:
    """The benchmark of the floors (~13 CPU s to build), built once a run."""
    return made_once(
        tmp_path_factory, worker_id, "eval-benchmark",
        lambda: build_benchmark(small_corpus(), masters=200, suspects=SUSPECTS, seed=7),
    )  # fmt: skip


def test_the_benchmark_is_deterministic_and_covers_every_attack(bench):
    # A quarter of the suspects still draws every attack, at a quarter of the time.
    size = {"masters": 200, "suspects": SUSPECTS // 4}
    once = build_benchmark(small_corpus(), **size, seed=7)
    assert build_benchmark(small_corpus(), **size, seed=7) == once
    assert {s.label for s in once.suspects} == {s.label for s in bench.suspects}
    assert build_benchmark(small_corpus(), **size, seed=8).suspects != once.suspects
    # 100 masters per language, or 3/4 of a language's documents in a smaller corpus.
    pools = Counter(doc.lang for doc in small_corpus())
    assert len(bench.masters) == sum(min(100, pools[lang] * 3 // 4) for lang in LANGS)
    assert len(bench.suspects) == SUSPECTS + LISTINGS == 840
    masters = {m.id: m for m in bench.masters}
    variants = {v.label: v for v in POSITIVES}
    for lang in LANGS:
        labels = {s.label for s in bench.suspects if s.lang == lang}
        # Every variant that has a master of its size (short excerpts: news briefs).
        sizes = [len(m.text) for m in bench.masters if m.lang == lang]
        usable = {
            v.label
            for v in POSITIVES
            if lang in v.langs and any(v.min_chars(lang) <= n <= v.max_chars() for n in sizes)
        }
        assert labels == usable | set(NEGATIVES) | set(LISTING_NEGATIVES)
    for suspect in bench.suspects:
        assert set(suspect.expected) <= masters.keys()
        negative = suspect.label in NEGATIVES or suspect.label in LISTING_NEGATIVES
        assert negative == (not suspect.expected)
        assert not set(suspect.acceptable) & set(suspect.expected)
        if suspect.label == "merge":
            assert len(set(suspect.expected)) == 2
        if suspect.label in variants:
            variant = variants[suspect.label]
            size = len(masters[suspect.expected[0]].text)
            assert variant.min_chars(suspect.lang) <= size <= variant.max_chars()


def test_negatives_and_fillers_reuse_no_master_and_hard_negatives_share_a_group(bench):
    corpus = {d.id: d for d in small_corpus()}
    masters = {m.id for m in bench.masters}
    related = {}
    for lang in LANGS:
        pool = [d for d in corpus.values() if d.lang == lang]
        related.update(reuse(pool, [m for m in bench.masters if m.lang == lang]))
    groups = {m.group for m in bench.masters}
    for suspect in bench.suspects:
        if suspect.label in LISTING_NEGATIVES:  # they show masters' headlines by design
            continue
        for source in set(suspect.sources) - set(suspect.expected):
            assert source not in masters and not related[source]
        if suspect.label in (HARD, HARD_ADS):
            assert corpus[suspect.sources[0]].group in groups
        if suspect.label == HARD_ADS:
            assert any(ad in suspect.text for ad in AD_LINES[suspect.lang])


def test_reuse_finds_shared_passages_but_not_boilerplate():
    news = [d for d in small_corpus() if d.lang == "zh"][:40]
    paragraph = news[1].text[:120]
    footer = "特别声明：本站所有文章均转载自网络，版权归原作者所有，如有侵权请联系删除。"
    quoting = replace(news[0], id="quoting", text=news[0].text + paragraph)
    footed = [replace(d, id=f"footed-{i}", text=d.text + footer) for i, d in enumerate(news[2:8])]
    docs = [quoting, *news[1:], *footed]
    related = reuse(docs, [news[1], footed[0]])
    assert related["quoting"] == {news[1].id}
    assert related[news[1].id] == set()  # a master is not related to itself
    assert all(related[d.id] == set() for d in footed[1:])  # the footer is boilerplate


@pytest.mark.parametrize("synonyms", [False, True], ids=["defaults", "synonym-stream"])
def test_accuracy_on_real_servers_stays_above_the_floors(request, synonyms, bench):
    ctx = request.getfixturevalue("synonyms_ctx" if synonyms else "ctx")
    assert ctx.params.synonyms is synonyms
    own_floors = {**SHORTEST_EXCERPT_FLOOR, **HIDDEN_BEYOND_TARGET_FLOOR, **REWRITE_FLOOR[synonyms],
                  **PARAPHRASE_FLOOR[synonyms]}  # fmt: skip
    evaluation = evaluate(ctx, bench, jobs=2)
    scores = score(evaluation)
    for lang in LANGS:
        # The shortest excerpts are held to their own floor below: at half of them found
        # (the fingerprint's measured limit), ten would weigh the whole recall under its
        # floor on the bundled corpus of a clone alone (215 of 220 pairs).
        overall = sum(
            (s for label, s in scores[lang].items() if label != "all" and label not in own_floors),
            Score(),
        )
        for name, floor in FLOORS.items():
            assert getattr(overall, name) >= floor, (lang, name, overall)
        hard = scores[lang][HARD] + scores[lang][HARD_ADS]
        assert hard.flagged <= MAX_HARD_FALSE_POSITIVES, (lang, hard)
        for label, s in scores[lang].items():
            if s.expected and label != "all":  # "all" is held to FLOORS above, less own floors
                floor = own_floors.get(label, ATTACK_RECALL_FLOOR)
                assert floor is None or s.recall >= floor, (lang, label, s)
    data = report_json(evaluation)
    for lang in LANGS:  # headlines, first lines and snippets of 10 works a page: no finding
        listings = data["languages"][lang]["listing_negatives"]
        assert listings == {"suspects": LISTINGS // len(LANGS), "false_positives": 0}, lang
    assert data["index"]["postings"] == ctx.index.stats().postings > 0
    assert set(data["languages"]) == set(LANGS)
    markdown = report_markdown(evaluation)
    assert "| excerpt 10% |" in markdown and "| hard negative + ads |" in markdown
    assert (
        "| search results |" in markdown
        and "Listing-page negatives: 20, false positives 0" in markdown
    )


def test_a_sweep_compares_settings_in_memory(ctx, bench):
    small = Benchmark(bench.masters, bench.suspects[::20], bench.seed)
    points = sweep_settings(ctx.params, DEFAULT_MATCH_SETTINGS, {"min_matched_letters": (30,)})
    results = sweep(ctx, small, points)
    assert [p.name for p, _ in results] == ["defaults", "min_matched_letters=30"]
    assert ctx.db.masters.count_documents({}) == 0  # in memory: the library stays empty
    table = sweep_markdown(results)
    assert table.count("\n") == 2 + 2 * len(LANGS) and "min_matched_letters=30" in table


def test_the_command_writes_markdown_and_json(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    with corpus.open("w", encoding="utf-8") as out:
        for name, limit in (("zh_news", 60), ("en_news", 60)):
            for doc in documents(name, limit):
                out.write(json.dumps(doc, ensure_ascii=False) + "\n")
        out.write("not json\n")
    md, js = tmp_path / "r.md", tmp_path / "r.json"
    args = ["eval", "--corpus", str(corpus), "--masters", "30", "--suspects", "60", "--seed", "1"]
    result = CliRunner().invoke(
        main, [*args, "--memory", "--jobs", "1", "--markdown", str(md), "--json", str(js)]
    )
    assert result.exit_code == 0, result.output
    assert "invalid JSON" in result.output  # the bad line is reported, the rest evaluated
    assert md.read_text(encoding="utf-8") in result.output
    report = json.loads(js.read_text(encoding="utf-8"))
    # 60 suspects, and the listing-page negatives on top.
    assert report["masters"] == 30 and report["suspects"] == 60 + LISTINGS and report["seed"] == 1
    assert "synonym stream off" in result.output  # the defaults
    assert report["params_version"] == DEFAULT_PARAMS.version


def test_the_command_measures_the_synonym_stream_when_asked(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    with corpus.open("w", encoding="utf-8") as out:
        for doc in documents("zh_news", 60):
            out.write(json.dumps(doc, ensure_ascii=False) + "\n")
    js = tmp_path / "r.json"
    args = ["eval", "--corpus", str(corpus), "--lang", "zh", "--masters", "30", "--suspects", "60"]
    result = CliRunner().invoke(
        main, [*args, "--memory", "--jobs", "1", "--synonyms", "--json", str(js)]
    )
    assert result.exit_code == 0, result.output
    assert "synonym stream on (20-letter granules in Chinese, 14 in English)" in result.output
    report = json.loads(js.read_text(encoding="utf-8"))
    assert report["params"]["synonyms"] is True
    assert report["params_version"] != DEFAULT_PARAMS.version
