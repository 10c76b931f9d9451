"""The copytrack domain: master library, inverted index, matcher, findings, campaigns, in
packages ordered as layers (pyproject.toml's contract; docs/architecture.md, "Inside
tracker/"): the domain over the wiring (context, celery_app) over index, runtime and core."""
