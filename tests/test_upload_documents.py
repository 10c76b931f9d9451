"""A Word, EPUB or PDF master's chapters: counted on the server, said so before.

The browser counts the chapters of a big .txt or .md before it goes; a .docx, .epub or .pdf
is compressed, so its size says nothing of its text: the form says that its chapters are
counted once it is uploaded, and the result then says how many there are.
"""

from __future__ import annotations

import re

from tests.test_admin_browser import (  # noqa: F401
    big_book,
    browser,
    open_upload_form,
    page,
    pytestmark,
    server,
)
from tests.test_library import _docx


def test_a_word_master_is_announced_then_counted_on_upload(server, page, monkeypatch, tmp_path):  # noqa: F811
    book = big_book()
    master = tmp_path / "合集.docx"
    master.write_bytes(_docx([book]))
    base, _ = server
    open_upload_form(page, base, monkeypatch, "#upload-later")
    page.set_input_files("#upload-form input[type=file]", str(master))
    later = page.wait_for_selector("#upload-later", state="visible").inner_text()
    assert re.search(r"合集.docx: [\d.]+ MB, a Word, EPUB or PDF document: its text is read", later)
    assert not page.is_visible("#upload-warning")  # no count guessed, nothing to agree to
    page.click("#upload-form button[type=submit]")
    notes = page.wait_for_selector("#upload-notes").inner_text()
    registered = re.search(
        r"合集.docx: ([\d,]+) characters, registered as one work cut into (\d+) ", notes
    )
    assert registered, notes
    chars = int(registered.group(1).replace(",", ""))
    assert chars > 0.95 * len(book)  # its text (less line breaks), not its compressed size
    # As many chapters as the result lists works: 60,000 characters in pieces of 10,000.
    rows = page.locator("#upload-result tbody tr").count()
    assert int(registered.group(2)) == rows >= 6
