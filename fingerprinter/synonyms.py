"""The synonym letter stream: Chinese words mapped to their synonym class, then to letters.

A rewrite (洗稿) swaps words for synonyms: 迅速 → 快速, 表示 → 指出. Their pinyin initials
differ, so the granules around every swap break. Here the text is segmented into words
(jieba, its default dictionary, no HMM guessing: deterministic), every word found in the
thesaurus is replaced by the pinyin initials of its class's canonical word, and every
other letter is the pinyin stream's own. A word and its synonyms then give the same
letters, whatever their length, and the stream is fingerprinted like the pinyin one
(`synonym_index_array`, `synonym_query`) with ``SYNONYM_BIT`` set on its values: the two
streams share one index without ever matching each other's granules.

The thesaurus is ``data/cedict_synonyms.tsv.gz``, derived from CC-CEDICT (MDBG,
https://cc-cedict.org, CC BY-SA 4.0; the derived file is under the same licence):
Chinese words of 2–4 characters sharing an English gloss, in small groups only (built by
scripts/build_synonym_data.py). A class is one such group; a word listed in several takes
the first (the file lists the smallest groups first), and a class's canonical word is its
first (the most frequent). The stream is off by default (``FingerprintParams.synonyms``;
``COPYTRACK_SYNONYMS`` turns it on).
"""

from __future__ import annotations

import gzip
from dataclasses import replace
from functools import lru_cache
from importlib import resources

import jieba
import numpy as np

from .fingerprint import FingerprintArray, granule_fingerprints, index_starts
from .fingerprint import query_granule_fingerprints as _query_granules
from .initials import Letters, to_letters
from .params import ALPHABET_SIZE, DEFAULT_PARAMS, FingerprintParams

#: Set on the values of the synonym stream's fingerprints: the bit between the packed
#: letter levels (26 × 2 bits) and the script bit, which no pinyin granule sets.
SYNONYM_BIT = 2 * ALPHABET_SIZE

jieba.setLogLevel(60)  # jieba announces its dictionary load on stderr


@lru_cache(maxsize=1)
def _tokenizer() -> jieba.Tokenizer:
    """jieba's tokenizer on its own dictionary, built from the package's data. Left to
    itself, its first use reads and writes a marshal cache in the shared temp directory:
    I/O the fingerprinter does not do, and a file another user of the machine could plant."""
    tokenizer = jieba.Tokenizer()
    with tokenizer.get_dict_file() as words:
        tokenizer.FREQ, tokenizer.total = tokenizer.gen_pfdict(words)
    tokenizer.initialized = True
    return tokenizer


def _groups() -> list[tuple[str, list[str]]]:
    """(gloss, its words) of every group, in the file's order."""
    raw = resources.files(__package__).joinpath("data", "cedict_synonyms.tsv.gz").read_bytes()
    lines = gzip.decompress(raw).decode("utf-8").splitlines()
    return [(gloss, words.split()) for gloss, words in
            (line.split("\t") for line in lines if not line.startswith("#"))]  # fmt: skip


@lru_cache(maxsize=1)
def canonical_words() -> dict[str, str]:
    """Word → the canonical word of its class (itself for a class's first word)."""
    first_of: dict[str, str] = {}
    canonical: dict[str, str] = {}
    for gloss, group in _groups():
        head = first_of.setdefault(gloss, group[0])
        for word in group:
            canonical.setdefault(word, head)
    return canonical


@lru_cache(maxsize=1)
def _classes_of() -> dict[str, frozenset[str]]:
    """Word → every class it is listed in (a word has several senses)."""
    classes: dict[str, set[str]] = {}
    for gloss, group in _groups():
        for word in group:
            classes.setdefault(word, set()).add(gloss)
    return {word: frozenset(found) for word, found in classes.items()}


@lru_cache(maxsize=1)
def _class_letters() -> dict[str, bytes]:
    """Word → the letter codes of its class (only where they differ from its own)."""
    out = {}
    for word, head in canonical_words().items():
        codes = to_letters(head).codes
        if not np.array_equal(codes, to_letters(word).codes):
            out[word] = codes.tobytes()
    return out


