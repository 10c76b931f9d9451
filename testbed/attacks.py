"""Pirate-style text attacks: deterministic ``str → str`` edits driven by a seeded ``Random``.

Every attack has the signature ``attack(text, rng, **strength) -> str`` and is listed by
name in ``ATTACKS``, so the test web, the tests and an accuracy evaluator apply the very
same edits. Paragraphs are ``"\\n"``-separated lines (``reflow`` turns corpus text into
that form); attacks keep the paragraph structure unless moving paragraphs is the attack.
"""

from __future__ import annotations

import random
import re
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Sequence
from functools import lru_cache, reduce
from typing import Any

from .hiding import HIDING_ATTACKS

Attack = Callable[..., str]

# A sentence ends at CJK terminal punctuation, at ASCII terminal punctuation followed by
# whitespace (so "3.5" stays whole), or at a line break; closing quotes stay with it.
_SENTENCE = re.compile(
    r'.*?(?:[。！？；…]+[”’"」』）)]*|[.!?]+["\'”’)]*(?=\s|$)|\n)\s*|.+', re.DOTALL
)
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")

AD_LINES = {
    "zh": (
        "【广告】新用户注册即送188元红包，点击立即领取！",
        "本站域名已更换，请收藏新域名，以免迷路。",
        "喜欢本文请记得收藏本站，下次阅读更方便。",
        "手机用户请访问手机版阅读，体验更流畅。",
        "关注官方微信公众号，每日推送最新热点。",
    ),
    "en": (
        "ADVERTISEMENT: Win a luxury cruise for two - enter today!",
        "Sponsored: This one weird trick cuts your energy bill in half.",
        "Subscribe now and get your first month of premium access free.",
        "Click here to download our app and never miss a story.",
    ),
}

# CJK punctuation a pirate site swaps for its ASCII look-alike (and back, via full width).
_ASCII_PUNCT = {
    "，": ",",
    "。": ".",
    "：": ":",
    "；": ";",
    "！": "!",
    "？": "?",
    "“": '"',
    "”": '"',
}
_SPACERS = (" ", "\u3000", "·", "~", "*")


def is_cjk(text: str) -> bool:
    """Whether the text is mostly Chinese (decides ad language and sentence joining)."""
    letters = sum(ch.isalpha() for ch in text)
    return letters > 0 and len(_CJK.findall(text)) * 2 > letters


def _joiner(text: str) -> str:
    return "" if is_cjk(text) else " "


def sentences(text: str) -> list[str]:
    """Split into sentences; ``"".join(sentences(t)) == t``."""
    return _SENTENCE.findall(text)


def reflow(text: str, max_chars: int = 400) -> str:
    """Corpus text → one paragraph per line.

    Blank lines separate paragraphs and hard wraps inside one are joined (the corpus keeps
    Gutenberg and e-text line wraps); paragraphs longer than ``max_chars`` (a whole news
    article on one line, a novel chapter without blank lines) are cut at sentence ends.
    """
    out: list[str] = []
    for block in re.split(r"\n\s*\n", text.strip()):
        paragraph = ""
        for line in (line.strip() for line in block.split("\n")):
            if paragraph and line and paragraph[-1].isascii() and line[0].isascii():
                paragraph += " "
            paragraph += line
        chunk = ""
        for sentence in sentences(paragraph):
            if chunk and len(chunk) + len(sentence) > max_chars:
                out.append(chunk.strip())
                chunk = ""
            chunk += sentence
        if chunk.strip():
            out.append(chunk.strip())
    return "\n".join(out)


def exact(text: str, rng: random.Random) -> str:
    """A verbatim copy."""
    return text


def noise(text: str, rng: random.Random, rate: float = 0.05) -> str:
    """Formatting noise on a ``rate`` of the characters.

    CJK punctuation becomes ASCII, ASCII becomes full width, anything else gets a stray
    spacer after it; the letters (and so the fingerprint input) stay the same.
    """
    out = []
    for ch in text:
        if ch == "\n" or rng.random() >= rate:
            out.append(ch)
        elif ch in _ASCII_PUNCT:
            out.append(_ASCII_PUNCT[ch])
        elif "!" <= ch <= "~":
            out.append(chr(ord(ch) + 0xFEE0))
        else:
            out.append(ch + rng.choice(_SPACERS))
    return "".join(out)


