"""Two installations sharing one Redis (COPYTRACK_REDIS_PREFIX) keep everything apart."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis

from admin.security import SessionStore
from tests.corpus import texts
from tracker.accounts.users import Principal
from tracker.celery_app import sender_app
from tracker.context import Context
from tracker.core.config import Settings
from tracker.findings import dashboard
from tracker.masters.generation import open_ready
from tracker.masters.library import Work, add_works
from tracker.matching.matcher import match_text
from tracker.runtime.servers import Endpoints


def _installation(endpoints: Endpoints, prefix: str, tmp: str) -> Context:
    return open_ready(
        Settings.from_env(
            {
                "COPYTRACK_MONGO_URL": endpoints.mongo_url,
                "COPYTRACK_REDIS_URL": endpoints.redis_url,
                "COPYTRACK_MONGO_DB": f"test_{uuid.uuid4().hex[:16]}",
                "COPYTRACK_DATA_DIR": tmp,
                "COPYTRACK_REDIS_PREFIX": prefix,
            }
        )
    )


@pytest.fixture
def two(
    endpoints: Endpoints, redis_client: redis.Redis, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Context, Context]]:
    press = _installation(endpoints, "press", str(tmp_path_factory.mktemp("press")))
    novels = _installation(endpoints, "novels", str(tmp_path_factory.mktemp("novels")))
    yield press, novels
    for ctx in (press, novels):
        ctx.db.client.drop_database(ctx.db.name)
        ctx.close()


def test_installations_on_one_redis_share_no_key(
    two: tuple[Context, Context], redis_client: redis.Redis
) -> None:
    press, novels = two
    story = texts("zh_news", 1)[0]
    add_works(press, [Work(story, external_id="p1", title="press story")])

    # The press finds its work; the novels' index, on the same Redis, knows nothing of it.
    assert [m.master.external_id for m in match_text(press, story)] == ["p1"]
    assert match_text(novels, story) == []
    assert dashboard(press)["works"] == 1 and dashboard(novels)["works"] == 0

    # A task sent by the press waits in the press's queue, not in the novels'.
    sender = sender_app("press-sender", press.endpoints.redis_url, press.settings)
    try:
        sender.send_task("tracker.scan_page", args=["0" * 24])
    finally:
        sender.close()
    assert redis_client.llen(press.keys.queue("scan")) == 1
    assert redis_client.llen(novels.keys.queue("scan")) == 0

    # A session of the press's admin is unknown to the novels' admin.
    session = SessionStore(press).create(Principal("editor", "admin"))
    assert SessionStore(press).load(session.sid) is not None
    assert SessionStore(novels).load(session.sid) is None

    # Every key written is under one of the two prefixes.
    strays = [k for k in redis_client.scan_iter("*") if not k.startswith((b"press:", b"novels:"))]
    assert strays == []
