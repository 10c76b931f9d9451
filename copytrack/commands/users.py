"""`copytrack user add|list|rm|passwd` and `copytrack token create|list|revoke`."""

from __future__ import annotations

import sys

import click

from tracker.accounts.users import (
    MAX_TOKEN_DAYS,
    ROLES,
    TOKEN_DAYS,
    UserError,
    add_user,
    create_token,
    list_tokens,
    list_users,
    remove_user,
    revoke_token,
    set_password,
)
from tracker.masters.generation import open_ready


def _password(from_stdin: bool) -> str:
    """The new password: the first line of stdin, or typed twice at a hidden prompt."""
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    return click.prompt("Password", hide_input=True, confirmation_prompt=True)


def _fail(err: Exception) -> None:
    click.echo(f"copytrack: {err}", err=True)
    sys.exit(1)


_PASSWORD_STDIN = click.option(
    "--password-stdin", is_flag=True, help="Read the password from the first line of stdin."
)


@click.group()
def user() -> None:
    """Manage the admin's users (roles: viewer, reviewer, admin)."""


@user.command()
@click.argument("name")
@click.option("--role", type=click.Choice(ROLES), default="reviewer", show_default=True)
@_PASSWORD_STDIN
def add(name: str, role: str, password_stdin: bool) -> None:
    """Create user NAME; asks for the password (there is no default password)."""
    ctx = open_ready()
    try:
        add_user(ctx, name, _password(password_stdin), role)
    except UserError as err:
        _fail(err)
    click.echo(f"added\t{name}\t{role}")


@user.command(name="list")
def list_() -> None:
    """List users: name, role, creation time."""
    for doc in list_users(open_ready()):
        click.echo(f"{doc['_id']}\t{doc['role']}\t{doc['created_at']:%Y-%m-%d %H:%M}")


@user.command()
@click.argument("name")
def rm(name: str) -> None:
    """Remove user NAME and revoke its API tokens."""
    try:
        remove_user(open_ready(), name)
    except UserError as err:
        _fail(err)
    click.echo(f"removed\t{name}")


@user.command()
@click.argument("name")
@_PASSWORD_STDIN
@click.option("--keep-tokens", is_flag=True, help="Keep NAME's API tokens (revoked by default).")
def passwd(name: str, password_stdin: bool, keep_tokens: bool) -> None:
    """Set a new password for NAME (ends its sessions and revokes its API tokens)."""
    try:
        set_password(open_ready(), name, _password(password_stdin), keep_tokens=keep_tokens)
    except UserError as err:
        _fail(err)
    click.echo(f"password changed\t{name}")


@click.group()
def token() -> None:
    """Manage API tokens for integrations (sent as `Authorization: Bearer TOKEN`)."""


@token.command()
@click.argument("user_name", metavar="USER")
@click.option("--label", required=True, help="What uses the token, e.g. 'CMS import'.")
@click.option("--role", type=click.Choice(ROLES), help="Lower rights than the user's.")
@click.option(
    "--days",
    type=click.IntRange(1, MAX_TOKEN_DAYS),
    default=TOKEN_DAYS,
    show_default=True,
    help="How long the token works.",
)
def create(user_name: str, label: str, role: str | None, days: int) -> None:
    """Create a token acting as USER and print it (only once: it is stored hashed)."""
    try:
        click.echo(create_token(open_ready(), user_name, label, role, days=days))
    except UserError as err:
        _fail(err)


@token.command(name="list")
@click.option("--user", "user_name", help="Only this user's tokens.")
def list_tokens_(user_name: str | None) -> None:
    """List tokens: id, user, role, label, last use, expiry."""
    for doc in list_tokens(open_ready(), user_name):
        used = f"{doc['last_used']:%Y-%m-%d %H:%M}" if doc.get("last_used") else "never"
        expires = f"{doc['expires_at']:%Y-%m-%d}"
        if doc.get("dated_at"):  # made before tokens expired: dated when first used or listed
            expires += f" (set {doc['dated_at']:%Y-%m-%d}: made before tokens expired)"
        click.echo(
            f"{doc['_id']}\t{doc['user']}\t{doc['role']}\t{doc['label']}\t{used}\texpires {expires}"
        )


@token.command()
@click.argument("token_id")
def revoke(token_id: str) -> None:
    """Revoke the token with id TOKEN_ID (the part after `ct_`)."""
    if not revoke_token(open_ready(), token_id):
        _fail(LookupError(f"no token {token_id!r} (see `copytrack token list`)"))
    click.echo(f"revoked\t{token_id}")
