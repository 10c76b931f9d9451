"""The library's pages say when no worker scans (where a scan waits).

Works uploaded to an installation without a worker were registered, but no crawled page
was matched against them and nothing said so: the upload page and a work's page now say
that no worker is running, and stop saying it once one is.
"""

from __future__ import annotations

from pathlib import Path

from tests.admin_seed import PASSWORD, ZH, client, login
from tests.processes import wait_until, worker_process
from tracker.accounts.users import add_user
from tracker.context import Context
from tracker.masters.library import Work, add_work

NOTICE = "No worker is running: crawled pages wait to be scanned"


def test_the_upload_and_work_pages_say_when_no_worker_scans(
    crawl_ctx: Context, tmp_path: Path
) -> None:
    ctx = crawl_ctx
    add_user(ctx, "rita", PASSWORD, "reviewer")
    master_id = add_work(ctx, Work(text=ZH[0], title="新闻", external_id="news-1"))[0].master_id
    http = client(ctx)
    login(http, "rita")
    pages = ("/works/new", f"/works/{master_id}")
    for path in pages:
        assert NOTICE in http.get(path).text, path
    log = tmp_path / "worker.log"
    with worker_process(ctx, log, queues="scan"):
        # The worker's heartbeat reaches the admin within seconds of its start.
        wait_until(lambda: NOTICE not in http.get(pages[0]).text, 60, "a heartbeat", log)
        assert NOTICE not in http.get(pages[1]).text
        assert "news-1" in http.get(pages[1]).text


def test_the_notice_is_in_chinese_for_a_chinese_reader(crawl_ctx: Context) -> None:
    add_user(crawl_ctx, "rita", PASSWORD, "reviewer")
    http = client(crawl_ctx)
    http.headers["Accept-Language"] = "zh-CN,zh;q=0.9"
    login(http, "rita")
    page = http.get("/works/new").text
    assert "没有正在运行的扫描进程：抓取到的页面都在等待扫描" in page and NOTICE not in page