def char_edits(text: str, rng: random.Random, rate: float = 0.03, insert_share: float = 0.5) -> str:
    """Insert or delete characters at ``rate`` per character (line breaks are kept).

    Inserted characters are drawn from the text itself, so they look like typos of its
    own script; ``insert_share`` is the fraction of edits that insert rather than delete.
    """
    pool = [ch for ch in text if not ch.isspace()]
    out = []
    for ch in text:
        if ch == "\n" or not pool or rng.random() >= rate:
            out.append(ch)
        elif rng.random() < insert_share:
            out.append(rng.choice(pool) + ch)
    return "".join(out)


def _toneless(reading: str) -> str:
    return "".join(
        c for c in unicodedata.normalize("NFKD", reading) if not unicodedata.combining(c)
    )


@lru_cache(maxsize=1)
def homophone_table() -> dict[str, tuple[str, ...]]:
    """Character → other characters with the same toneless first pypinyin reading.

    Only GB2312 level-1 characters (the 3,755 common ones) that are already simplified take
    part: pirate sites use common characters, the result stays encodable in GBK, and a
    simplified character keeps the pinyin letter of its reading (a traditional one takes
    its simplified form's in the fingerprint).
    """
    # Imported here: loading pypinyin's tables takes ~0.4 s that most callers never need.
    import opencc
    from pypinyin.pinyin_dict import pinyin_dict

    common = []
    for codepoint in pinyin_dict:
        ch = chr(codepoint)
        try:
            lead = ch.encode("gb2312")[0]
        except UnicodeEncodeError:
            continue
        if 0xB0 <= lead <= 0xD7:  # level-1 rows
            common.append(ch)
    # One conversion call for all: newlines keep characters from forming phrases.
    simplified = opencc.OpenCC("t2s").convert("\n".join(common)).split("\n")
    groups: dict[str, list[str]] = defaultdict(list)
    for ch, simple in zip(common, simplified, strict=True):
        if ch == simple:
            groups[_toneless(pinyin_dict[ord(ch)].split(",", 1)[0])].append(ch)
    return {
        ch: tuple(other for other in group if other != ch)
        for group in groups.values()
        if len(group) > 1
        for ch in group
    }


def homophones(text: str, rng: random.Random, rate: float = 0.1) -> str:
    """Replace a ``rate`` of the replaceable Chinese characters by same-pinyin ones (同音字)."""
    table = homophone_table()
    return "".join(
        rng.choice(table[ch]) if ch in table and rng.random() < rate else ch for ch in text
    )


@lru_cache(maxsize=1)
def _to_traditional() -> Any:
    import opencc

    return opencc.OpenCC("s2t")


def traditional(text: str, rng: random.Random) -> str:
    """Convert to traditional characters (OpenCC s2t, phrase-aware)."""
    return _to_traditional().convert(text)


def paragraph_shuffle(text: str, rng: random.Random) -> str:
    """Shuffle the order of the paragraphs."""
    paragraphs = text.split("\n")
    rng.shuffle(paragraphs)
    return "\n".join(paragraphs)


def sentence_shuffle(text: str, rng: random.Random) -> str:
    """Shuffle the sentences inside each paragraph."""
    out = []
    for paragraph in text.split("\n"):
        parts = [s.strip() for s in sentences(paragraph) if s.strip()]
        rng.shuffle(parts)
        out.append(_joiner(paragraph).join(parts))
    return "\n".join(out)


def excerpt(text: str, rng: random.Random, fraction: float = 0.3, filler: str = "") -> str:
    """Copy whole sentences making up about ``fraction`` of the text, set inside ``filler``.

    The excerpt is contiguous, starts at a random sentence and is at least ``fraction`` of
    the characters (one sentence more at most); it goes between two paragraphs of the
    unrelated ``filler`` text, or stands alone when there is none.
    """
    units = sentences(text)
    target = fraction * len(text)
    ends, total = [], 0
    for unit in units:
        total += len(unit)
        ends.append(total)
    # Starts from which the rest of the text still reaches the target.
    starts = [i for i in range(len(units)) if total - (ends[i] - len(units[i])) >= target]
    start = rng.choice(starts or [0])
    chosen, size = [], 0
    for unit in units[start:]:
        if size >= target:
            break
        chosen.append(unit)
        size += len(unit)
    piece = "".join(chosen).strip()
    if not filler:
        return piece
    paragraphs = filler.split("\n")
    at = rng.randint(0, len(paragraphs))
    return "\n".join([*paragraphs[:at], piece, *paragraphs[at:]])


