"""`copytrack evidence`: evidence bundles for a legal team."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from admin.bundles import make_bundle
from admin.i18n import LANGUAGES, language
from tracker.evidence.bundle import BundleError
from tracker.findings.captures import drop_orphaned_images
from tracker.masters.generation import open_ready


@click.group()
def evidence() -> None:
    """Evidence bundles: captures, screenshots, reports and time-stamp tokens."""


@evidence.command()
@click.argument("finding", required=False)
@click.option("--domain", help="Every finding on this domain (and its subdomains).")
@click.option("--work", help="Every finding of this work (external id, id or work id).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The ZIP file to write.")  # fmt: skip
@click.option("--lang", type=click.Choice(sorted(LANGUAGES)), default="en", show_default=True,
              help="Language of the evidence reports.")  # fmt: skip
def bundle(
    finding: str | None, domain: str | None, work: str | None, output: Path, lang: str
) -> None:
    """Write the evidence bundle of FINDING (an id of `copytrack findings --json`), or of
    --domain or --work, to a ZIP: each capture as received with its time-stamp token
    (CAPTURE.tsr), an offline screenshot, the evidence report PDF, and manifest.json listing
    every file's SHA-256 (time-stamped too when COPYTRACK_TSA_URL is set)."""
    asked = [(k, v) for k, v in (("finding", finding), ("domain", domain), ("work", work)) if v]
    if len(asked) != 1:
        raise click.UsageError("give one FINDING id, or --domain, or --work")
    kind, subject = asked[0]
    ctx = open_ready()
    partial = output.with_name(output.name + ".part")
    try:
        with language(lang):
            made = make_bundle(ctx, kind, subject, partial)
        partial.replace(output)  # a bundle cut short by an error is never left as the file
    except BundleError as err:
        click.echo(f"copytrack: {err}", err=True)
        sys.exit(1)
    finally:
        partial.unlink(missing_ok=True)
    for problem in made.problems:
        click.echo(f"warning: {problem}", err=True)
    stamped = "time-stamped" if made.manifest_stamped else "not time-stamped"
    click.echo(
        f"wrote {output}: {made.findings} finding(s), {made.files} files; manifest SHA-256 "
        f"{made.manifest_sha256} ({stamped})"
    )


@evidence.command("sweep-images")
def sweep_images() -> None:
    """Delete the stored images no page names: a process killed between storing a page's
    images and the page (or between a page letting one go and deleting it) leaves them."""
    deleted = drop_orphaned_images(open_ready())
    click.echo(f"deleted {deleted} image file(s) that no page names")
