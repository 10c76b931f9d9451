"""The rewrite stream beside the pinyin one: what a synonym rewrite (洗稿) leaves of a text.

A rewrite swaps words for synonyms: 迅速 → 快速, 表示 → 指出. Their pinyin initials
differ, so the granules around every swap break. The stream here is the text's skeleton
(`fingerprinter.skeleton`: every common word one letter, names, numbers, rare words and
punctuation kept), which a swap of one word for another leaves as it was, whatever word
list the rewriting tool drew on. It is fingerprinted like the pinyin stream, with its own
granule length and only the granules holding ``FingerprintParams.skeleton_min_known``
letters that are no class letter (`synonym_index_array`, `synonym_query`), with
``SYNONYM_BIT`` set on its values: the two streams share one index without ever matching
each other's granules. The stream is off by default (``FingerprintParams.synonyms``;
``COPYTRACK_SYNONYMS`` turns it on).

The evidence report names the swaps it can (`are_synonyms`) from a thesaurus,
``data/cedict_synonyms.tsv.gz``, derived from CC-CEDICT (MDBG, https://cc-cedict.org,
CC BY-SA 4.0; the derived file is under the same licence): Chinese words of 2–4
characters sharing an English gloss, in small groups only (built by
scripts/build_synonym_data.py). A class is one such group; a word listed in several takes
the first (the file lists the smallest groups first), and a class's canonical word is its
first (the most frequent).
"""

from __future__ import annotations

import gzip
from dataclasses import replace
from functools import lru_cache
from importlib import resources

import numpy as np

from .fingerprint import FingerprintArray, granule_fingerprints, index_starts
from .fingerprint import query_granule_fingerprints as _query_granules
from .initials import Letters, to_letters
from .params import ALPHABET_SIZE, DEFAULT_PARAMS, FingerprintParams
from .skeleton import Skeleton, known_granules, segment, skeleton_letters

#: Set on the values of the synonym stream's fingerprints: the bit between the packed
#: letter levels (26 × 2 bits) and the script bit, which no pinyin granule sets.
SYNONYM_BIT = 2 * ALPHABET_SIZE


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


def segment_words(text: str) -> list[str]:
    """The text segmented into words as the rewrite stream segments it (jieba's tokenizer
    built in memory, `fingerprinter.skeleton.segmenter`: no cache file read or written)."""
    return segment(text)


def are_synonyms(word: str, other: str) -> bool:
    """Two different words listed in one thesaurus class (in any of their senses)."""
    classes = _classes_of()
    return word != other and bool(classes.get(word, frozenset()) & classes.get(other, frozenset()))


def synonym_letters(text: str, latin_mode: str = "letters") -> Letters:
    """The text's rewrite stream (its skeleton, `skeleton_letters`); offsets point into
    ``text`` as the pinyin stream's do."""
    return skeleton_letters(text, latin_mode)


def synonym_stream(text: str, params: FingerprintParams = DEFAULT_PARAMS) -> Letters | None:
    """The rewrite stream of a text, or None when ``params.synonyms`` is off or the text
    has no Chinese letter (the pinyin stream alone says it all: Latin text skips the
    segmentation)."""
    if not params.synonyms or not to_letters(text, params.latin_mode).is_cjk.any():
        return None
    return skeleton_letters(text, params.latin_mode)


def _tagged(fingerprints: FingerprintArray) -> FingerprintArray:
    values = fingerprints.values | np.uint64(1 << SYNONYM_BIT)
    return FingerprintArray(values, fingerprints.starts, fingerprints.ends, fingerprints.checks,
                            fingerprints.first_letters)  # fmt: skip


def _stream_params(params: FingerprintParams, skeleton: bool) -> FingerprintParams:
    """The parameters a rewrite stream is fingerprinted with: its own granule length (the
    skeleton's, or the English stream's)."""
    granule = params.skeleton_granule if skeleton else params.synonym_granule
    stride = max(1, round(granule * (1.0 - params.overlap)))
    return replace(params, granule=granule, query_window=min(params.query_window, stride))


def _kept(found: FingerprintArray, letters: Letters, params: FingerprintParams) -> FingerprintArray:
    """The granules a stream indexes and queries: of a skeleton, those holding enough own
    letters (`known_granules`); of another stream, all."""
    if not isinstance(letters, Skeleton):
        return _tagged(found)
    return _tagged(
        known_granules(
            found,
            letters,
            params.granule,
            params.skeleton_min_known,
            params.skeleton_sparse_granules,
        )
    )


def synonym_index_array(
    letters: Letters, params: FingerprintParams = DEFAULT_PARAMS
) -> FingerprintArray:
    """Index fingerprints of a rewrite stream (`rewrite_stream`), ``SYNONYM_BIT`` set."""
    params = _stream_params(params, isinstance(letters, Skeleton))
    return _kept(granule_fingerprints(letters, params, index_starts(letters, params)), letters,
                 params)  # fmt: skip


def synonym_query(letters: Letters, params: FingerprintParams = DEFAULT_PARAMS) -> FingerprintArray:
    """Query fingerprints of a rewrite stream, ``SYNONYM_BIT`` set."""
    params = _stream_params(params, isinstance(letters, Skeleton))
    return _kept(_query_granules(letters, params), letters, params)
