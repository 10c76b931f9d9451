"""Matching batches on worker processes (`check --jsonl`): what this process would find."""

from __future__ import annotations

import time

from tests.adding import add_texts
from tests.corpus import texts
from tracker.matching.match_pool import MatchPool
from tracker.matching.matcher import match_texts

ZH = texts("zh_news", 40)


def test_batches_matched_here_and_in_workers_get_what_this_process_gets(ctx):
    add_texts(ctx, ZH[:20], "m")
    batches = [[ZH[n % 40][100:1500], ZH[(n + 7) % 40]] for n in range(40)]
    expected = [match_texts(ctx, batch) for batch in batches]

    def found(timed):
        return [[m.master.external_id for m in matches] for matches, _ in timed]

    # This process runs threads (its MongoDB client's): the workers come from a forkserver
    # (forked from the command itself in `check --jsonl`: tests/test_cli.py).
    with MatchPool(ctx.settings, 2) as pool:
        pool.match_here(ctx)
        # Until its workers are up, the pool matches here; then they take every batch.
        early = [pool.submit(batch) for batch in batches]
        deadline = time.monotonic() + 60
        while not pool.in_workers and time.monotonic() < deadline:
            time.sleep(0.02)
        assert pool.in_workers
        late = [pool.submit(batch) for batch in batches]
        for futures in (early, late):
            assert [found(f.result()) for f in futures] == [
                [[m.master.external_id for m in matches] for matches in batch] for batch in expected
            ]
    assert sum(bool(ids) for batch in expected for ids in batch) >= 30  # copies found
