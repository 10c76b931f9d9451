"""Regression tests of the attacks in docs/security.md; run alone with `make test-security`."""
