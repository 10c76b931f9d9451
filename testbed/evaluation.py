"""Accuracy evaluation: a labelled benchmark of pirate-style copies run through the real matcher.

``build_benchmark`` draws masters from a corpus (JSONL documents), then makes suspects:
copies of masters under every attack of ``POSITIVES`` (``testbed.attacks``, fixed
strengths), negatives of three kinds (``NEGATIVES``) and listing-page negatives
(``LISTING_NEGATIVES``: pages showing headlines and first lines of masters).
``evaluate`` registers the masters (``add_work`` on the context's servers, or a
``MemoryIndex`` for quick sweeps — the same ``match_text`` either way), matches every
suspect, and ``score`` turns the outcomes into recall, top-1 accuracy, precision, F1 and
false-positive rates, per language and attack.
Everything is deterministic for a given corpus and seed. See docs/accuracy.md.
"""

from __future__ import annotations

import datetime
import json
import math
import multiprocessing
import multiprocessing.pool
import platform
import random
import re
import signal
import statistics
import time
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, astuple, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from fingerprinter import CHECK_BITS, FingerprintParams
from tracker.context import Context
from tracker.core.config import Settings
from tracker.core.jsonl import BadLine, read_jsonl
from tracker.index import MemoryIndex
from tracker.masters.generation import open_ready
from tracker.masters.library import Work, add_work, fingerprint_values, text_sha256
from tracker.masters.master_cache import cached_masters
from tracker.matching.matcher import DEFAULT_MATCH_SETTINGS, MasterLoader, MatchSettings, match_text

from .attacks import ATTACKS, insert_ads, is_cjk, reflow
from .corpus import default_corpus_dir
from .paraphrase import PARAPHRASE_ATTACKS, PARAPHRASE_RATES
from .rewrite import REWRITE_ATTACKS, SYNONYM_RATES
from .testweb.listings import LISTING_KINDS, listing_page

DEFAULT_CORPUS = default_corpus_dir()
LANGS = ("zh", "en")

#: An excerpt attack copies at least this many characters: a 10% excerpt of a 300-character
#: brief would be half a sentence, quotation rather than piracy. Both sizes hold about the
#: same content (an English sentence takes about twice the characters of its Chinese
#: translation), and excerpt attacks of fraction f only use masters of at least
#: ``MIN_EXCERPT_CHARS[lang] / f`` characters.
MIN_EXCERPT_CHARS = {"zh": 150, "en": 300}
#: News briefs: the short works short excerpts are taken from (characters).
SHORT_WORK_CHARS = (200, 700)
#: A short excerpt copies this many Chinese characters, or English words, of a brief: the
#: shortest stretches a publisher asks to find (quotation-sized; reported with their size).
SHORT_EXCERPT_SIZES = {"zh": (30, 50), "en": (25, 40)}
#: Longest paragraph of a suspect page: pages break text into short paragraphs, so that a
#: news article has enough of them for ads every 3 paragraphs and shuffles to matter.
PARAGRAPH_CHARS = 200
#: Share of the suspects that are negatives (split evenly over ``NEGATIVES``).
NEGATIVE_SHARE = 0.3
#: Two corpus documents sharing this many characters of exact common text (letters and
#: digits, in passages of at least ``SHINGLE[lang]`` characters, boilerplate excluded) are
#: related: news outlets reuse each other's sentences and paragraphs, novels quote a poem
#: twice. As short as the shortest copied stretch copytrack reports (a Chinese quotation
#: of ~24 characters, MatchSettings.min_excerpt_letters): a passage that size shared by two
#: documents is a real quotation, reported with its size, not an error.
REUSE_CHARS = {"zh": 24, "en": 50}
#: Shortest common passage that counts: ~12 Chinese characters, ~6 English words.
SHINGLE = {"zh": 12, "en": 30}
#: A passage found in this many corpus documents is boilerplate (a site footer, a
#: disclaimer, a stock phrase): sharing it relates nothing, and matching on it is an error.
BOILERPLATE_DOCS = 5
_BITMAP_BITS = 26

#: A thorough pirate: reordered paragraphs, homophones, typos, formatting noise and ads.
COMBINED_STEPS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("paragraph_shuffle", {}),
    ("homophones", {"rate": 0.1}),
    ("char_edits", {"rate": 0.01}),
    ("noise", {"rate": 0.02}),
    ("insert_ads", {"every": 2}),
)


@dataclass(frozen=True)
class Variant:
    """One attack at one strength; ``langs`` lists the languages it changes anything in."""

    label: str
    attack: str
    strength: Mapping[str, Any] = field(default_factory=dict)
    langs: tuple[str, ...] = LANGS

    def min_chars(self, lang: str) -> int:
        """Shortest master this variant uses (excerpts need enough text to copy)."""
        if self.attack == "short_excerpt":
            return SHORT_WORK_CHARS[0]
        if self.attack != "excerpt":
            return 0
        chars = MIN_EXCERPT_CHARS.get(lang, max(MIN_EXCERPT_CHARS.values()))
        return round(chars / self.strength["fraction"])

    def max_chars(self) -> float:
        """Longest master this variant uses (short excerpts come from short works)."""
        return SHORT_WORK_CHARS[1] if self.attack == "short_excerpt" else math.inf


