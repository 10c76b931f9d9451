"""Evidence that stands up: trusted time-stamps of captures (RFC 3161), their checking,
and the evidence bundles a legal team files (captures, screenshots, reports, tokens and a
manifest of their hashes). Import the modules themselves: `bundle` builds on
tracker.findings, which shows the time-stamps."""
