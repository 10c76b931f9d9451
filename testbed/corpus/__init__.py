"""Which corpus the demo, the evaluation and the tests read: the developers' shared
corpus (``../shared/corpus``) when it sits beside the repository, else the small
public-domain corpus bundled here (see README.md)."""

from __future__ import annotations

from pathlib import Path

BUNDLED_CORPUS = Path(__file__).resolve().parent
SHARED_CORPUS = BUNDLED_CORPUS.parents[2] / "shared" / "corpus"
FILES = ("zh_news", "zh_novel", "en_news", "en_novel")


def default_corpus_dir() -> Path:
    """The shared corpus if it is there (all four files), else the bundled one."""
    if all((SHARED_CORPUS / f"{name}.jsonl.gz").exists() for name in FILES):
        return SHARED_CORPUS
    return BUNDLED_CORPUS


def describe(corpus_dir: Path) -> str:
    """One line saying which corpus ``corpus_dir`` is."""
    if corpus_dir.resolve() == BUNDLED_CORPUS:
        return (
            "the bundled public-domain corpus (testbed/corpus: classical Chinese novels and "
            "Project Gutenberg books; its news-like pages are novel excerpts)"
        )
    if corpus_dir.resolve() == SHARED_CORPUS.resolve():
        return f"the shared corpus ({corpus_dir})"
    return f"the corpus in {corpus_dir}"
