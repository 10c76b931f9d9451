"""Discovery: sites nobody has listed, found by asking a search engine for the library's
most distinctive sentences (a campaign of kind ``discover``).

One part per module: ``sentences`` picks what to ask, ``providers`` asks (SearXNG, Brave
Search), ``searches`` spends the daily budget and caches answers, ``proposals`` lists the
new sites that turned out to copy works.
"""
