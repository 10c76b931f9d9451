"""Matching a text against the library: the matcher, its process pool and the index audit."""
