"""HTML reports as PDF (WeasyPrint), fetching nothing from outside."""

from __future__ import annotations

import io
from collections.abc import Sequence

from .web import STATIC_DIR


def pdf(html: str, attachments: Sequence[tuple[str, bytes, str]] = ()) -> bytes:
    """The report as PDF; WeasyPrint fetches nothing (the stylesheet is given directly).
    ``attachments``: files embedded in the PDF (name, bytes, description)."""
    # Imported here: it takes about a second to load, and only PDF exports need it.
    import weasyprint
    from weasyprint.urls import URLFetcher

    class NoFetch(URLFetcher):
        def fetch(self, url: str, headers: dict | None = None) -> None:
            raise ValueError(f"reports load nothing from outside: {url}")

    document = weasyprint.HTML(string=html, url_fetcher=NoFetch())
    files = [
        weasyprint.Attachment(file_obj=io.BytesIO(data), name=name, description=description)
        for name, data, description in attachments
    ]
    return document.write_pdf(
        stylesheets=[weasyprint.CSS(filename=STATIC_DIR / "print.css")], attachments=files
    )
