"""``python -m testbed.testweb``: generate the test web, save its truth, optionally serve it."""

from __future__ import annotations

import argparse
import threading
from collections import Counter
from pathlib import Path

from .generator import CORPUS_DIR, WEBPAGES_DIR, build_site
from .server import serve


def main(argv: list[str] | None = None) -> int:
    """Generate (and with --serve, serve until Ctrl-C) the local test web."""
    parser = argparse.ArgumentParser(prog="python -m testbed.testweb", description=__doc__)
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("testweb"),
        help="where truth.json and masters.jsonl go (default: ./testweb)",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--masters", type=int, default=60, help="size of the master library")
    parser.add_argument("--pages", type=int, default=150, help="article pages from the corpus")
    parser.add_argument("--real-pages", type=int, default=10, help="real pages on clean-site")
    parser.add_argument("--corpus", type=Path, default=CORPUS_DIR)
    parser.add_argument("--serve", action="store_true", help="serve until Ctrl-C")
    parser.add_argument(
        "--port-base",
        type=int,
        default=0,
        help="first port (sites take consecutive ports); default: free ports",
    )
    args = parser.parse_args(argv)

    web = build_site(
        args.out,
        args.corpus,
        args.seed,
        args.masters,
        args.pages,
        webpages_dir=WEBPAGES_DIR,
        n_real_pages=args.real_pages,
    )
    per_site = Counter(a["site"] for a in web.articles())
    copies = sum(1 for a in web.articles() if a["copies"])
    print(
        f"{len(web.masters)} masters, {sum(per_site.values())} article pages "
        f"({copies} copies) on {len(web.sites)} sites; truth in {args.out}/truth.json, "
        f"library in {args.out}/masters.jsonl"
    )
    if not args.serve:
        return 0
    with serve(web, port_base=args.port_base) as running:
        for site, url in running.base_urls.items():
            print(f"  {site:<14} {url}/  ({per_site[site]} articles)")
        print("Serving on 127.0.0.1; Ctrl-C to stop.", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
