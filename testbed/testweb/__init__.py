"""The local test web: pirate sites generated from the shared corpus, served on loopback.

``build_site`` makes the sites and their ground truth, ``serve`` runs them (one port per
site on 127.0.0.1), ``attacks.ATTACKS`` holds the pirate edits for reuse by evaluators.
"""

from testbed.attacks import ATTACKS, reflow

from .generator import CORPUS_DIR, SITES, WEBPAGES_DIR, Resource, TestWeb, build_site
from .server import LoggedRequest, RunningWeb, serve

__all__ = [
    "ATTACKS",
    "CORPUS_DIR",
    "SITES",
    "WEBPAGES_DIR",
    "LoggedRequest",
    "Resource",
    "RunningWeb",
    "TestWeb",
    "build_site",
    "reflow",
    "serve",
]
