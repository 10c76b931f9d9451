"""The English rewrite stream: a text's function words, with its content words as one mark.

A heavy revision of an English copy rewrites every sentence: content words swapped for
synonyms (announced → declared), inflections changed, adjectives dropped, fillers added.
Every granule of the letter stream breaks. What a reviser keeps is the grammar around the
content: "the … of the … was … to … a …". So here each function word (articles,
pronouns, auxiliaries, prepositions, conjunctions) becomes one letter, the forms of a word
one letter together (is, was, were, be → one; a and an → one), and every run of content
words one mark letter, whatever its words and however many: a synonym swap, an inflection
change, a dropped or added adjective change nothing. Stopword n-grams are known to
survive paraphrase in plagiarism detection (Stamatatos 2011); measured on copytrack's
paraphrase attack (docs/accuracy.md, "English heavy revision") they find nearly every
heavy revision with no false positive, where the letter stream misses a third of the
heaviest.

Letters are flagged as a CJK stream's are (a letter stands for a word, and counts 1 in the
alignment, not ``latin_weight``), and classes get the letters of the pinyin frame by
frequency: the commonest class (the content mark) the commonest initial, and so on, so
that granule counts spread over the frame's levels. The stream is the synonym stream of
English text (`rewrite_stream`), on with ``FingerprintParams.synonyms``.
"""

from __future__ import annotations

import gzip
from functools import lru_cache
from importlib import resources

import numpy as np

from .initials import CJK_FLAG, Letters, code_points, to_letters
from .params import DEFAULT_PARAMS, FingerprintParams
from .synonyms import are_synonyms, synonym_letters, synonym_stream

