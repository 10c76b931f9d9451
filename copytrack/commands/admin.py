"""`copytrack admin`: serve the reviewers' web app and the JSON API."""

from __future__ import annotations

import os
import socket
from typing import Any

import click

from tracker.core.config import Settings
from tracker.masters.generation import open_ready


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535))
def admin(host: str, port: int) -> None:
    """Serve the admin (dashboard, findings, works, campaigns, API) with uvicorn."""
    from admin.app import create_app
    from crawler.fetch import fetch_page  # the admin's "check a URL" fetches like a crawl

    ctx = open_ready()
    if not ctx.db.users.count_documents({"role": "admin"}, limit=1):
        click.echo(
            "copytrack: no admin user yet: create one with `copytrack user add NAME --role admin`",
            err=True,
        )
    app = create_app(ctx, fetch_page=fetch_page)
    serve_admin(app, ctx.settings, host, port, f"copytrack admin on http://{host}:{port}/", "info")


def serve_admin(
    app: Any, settings: Settings, host: str, port: int, announce: str, log_level: str
) -> None:
    """Listen on ``host:port``, say ``announce``, then serve ``app``: whoever connects
    once it is said is answered, not refused."""
    import uvicorn  # only serving needs a web server

    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        listening = socket.create_server((host, port), family=family)
    except OSError as err:
        raise click.ClickException(
            f"cannot listen on {host}:{port} ({os.strerror(err.errno or 0)}): stop what serves it, "
            f"or give another --port"
        ) from None
    click.echo(announce)
    # log_config=None: uvicorn's loggers go through copytrack's handler (COPYTRACK_LOG_FORMAT).
    config = uvicorn.Config(app, log_level=log_level, log_config=None, **server_options(settings))
    uvicorn.Server(config).run(sockets=[listening])


def server_options(settings: Settings) -> dict[str, Any]:
    """uvicorn's settings for the admin: idle keep-alive connections close after 5 s; a
    request head must come within 5 s, at most COPYTRACK_ADMIN_CONNECTIONS_PER_CLIENT
    connections per address and COPYTRACK_ADMIN_CONNECTIONS in all (admin.connections;
    bodies are bounded by admin.limits); X-Forwarded-For is believed only from
    COPYTRACK_TRUSTED_PROXIES (uvicorn would trust it from loopback by default)."""
    from admin.connections import ConnectionLimits, guarded_protocol  # imports uvicorn

    limits = ConnectionLimits(
        total=settings.admin_connections,
        per_client=settings.admin_connections_per_client,
        unbounded=settings.trusted_proxies,
    )
    return {
        "http": guarded_protocol(limits),
        "timeout_keep_alive": 5,
        # uvicorn's limit counts connections too: above the guard's total, it bounds only
        # requests still running after their client left.
        "limit_concurrency": 2 * settings.admin_connections,
        "proxy_headers": bool(settings.trusted_proxies),
        "forwarded_allow_ips": ",".join(settings.trusted_proxies) or "",
    }
