"""The JSON API keeps the contract its OpenAPI document states, checked by schemathesis,
and a client generated from the document works.

schemathesis (the command-line fuzzer integrators use) reads /api/v1/openapi.json from the
admin served on loopback and sends generated requests, valid and invalid, with the token of
each role: every response must have a documented status code, match the documented schema
and content type; schema-valid requests must be accepted and invalid ones refused; a
request without the token must be refused. Any finding fails the test with its report.

openapi-python-client (the generator integrators use) builds a client package from the
document as the admin serves it, without a token; the client then drives every operation.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from tests.admin_seed import ZH, seed
from tests.served_admin import served_admin
from tracker.accounts.users import create_token
from tracker.context import Context
from tracker.enforcement.deliveries import queue_delivery

ST = Path(sys.executable).with_name("st")  # schemathesis's command, beside this interpreter
GENERATOR = Path(sys.executable).with_name("openapi-python-client")
CLIENT = "copytrack_api_client"  # the package the generator names after the API's title
# No formatter run over the generated code; the PDF's bytes come back as a File.
GENERATOR_CONFIG = {
    "post_hooks": [],
    "content_type_overrides": {"application/pdf": "application/octet-stream"},
}
EXAMPLES = 15  # generated requests per operation and phase; a bound, so the suite stays quick
# Every role calls each operation with its examples: what it may call is answered, the rest
# refused. The boundary cases (coverage) and the random fuzzing go to the admin, who may
# call every operation: an operation validates its input alike for every role, so the
# lower roles' boundary cases would only repeat the admin's (~20 CPU s each).
ROLES = (
    ("ada", "admin", "examples,coverage,fuzzing"),
    ("rui", "reviewer", "examples"),
    ("vic", "viewer", "examples"),
)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "role", "phases"), ROLES, ids=[r[1] for r in ROLES])
def test_the_api_keeps_its_documented_contract(
    ctx: Context, tmp_path: Path, name: str, role: str, phases: str
) -> None:
    seed(ctx, pages=6)
    token = create_token(ctx, name, f"{role} contract test", role=role)
    with served_admin(ctx) as port:
        done = subprocess.run(
            [
                str(ST), "run", f"http://127.0.0.1:{port}/api/v1/openapi.json",
                "--header", f"Authorization: Bearer {token}",
                "--checks", "all",
                "--phases", phases,
                "--max-examples", str(EXAMPLES),
                "--generation-deterministic",
                "--workers", "1",
                "--request-timeout", "30",
                # Speed is measured in benchmarks/: only a hang fails here (a PDF report
                # can take over schemathesis's default 10 s on a loaded machine).
                "--max-response-time", "30",
                "--no-color",
            ],
            capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


@pytest.fixture
def generated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Where the generated client goes; importable from there, forgotten afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [name for name in sys.modules if name.split(".")[0] == CLIENT]:
        del sys.modules[name]


def _generate(base: str, folder: Path) -> None:
    document = httpx.get(f"{base}/api/v1/openapi.json")  # no token: the document is public
    assert document.status_code == 200
    (folder / "openapi.json").write_bytes(document.content)
    (folder / "config.json").write_text(json.dumps(GENERATOR_CONFIG))
    done = subprocess.run(
        [str(GENERATOR), "generate", "--path", "openapi.json", "--config", "config.json",
         "--meta", "none"],
        capture_output=True, text=True, timeout=300, check=False, cwd=folder,
    )  # fmt: skip
    # A warning means an operation or a schema the client leaves out.
    assert done.returncode == 0 and "Warning" not in done.stdout, done.stdout + done.stderr


def _operation(tag: str, name: str) -> ModuleType:
    return importlib.import_module(f"{CLIENT}.api.{tag}.{name}")


def _models() -> Any:
    return importlib.import_module(f"{CLIENT}.models")


@pytest.mark.slow
def test_a_generated_client_drives_every_operation(
    ctx: Context, generated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seeded = seed(ctx, pages=6)
    tokens = {role: create_token(ctx, name, f"{role} client", role=role) for name, role, _ in ROLES}
    monkeypatch.setattr("tracker.campaigns.dispatch.launch_crawl", lambda ctx, name, run_id: None)
    with served_admin(ctx) as port:
        base = f"http://127.0.0.1:{port}"
        _generate(base, generated)
        client_module = importlib.import_module(CLIENT)
        m = _models()
        admin, reviewer, viewer = (
            client_module.AuthenticatedClient(base_url=base, token=tokens[role])
            for role in ("admin", "reviewer", "viewer")
        )

        # Findings: listed with a named sort order, their statuses an enum.
        listed = _operation("findings", "list_findings").sync(
            client=viewer, status="confirmed", sort=m.FindingSort.SCORE_DESC, per_page=200
        )
        assert listed.total == len(listed.items) > 0
        assert {item.status for item in listed.items} == {m.FindingStatus.CONFIRMED}
        scores = [item.score for item in listed.items]
        assert scores == sorted(scores, reverse=True)
        confirmed = str(seeded.findings[2])
        one = _operation("findings", "get_finding").sync(confirmed, client=viewer)
        assert one.id == confirmed and one.history[0].status == "new"
        missing = _operation("findings", "get_finding").sync("0" * 24, client=viewer)
        assert isinstance(missing, m.Problem) and missing.detail.startswith("no finding")
        changed = _operation("findings", "update_finding").sync(
            str(seeded.xss),
            client=reviewer,
            body=m.StatusIn(status=m.ReviewStatus.CONFIRMED, note="via the client"),
        )
        assert changed.status == m.FindingStatus.CONFIRMED
        refused = _operation("findings", "update_finding").sync(
            str(seeded.xss), client=viewer, body=m.StatusIn(status=m.ReviewStatus.DISMISSED)
        )
        assert isinstance(refused, m.Problem) and "reviewer" in refused.detail

        # Notices: drafted, recorded, listed; the evidence report.
        draft = _operation("notices", "draft_notice").sync(
            confirmed, client=reviewer, lang=m.NoticeLanguage.EN
        )
        assert draft.lang == m.NoticeLanguage.EN and "示例报业集团" in draft.body
        notice = _operation("notices", "record_notice").sync(
            confirmed,
            client=reviewer,
            body=m.NoticeIn(
                lang=m.NoticeLanguage.EN,
                subject=draft.subject,
                body=draft.body,
                recipient="abuse@pirate.example",
            ),
        )
        assert isinstance(notice, m.NoticeOut) and notice.by == "rui"
        assert notice.deadline.date() == draft.deadline
        notices = _operation("notices", "list_notices").sync(confirmed, client=viewer)
        assert [n.id for n in notices] == [notice.id]

        # Outcomes: the finding's timeline ends with the notice; the funnel counts it.
        steps = _operation("enforcement", "get_finding_timeline").sync(confirmed, client=viewer)
        assert steps[0].kind == m.StepKind.FOUND and steps[-1].kind == m.StepKind.NOTICE_SENT
        assert steps[-1].by == "rui" and steps[-1].to == ["abuse@pirate.example"]
        assert m.StepKind.REVIEWED in [s.kind for s in steps]
        rows = _operation("enforcement", "get_funnel").sync(client=viewer, by=m.FunnelBy.DOMAIN)
        [row] = [r for r in rows if r.key == one.domain]
        assert row.found >= row.confirmed >= row.notified >= 1
        works = _operation("enforcement", "get_funnel").sync(client=viewer, by=m.FunnelBy.WORK)
        assert sum(r.notified for r in works) == sum(r.notified for r in rows)
        report = _operation("evidence", "get_evidence_report").sync(confirmed, client=viewer)
        assert report.payload.read(5) == b"%PDF-"

        # Alerts: subscribed by a reviewer (the secret never comes back), listed, the
        # delivery log paged, unsubscribed.
        hook = m.SubscriptionIn(
            name="client hook",
            to=m.WebhookChannel(channel="webhook", url="http://127.0.0.1:9/in", secret="s3cret"),
            when=[m.AlertEvent.CONFIRMED],
            every=m.AlertFrequency.HOUR,
        )
        refused = _operation("alerts", "create_subscription").sync(client=viewer, body=hook)
        assert isinstance(refused, m.Problem) and "reviewer" in refused.detail
        made = _operation("alerts", "create_subscription").sync(client=reviewer, body=hook)
        assert made.secret_set and made.by == "rui" and made.every == m.AlertFrequency.HOUR
        taken = _operation("alerts", "create_subscription").sync(client=reviewer, body=hook)
        assert isinstance(taken, m.Problem) and "exists" in taken.detail
        subs = _operation("alerts", "list_subscriptions").sync(client=viewer)
        assert [(s.name, s.when) for s in subs] == [("client hook", [m.AlertEvent.CONFIRMED])]
        stored = ctx.db.subscriptions.find_one({"name": "client hook"})
        queue_delivery(
            ctx, stored, subject="copytrack: 1 confirmed finding", text="…", payload={},
            finding_ids=[seeded.findings[2]], run_ids=[], events={"confirmed": 1},
            at=datetime.now(UTC),
        )  # fmt: skip
        log = _operation("alerts", "get_deliveries").sync(
            client=viewer, subscription="client hook", state=m.DeliveryState.PENDING
        )
        assert log.total == 1 and log.items[0].finding_ids == [confirmed]
        assert log.items[0].to == ["http://127.0.0.1:9/in"]
        gone = _operation("alerts", "delete_subscription").sync("client hook", client=reviewer)
        assert gone.name == "client hook"
        again = _operation("alerts", "delete_subscription").sync("client hook", client=reviewer)
        assert isinstance(again, m.Problem)

        # Works: added, listed, read, edited, deleted (by an admin only).
        added = _operation("works", "add_works").sync(
            client=reviewer,
            body=m.WorksIn(works=[m.WorkIn(id="client-1", title="客户端", text=ZH[10])]),
        )
        assert added.results[0].status == m.WorkResultStatus.ADDED
        master_id = added.results[0].master_id
        works = _operation("works", "list_works").sync(client=viewer, q="client-1")
        assert [w.master_id for w in works.items] == [master_id]
        work = _operation("works", "get_work").sync(master_id, client=viewer)
        assert work.text == ZH[10] and work.title == "客户端"
        edited = _operation("works", "edit_work").sync(
            master_id, client=reviewer, body=m.WorkEditIn(title="客户端（改）")
        )
        assert edited.work.title == "客户端（改）"
        checked = _operation("check", "check_text").sync(
            client=viewer, body=m.CheckIn(text="转载：" + ZH[10])
        )
        assert checked.matches[0].work_id == "client-1"
        not_yours = _operation("works", "delete_work").sync(master_id, client=reviewer)
        assert isinstance(not_yours, m.Problem)
        deleted = _operation("works", "delete_work").sync(master_id, client=admin)
        assert deleted.work_id == "client-1"

        # Campaigns: listed, run, stopped; the run states an enum.
        campaigns = _operation("campaigns", "list_campaigns").sync(client=viewer)
        assert [c.name for c in campaigns] == ["pirate-sites"]
        started = _operation("campaigns", "run_campaign").sync("pirate-sites", client=admin)
        stopped = _operation("campaigns", "stop_campaign").sync("pirate-sites", client=admin)
        assert stopped.id == started.run_id and stopped.state == m.RunState.CANCELLED
        assert stopped.cancelled.by == "ada"
        runs = _operation("campaigns", "list_runs").sync("pirate-sites", client=viewer)
        assert [r.state for r in runs[:2]] == [m.RunState.CANCELLED, m.RunState.FINISHED]
        again = _operation("campaigns", "stop_campaign").sync("pirate-sites", client=admin)
        assert isinstance(again, m.Problem) and "no run under way" in again.detail

        # Health: any token.
        health = _operation("health", "get_health").sync(client=viewer)
        assert health.servers["mongo"].ok and health.servers["redis"].ok