_WORD = re.compile(r"\S+\s*")


def short_excerpt(text: str, rng: random.Random, size: int = 30, filler: str = "") -> str:
    """Copy ``size`` characters of Chinese text (``size`` words of English) from the start
    of one of its sentences — a quotation-sized stretch — into ``filler`` (between two of
    its paragraphs), or alone when there is none."""
    cjk = is_cjk(text)
    flat = " ".join(text.split()) if not cjk else "".join(text.split())
    starts, at = [], 0
    for unit in sentences(flat):
        starts.append(at)
        at += len(unit)
    if cjk:
        fits = [s for s in starts if s + size <= len(flat)] or [0]
        start = rng.choice(fits)
        piece = flat[start : start + size]
    else:
        words = [(m.start(), m.group()) for m in _WORD.finditer(flat)]
        word_at = {offset: n for n, (offset, _) in enumerate(words)}
        fits = [word_at[s] for s in starts if s in word_at and word_at[s] + size <= len(words)]
        first = rng.choice(fits or [0])
        piece = "".join(w for _, w in words[first : first + size]).strip()
    if not filler:
        return piece
    paragraphs = filler.split("\n")
    place = rng.randint(0, len(paragraphs))
    return "\n".join([*paragraphs[:place], piece, *paragraphs[place:]])


def insert_ads(
    text: str, rng: random.Random, every: int = 2, ads: Sequence[str] | None = None
) -> str:
    """An ad line after every ``every`` paragraphs (Chinese or English ads by the text)."""
    ads = ads or AD_LINES["zh" if is_cjk(text) else "en"]
    out = []
    for i, paragraph in enumerate(text.split("\n"), start=1):
        out.append(paragraph)
        if i % every == 0:
            out.append(rng.choice(ads))
    return "\n".join(out)


def merge(text: str, rng: random.Random, other: str = "") -> str:
    """Two works on one page: ``text`` followed by ``other`` (merged chapters)."""
    return f"{text}\n{other}" if other else text


#: The default ``combine`` recipe: a lightly but thoroughly edited copy.
DEFAULT_STEPS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("homophones", {"rate": 0.05}),
    ("char_edits", {"rate": 0.01}),
    ("noise", {"rate": 0.02}),
    ("insert_ads", {"every": 2}),
)


def combine(
    text: str,
    rng: random.Random,
    steps: Sequence[tuple[str, dict[str, Any]]] = DEFAULT_STEPS,
) -> str:
    """Apply several named attacks in turn."""
    return reduce(lambda acc, step: ATTACKS[step[0]](acc, rng, **step[1]), steps, text)


ATTACKS: dict[str, Attack] = {
    "exact": exact,
    "noise": noise,
    "char_edits": char_edits,
    "homophones": homophones,
    "traditional": traditional,
    "paragraph_shuffle": paragraph_shuffle,
    "sentence_shuffle": sentence_shuffle,
    "excerpt": excerpt,
    "short_excerpt": short_excerpt,
    "insert_ads": insert_ads,
    "merge": merge,
    "combine": combine,
    **HIDING_ATTACKS,
}


def copied_fraction(name: str, strength: dict[str, Any]) -> float:
    """About how much of the master an attack leaves on the page (1.0 = all of it)."""
    if name == "excerpt":
        return float(strength.get("fraction", 0.3))
    if name == "short_excerpt":
        return 0.1  # ~30-60 characters of a 200-700-character brief
    if name == "combine":
        steps = strength.get("steps", DEFAULT_STEPS)
        return reduce(lambda acc, step: acc * copied_fraction(*step), steps, 1.0)
    return 1.0
