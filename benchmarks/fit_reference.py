"""Fit the default reference frame on the shared corpus and write it as package data.

    .venv/bin/python -m benchmarks.fit_reference

Every document of the four corpus files contributes its letters (pinyin initials of
Chinese characters, Latin letters); the frame is the relative frequency of each letter,
per script. The result is written to fingerprinter/data/reference.json.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.shared_corpus import FILES, iter_documents, require_shared
from fingerprinter import DEFAULT_PARAMS, fit_reference

OUT = Path(__file__).resolve().parents[1] / "fingerprinter" / "data" / "reference.json"


def main() -> None:
    require_shared()
    texts = (doc["text"] for doc in iter_documents())
    note = (
        f"Letter frequencies per script fitted by benchmarks/fit_reference.py on "
        f"../shared/corpus ({', '.join(FILES)}; every document), latin_mode=letters."
    )
    frame = fit_reference(texts, frame_id=DEFAULT_PARAMS.reference, note=note)
    OUT.write_text(frame.to_json() + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
