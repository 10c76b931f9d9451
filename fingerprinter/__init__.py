"""Pure fingerprinting functions: text → pinyin-initial granule fingerprints (and those of
the rewrite stream), and alignment.

No I/O, no storage: the tracker package stores and queries what this package computes.
"""

from .align import (
    Alignment,
    KgramIndex,
    Span,
    align,
    align_letters,
    kgrams_within,
)
from .english import (
    english_letters,
    english_synonyms,
    rewrite_letters,
    rewrite_stream,
    words_are_synonyms,
)
from .fingerprint import (
    Fingerprint,
    FingerprintArray,
    fingerprint,
    index_array,
    query_array,
    query_fingerprints,
    query_granule_fingerprints,
)
from .granule_check import CHECK_BITS
from .initials import Letters, to_letters
from .kgrams import kgram_codes
from .params import DEFAULT_PARAMS, FingerprintParams
from .reference import ReferenceFrame, fit_reference, load_reference
from .skeleton import Skeleton, kept_numbers, kept_share
from .synonyms import (
    SYNONYM_BIT,
    are_synonyms,
    segment_words,
    synonym_index_array,
    synonym_letters,
    synonym_query,
    synonym_stream,
)
from .unknown import known_kgram_share

__all__ = [
    "CHECK_BITS",
    "DEFAULT_PARAMS",
    "SYNONYM_BIT",
    "Alignment",
    "Fingerprint",
    "FingerprintArray",
    "FingerprintParams",
    "KgramIndex",
    "Letters",
    "ReferenceFrame",
    "Skeleton",
    "Span",
    "align",
    "align_letters",
    "are_synonyms",
    "english_letters",
    "english_synonyms",
    "fingerprint",
    "fit_reference",
    "index_array",
    "kept_numbers",
    "kept_share",
    "kgram_codes",
    "kgrams_within",
    "known_kgram_share",
    "load_reference",
    "query_array",
    "query_fingerprints",
    "query_granule_fingerprints",
    "rewrite_letters",
    "rewrite_stream",
    "segment_words",
    "synonym_index_array",
    "synonym_letters",
    "synonym_query",
    "synonym_stream",
    "to_letters",
    "words_are_synonyms",
]
