"""Every parameter of the fingerprint, in one frozen object with a stable version string."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from functools import cached_property

ALPHABET_SIZE = 26  # a..z: pinyin initials and Latin letters share one alphabet
SCRIPT_BIT = 2 * ALPHABET_SIZE + 1  # above the widest packed vector (26 letters × 2 bits)
VALUE_BITS = SCRIPT_BIT + 1  # every fingerprint value is below 2**VALUE_BITS


MAX_GRANULE = 255

#: What text gives which letters (`initials.to_letters`), beyond these parameters: part of
#: the version, so an index built from other letters is refused until `copytrack reindex`.
#: 2: words written in pinyin inside Chinese text give their syllables' initials, and
#: private-use code points an unknown letter in their place (they gave none).
LETTERS_VERSION = 2
#: What the synonym stream is, when on: 2: English text has one too (`fingerprinter.english`);
#: 3: Chinese text's is its skeleton (`fingerprinter.skeleton`); 4: a sparse skeleton
#: has granules of fewer own letters too (``skeleton_sparse_granules``); 5: down to one own
#: letter when it has none of two.
REWRITE_STREAMS_VERSION = 5


@dataclass(frozen=True)
class FingerprintParams:
    """Parameters of the Daguan granule fingerprint and of the second-round alignment.

    granule:      letters per granule (window) *n*.
    overlap:      overlap rate of indexed granules; 0.5 means a granule every n/2 letters
                  (fixed anchoring) or one in every window of n/2 letters (content anchoring).
    anchoring:    ``"content"``: indexed granules start at winnowing anchors, so a passage
                  shared by masters gets the same fingerprints in each; ``"fixed"``: every
                  ``stride`` letters from the start (the seed's scheme).
    anchor_k:     letters hashed to choose content anchors.
    query_window: winnowing window of the granules a suspect is queried at (content
                  anchoring). The minimum of a window of ``stride`` hashes is indexed, and
                  it is also the minimum of every smaller window inside that one: in a
                  copied stretch the suspect is queried at the indexed anchors of every
                  ``stride`` window, whatever ``query_window`` (up to ``stride``). Smaller
                  windows query more offsets (1: every offset) and also find indexed
                  granules whose window was damaged by edits; the default, ``stride``,
                  queries a fifth of the offsets, with the same recall and precision in
                  the eval (docs/accuracy.md).
    levels:       quantization levels per letter (2 → 1 bit, 3 or 4 → 2 bits per letter).
    width:        quantization step in standard deviations of the letter's count.
    latin_mode:   ``"letters"`` (every Latin letter) or ``"initials"`` (first letter of words).
    reference:    id of the reference frame (expected letter frequencies) to subtract.
    align_k:      letters per k-gram in the second-round alignment.
    align_gap:    largest gap, in letters, bridged when chaining k-gram matches into a span.
    align_min_span: shortest span, in letters, that the alignment reports.
    latin_weight: what a Latin letter counts for against ``align_min_span`` (a pinyin
                  initial counts 1): English letters are more predictable than initials.
    synonyms:     also index and query the rewrite stream: a Chinese text's skeleton
                  (``fingerprinter.skeleton``: every common word one letter), so rewrites
                  that swap words for synonyms (洗稿) are found; English text's is its
                  function words (``fingerprinter.english``), so heavy revisions are. Off
                  by default (its cost: docs/accuracy.md, "Rewrites"); an installation
                  turns it on with ``COPYTRACK_SYNONYMS``.
    synonym_granule: letters per granule of the English rewrite stream: shorter than
                  ``granule``, as a revision leaves few long stretches whole.
    skeleton_granule: letters per granule of the Chinese rewrite stream (the skeleton).
    skeleton_min_known: letters a granule of the skeleton needs that are no class letter
                  (names, numbers, rare words) to be indexed or queried.
    skeleton_sparse_granules: a skeleton with fewer granules than this holding
                  ``skeleton_min_known`` such letters (a short text, or one of few names)
                  is indexed and queried at those holding one letter fewer too, and one
                  with none of those at those holding one: a rewrite of it would
                  otherwise have no granule to be found by.
    """

    granule: int = 20
    overlap: float = 0.5
    anchoring: str = "content"
    anchor_k: int = 5
    query_window: int = 10
    levels: int = 4
    width: float = 1.0
    latin_mode: str = "letters"
    reference: str = "default-2026-11"
    align_k: int = 8
    align_gap: int = 24
    align_min_span: int = 24
    latin_weight: float = 0.5
    synonyms: bool = False
    synonym_granule: int = 14
    skeleton_granule: int = 20
    skeleton_min_known: int = 3
    skeleton_sparse_granules: int = 32

    def __post_init__(self) -> None:
        # Up to 255: per-letter counts are bytes, and querying costs O(granule) per letter.
        if not 8 <= self.granule <= MAX_GRANULE:
            raise ValueError(
                f"granule must be between 8 and {MAX_GRANULE} letters, not {self.granule}"
            )
        for name in ("synonym_granule", "skeleton_granule"):
            if not 8 <= getattr(self, name) <= MAX_GRANULE:
                raise ValueError(
                    f"{name} must be between 8 and {MAX_GRANULE} letters, not {getattr(self, name)}"
                )
        if not 0 <= self.skeleton_min_known <= self.skeleton_granule:
            raise ValueError(
                f"skeleton_min_known must be between 0 and skeleton_granule, "
                f"not {self.skeleton_min_known}"
            )
        if self.skeleton_sparse_granules < 0:
            raise ValueError(
                f"skeleton_sparse_granules must be 0 or more, not {self.skeleton_sparse_granules}"
            )
        if not 0.0 <= self.overlap < 1.0:
            raise ValueError(f"overlap must be in [0, 1), not {self.overlap}")
        if self.anchoring not in ("content", "fixed"):
            raise ValueError(f"anchoring must be 'content' or 'fixed', not {self.anchoring!r}")
        if not 1 <= self.anchor_k <= self.granule:
            raise ValueError(f"anchor_k must be between 1 and the granule, not {self.anchor_k}")
        if not 1 <= self.query_window <= self.stride:
            raise ValueError(
                f"query_window must be between 1 and the stride ({self.stride}), "
                f"not {self.query_window}"
            )
        if self.levels not in (2, 3, 4):
            raise ValueError(f"levels must be 2, 3 or 4, not {self.levels}")
        if self.width <= 0:
            raise ValueError(f"width must be positive, not {self.width}")
        if self.latin_mode not in ("letters", "initials"):
            raise ValueError(f"latin_mode must be 'letters' or 'initials', not {self.latin_mode!r}")
        if not 3 <= self.align_k <= 32:
            raise ValueError(f"align_k must be between 3 and 32, not {self.align_k}")
        if not 0 < self.latin_weight <= 1:
            raise ValueError(f"latin_weight must be in (0, 1], not {self.latin_weight}")
        if self.align_gap < 0 or self.align_min_span < self.align_k:
            raise ValueError("align_gap must be ≥ 0 and align_min_span ≥ align_k")

    @property
    def stride(self) -> int:
        """Largest distance in letters between the starts of two indexed granules."""
        return max(1, round(self.granule * (1.0 - self.overlap)))

    @property
    def bits_per_letter(self) -> int:
        return 1 if self.levels == 2 else 2

    @property
    def value_bits(self) -> int:
        """Every fingerprint value is below ``2**value_bits``."""
        return VALUE_BITS

    @property
    def guaranteed_span(self) -> int:
        """Letters of exact copy that are always found, wherever they sit in the suspect.

        Any run of ``granule + stride - 1`` letters contains a whole indexed granule (fixed
        anchoring: one starts every ``stride`` letters; content anchoring: every window of
        ``stride`` anchor positions holds an anchor). The query side computes a granule at
        every offset (fixed anchoring) or at every anchor of windows of ``query_window``
        positions, among them the minimum of the run's first ``stride`` window, which is
        that indexed granule.
        """
        return self.granule + self.stride - 1

    @cached_property
    def version(self) -> str:
        """Stable id of these parameters (an index built with another version is refused)."""
        fields = {**asdict(self), "letters": LETTERS_VERSION}
        if not self.synonyms:  # without the stream, the version the pinyin stream always had
            for name in (
                "synonyms",
                "synonym_granule",
                "skeleton_granule",
                "skeleton_min_known",
                "skeleton_sparse_granules",
            ):
                del fields[name]
        else:
            fields["streams"] = REWRITE_STREAMS_VERSION
        canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"))
        return "fp1-" + hashlib.sha256(canonical.encode()).hexdigest()[:12]


DEFAULT_PARAMS = FingerprintParams()
