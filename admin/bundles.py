"""Evidence bundles made with the admin's renderers: the evidence report as PDF and the
offline screenshot (tracker.evidence.bundle assembles them). The CLI's `copytrack evidence
bundle` and the admin's download both come here."""

from __future__ import annotations

from pathlib import Path
from typing import IO

from tracker.context import Context
from tracker.evidence.bundle import Bundled, findings_of, write_bundle
from tracker.findings import Evidence

from .evidence_report import evidence_pdf
from .screenshots import OfflineScreenshots

#: What a bundle can be of.
KINDS = ("finding", "domain", "work")


def make_bundle(ctx: Context, kind: str, subject: str, out: IO[bytes] | Path) -> Bundled:
    """The bundle of the finding, domain or work ``subject`` written to ``out``; raises
    `tracker.evidence.bundle.BundleError` when there is nothing to bundle."""
    finding_ids = findings_of(ctx, kind, subject)

    def report(found: Evidence) -> bytes:
        return evidence_pdf(ctx, found)

    with OfflineScreenshots() as screenshot:
        return write_bundle(ctx, finding_ids, out, report, screenshot, {kind: subject})
