"""No CSV cell becomes a formula, whatever separator the spreadsheet splits on.

The attack: a work titled ``a;=HYPERLINK(…)`` was exported unchanged: the file's cells are
separated by commas, but a spreadsheet in a locale that splits on semicolons (or a tab
import) starts a new cell after the ``;`` — one that begins with ``=``.
"""

from __future__ import annotations

import csv
import io

import pytest

from tests.admin_seed import PASSWORD, ZH, client, login, scanned_page
from tracker.accounts.users import add_user
from tracker.context import Context
from tracker.masters.library import Work, add_work

pytestmark = pytest.mark.security

TITLES = ('a;=HYPERLINK("http://evil.example","open")', "b\t+cmd|' /C calc'!A0", "c; @SUM(1)")


def test_no_cell_starts_a_formula_on_any_separator(ctx: Context) -> None:
    add_user(ctx, "vic", PASSWORD, "viewer")
    for n, title in enumerate(TITLES):
        add_work(ctx, Work(text=ZH[n], external_id=f"w{n}", title=title))
        scanned_page(ctx, f"https://mirror.example/{n};-1", "t", ZH[n])
    web = client(ctx)
    login(web, "vic")
    body = web.get("/exports/findings.csv").content.decode("utf-8-sig")
    assert len(body.splitlines()) == len(TITLES) + 1
    for separator in (",", ";", "\t"):
        cells = [cell for row in csv.reader(io.StringIO(body), delimiter=separator) for cell in row]
        formulas = [cell for cell in cells if cell.lstrip().startswith(("=", "+", "-", "@"))]
        assert formulas == [], separator
    # Read as the file says (commas), each title is there, marked as text.
    titles = {row["work_title"] for row in csv.DictReader(io.StringIO(body))}
    assert titles == {
        'a;\'=HYPERLINK("http://evil.example","open")',
        "b\t'+cmd|' /C calc'!A0",
        "c; '@SUM(1)",
    }