POSITIVES: tuple[Variant, ...] = (
    Variant("exact", "exact"),
    Variant("noise 10%", "noise", {"rate": 0.1}),
    *(Variant(f"char edits {p}%", "char_edits", {"rate": p / 100}) for p in (2, 5, 10)),
    *(Variant(f"homophones {p}%", "homophones", {"rate": p / 100}, ("zh",)) for p in (10, 30, 50)),
    Variant("traditional", "traditional", langs=("zh",)),
    Variant("paragraph shuffle", "paragraph_shuffle"),
    Variant("sentence shuffle", "sentence_shuffle"),
    *(Variant(f"excerpt {p}%", "excerpt", {"fraction": p / 100}) for p in (10, 30, 60)),
    *(
        Variant(f"short excerpt {n} {unit}", "short_excerpt", {"size": n}, (lang,))
        for lang, unit in (("zh", "chars"), ("en", "words"))
        for n in SHORT_EXCERPT_SIZES[lang]
    ),
    *(Variant(f"ads every {n}", "insert_ads", {"every": n}) for n in (1, 3)),
    Variant("merge", "merge"),
    Variant("combined", "combine", {"steps": COMBINED_STEPS}),
    *(
        Variant(f"private use {p}%", "private_use", {"rate": p / 100}, ("zh",))
        for p in (5, 10, 20, 30)
    ),
    *(
        Variant(f"pinyin words {p}%", "pinyin_words", {"rate": p / 100}, ("zh",))
        for p in (10, 25, 40)
    ),
    *(Variant(f"synonyms {p}%", "synonyms", {"rate": p / 100}, ("zh",)) for p in SYNONYM_RATES),
    Variant("clause reorder", "clause_reorder", langs=("zh",)),
    Variant("names scrubbed", "scrub_names", langs=("zh",)),
    *(Variant(f"rewrite {p}%", "rewrite", {"rate": p / 100}, ("zh",)) for p in (50, 70)),
    *(
        Variant(f"paraphrase {p}%", "paraphrase", {"rate": p / 100}, ("en",))
        for p in PARAPHRASE_RATES
    ),
)
#: Every attack a positive can be made with: the pirate edits, the 洗稿 rewrites and the
#: English heavy revisions.
_ATTACKS = {**ATTACKS, **REWRITE_ATTACKS, **PARAPHRASE_ATTACKS}

UNRELATED, HARD, HARD_ADS = "unrelated", "hard negative", "hard negative + ads"
NEGATIVES = (UNRELATED, HARD, HARD_ADS)
#: Pages that show many works and copy none (``testbed.listings``): a list of headlines
#: with first lines, a tag page, search results (snippets), and an unrelated article with
#: a "related articles" block. Added to the suspects (LISTING_PAGES of each kind per
#: language) and reported apart from the other negatives.
LISTING_NEGATIVES = LISTING_KINDS
LISTING_PAGES = 5


@dataclass(frozen=True)
class Document:
    """A corpus document; ``group`` (book or news category) defines hard negatives."""

    id: str
    text: str
    lang: str
    kind: str = ""
    group: str = ""


@dataclass(frozen=True)
class Suspect:
    """A text to match, with the masters (document ids) it copies.

    ``sources`` are the corpus documents the text was made from; ``acceptable`` masters
    are related to them in the corpus itself (see ``reuse``): reporting those is neither
    required nor an error.
    """

    id: str
    lang: str
    label: str  # a Variant label or a negative kind
    text: str
    sources: tuple[str, ...]
    expected: tuple[str, ...]
    acceptable: tuple[str, ...] = ()
    #: Extraction takes its page for a listing: as a scan does (`tracker.scanning.pages.scan_page`),
    #: only its copies count, not its quotation-sized matches.
    listing: bool = False


@dataclass(frozen=True)
class Benchmark:
    """Masters to register and labelled suspects."""

    masters: tuple[Document, ...]
    suspects: tuple[Suspect, ...]
    seed: int


def corpus_files(paths: Iterable[Path]) -> list[Path]:
    """JSONL files named, or found in named directories (``*.jsonl``, ``*.jsonl.gz``).

    Raises FileNotFoundError naming the path when one is missing or holds no JSONL file.
    """
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.name.endswith((".jsonl", ".jsonl.gz")))
            if not found:
                raise FileNotFoundError(f"no *.jsonl or *.jsonl.gz file in {path}")
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"{path} does not exist")
    return files


def to_document(obj: Mapping[str, Any], fallback_id: str) -> Document:
    """A corpus JSON object as a Document (``text`` required; ``id``, ``lang``, ``kind``,
    ``book`` or ``category`` used when present, the language detected when absent)."""
    text = obj["text"]
    return Document(
        id=str(obj.get("id") or fallback_id),
        text=text,
        lang=obj.get("lang") or ("zh" if is_cjk(text) else "en"),
        kind=str(obj.get("kind") or ""),
        group=str(obj.get("book") or obj.get("category") or ""),
    )