#: Function-word classes, commonest first (counted on the shared English corpus): the forms
#: of a word or near-equivalents that a reviser swaps for each other, and, as the frame
#: has 23 letters, rarer words sharing one (do, if, when, than, …).
FUNCTION_CLASSES: tuple[tuple[str, ...], ...] = (
    ("the",),
    ("i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "you", "your", "yours"),
    ("is", "are", "was", "were", "be", "been", "being", "am"),
    ("he", "him", "his", "himself", "she", "her", "hers", "herself"),
    ("to",),
    ("and",),
    ("of",),
    ("a", "an"),
    ("it", "its", "itself", "they", "them", "their", "theirs", "themselves"),
    ("in", "into", "inside", "within"),
    ("that", "which", "who", "whom", "whose"),
    ("do", "does", "did", "if", "when", "while", "than", "there", "what", "where"),
    ("have", "has", "had", "having"),
    ("will", "would", "can", "could", "may", "might", "shall", "should", "must"),
    ("not", "no", "never", "nor", "t"),
    ("at", "by"),
    ("but", "or", "yet", "though", "although"),
    ("with", "without"),
    ("from", "this", "these", "those"),
    ("for",),
    ("as",),
    ("on", "upon", "onto"),
)
#: The pinyin frame's letters, commonest first, without those a pinyin initial never is
#: (i, u, v): a flagged "u" would be read as an unknown letter (fingerprinter.unknown).
_LETTERS_BY_FREQUENCY = "zysdjlxbcghwqtmnfrkpeao"
#: The mark of a run of content words: the commonest letter.
CONTENT = ord(_LETTERS_BY_FREQUENCY[0]) - ord("a")
#: Fewest words a text needs for an English stream: a shorter one is left to the letters.
MIN_WORDS = 40


@lru_cache(maxsize=1)
def function_letters() -> dict[str, int]:
    """Function word → its class's letter code (CJK-flagged)."""
    out = {}
    for n, words in enumerate(FUNCTION_CLASSES, start=1):
        code = (ord(_LETTERS_BY_FREQUENCY[n]) - ord("a")) | CJK_FLAG
        out.update(dict.fromkeys(words, code))
    return out


def _word_runs(text: str) -> tuple[np.ndarray, np.ndarray]:
    """Starts and ends of the runs of ASCII letters (the words) of ``text``."""
    points = code_points(text)
    # OR 0x20 folds A-Z onto a-z and moves nothing else into a-z.
    latin = ((points | np.uint32(0x20)) - np.uint32(ord("a"))) < 26
    edges = np.flatnonzero(np.diff(latin.view(np.int8), prepend=0, append=0))
    return edges[0::2], edges[1::2]


def english_letters(text: str) -> Letters:
    """The English rewrite stream of ``text``: one letter per function word, one per run of
    content words, each at the offset of its first character."""
    starts, ends = _word_runs(text)
    table = function_letters()
    content = CONTENT | CJK_FLAG
    get = table.get
    codes = np.fromiter((get(text[a:b].lower(), content) for a, b in zip(starts.tolist(),
                         ends.tolist(), strict=True)), np.uint8, len(starts))  # fmt: skip
    # A run of content words is one mark: its first word's.
    keep = np.ones(len(codes), dtype=bool)
    keep[1:] = (codes[1:] != content) | (codes[:-1] != content)
    return Letters(codes[keep], starts[keep].astype(np.int64))


def _is_latin(text: str, latin_mode: str) -> bool:
    letters = to_letters(text, latin_mode)
    return len(letters) > 0 and not letters.is_cjk.any()


def rewrite_letters(text: str, params: FingerprintParams = DEFAULT_PARAMS) -> Letters:
    """The rewrite stream of a text in its script: the English one for Latin text (no
    Chinese letter at all), the synonym stream (`fingerprinter.synonyms`) for the rest."""
    if _is_latin(text, params.latin_mode):
        return english_letters(text)
    return synonym_letters(text, params.latin_mode)


def rewrite_stream(text: str, params: FingerprintParams = DEFAULT_PARAMS) -> Letters | None:
    """The rewrite stream a text is indexed and queried in besides its letters, or None when
    ``params.synonyms`` is off or the text has none (too short, or a Chinese text no word of
    which the thesaurus maps)."""
    if not params.synonyms:
        return None
    if _is_latin(text, params.latin_mode):
        if len(_word_runs(text)[0]) < MIN_WORDS:
            return None
        return english_letters(text)
    return synonym_stream(text, params)


# Regular inflections back to a lemma (WordNet's morphy rules): suffix → replacement.
_DETACH = (("ies", "y"), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"),
           ("shes", "sh"), ("men", "man"), ("es", "e"), ("es", ""), ("s", ""), ("ed", "e"),
           ("ed", ""), ("ing", "e"), ("ing", ""), ("er", ""), ("est", ""), ("er", "e"),
           ("est", "e"))  # fmt: skip


@lru_cache(maxsize=1)
def _wordnet() -> tuple[dict[str, frozenset[int]], dict[str, str]]:
    """Lemma → the synsets it is in, and irregular form → lemma, from
    ``data/wordnet_synonyms.tsv.gz`` (WordNet 3.0, Princeton University, under the WordNet
    3.0 licence that its header carries; built by scripts/build_english_synonyms.py)."""
    raw = resources.files(__package__).joinpath("data", "wordnet_synonyms.tsv.gz").read_bytes()
    synsets: dict[str, set[int]] = {}
    irregular: dict[str, str] = {}
    lines = gzip.decompress(raw).decode("utf-8").splitlines()
    for n, line in enumerate(lines):
        if line.startswith("#"):
            continue
        form, tab, lemma = line.partition("\t")
        if tab:
            irregular[form] = lemma
            continue
        for word in line.split():
            synsets.setdefault(word, set()).add(n)
    return {word: frozenset(ids) for word, ids in synsets.items()}, irregular


def _lemmas(word: str) -> set[str]:
    synsets, irregular = _wordnet()
    word = word.lower()
    found = {word} if word in synsets else set()
    if irregular.get(word) in synsets:
        found.add(irregular[word])
    for suffix, replacement in _DETACH:
        if word.endswith(suffix) and len(word) > len(suffix) + 1:
            stem = word[: -len(suffix)]
            for lemma in (stem + replacement, stem[:-1] if stem[-1:] == stem[-2:-1] else ""):
                if lemma in synsets:
                    found.add(lemma)
    return found


def english_synonyms(word: str, other: str) -> bool:
    """Two English words of different lemmas that share a WordNet synset in some sense and
    inflection (declared, announced)."""
    if not (word.isascii() and other.isascii() and word.isalpha() and other.isalpha()):
        return False
    mine, theirs = _lemmas(word), _lemmas(other)
    if not mine or not theirs or mine & theirs:  # unknown, or the same word inflected
        return False
    synsets = _wordnet()[0]
    return any(synsets[a] & synsets[b] for a in mine for b in theirs)


def words_are_synonyms(word: str, other: str) -> bool:
    """Two words a rewrite swaps for each other: of one Chinese thesaurus class
    (`fingerprinter.synonyms.are_synonyms`), or English words sharing a WordNet synset."""
    return are_synonyms(word, other) or english_synonyms(word, other)
