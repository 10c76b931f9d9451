"""Evidence downloads: a capture's time-stamp token, and evidence bundles (ZIP) of a
finding, a domain or a work."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import FileResponse, Response
from starlette.background import BackgroundTask

from tracker.evidence.bundle import BundleError
from tracker.findings import parse_object_id

from ..bundles import KINDS, make_bundle
from ..i18n import _
from ..security import Viewer, app_context
from ..web import download

router = APIRouter(include_in_schema=False)


@router.get("/pages/{page_id}/timestamp.tsr")
def timestamp_token(request: Request, user: Viewer, page_id: str) -> Response:
    """The RFC 3161 token of the page's current capture (DER TimeStampResp)."""
    try:
        oid = parse_object_id(page_id)
    except ValueError:
        raise HTTPException(404, _("no such page")) from None
    page = app_context(request).db.pages.find_one({"_id": oid}, {"timestamp": 1, "raw_sha256": 1})
    stamp = None if page is None else page.get("timestamp")
    if page is None or not stamp or stamp.get("sha256") != page.get("raw_sha256"):
        raise HTTPException(404, _("this capture has no time-stamp token yet"))
    return download(
        bytes(stamp["token"]), "application/timestamp-reply", f"{page['raw_sha256'][:16]}.tsr"
    )


@router.get("/evidence/bundle")
def evidence_bundle(
    request: Request,
    user: Viewer,
    finding: Annotated[str, Query(max_length=100)] = "",
    domain: Annotated[str, Query(max_length=300)] = "",
    work: Annotated[str, Query(max_length=200)] = "",
) -> Response:
    """A ZIP of the captures, screenshots, reports and tokens of a finding, a domain or a
    work (exactly one of them)."""
    asked = [(kind, value) for kind, value in zip(KINDS, (finding, domain, work), strict=True)
             if value]  # fmt: skip
    if len(asked) != 1:
        raise HTTPException(400, _("Ask for the bundle of one finding, domain or work."))
    kind, subject = asked[0]
    handle, path = tempfile.mkstemp(prefix="copytrack-bundle-", suffix=".zip")
    os.close(handle)
    try:
        make_bundle(app_context(request), kind, subject, Path(path))
    except BundleError as err:
        os.unlink(path)
        raise HTTPException(404, str(err)) from None
    except BaseException:
        os.unlink(path)
        raise
    name = "".join(c if c.isalnum() or c in ".-" else "-" for c in subject)[:80]
    return FileResponse(
        path,
        media_type="application/zip",
        filename=f"copytrack-evidence-{kind}-{name}.zip",
        background=BackgroundTask(os.unlink, path),
    )
