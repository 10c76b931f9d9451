"""Which TLS library pymongo uses, settled before pymongo is imported (by importing this
module first).

pymongo takes pyOpenSSL for TLS whenever it is installed, and Scrapy installs it: importing
pymongo then also imports pyOpenSSL, cryptography and requests (for OCSP), 0.15 s of every
command's start, though copytrack's embedded MongoDB and most installations speak no TLS.
Unless the MongoDB URL mentions TLS (``tls``/``ssl`` options, or ``mongodb+srv://``, which
implies it), pymongo is told pyOpenSSL is absent and uses Python's ``ssl`` module, as it
does on any machine without pyOpenSSL. A URL with TLS keeps pyOpenSSL, and its OCSP checks.
"""

from __future__ import annotations

import os
import sys


def mentions_tls(url: str) -> bool:
    """Whether a MongoDB URL asks for TLS, or may (any TLS option, even set to false)."""
    url = url.strip().lower()
    return url.startswith("mongodb+srv://") or "tls" in url or "ssl" in url


if "pymongo" not in sys.modules and not mentions_tls(os.environ.get("COPYTRACK_MONGO_URL", "")):
    # An import of a module set to None raises ImportError: pymongo falls back to ssl.
    # (typeshed's sys.modules holds modules only; None is what the import system reads.)
    sys.modules.setdefault("pymongo.pyopenssl_context", None)  # type: ignore[arg-type]
