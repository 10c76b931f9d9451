"""Where WeasyPrint lays text out, for tests that a PDF report fits its pages."""

from __future__ import annotations

from admin.web import STATIC_DIR


def overflowing_text(html: str) -> list[tuple[int, float, str]]:
    """Pieces of text that WeasyPrint lays out past the right margin: (page, mm, text)."""
    import weasyprint

    document = weasyprint.HTML(string=html).render(
        stylesheets=[weasyprint.CSS(filename=STATIC_DIR / "print.css")]
    )
    past = []
    for number, page in enumerate(document.pages, start=1):
        box = page._page_box
        right = box.content_box_x() + box.width
        for child in box.descendants():
            if getattr(child, "text", None) and child.position_x + child.width > right + 0.5:
                past.append((number, (child.position_x + child.width - right) / 3.78, child.text))
    return past


def text_past_its_cell(html: str) -> list[tuple[int, str]]:
    """Pieces of text that WeasyPrint lays out past the right edge of their table cell
    (printed over the next column): (page, text)."""
    import weasyprint
    from weasyprint.formatting_structure.boxes import TableCellBox

    document = weasyprint.HTML(string=html).render(
        stylesheets=[weasyprint.CSS(filename=STATIC_DIR / "print.css")]
    )
    past = []
    for number, page in enumerate(document.pages, start=1):
        for cell in page._page_box.descendants():
            if not isinstance(cell, TableCellBox):
                continue
            right = cell.content_box_x() + cell.width
            for child in cell.descendants():
                if getattr(child, "text", None) and child.position_x + child.width > right + 0.5:
                    past.append((number, child.text))
    return past
