"""Subcommands of the `copytrack` command line, one module per area."""
