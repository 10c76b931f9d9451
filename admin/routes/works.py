"""The master library: list, upload (validated like `copytrack library add`), where found."""

from __future__ import annotations

import dataclasses
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, File, Form, HTTPException, Query, Request, UploadFile
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from tracker.context import Context
from tracker.core.batches import batched
from tracker.index import MAX_MASTER_ID
from tracker.masters.library import (
    ARCHIVE,
    CHAPTER_CHARS,
    MAX_MASTER_CHARS,
    AddResult,
    Work,
    add_works,
    library_page,
)
from tracker.masters.loaders import (
    DOCUMENT_SUFFIXES,
    HTML_SUFFIXES,
    JSONL_SUFFIXES,
    MAX_FILE_BYTES,
    TEXT_SUFFIXES,
    UNSUPPORTED,
    Loaded,
    LoadError,
    load_works,
)
from tracker.monitoring.heartbeats import has_worker
from tracker.scanning.library_edits import EditResult, delete_work, edit_work, findings_fate

from ..i18n import _
from ..security import Admin, Reviewer, Viewer, app_context, flash
from ..web import MAX_PAGE, redirect, render

router = APIRouter(include_in_schema=False)
PER_PAGE = 50
PREVIEW_CHARS = 3000
UPLOAD_SUFFIXES = (*TEXT_SUFFIXES, *HTML_SUFFIXES, *JSONL_SUFFIXES, *DOCUMENT_SUFFIXES)
_CHUNK = 1 << 20
REGISTER_BATCH = 1000  # works added together (`register`)


@dataclass
class Intake:
    """What registering a batch of works did: one result per master, one error per problem."""

    results: list[tuple[AddResult, str]] = field(default_factory=list)  # (result, title)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what a reviewer may not expect


def register(
    ctx: Context, items: Iterable[Loaded | LoadError], intake: Intake | None = None
) -> Intake:
    """Add works to the library; problems are collected, the other works still go in.

    Works go in batches of REGISTER_BATCH (`add_works`: a few round trips a batch; one work
    at a time took ~10 ms each, 150 works through the API 1.4 s against 0.17)."""
    intake = intake or Intake()
    for batch in batched(items, REGISTER_BATCH):
        loaded = [item for item in batch if not isinstance(item, LoadError)]
        intake.errors += [str(item) for item in batch if isinstance(item, LoadError)]
        # Shown as added: stored only once the index has their postings on disk.
        added = add_works(ctx, [item.work for item in loaded], index_on_disk=True) if loaded else []
        for item, results in zip(loaded, added, strict=True):
            _note_added(intake, item, results)
    return intake


def _note_added(intake: Intake, item: Loaded, results: list[AddResult] | ValueError) -> None:
    """What became of one work: its results, or why it could not go in."""
    if isinstance(results, ValueError):
        intake.errors.append(f"{item.where}: {results}")
        return
    intake.results += [(result, item.work.title or "") for result in results]
    if len(results) > 1:
        intake.notes.append(
            _(
                "%(where)s: %(chars)s characters, registered as one work cut into %(num)s "
                "chapters (%(first)s … %(last)s). If it holds several works, delete it and "
                "upload them as JSONL, one work per line."
            )
            % {
                "where": item.where,
                "chars": f"{len(item.work.text):,}",
                "num": len(results),
                "first": results[0].external_id,
                "last": results[-1].external_id,
            }
        )


def _safe_name(filename: str) -> str:
    name = re.sub(r"[^\w.\-]+", "_", Path(filename).name).strip("._") or "upload"
    return name[:120]


def _loaded(upload: UploadFile, folder: Path, chapters: bool) -> Iterable[Loaded | LoadError]:
    """The works of one uploaded file, through the CLI's loaders (same validation)."""
    shown = upload.filename or "upload"
    name = _safe_name(shown)
    if not name.lower().endswith(UPLOAD_SUFFIXES):
        yield LoadError(shown, UNSUPPORTED)
        return
    path = folder / name
    size = 0
    with path.open("wb") as out:
        while chunk := upload.file.read(_CHUNK):
            size += len(chunk)
            if size > MAX_FILE_BYTES:
                yield LoadError(shown, f"larger than {MAX_FILE_BYTES // 2**20} MB; split it")
                return
            out.write(chunk)
    for item in load_works([path], chapters):
        # The reviewer knows the file by its own name, not by our temporary path.
        where = item.where.replace(str(path), shown)
        if isinstance(item, LoadError):
            yield LoadError(where, item.reason)
        else:
            yield Loaded(where, dataclasses.replace(item.work, source=f"upload:{shown}"))


