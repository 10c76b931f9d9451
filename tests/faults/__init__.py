"""The fault suite: what survives what (docs/operations.md), on the real embedded servers.

Each module reproduces one kind of failure of issue #13 and asserts that nothing
acknowledged is lost, no finding is wrongly closed, nothing is duplicated, and every failure
prints one line that names the input or server and what to do:

- ``test_index_loss``: an index wiped, of another build or short of postings (item 1);
- ``test_restarts``: kill -9 / restart of Valkey and SecantusDB under running workers and
  clients (item 2); a worker killed in the middle of a task is
  ``tests/test_tasks.py::test_task_of_a_killed_worker_runs_again_and_nothing_is_lost``;
- ``test_durability``: acknowledged writes and printed results across kill -9 (item 3);
- ``test_disk_full``: a 5 MB data dir, full, then grown; a read-only one (item 4, root only);
- ``test_error_lines``: bad inputs and dead servers end in one line each (item 7).

Racing ``library add`` runs (item 5) and interrupted adds and updates (item 6) get their
modules here, ``test_racing_adds`` and ``test_interrupted_adds``, with the ingest rewrite.
"""
