"""Fixtures of the enforcement tests: a mail relay on loopback and contexts that send."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.enforcement.helpers import set_sender
from tests.enforcement.servers import MailBox, smtp_relay
from tracker.context import Context
from tracker.core.config import Settings
from tracker.masters.generation import open_ready


@pytest.fixture
def relay(tracker_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[MailBox]:
    """An SMTP relay on loopback that COPYTRACK_SMTP_URL names."""
    with smtp_relay() as (box, url):
        monkeypatch.setenv("COPYTRACK_SMTP_URL", url)
        yield box


@pytest.fixture
def sender_context(relay: MailBox) -> Iterator[Callable[[], Context]]:
    """Opens contexts on the environment as it is then, with a notice sender in Settings."""
    opened: list[Context] = []

    def open_one() -> Context:
        context = open_ready(Settings.from_env())
        set_sender(context)
        opened.append(context)
        return context

    yield open_one
    for context in opened:
        context.close()