@router.get("/works")
def works_list(
    request: Request,
    user: Viewer,
    q: Annotated[str, Query(max_length=200)] = "",
    page: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 1,
) -> HTMLResponse:
    ctx = app_context(request)
    masters, page, pages, total = library_page(ctx, page, PER_PAGE, q.strip())
    counts = {
        row["_id"]: row
        for row in ctx.db.findings.aggregate(
            [
                {"$match": {"master_id": {"$in": [m["_id"] for m in masters]}}},
                {
                    "$group": {
                        "_id": "$master_id",
                        "pages": {"$sum": 1},
                        "domains": {"$addToSet": "$domain"},
                    }
                },
            ]
        )
    }
    return render(
        request,
        "works.html",
        masters=masters,
        counts=counts,
        q=q,
        page=page,
        pages=pages,
        total=total,
    )


def _no_scan_worker(ctx: Context) -> str | None:
    """What the library's pages say when no worker scans: the works are registered, but
    no crawled page is matched against them until one runs."""
    if has_worker(ctx, "scan"):
        return None
    return _(
        "No worker is running: crawled pages wait to be scanned, so no finding of these "
        "works comes in. Start one (copytrack worker, or copytrack up)."
    )


def _upload_page(request: Request, intake: Intake | None, status_code: int = 200) -> HTMLResponse:
    return render(
        request,
        "work_upload.html",
        status_code=status_code,
        intake=intake,
        waiting=_no_scan_worker(app_context(request)),
        suffixes=UPLOAD_SUFFIXES,
        # A text file past this size may hold more characters than one work: the browser
        # reads it and counts its chapters before it goes (a character takes 1-4 bytes).
        big_bytes=MAX_MASTER_CHARS,
        max_chars=MAX_MASTER_CHARS,
        chapter_chars=CHAPTER_CHARS,
    )


@router.get("/works/new")
def upload_form(request: Request, user: Reviewer) -> HTMLResponse:
    return _upload_page(request, None)


@router.post("/works/new")
def upload(
    request: Request,
    user: Reviewer,
    files: Annotated[list[UploadFile], File(default_factory=list)],
    text: Annotated[str, Form(max_length=2_000_000)] = "",
    title: Annotated[str, Form(max_length=500)] = "",
    external_id: Annotated[str, Form(max_length=200)] = "",
    author: Annotated[str, Form(max_length=200)] = "",
    chapters: Annotated[bool, Form()] = False,
) -> HTMLResponse:
    ctx = app_context(request)
    intake = Intake()
    with tempfile.TemporaryDirectory(prefix="copytrack-upload-") as folder:
        for upload_file in files:
            if upload_file.filename:
                register(ctx, _loaded(upload_file, Path(folder), chapters), intake)
    if text.strip():
        work = Work(
            text=text,
            external_id=external_id.strip() or None,
            title=title.strip() or None,
            author=author.strip() or None,
            source="upload:pasted",
        )
        register(ctx, [Loaded(work.external_id or "pasted text", work)], intake)
    if not intake.results and not intake.errors:
        intake.errors.append("nothing to add: choose files or paste a text")
    return _upload_page(request, intake, 200 if intake.results or not intake.errors else 400)


MasterId = Annotated[int, PathParam(ge=0, le=MAX_MASTER_ID)]


def _master(ctx: Context, master_id: int, projection: dict[str, int] | None = None) -> dict:
    master = ctx.db.masters.find_one({"_id": master_id}, projection)
    if master is None:
        raise HTTPException(404, _("no such work"))
    return master


