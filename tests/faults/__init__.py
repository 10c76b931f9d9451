"""The fault suite: what survives what (docs/operations.md), on the real embedded servers.

Each module reproduces one kind of failure and asserts that nothing
acknowledged is lost, no finding is wrongly closed, nothing is duplicated, and every failure
prints one line that names the input or server and what to do:

- ``test_index_loss``: an index wiped, of another build or short of postings (item 1);
- ``test_restarts``: kill -9 / restart of Valkey and SecantusDB under running workers and
  clients (item 2); a worker killed in the middle of a task is
  ``tests/test_tasks.py::test_task_of_a_killed_worker_runs_again_and_nothing_is_lost``;
- ``test_racing_adds``: two `library add` runs of the same texts at once (item 5);
- ``test_interrupted_adds``: an update killed midway, shown and finished (item 6);
- ``test_disk_full``: the data dir's disk filling up during `library add`, or full before
  the servers start (item 4; a tmpfs, so root only: skipped with the reason elsewhere);
- ``test_one_line_errors``: bad inputs, servers that do not answer, a read-only data dir
  (item 7);
- ``test_hostile_input``: file names that are not UTF-8, lone surrogates, integers past 64
  bits and fields named as the library's keys in JSONL, UTF-16 texts;
- ``test_removal_races``: `library rm` racing the scans of the work's copies;
- ``test_stack_stop``: `copytrack down` under `copytrack up`, crawls included;
- ``test_crawl_follows_servers``: a crawl under way when the servers move to other ports;
- ``test_crawl_frontier_lost``: a crawl's shared Redis frontier deleted under it;
- ``test_full_disk_crawl``: the disk filling up during a crawl, freed later or not;
- ``test_small_faults``: FIFOs given to `check --jsonl` and `campaign import`, `status` on a
  full disk, a URL redirecting to itself.

`test_index_loss` also covers index blocks lost with their counters kept (a single block
too, found by the shards' counts of their blocks), `test_racing_adds` a racer's removal and
a racing add's give-back forced between the two counts' readings, `test_interrupted_adds`
Valkey killed during an update, `test_restarts` a worker stopped by SIGTERM mid-scan.

Durable acknowledged writes (item 3) rest on SecantusDB's sync-on-commit and
`tracker.masters.durability.wait_durable`.
"""
