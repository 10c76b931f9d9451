"""Fixtures of the evidence tests: a real time-stamping authority on loopback, and an
installation that asks it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.evidence.authority import Authority, running_authority
from tracker.context import Context
from tracker.core.config import Settings
from tracker.masters.generation import open_ready


@pytest.fixture
def authority(tmp_path: Path) -> Iterator[Authority]:
    with running_authority(tmp_path / "tsa") as running:
        yield running


@pytest.fixture
def stamping_ctx(
    tracker_env: dict[str, str], authority: Authority, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Context]:
    """A fresh installation whose captures are time-stamped by ``authority``, whose
    tokens are verified against its CA."""
    monkeypatch.setenv("COPYTRACK_TSA_URL", authority.url)
    monkeypatch.setenv("COPYTRACK_TSA_CA_FILE", str(authority.ca_file))
    context = open_ready(Settings.from_env())
    yield context
    context.close()
