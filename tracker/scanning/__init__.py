"""Crawled pages: storing and scanning them, chapters split over pages, re-checks of
noticed copies, and the re-scans a library edit calls for."""