@router.get("/works/{master_id}")
def work_detail(request: Request, user: Viewer, master_id: MasterId) -> HTMLResponse:
    ctx = app_context(request)
    master = ctx.db.masters.find_one({"_id": master_id})
    if master is None:
        deleted = ctx.db[ARCHIVE].find_one({"_id": master_id}, {"text": 0})
        if deleted is None:
            raise HTTPException(404, _("no such work"))
        gone = _(
            "work %(work)s was deleted on %(day)s by %(user)s; the findings reviewers decided "
            "on are kept: %(link)s"
        )
        raise HTTPException(
            410,
            gone % {"work": deleted["external_id"], "day": f"{deleted['deleted_at']:%Y-%m-%d}",
                    "user": deleted["deleted_by"], "link": f"/findings?work={master_id}"},
        )  # fmt: skip
    findings = list(
        ctx.db.findings.find({"master_id": master_id}, {"history": 0, "spans": 0})
        .sort([("score", -1), ("_id", 1)])
        .limit(500)
    )
    domains: dict[str, int] = {}
    for finding in findings:
        domains[finding["domain"]] = domains.get(finding["domain"], 0) + 1
    text = master.pop("text", "")
    return render(
        request,
        "work.html",
        master=master,
        waiting=_no_scan_worker(ctx),
        preview=text[:PREVIEW_CHARS],
        truncated=len(text) > PREVIEW_CHARS,
        findings=findings,
        domains=sorted(domains.items(), key=lambda item: (-item[1], item[0])),
    )


def _edit_message(result: EditResult) -> str:
    """What an edit did, and what became of the work's findings."""
    if result.text is None or result.text.status == "unchanged":
        return _("Saved.")
    if result.text.status == "duplicate":
        return _("The text was not changed: %(reason)s.") % {"reason": result.text.detail}
    if not result.rescanned:
        return _("Saved; the new text is matched from now on.")
    closed = result.rescanned - result.still_copied
    figures = {"pages": result.rescanned, "still": result.still_copied, "closed": closed}
    if closed:
        return (
            _(
                "Saved; the new text is matched from now on. The %(pages)s page(s) that copied the "
                "work were scanned again: %(still)s still copy it, %(closed)s no longer do (their "
                "findings are now 'removed')."
            )
            % figures
        )
    return (
        _(
            "Saved; the new text is matched from now on. The %(pages)s page(s) that copied the "
            "work were scanned again: %(still)s still copy it."
        )
        % figures
    )


@router.get("/works/{master_id}/edit")
def edit_form(request: Request, user: Reviewer, master_id: MasterId) -> HTMLResponse:
    master = _master(app_context(request), master_id)
    return render(request, "work_edit.html", master=master, text=master["text"], problem=None,
                  max_chars=MAX_MASTER_CHARS)  # fmt: skip


@router.post("/works/{master_id}/edit")
async def edit_submitted(
    request: Request,
    user: Reviewer,
    master_id: MasterId,
    title: Annotated[str, Form(max_length=500)] = "",
    author: Annotated[str, Form(max_length=200)] = "",
    text: Annotated[str, Form(max_length=MAX_MASTER_CHARS + 10_000)] = "",
) -> Response:
    ctx = app_context(request)
    master = _master(ctx, master_id, {"text": 0})
    # A browser sends CRLF line ends from a textarea: the stored text keeps LF.
    text = text.replace("\r\n", "\n")
    try:
        result = await run_in_threadpool(
            partial(edit_work, ctx, master_id, title=title, author=author, text=text)
        )
    except ValueError as err:
        return render(request, "work_edit.html", status_code=400, problem=str(err),
                      master={**master, "title": title, "author": author}, text=text,
                      max_chars=MAX_MASTER_CHARS)  # fmt: skip
    flash(
        request,
        _edit_message(result),
        "ok" if not result.text or result.text.status != "duplicate" else "warn",
    )
    return redirect(f"/works/{master_id}")


@router.get("/works/{master_id}/delete")
def delete_form(request: Request, user: Admin, master_id: MasterId) -> HTMLResponse:
    """Deleting a work (admins: reviewers edit works, as in the API) asks first."""
    ctx = app_context(request)
    master = _master(ctx, master_id, {"text": 0})
    return render(request, "work_delete.html", master=master, fate=findings_fate(ctx, master_id))


@router.post("/works/{master_id}/delete")
async def delete_submitted(request: Request, user: Admin, master_id: MasterId) -> Response:
    ctx = app_context(request)
    _master(ctx, master_id, {"_id": 1})
    result = await run_in_threadpool(delete_work, ctx, master_id, user.name)
    flash(
        request,
        _(
            "Deleted %(work)s: %(deleted)s finding(s) nobody had decided on went with it; "
            "%(kept)s reviewed finding(s) are kept as records."
        )
        % {
            "work": result.external_id,
            "deleted": result.findings_deleted,
            "kept": result.findings_kept,
        },
    )
    return redirect("/works")
