"""The admin served by uvicorn on 127.0.0.1 in a thread, for tests that need real sockets
(browsers, raw HTTP, forwarded headers)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from admin.app import create_app
from tests.processes import wait_until
from tracker.context import Context
from tracker.runtime.servers import free_port


@contextmanager
def served_admin(ctx: Context, **options: Any) -> Iterator[int]:
    """Serve ctx's admin (uvicorn options as given) until the block ends; yields its port."""
    port = free_port()
    app = create_app(ctx)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", **options)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, 15, "start of the admin")
    # Its findings catalogue loads as it starts: tests look at the lists, not at the
    # page saying they are being prepared (tests/test_admin_cold_start.py does).
    wait_until(lambda: not app.state.catalogue.preparing(), 120, "the findings catalogue")
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=10)
