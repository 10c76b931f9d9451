"""A whole-book TXT download, the commonest form of web-fiction piracy: every chapter it
copies is reported, with passages inside that chapter's place in the book."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from copytrack.cli import main
from tests.corpus import novel_chapters
from tracker.masters.library import Work, add_works
from tracker.matching.matcher import match_text

CHAPTERS = 120


def test_a_book_of_120_chapters_gives_120_findings(ctx, tmp_path: Path) -> None:
    chapters = novel_chapters(CHAPTERS)
    assert len(chapters) == CHAPTERS
    results = add_works(
        ctx, [Work(text=text, external_id=f"ch{n}") for n, text in enumerate(chapters)]
    )
    assert all(r[0].status == "added" for r in results)

    # The pirate's TXT: chapter headings, the chapters in order, in GBK as such files are.
    parts, places = [], {}
    at = 0
    for n, text in enumerate(chapters):
        part = f"第{n + 1}章\r\n{text}\r\n\r\n"
        places[f"ch{n}"] = (at, at + len(part))
        parts.append(part)
        at += len(part)
    book = "".join(parts)
    path = tmp_path / "全本.txt"
    path.write_bytes(book.encode("gbk", errors="replace"))

    matches = match_text(ctx, book)
    assert sorted(m.master.external_id for m in matches) == sorted(places)
    for match in matches:
        start, end = places[match.master.external_id]
        longest = max(match.spans, key=lambda s: s.master_end - s.master_start)
        assert start <= longest.suspect_start < longest.suspect_end <= end, match
        assert match.master_coverage > 0.9

    # The command a reviewer runs on the downloaded file says so too.
    result = CliRunner().invoke(main, ["check", str(path)])
    assert result.exit_code == 0, result.output
    assert sum(line.startswith("ch") for line in result.output.splitlines()) == CHAPTERS
