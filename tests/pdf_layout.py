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


def laid_out_text(html: str) -> str:
    """The text WeasyPrint lays out on a report's pages, in reading order (a PDF's own text
    layer maps CJK glyphs through its subset fonts, which readers extract unreliably)."""
    import weasyprint

    document = weasyprint.HTML(string=html).render(
        stylesheets=[weasyprint.CSS(filename=STATIC_DIR / "print.css")]
    )
    return "".join(
        child.text
        for page in document.pages
        for child in page._page_box.descendants()
        if getattr(child, "text", None)
    )