def load_documents(paths: Iterable[Path]) -> tuple[list[Document], list[str]]:
    """Documents of JSONL files (see ``to_document``), and what was wrong with other lines."""
    docs, problems = [], []
    for path in corpus_files(paths):
        for item in read_jsonl(path):
            if isinstance(item, BadLine):
                problems.append(str(item))
                continue
            line_no, obj = item
            text = obj.get("text")
            if not isinstance(text, str) or not text.strip():
                problems.append(f'{path}:{line_no}: no "text" string')
                continue
            docs.append(to_document(obj, f"{path.name}:{line_no}"))
    return docs, problems


def _shingles(text: str, size: int) -> np.ndarray:
    """Hashes of every ``size``-character window of the text's letters and digits."""
    kept = "".join(filter(str.isalnum, unicodedata.normalize("NFKC", text).casefold()))
    points = np.frombuffer(kept.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    n = len(points) - size + 1
    hashes = np.zeros(max(n, 0), dtype=np.uint64)
    for i in range(size if n > 0 else 0):
        # Polynomial hash modulo 2**64 (numpy wraps): exact enough for a few million windows.
        hashes = hashes * np.uint64(0x100000001B3) + points[i : i + n]
    return hashes


def reuse(docs: Sequence[Document], masters: Sequence[Document]) -> dict[str, set[str]]:
    """Document id → ids of the other masters it shares ``REUSE_CHARS`` of exact text with.

    The benchmark's ground truth only knows the copies it made; this finds the text reuse
    already in the corpus (a story rewritten from another, a quoted paragraph), independently
    of the fingerprints, so that it counts neither for nor against the matcher. ``masters``
    must be among ``docs``, whose passages decide what is boilerplate.
    """
    lang = masters[0].lang if masters else ""
    size = SHINGLE.get(lang, min(SHINGLE.values()))
    reuse_chars = REUSE_CHARS.get(lang, max(REUSE_CHARS.values()))
    windows_of = {doc.id: _shingles(doc.text, size) for doc in docs}
    values, df = np.unique(
        np.concatenate([np.empty(0, np.uint64), *map(np.unique, windows_of.values())]),
        return_counts=True,
    )
    boilerplate = values[df >= BOILERPLATE_DOCS]
    per_master = [
        np.setdiff1d(np.unique(windows_of[m.id]), boilerplate, assume_unique=True) for m in masters
    ]
    hashes = np.concatenate([np.empty(0, np.uint64), *per_master])
    owners = np.repeat(np.arange(len(masters)), [len(h) for h in per_master])
    order = np.argsort(hashes, kind="stable")
    hashes, owners = hashes[order], owners[order]
    # Most windows are in no master: a bitmap on the top hash bits drops them before the
    # (cache-unfriendly) binary search.
    seen = np.zeros(1 << _BITMAP_BITS, dtype=bool)
    seen[hashes >> np.uint64(64 - _BITMAP_BITS)] = True
    related: dict[str, set[str]] = {}
    for doc in docs:
        windows = windows_of[doc.id]
        where = np.flatnonzero(seen[windows >> np.uint64(64 - _BITMAP_BITS)])
        windows = windows[where]
        left = np.searchsorted(hashes, windows, "left")
        count = np.searchsorted(hashes, windows, "right") - left
        position = np.repeat(where, count)
        first = np.repeat(left - np.cumsum(count) + count, count)
        owner = owners[first + np.arange(len(position))]
        # Characters covered by the shared windows, per master: a window covers ``size``
        # characters, less where the next shared window of the same master overlaps it.
        order = np.lexsort((position, owner))
        owner, position = owner[order], position[order]
        step = np.diff(position, append=np.iinfo(np.int64).max)
        step[np.diff(owner, append=-1) != 0] = size
        covered = np.bincount(owner, np.minimum(step, size), minlength=len(masters))
        related[doc.id] = {
            masters[i].id
            for i in np.flatnonzero(covered >= reuse_chars).tolist()
            if masters[i].id != doc.id
        }
    return related


def _split(total: int, parts: int) -> list[int]:
    """``total`` as ``parts`` near-equal whole numbers, larger ones first."""
    return [total // parts + (i < total % parts) for i in range(parts)]


def _pick(pool: Sequence[Document], count: int, rng: random.Random) -> list[Document]:
    """``count`` documents, distinct while the pool lasts."""
    picked: list[Document] = []
    while pool and len(picked) < count:
        picked += rng.sample(list(pool), min(len(pool), count - len(picked)))
    return picked


class _Pools:
    """The documents of one language: masters, and the others that reuse no master's text."""

    def __init__(self, docs: Sequence[Document], masters: int, rng: random.Random) -> None:
        self.masters = rng.sample(list(docs), min(masters, len(docs)))
        self.related = reuse(docs, self.masters)
        chosen = {d.id for d in self.masters}
        self.others = [d for d in docs if d.id not in chosen and not self.related[d.id]]
        if not self.others:
            raise ValueError("every document outside the masters reuses a master's text")
        self._by_group: dict[str, list[Document]] = defaultdict(list)
        for doc in self.others:
            self._by_group[doc.group].append(doc)

    def other_like(self, doc: Document, rng: random.Random) -> Document:
        """A non-master of the same group (book, category), else of any group."""
        pool = self._by_group.get(doc.group) if doc.group else None
        return rng.choice(pool or self.others)

    def master_like(self, doc: Document, rng: random.Random) -> Document:
        """Another master, of the same group when there is one."""
        same = [d for d in self.masters if d.group == doc.group and d.id != doc.id]
        return rng.choice(same or [d for d in self.masters if d.id != doc.id])


def _page(doc: Document) -> str:
    """The document laid out as a web page: one short paragraph per line."""
    return reflow(doc.text, PARAGRAPH_CHARS)


def _positive(
    variant: Variant, master: Document, pools: _Pools, rng: random.Random, sid: str
) -> Suspect:
    extra: dict[str, Any] = {}
    copied, sources = [master], [master]
    if variant.attack in ("excerpt", "short_excerpt"):
        sources.append(pools.other_like(master, rng))
        extra["filler"] = _page(sources[1])
    elif variant.attack == "merge":
        copied.append(pools.master_like(master, rng))
        sources = copied
        extra["other"] = _page(copied[1])
    text = _ATTACKS[variant.attack](_page(master), rng, **variant.strength, **extra)
    expected = tuple(d.id for d in copied)
    acceptable = {m for d in copied for m in pools.related[d.id]}.difference(expected)
    return Suspect(
        sid,
        master.lang,
        variant.label,
        text,
        tuple(d.id for d in sources),
        expected,
        tuple(sorted(acceptable)),
    )


def _negative(kind: str, pools: _Pools, rng: random.Random, sid: str, lang: str) -> Suspect:
    doc = rng.choice(pools.others) if kind == UNRELATED else None
    doc = doc or pools.other_like(rng.choice(pools.masters), rng)
    text = _page(doc)
    if kind == HARD_ADS:
        text = insert_ads(text, rng, every=1)
    return Suspect(sid, lang, kind, text, (doc.id,), ())


def _listing_negative(kind: str, pools: _Pools, rng: random.Random, sid: str, lang: str) -> Suspect:
    works = rng.sample(pools.masters, min(10, len(pools.masters)))
    article = rng.choice(pools.others)
    found = listing_page(kind, [(w.id, w.text) for w in works], article.text, lang, rng)
    sources = (article.id, *(w.id for w in works))
    return Suspect(sid, lang, kind, found.text, sources, (), listing=found.listing)


def _slug(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")


def build_benchmark(
    docs: Sequence[Document],
    masters: int = 1000,
    suspects: int = 3000,
    langs: Sequence[str] = LANGS,
    seed: int = 0,
    listing_pages: int = LISTING_PAGES,
) -> Benchmark:
    """Masters and labelled suspects, split evenly over ``langs`` (see the module docstring).

    Per language, ``NEGATIVE_SHARE`` of the suspects are negatives and the rest are spread
    evenly over the ``POSITIVES`` that apply to the language (an excerpt attack without a
    master long enough is left out). Each suspect draws from its own seeded ``Random``, so
    one variant's suspects do not depend on the others. ``listing_pages`` of each of
    LISTING_NEGATIVES per language come on top (not counted in ``suspects``).
    """
    all_masters: list[Document] = []
    all_suspects: list[Suspect] = []
    for lang, n_masters, n_suspects in zip(
        langs, _split(masters, len(langs)), _split(suspects, len(langs)), strict=True
    ):
        pool = [d for d in docs if d.lang == lang]
        # Leave at least a quarter of the documents for negatives and excerpt fillers.
        n_masters = min(n_masters, len(pool) * 3 // 4)
        if n_masters < 2:
            raise ValueError(
                f"{len(pool)} {lang} documents in the corpus: too few for 2 masters and negatives"
            )
        pools = _Pools(pool, n_masters, random.Random(f"{seed}:{lang}"))
        variants = [
            (v, [m for m in pools.masters if v.min_chars(lang) <= len(m.text) <= v.max_chars()])
            for v in POSITIVES
            if lang in v.langs
        ]
        variants = [(v, eligible) for v, eligible in variants if eligible]
        n_negative = round(n_suspects * NEGATIVE_SHARE)
        for (variant, eligible), count in zip(
            variants, _split(n_suspects - n_negative, len(variants)), strict=True
        ):
            rng = random.Random(f"{seed}:{lang}:{variant.label}")
            for i, master in enumerate(_pick(eligible, count, rng)):
                sid = f"{lang}-{_slug(variant.label)}-{i}"
                all_suspects.append(_positive(variant, master, pools, rng, sid))
        for kind, count in zip(NEGATIVES, _split(n_negative, len(NEGATIVES)), strict=True):
            rng = random.Random(f"{seed}:{lang}:{kind}")
            all_suspects += [
                _negative(kind, pools, rng, f"{lang}-{_slug(kind)}-{i}", lang) for i in range(count)
            ]
        for kind in LISTING_NEGATIVES:
            rng = random.Random(f"{seed}:{lang}:{kind}")
            all_suspects += [
                _listing_negative(kind, pools, rng, f"{lang}-{_slug(kind)}-{i}", lang)
                for i in range(listing_pages)
            ]
        all_masters += pools.masters
    return Benchmark(tuple(all_masters), tuple(all_suspects), seed)


# ----------------------------------------------------------------------- running


@dataclass(frozen=True)
class Outcome:
    """What the matcher reported for one suspect (master document ids, best first)."""

    found: tuple[str, ...]
    seconds: float


@dataclass(frozen=True)
class Evaluation:
    """Outcomes of one run (one per suspect, in order), with settings, timings, index size."""

    params: FingerprintParams
    settings: MatchSettings
    seed: int
    suspects: tuple[Suspect, ...]
    outcomes: tuple[Outcome, ...]
    masters: int
    index_seconds: float
    match_seconds: float  # wall clock, with ``jobs`` processes
    jobs: int
    postings: int
    index_bytes: int


def _memory_library(ctx: Context, masters: Sequence[Document]) -> tuple[Context, MasterLoader]:
    """A copy of ``ctx`` whose index and masters live in this process."""
    ctx = replace(ctx, index=MemoryIndex(ctx.params.value_bits, CHECK_BITS))
    ctx.index.ensure_version(ctx.params.version)
    stored = {}
    for master_id, doc in enumerate(masters, start=1):
        ctx.index.add(master_id, *fingerprint_values(ctx, doc.text))
        # With its hash, as MongoDB gives it: the matcher then keeps its letters at hand.
        stored[master_id] = {"_id": master_id, "external_id": doc.id, "text": doc.text,
                             "sha256": text_sha256(doc.text)}  # fmt: skip

    def load(_: Context, ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        return {i: stored[i] for i in ids}

    return ctx, load


def _register(ctx: Context, masters: Sequence[Document]) -> None:
    if ctx.db.masters.estimated_document_count():
        raise ValueError("evaluation needs an empty library (other masters would count as errors)")
    for doc in masters:
        add_work(ctx, Work(text=doc.text, external_id=doc.id, lang=doc.lang, kind=doc.kind))


@dataclass
class _Run:
    """What the matching processes share: inherited through fork in memory, sent to each
    worker from a forkserver on the servers."""

    ctx: Context
    load: MasterLoader
    settings: MatchSettings
    suspects: Sequence[Suspect]


_RUN: _Run | None = None


def _worker_pool(
    ctx: Context, jobs: int, in_memory: bool, settings: MatchSettings, suspects: Sequence[Suspect]
) -> multiprocessing.pool.Pool:
    """``jobs`` processes that match suspects with ``_match``.

    In memory they inherit the library through fork. On the servers they connect by
    themselves, started from a forkserver: a fork of this process would inherit its client
    sockets and the after-fork hooks of the libraries holding them (kombu closes its pools
    in the child by reading their sockets: two children read one socket and waited forever).
    """
    if in_memory:
        return multiprocessing.get_context("fork").Pool(jobs, initializer=_start_forked)
    # The servers' URLs, so that a worker connects and never starts servers itself.
    urls = replace(
        ctx.settings, mongo_url=ctx.endpoints.mongo_url, redis_url=ctx.endpoints.redis_url
    )
    server = multiprocessing.get_context("forkserver")
    server.set_forkserver_preload([__name__])
    return server.Pool(
        jobs, initializer=_connect_worker, initargs=(urls, ctx.params, settings, suspects)
    )


def _start_forked() -> None:
    # A caller's SIGTERM handler (the CLI's, which stops the servers) is not the worker's:
    # Pool.terminate() must end a worker at once.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _connect_worker(
    urls: Settings, params: FingerprintParams, settings: MatchSettings, suspects: Sequence[Suspect]
) -> None:
    global _RUN
    _start_forked()
    _RUN = _Run(open_ready(urls, params), cached_masters, settings, suspects)


def _match(i: int) -> Outcome:
    assert _RUN is not None
    started = time.perf_counter()
    suspect = _RUN.suspects[i]
    matches = match_text(_RUN.ctx, suspect.text, _RUN.settings, _RUN.load)
    found = tuple(m.master.external_id for m in matches if not (suspect.listing and m.quotation))
    return Outcome(found, time.perf_counter() - started)


def evaluate(
    ctx: Context,
    bench: Benchmark,
    settings: MatchSettings = DEFAULT_MATCH_SETTINGS,
    in_memory: bool = False,
    jobs: int = 1,
    progress: Callable[[int], object] | None = None,
) -> Evaluation:
    """Register the masters and match every suspect with ``match_text``.

    By default the masters go into ``ctx``'s library (MongoDB and the Redis index), which
    must be empty; ``in_memory`` keeps them in a ``MemoryIndex`` and a dict instead, for
    sweeps (same fingerprints, same matcher code). ``jobs`` > 1 matches in that many
    processes (`_worker_pool`).
    """
    global _RUN
    started = time.perf_counter()
    load: MasterLoader = cached_masters
    if in_memory:
        ctx, load = _memory_library(ctx, bench.masters)
    else:
        _register(ctx, bench.masters)
    index_seconds = time.perf_counter() - started
    _RUN = _Run(ctx, load, settings, bench.suspects)
    started = time.perf_counter()
    outcomes: list[Outcome] = []
    try:
        if jobs > 1:
            with _worker_pool(ctx, jobs, in_memory, settings, bench.suspects) as pool:
                for outcome in pool.imap(_match, range(len(bench.suspects)), chunksize=8):
                    outcomes.append(outcome)
                    if progress:
                        progress(1)
                # Leaving the block terminates the workers: every result is in, and
                # joining them could wait on a thread a library left in the fork.
        else:
            for i in range(len(bench.suspects)):
                outcomes.append(_match(i))
                if progress:
                    progress(1)
    finally:
        _RUN = None
    match_seconds = time.perf_counter() - started
    stats = ctx.index.stats()
    return Evaluation(
        ctx.params,
        settings,
        bench.seed,
        bench.suspects,
        tuple(outcomes),
        len(bench.masters),
        index_seconds,
        match_seconds,
        jobs,
        stats.postings,
        stats.memory_bytes,
    )


# ----------------------------------------------------------------------- scoring


@dataclass(frozen=True)
class Score:
    """Pair counts of one group of suspects and the rates derived from them.

    A pair is (suspect, master): expected pairs are the copies, reported pairs what the
    matcher returned. ``flagged`` counts suspects with any match at all.
    """

    suspects: int = 0
    positives: int = 0  # suspects that copy something
    expected: int = 0
    found: int = 0  # expected pairs reported
    reported: int = 0
    top1: int = 0  # suspects whose first match is a master they copy
    flagged: int = 0

    def __add__(self, other: Score) -> Score:
        return Score(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))

    @property
    def recall(self) -> float:
        return self.found / self.expected if self.expected else 1.0

    @property
    def precision(self) -> float:
        return self.found / self.reported if self.reported else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    @property
    def top1_accuracy(self) -> float:
        """Share of the copies whose best match is a master they copy."""
        return self.top1 / self.positives if self.positives else 1.0

    @property
    def flagged_rate(self) -> float:
        """For negatives: the false-positive rate."""
        return self.flagged / self.suspects if self.suspects else 0.0

    def as_dict(self) -> dict[str, float | int]:
        rates = ("recall", "precision", "f1", "top1_accuracy", "flagged_rate")
        return {**asdict(self), **{name: round(getattr(self, name), 4) for name in rates}}


def _score(suspect: Suspect, outcome: Outcome) -> Score:
    expected = set(suspect.expected)
    # Masters related to the suspect's sources in the corpus itself count neither way.
    found = [m for m in outcome.found if m not in suspect.acceptable]
    return Score(
        suspects=1,
        positives=bool(expected),
        expected=len(expected),
        found=len(expected.intersection(found)),
        reported=len(found),
        top1=bool(found) and found[0] in expected,
        flagged=bool(found),
    )


def score(evaluation: Evaluation) -> dict[str, dict[str, Score]]:
    """lang → label → Score, plus the label ``"all"`` per language (positives and negatives)."""
    return score_outcomes(evaluation.suspects, evaluation.outcomes)


def score_outcomes(
    suspects: Sequence[Suspect], outcomes: Sequence[Outcome]
) -> dict[str, dict[str, Score]]:
    """`score` of any matcher's outcomes (one per suspect, in order)."""
    table: dict[str, dict[str, Score]] = defaultdict(lambda: defaultdict(Score))
    for suspect, outcome in zip(suspects, outcomes, strict=True):
        s = _score(suspect, outcome)
        by_label = table[suspect.lang]
        by_label[suspect.label] += s
        by_label["all"] += s
    return {lang: dict(labels) for lang, labels in table.items()}


def throughput(evaluation: Evaluation) -> dict[str, float]:
    """Indexing and matching speed of a run (wall clock; latency per suspect)."""
    seconds = [o.seconds for o in evaluation.outcomes] or [0.0]
    chars = sum(len(s.text) for s in evaluation.suspects)
    wall = evaluation.match_seconds or 1e-9
    return {
        "masters_per_second": round(evaluation.masters / (evaluation.index_seconds or 1e-9), 1),
        "jobs": evaluation.jobs,
        "suspects_per_second": round(len(evaluation.outcomes) / wall, 1),
        "suspect_chars_per_second": round(chars / wall),
        "latency_ms_median": round(1000 * statistics.median(seconds), 2),
        "latency_ms_p95": round(1000 * percentile(seconds, 0.95), 2),
    }


def percentile(values: Sequence[float], q: float) -> float:
    """The value at fraction ``q`` of the values, one of them (nearest rank; 0.0 for none)."""
    return float(np.quantile(values, q, method="inverted_cdf")) if len(values) else 0.0


def weakest(scores: Mapping[str, Score]) -> tuple[str, float]:
    """The positive label with the lowest recall (``("", 1.0)`` when nothing is missed)."""
    positives = [(label, s.recall) for label, s in scores.items() if s.expected and label != "all"]
    worst = min(positives, key=lambda item: item[1], default=("", 1.0))
    return worst if worst[1] < 1.0 else ("", 1.0)


def listing_figures(scores: Mapping[str, Score]) -> dict[str, int]:
    """Listing-page negatives (LISTING_NEGATIVES) and how many of them matched anything."""
    listings = sum((scores.get(kind, Score()) for kind in LISTING_NEGATIVES), Score())
    return {"suspects": listings.suspects, "false_positives": listings.flagged}


def hard_fp_rate(scores: Mapping[str, Score]) -> float:
    """False-positive rate over both kinds of hard negatives."""
    return (scores.get(HARD, Score()) + scores.get(HARD_ADS, Score())).flagged_rate


# ----------------------------------------------------------------------- reports


def _labels(scores: Mapping[str, Score]) -> Iterator[str]:
    """Labels in the benchmark's order."""
    for label in [v.label for v in POSITIVES] + list(NEGATIVES) + list(LISTING_NEGATIVES):
        if label in scores:
            yield label


def report_json(evaluation: Evaluation) -> dict[str, Any]:
    """Everything a run measured, JSON-ready."""
    scores = score(evaluation)
    overall = sum((by_label["all"] for by_label in scores.values()), Score())
    return {
        "run": {
            "date": datetime.date.today().isoformat(),
            "machine": platform.machine(),
            "python": platform.python_version(),
        },
        "seed": evaluation.seed,
        "masters": evaluation.masters,
        "suspects": len(evaluation.outcomes),
        "params": asdict(evaluation.params),
        "params_version": evaluation.params.version,
        "settings": asdict(evaluation.settings),
        "min_excerpt_chars": MIN_EXCERPT_CHARS,
        "overall": overall.as_dict(),
        "languages": {
            lang: {
                "overall": by_label["all"].as_dict(),
                "hard_negative_fp_rate": round(hard_fp_rate(by_label), 4),
                "listing_negatives": listing_figures(by_label),
                "related_suspects": sum(
                    bool(s.acceptable) for s in evaluation.suspects if s.lang == lang
                ),
                "labels": {label: by_label[label].as_dict() for label in _labels(by_label)},
            }
            for lang, by_label in scores.items()
        },
        "throughput": throughput(evaluation),
        "index": {
            "postings": evaluation.postings,
            "bytes": evaluation.index_bytes,
            "bytes_per_posting": round(evaluation.index_bytes / max(evaluation.postings, 1), 2),
            "postings_per_master": round(evaluation.postings / max(evaluation.masters, 1), 1),
        },
    }


def _ordered(langs: Iterable[str]) -> list[str]:
    """Languages as in LANGS first, then any others alphabetically."""
    rank = {lang: i for i, lang in enumerate(LANGS)}
    return sorted(langs, key=lambda lang: (rank.get(lang, len(LANGS)), lang))


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def report_markdown(evaluation: Evaluation) -> str:
    """The run as Markdown: overall figures and per-attack tables per language."""
    data = report_json(evaluation)
    lines = [
        f"# copytrack eval, {data['run']['date']} ({data['run']['machine']}, "
        f"Python {data['run']['python']})",
        "",
        f"{data['masters']:,} masters, {data['suspects']:,} suspects, seed {evaluation.seed}; "
        f"fingerprint {evaluation.params.version}, {_settings_text(evaluation)}.",
        "",
        f"All languages: F1 **{data['overall']['f1']:.3f}**, precision "
        f"{data['overall']['precision']:.3f}, recall {data['overall']['recall']:.3f}.",
        "",
    ]
    for lang, figures in data["languages"].items():
        overall = figures["overall"]
        lines += [
            f"### {lang}",
            "",
            f"F1 **{overall['f1']:.3f}**, precision {overall['precision']:.3f}, "
            f"recall {overall['recall']:.3f}; false positives on hard negatives "
            f"{_pct(figures['hard_negative_fp_rate'])}. {figures['related_suspects']} suspects "
            "also share text with other masters in the corpus itself (not counted either way).",
            "",
            "| attack | suspects | recall | top-1 | precision | F1 |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        missing = [
            v.label for v in POSITIVES if lang in v.langs and v.label not in figures["labels"]
        ]
        if missing:
            lines[-2:-2] = [f"Not measured (no master long enough): {', '.join(missing)}.", ""]
        negatives = []
        for label, s in figures["labels"].items():
            if label in NEGATIVES or label in LISTING_NEGATIVES:
                negatives.append(f"| {label} | {s['suspects']} | {_pct(s['flagged_rate'])} |")
                continue
            lines.append(
                f"| {label} | {s['suspects']} | {s['recall']:.3f} | {s['top1_accuracy']:.3f} "
                f"| {s['precision']:.3f} | {s['f1']:.3f} |"
            )
        lines += ["", "| negatives | suspects | false-positive rate |", "|---|---:|---:|"]
        listings = figures["listing_negatives"]
        lines += [*negatives, "", f"Listing-page negatives: {listings['suspects']}, "
                  f"false positives {listings['false_positives']}.", ""]  # fmt: skip
    speed, index = data["throughput"], data["index"]
    lines += [
        f"Throughput: {speed['masters_per_second']:,} masters/s registered; "
        f"{speed['suspects_per_second']:,} suspects/s "
        f"({speed['suspect_chars_per_second'] / 1e6:.2f} M chars/s) matched with "
        f"{speed['jobs']} processes, latency median "
        f"{speed['latency_ms_median']} ms, p95 {speed['latency_ms_p95']} ms. "
        f"Index: {index['postings']:,} postings ({index['postings_per_master']} per master), "
        f"{index['bytes'] / 1e6:.1f} MB, {index['bytes_per_posting']} bytes/posting.",
        "",
    ]
    return "\n".join(lines)


def _settings_text(evaluation: Evaluation) -> str:
    p, s = evaluation.params, evaluation.settings
    stream = (
        f"on ({p.skeleton_granule}-letter granules in Chinese, {p.synonym_granule} in English)"
        if p.synonyms
        else "off"
    )
    return (
        f"granule {p.granule}, overlap {p.overlap}, levels {p.levels}, width {p.width}, "
        f"latin {p.latin_mode} (weight {p.latin_weight}); synonym stream "
        f"{stream}; min_matched_letters "
        f"{s.min_matched_letters}, whole_master_coverage {s.whole_master_coverage}, "
        f"min_coverage {s.min_coverage}, max_df {s.max_df} or {s.max_df_share:.2%} of the "
        f"library, min_shared_hits "
        f"{s.min_shared_hits}, boilerplate under {s.boilerplate_max_chars} chars and "
        f"{s.boilerplate_max_share:.0%} of the master; excerpts from {s.min_excerpt_chars} "
        f"Chinese or {s.min_excerpt_latin_chars} Latin characters copied verbatim"
    )


# ----------------------------------------------------------------------- sweeps


@dataclass(frozen=True)
class Setting:
    """One point of a sweep: fingerprint parameters and matcher thresholds."""

    name: str
    params: FingerprintParams
    settings: MatchSettings


#: Values tried per parameter; a sweep changes one parameter of the defaults at a time.
SWEEP_GRID: dict[str, tuple[Any, ...]] = {
    "granule": (12, 16, 24, 32),
    "overlap": (0.25, 0.75),
    "levels": (2, 3),
    "width": (0.75, 1.5),
    "latin_mode": ("initials",),
    "latin_weight": (0.4, 0.6),
    "synonyms": (True,),  # the synonym stream on (COPYTRACK_SYNONYMS; docs/accuracy.md)
    "min_matched_letters": (30, 60, 80, 120, 150),
    "min_coverage": (0.02, 0.1),
    "whole_master_coverage": (0.6, 1.0),
    "max_df": (5, 100),
    "min_shared_hits": (6, 1_000_000),
    "boilerplate_max_chars": (0, 300, 1_000_000),
    "boilerplate_max_share": (0.3, 1.0),
}


def sweep_settings(
    params: FingerprintParams,
    settings: MatchSettings,
    grid: Mapping[str, Sequence[Any]] = SWEEP_GRID,
) -> list[Setting]:
    """The defaults, then each value of ``grid`` with everything else at the defaults."""
    points = [Setting("defaults", params, settings)]
    for name, values in grid.items():
        for value in values:
            change = {name: value}
            if hasattr(params, name):
                points.append(Setting(f"{name}={value}", replace(params, **change), settings))
            else:
                points.append(Setting(f"{name}={value}", params, replace(settings, **change)))
    return points


def sweep(
    ctx: Context,
    bench: Benchmark,
    points: Sequence[Setting],
    jobs: int = 1,
    progress: Callable[[int], object] | None = None,
) -> list[tuple[Setting, Evaluation]]:
    """Evaluate every setting in memory (same fingerprints and matcher as the real index)."""
    return [
        (
            point,
            evaluate(
                replace(ctx, params=point.params), bench, point.settings, True, jobs, progress
            ),
        )
        for point in points
    ]


def sweep_markdown(results: Sequence[tuple[Setting, Evaluation]]) -> str:
    """One row per setting and language: F1, precision, recall, errors, weakest attack,
    hard-negative false positives; then index size and matching time."""
    langs = _ordered({s.lang for _, ev in results for s in ev.suspects})
    lines = [
        "| setting | lang | F1 | precision | recall | missed / wrong pairs | weakest attack "
        "| hard-negative FP | postings/master | ms/suspect |",
        "|---|---|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for point, evaluation in results:
        scores = score(evaluation)
        per_master = evaluation.postings / max(evaluation.masters, 1)
        latency = 1000 * statistics.fmean(o.seconds for o in evaluation.outcomes)
        for lang in langs:
            overall = scores[lang]["all"]
            label, recall = weakest(scores[lang])
            lines.append(
                f"| {point.name} | {lang} | {overall.f1:.3f} | {overall.precision:.3f} "
                f"| {overall.recall:.3f} | {overall.expected - overall.found} / "
                f"{overall.reported - overall.found} | {f'{label} {recall:.2f}' if label else '—'} "
                f"| {_pct(hard_fp_rate(scores[lang]))} | {per_master:.0f} | {latency:.1f} |"
            )
    return "\n".join(lines) + "\n"


def sweep_json(results: Sequence[tuple[Setting, Evaluation]]) -> list[dict]:
    """Every setting's full report."""
    return [{"name": point.name, **report_json(evaluation)} for point, evaluation in results]


def write_reports(path_md: Path | None, path_json: Path | None, markdown: str, data: Any) -> None:
    """Write the Markdown and JSON reports where asked (parents created)."""
    for path, content in (
        (path_md, markdown),
        (path_json, json.dumps(data, ensure_ascii=False, indent=1) + "\n"),
    ):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
