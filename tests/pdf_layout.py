"""Where WeasyPrint lays text out, for tests that a PDF report fits its pages."""

from __future__ import annotations

from typing import Any

from admin.web import STATIC_DIR


def overflowing_text(html: str) -> list[tuple[int, float, str]]:
    """Pieces of text that WeasyPrint lays out past the right margin: (page, mm, text)."""
    past = []
    for number, page in enumerate(_rendered(html).pages, start=1):
        box = page._page_box
        right = box.content_box_x() + box.width
        for child in box.descendants():
            if getattr(child, "text", None) and child.position_x + child.width > right + 0.5:
                past.append((number, (child.position_x + child.width - right) / 3.78, child.text))
    return past


def _rendered(html: str) -> Any:
    import weasyprint  # only where reports are laid out: it loads Pango

    return weasyprint.HTML(string=html).render(
        stylesheets=[weasyprint.CSS(filename=STATIC_DIR / "print.css")]
    )


def laid_out_text(html: str) -> str:
    """The text WeasyPrint lays out on a report's pages, in reading order (a PDF's own text
    layer maps CJK glyphs through its subset fonts, which readers extract unreliably)."""
    return "".join(
        child.text
        for page in _rendered(html).pages
        for child in page._page_box.descendants()
        if getattr(child, "text", None)
    )


def text_past_its_cell(html: str) -> list[tuple[int, str]]:
    """Pieces of text that WeasyPrint lays out past the right edge of their table cell
    (printed over the next column): (page, text)."""
    from weasyprint.formatting_structure.boxes import TableCellBox

    past = []
    for number, page in enumerate(_rendered(html).pages, start=1):
        for cell in page._page_box.descendants():
            if not isinstance(cell, TableCellBox):
                continue
            right = cell.content_box_x() + cell.width
            for child in cell.descendants():
                if getattr(child, "text", None) and child.position_x + child.width > right + 0.5:
                    past.append((number, child.text))
    return past