def segment_words(text: str) -> list[str]:
    """The text segmented into words as the synonym stream segments it."""
    return list(_tokenizer().lcut(text, HMM=False))


def are_synonyms(word: str, other: str) -> bool:
    """Two different words listed in one thesaurus class (in any of their senses)."""
    classes = _classes_of()
    return word != other and bool(classes.get(word, frozenset()) & classes.get(other, frozenset()))


def synonym_letters(text: str, latin_mode: str = "letters") -> Letters:
    """The text's letter stream with every thesaurus word's letters those of its class.

    Offsets point into ``text`` as the pinyin stream's do: a class's letters are spread over
    the characters of the word they stand for.
    """
    return _synonym_letters(text, latin_mode)[0]


def synonym_stream(text: str, params: FingerprintParams = DEFAULT_PARAMS) -> Letters | None:
    """The synonym stream of a text, or None when ``params.synonyms`` is off or no word of
    the text has other letters there (the pinyin stream alone says it all)."""
    if not params.synonyms:
        return None
    letters, changed = _synonym_letters(text, params.latin_mode)
    return letters if changed else None


def _synonym_letters(text: str, latin_mode: str) -> tuple[Letters, bool]:
    base = to_letters(text, latin_mode)
    if not base.is_cjk.any():  # no Chinese word to map: spare the segmentation
        return base, False
    table = _class_letters()
    words = _tokenizer().lcut(text, HMM=False)
    ends = np.cumsum(np.fromiter(map(len, words), np.int64, len(words)))
    mapped = [j for j, word in enumerate(words) if word in table]
    if not mapped:
        return base, False
    # The letters of the mapped words (whole words: a character is in one word).
    inserted = [table[words[j]] for j in mapped]
    codes = np.frombuffer(b"".join(inserted), np.uint8)
    counts = np.fromiter(map(len, inserted), np.int64, len(inserted))
    word_ends = ends[mapped]
    word_starts = word_ends - np.fromiter((len(words[j]) for j in mapped), np.int64, len(mapped))
    # A class's letters spread over its word's characters, in order.
    nth = np.arange(len(codes)) - np.repeat(np.cumsum(counts) - counts, counts)
    lengths = np.repeat(word_ends - word_starts, counts)
    offsets = np.repeat(word_starts, counts) + nth * lengths // np.repeat(counts, counts)
    # The pinyin letters of the other words, merged by where they are in the text.
    at = np.searchsorted(word_ends, base.offsets, side="right")
    inside = at < len(word_ends)
    inside[inside] = word_starts[at[inside]] <= base.offsets[inside]
    keep = ~inside
    all_offsets = np.concatenate((base.offsets[keep], offsets))
    order = np.argsort(all_offsets, kind="stable")
    stream = Letters(np.concatenate((base.codes[keep], codes))[order], all_offsets[order])
    return stream, True


def _tagged(fingerprints: FingerprintArray) -> FingerprintArray:
    values = fingerprints.values | np.uint64(1 << SYNONYM_BIT)
    return FingerprintArray(values, fingerprints.starts, fingerprints.ends, fingerprints.checks,
                            fingerprints.first_letters)  # fmt: skip


def _stream_params(params: FingerprintParams) -> FingerprintParams:
    """The parameters the synonym stream is fingerprinted with: its own granule length."""
    stride = max(1, round(params.synonym_granule * (1.0 - params.overlap)))
    return replace(params, granule=params.synonym_granule,
                   query_window=min(params.query_window, stride))  # fmt: skip


def synonym_index_array(
    letters: Letters, params: FingerprintParams = DEFAULT_PARAMS
) -> FingerprintArray:
    """Index fingerprints of a synonym stream (`synonym_letters`), ``SYNONYM_BIT`` set."""
    params = _stream_params(params)
    return _tagged(granule_fingerprints(letters, params, index_starts(letters, params)))


def synonym_query(letters: Letters, params: FingerprintParams = DEFAULT_PARAMS) -> FingerprintArray:
    """Query fingerprints of a synonym stream, ``SYNONYM_BIT`` set."""
    return _tagged(_query_granules(letters, _stream_params(params)))
