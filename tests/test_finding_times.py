"""A finding's, a work's and a campaign's times name their zone once.

The pages put " UTC" after times that already carry their zone's offset: a Beijing reader
read "2026-12-02 17:30 UTC+8 UTC", which says two different times, and a reader in UTC
"… UTC UTC". The capture's fetch time is evidence: in UTC, the reader's time beside it.
"""

from __future__ import annotations

import re
from datetime import UTC
from zoneinfo import ZoneInfo

from tests.admin_seed import client, login, seed
from tracker.context import Context


def test_times_name_their_zone_once_and_the_fetch_keeps_utc(ctx: Context) -> None:
    seeded = seed(ctx)
    finding = ctx.db.findings.find_one({"_id": seeded.findings[0]})
    page = ctx.db.pages.find_one({"_id": finding["page_id"]})
    http = client(ctx)
    token = login(http, "rui")
    # The seeded campaign runs on a schedule: its page lists the next runs' times.
    paths = (
        f"/findings/{finding['_id']}",
        f"/works/{finding['master_id']}",
        "/campaigns/pirate-sites",
    )
    for path in paths:
        assert not re.search(r"UTC(\+\d+)? UTC", http.get(path).text), path
    http.post("/account/time-zone", data={"csrf_token": token, "time_zone": "Asia/Shanghai"})
    for path in paths:
        shown = http.get(path).text
        assert "UTC+8" in shown and not re.search(r"UTC(\+\d+)? UTC", shown), path
    fetched = page["fetched_at"].astimezone(UTC)
    beijing = fetched.astimezone(ZoneInfo("Asia/Shanghai"))
    assert (
        f"{fetched:%Y-%m-%d %H:%M:%S} UTC ({beijing:%Y-%m-%d %H:%M:%S} UTC+8)"
        in http.get(paths[0]).text
    )
