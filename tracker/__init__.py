"""The copytrack domain: master library, inverted index, matcher, findings, campaigns."""
