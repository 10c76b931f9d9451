"""Bytes → text: decoding (BOM, header, meta, GB18030, detector), article extraction, and a
CPU-time cap for both. A leaf package: it knows nothing of Scrapy, Redis or MongoDB, so the
crawler, the library loader and `copytrack check` share it.
"""

from .cpucap import CpuTimeExceeded, cpu_cap
from .decoding import Decoded, UnusableContent, decode_html, sniff_binary
from .documents import NoArticleText, decode_text_file, html_to_text
from .extraction import Extracted, ExtractionOptions, extract, published_date

__all__ = [
    "CpuTimeExceeded",
    "Decoded",
    "Extracted",
    "ExtractionOptions",
    "NoArticleText",
    "UnusableContent",
    "cpu_cap",
    "decode_html",
    "decode_text_file",
    "extract",
    "html_to_text",
    "published_date",
    "sniff_binary",
]
