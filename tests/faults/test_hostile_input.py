"""Hostile library input: a file name that is not UTF-8, JSONL strings holding lone
surrogates, integers past 64 bits, fields named like the library's own keys, a UTF-16 text.
Each bad work is one line naming its file (and line), the others go in, no traceback, and
no field of the caller's reaches the keys of a work's document."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.corpus import texts
from tests.faults.helpers import add_statuses, copytrack, data_dir_env, one_error_per_place

pytestmark = pytest.mark.slow

GOOD = texts("zh_news", 8)


def _jsonl_line(fields: dict[str, object], text: str) -> str:
    """A JSONL line with ``text``; lone surrogates stay escaped, as a hostile file has them."""
    return json.dumps({**fields, "text": text}, ensure_ascii=True)


def test_hostile_works_each_get_one_line_and_the_rest_goes_in(tmp_path: Path) -> None:
    library = tmp_path / "library"
    library.mkdir()
    (library / "good.txt").write_text(GOOD[0], encoding="utf-8")
    # A Latin-1 name, as copied from an old archive: not UTF-8.
    with open(os.path.join(os.fsencode(library), b"caf\xe9.txt"), "wb") as out:
        out.write(GOOD[1].encode("utf-8"))
    (library / "notepad.txt").write_bytes(GOOD[2].encode("utf-16"))  # with its BOM
    lines = [
        _jsonl_line({"id": "fine"}, GOOD[3]),
        _jsonl_line({"id": "bad-text"}, GOOD[4][:50] + "\ud800" + GOOD[4][50:]),
        _jsonl_line({"id": "bad-title", "title": "标题\udc00"}, GOOD[5]),
        _jsonl_line({"id": "id-\ud83d"}, GOOD[6]),
        _jsonl_line({"id": "huge", "year": 2**64}, GOOD[7]),
        # Fields named as the library's own keys stay the caller's.
        _jsonl_line({"id": "named", "_id": 1, "state": "x"}, GOOD[4][::-1]),
        _jsonl_line({"id": "named2", "_id": "abc"}, GOOD[5][::-1]),
    ]
    (library / "works.jsonl").write_text("\n".join(lines) + "\n", encoding="ascii")
    env = data_dir_env(tmp_path / "data")
    try:
        done = copytrack(["library", "add", str(library)], env, cwd=tmp_path)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        expected = {
            "caf\\xe9.txt": "not UTF-8",
            "works.jsonl:2": "lone surrogate",
            "works.jsonl:3": "'title'",
            "works.jsonl:4": "'id'",
            "works.jsonl:5": "beyond 64 bits",
        }
        one_error_per_place(done.stderr, expected)
        statuses = add_statuses(done.stdout)
        assert statuses == dict.fromkeys(["good", "notepad", "fine", "named", "named2"], "added"), (
            done.stdout
        )

        # Each added work is findable as itself, the ones with fields named `_id` included.
        for name, text in (("named", GOOD[4][::-1]), ("named2", GOOD[5][::-1]),
                           ("notepad", GOOD[2])):  # fmt: skip
            suspect = tmp_path / f"{name}.txt"
            suspect.write_text(text, encoding="utf-8")
            found = copytrack(["check", str(suspect)], env, cwd=tmp_path)
            assert found.returncode == 0 and found.stdout.startswith(name), found.stdout
        listed = copytrack(["library", "list", "--json"], env, cwd=tmp_path)
        works = {w["external_id"]: w for w in map(json.loads, listed.stdout.splitlines())}
        assert set(works) == set(statuses)
        assert all(isinstance(w["_id"], int) and w["state"] == "indexed" for w in works.values())
    finally:
        copytrack(["down"], env)
