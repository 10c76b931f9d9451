"""Administration: users and roles, the notice sender, the whitelist of licensed domains."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response

from tracker.accounts.users import (
    ROLES,
    UserError,
    add_user,
    list_tokens,
    list_users,
    remove_user,
    set_password,
    set_role,
)
from tracker.findings import (
    SENDER_FIELDS,
    WorkflowError,
    add_licensed_domain,
    decisions_relabelled_by_adding,
    decisions_relabelled_by_removing,
    list_licensed_domains,
    notice_sender,
    remove_licensed_domain,
    set_notice_sender,
)

from ..i18n import _
from ..security import Admin, UserAdmin, Viewer, app_context, flash
from ..web import redirect, render

router = APIRouter(include_in_schema=False)
Password = Annotated[str, Form(max_length=1024)]


@router.get("/users")
def users(request: Request, user: UserAdmin) -> HTMLResponse:
    ctx = app_context(request)
    return render(
        request, "users.html", users=list_users(ctx), tokens=list_tokens(ctx), roles=ROLES
    )


def _user_action(request: Request, done: str, action: Callable[[], None]) -> Response:
    try:
        action()
    except UserError as err:
        flash(request, str(err), "error")
    else:
        flash(request, done)
    return redirect("/users")


@router.post("/users")
def user_add(
    request: Request,
    user: UserAdmin,
    name: Annotated[str, Form(max_length=64)],
    role: Annotated[str, Form()],
    password: Password,
    repeat: Password,
) -> Response:
    if password != repeat:
        flash(request, _("The two passwords differ."), "error")
        return redirect("/users")
    ctx = app_context(request)
    done = _("User %(name)s added.") % {"name": name}
    return _user_action(request, done, lambda: add_user(ctx, name, password, role))


@router.post("/users/{name}/role")
def user_role(
    request: Request, user: UserAdmin, name: str, role: Annotated[str, Form()]
) -> Response:
    ctx = app_context(request)
    done = _("%(name)s is now %(role)s.") % {"name": name, "role": _(role)}
    return _user_action(request, done, lambda: set_role(ctx, name, role))


@router.post("/users/{name}/password")
def user_password(request: Request, user: UserAdmin, name: str, password: Password) -> Response:
    ctx = app_context(request)
    done = _("Password of %(name)s reset.") % {"name": name}
    return _user_action(request, done, lambda: set_password(ctx, name, password))


@router.post("/users/{name}/delete")
def user_delete(request: Request, user: UserAdmin, name: str) -> Response:
    if name == user.name:
        flash(request, _("You cannot remove yourself: ask another admin."), "error")
        return redirect("/users")
    ctx = app_context(request)
    done = _("User %(name)s removed.") % {"name": name}
    return _user_action(request, done, lambda: remove_user(ctx, name))


@router.get("/settings")
def settings(request: Request, user: Admin) -> HTMLResponse:
    return render(
        request, "settings.html", sender=notice_sender(app_context(request)), fields=SENDER_FIELDS
    )


@router.post("/settings")
async def save_settings(request: Request, user: Admin) -> Response:
    form = await request.form()
    values = {name: str(form.get(name) or "") for name in SENDER_FIELDS}
    try:
        set_notice_sender(app_context(request), **values)
    except WorkflowError as err:
        flash(request, str(err), "error")
        # The form as typed, to be corrected.
        return render(
            request, "settings.html", sender=values, fields=SENDER_FIELDS, status_code=400
        )
    flash(request, _("Settings saved."))
    return redirect("/settings")


@router.get("/whitelist")
def whitelist(request: Request, user: Viewer) -> HTMLResponse:
    return render(request, "whitelist.html", entries=list_licensed_domains(app_context(request)))


@router.post("/whitelist")
def whitelist_add(
    request: Request,
    user: Admin,
    domain: Annotated[str, Form(max_length=300)],
    note: Annotated[str, Form(max_length=2000)] = "",
    confirm: Annotated[bool, Form()] = False,
) -> Response:
    ctx = app_context(request)
    try:
        decided = decisions_relabelled_by_adding(ctx, domain)
        if decided and not confirm:
            return _confirm_page(request, "add", domain, decided, note)
        count = add_licensed_domain(ctx, domain, user.name, note)
    except WorkflowError as err:
        flash(request, str(err), "error")
    else:
        flash(
            request,
            _("%(domain)s is licensed; %(num)s finding(s) on it marked licensed.")
            % {"domain": domain, "num": count},
        )
    return redirect("/whitelist")


def _confirm_page(
    request: Request, action: str, domain: str, decided: dict[str, int], note: str = ""
) -> HTMLResponse:
    """Ask before a whitelist change relabels findings reviewers decided on."""
    return render(
        request,
        "whitelist.html",
        entries=list_licensed_domains(app_context(request)),
        pending={"action": action, "domain": domain, "note": note, "decided": decided},
    )


@router.post("/whitelist/{domain}/delete")
def whitelist_remove(
    request: Request, user: Admin, domain: str, confirm: Annotated[bool, Form()] = False
) -> Response:
    ctx = app_context(request)
    try:
        decided = decisions_relabelled_by_removing(ctx, domain)
        if decided and not confirm:
            return _confirm_page(request, "remove", domain, decided)
        count = remove_licensed_domain(ctx, domain, user.name)
    except WorkflowError as err:
        flash(request, str(err), "error")
    else:
        flash(
            request,
            _("%(domain)s removed from the whitelist; %(num)s finding(s) restored.")
            % {"domain": domain, "num": count},
        )
    return redirect("/whitelist")
