"""Distractor works: text that reads like the corpus at the token level but copies no work.

A library at a publisher's size (10^5 works) is mostly works that no suspect copies; the
corpus holds a few thousand. ``distractors`` pads it with first-order Markov chains over
the corpus's tokens (characters of Chinese text, words of English text), lengths drawn from
the corpus: fingerprints spread like real ones, while a chain repeats no passage of a real
work long enough to be reported (a finding needs 100 letters of exactly matching k-grams).

Chains are generated many at a time with numpy (one ``searchsorted`` per step for a whole
batch), about a million tokens per second, and deterministic for a seed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

import numpy as np

_EN_TOKEN = re.compile(r"\S+\s*")
_BATCH = 1000  # chains generated together
MAX_TOKENS = 12_000  # longer corpus documents give chains of this length


class _Chain:
    """Transition table of one language: for each token, its successors' cumulative
    probabilities, laid out so that ``searchsorted(cum, state + u)`` samples a successor."""

    def __init__(self, docs: Sequence[str], split_words: bool) -> None:
        tokens: list[str] = []
        for text in docs:
            tokens += _EN_TOKEN.findall(text) if split_words else list(text)
            tokens.append("\n")
        vocab, ids = np.unique(np.array(tokens, dtype=object).astype(str), return_inverse=True)
        self.vocab = vocab
        pairs = np.unique(ids[:-1] * len(vocab) + ids[1:], return_counts=True)
        state, successor = np.divmod(pairs[0], len(vocab))
        counts = pairs[1].astype(np.float64)
        running = np.cumsum(counts)
        first = np.searchsorted(state, state)  # first entry of each entry's state
        before = running[first] - counts[first]
        total = np.bincount(state, weights=counts, minlength=len(vocab))[state]
        # Entry j covers (state, state + cumulative probability]: state + u falls in the
        # segment of its state.
        self.cum = state + (running - before) / total
        self.successor = successor
        self.starts = np.unique(state)

    def generate(self, lengths: Sequence[int], rng: np.random.Generator) -> list[str]:
        """One chain per length (in tokens)."""
        count, longest = len(lengths), max(lengths)
        out = np.empty((count, longest), dtype=np.int32)
        state = rng.choice(self.starts, size=count)
        # Chains longest first: those still growing at a step are a prefix of them (a step
        # costs what they need, not what the longest does). Each chain draws the same
        # numbers as when all grew to the end: the random draws keep their full size.
        by_length = np.argsort(-np.asarray(lengths), kind="stable")
        remaining = np.asarray(lengths)[by_length]
        growing = count
        for step in range(longest):
            while remaining[growing - 1] <= step:
                growing -= 1
            chains = by_length[:growing]
            now = state[chains]
            out[chains, step] = now
            drawn = rng.random(count)[chains]
            at = np.searchsorted(self.cum, now + drawn * 0.999999)
            at = np.minimum(at, len(self.cum) - 1)
            # A state without successors (the corpus's last token) restarts anywhere.
            dead = np.floor(self.cum[at]) != now
            state[chains] = np.where(dead, rng.choice(self.starts, size=count)[chains],
                                     self.successor[at])  # fmt: skip
        return ["".join(self.vocab[row[:n]]) for row, n in zip(out, lengths, strict=True)]


def distractors(
    docs: Sequence[tuple[str, str]], count: int, seed: int = 0
) -> Iterator[tuple[str, str]]:
    """``count`` distractor (lang, text) pairs trained on corpus (lang, text) pairs, in the
    corpus's proportion of languages and lengths."""
    rng = np.random.default_rng(seed)
    by_lang: dict[str, list[str]] = {}
    for lang, text in docs:
        by_lang.setdefault(lang, []).append(text)
    chains = {lang: _Chain(texts, split_words=lang != "zh") for lang, texts in by_lang.items()}
    langs = sorted(by_lang)
    shares = np.array([len(by_lang[lang]) for lang in langs], dtype=np.float64)
    picks = rng.choice(len(langs), size=count, p=shares / shares.sum())
    for first in range(0, count, _BATCH):
        batch = picks[first : first + _BATCH]
        for index, lang in enumerate(langs):
            n = int(np.count_nonzero(batch == index))
            if not n:
                continue
            texts = by_lang[lang]
            lengths = [
                _tokens(texts[i], lang) for i in rng.integers(0, len(texts), size=n).tolist()
            ]
            for text in chains[lang].generate(lengths, rng):
                yield lang, text


def _tokens(text: str, lang: str) -> int:
    return min(MAX_TOKENS, len(text) if lang == "zh" else len(_EN_TOKEN.findall(text)))
