"""The master library: works and their fingerprints, loading them from files, the index's
generation (whether the index is the library's), durability barriers and the masters' cache."""
