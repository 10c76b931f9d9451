"""The `copytrack` command line on real servers: library add/list/rm, check, bad input."""

from __future__ import annotations

import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from copytrack.cli import main
from copytrack.commands.check import SMALL_FILE_BYTES
from tests.corpus import documents, texts
from tracker.core.config import Settings
from tracker.masters.generation import open_ready

ZH = texts("zh_news", 12)
CHECK = [sys.executable, "-c", "from copytrack.cli import run; run()", "check"]


@pytest.fixture
def run(tracker_env):
    runner = CliRunner()

    def invoke(*args: str, stdin: str | None = None):
        return runner.invoke(main, list(args), input=stdin, catch_exceptions=False)

    return invoke


@pytest.fixture
def files(tmp_path):
    """A directory of works, good and bad, as a publisher might hand them over."""
    root = tmp_path / "works"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text(ZH[0], encoding="utf-8")
    (root / "sub" / "b.md").write_text(ZH[1], encoding="utf-8")
    (root / "c-gbk.txt").write_bytes(ZH[2].replace("\xa0", " ").encode("gbk", "ignore"))
    (root / "d.html").write_text(
        "<html><head><title>D</title></head><body><article><h1>D</h1>"
        + "".join(f"<p>{p}</p>" for p in ZH[3].split("\n"))
        + "</article></body></html>",
        encoding="utf-8",
    )
    (root / "binary.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" * 20)
    (root / "empty.txt").write_text("", encoding="utf-8")
    (root / "latin1.txt").write_bytes("Café crème brûlée, déjà vu".encode("latin-1") * 5)
    (root / "notes.odt").write_bytes(b"PK\x03\x04")  # skipped: not a supported type
    (root / "master.pdf").write_bytes(b"%PDF-1.4")  # a master, but cut short: reported
    lines = [
        json.dumps({"id": d["id"], "title": d["title"], "text": d["text"]}, ensure_ascii=False)
        for d in documents("zh_news", 12)[4:8]
    ]
    lines.insert(2, "{not json")
    lines.insert(3, json.dumps({"id": "no-text"}))
    (root / "more.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_every_command_is_listed_in_help_and_runs_under_its_name():
    """Commands are imported when run: each name in `copytrack --help` resolves to the
    command of that name, and one that does not exist says so."""
    runner = CliRunner()
    listed = runner.invoke(main, ["--help"]).output
    ctx = main.make_context("copytrack", ["--help"], resilient_parsing=True)
    for name in main.list_commands(ctx):
        assert f"  {name} " in listed
        assert main.get_command(ctx, name).name == name
        assert runner.invoke(main, [name, "--help"]).exit_code == 0
    wrong = runner.invoke(main, ["chek"])
    assert wrong.exit_code == 2 and "No such command 'chek'" in wrong.output


def test_library_add_reports_bad_files_and_loads_the_rest(run, files):
    result = run("library", "add", str(files))
    assert result.exit_code == 1
    added = [line.split("\t") for line in result.stdout.splitlines()]
    assert sorted(row[1] for row in added) == sorted(
        ["a", "b", "c-gbk", "d", *[d["id"] for d in documents("zh_news", 12)[4:8]]]
    )
    assert all(row[0] == "added" for row in added)
    errors = result.stderr
    assert "binary.txt: binary file" in errors
    assert "empty.txt: no text found" in errors
    assert "latin1.txt: not UTF-8 text" in errors and "convert the file to UTF-8" in errors
    assert "more.jsonl:3: invalid JSON" in errors
    assert 'more.jsonl:4: no "text"' in errors
    assert "notes.odt" not in errors
    assert "master.pdf: a PDF that cannot be read" in errors
    assert "8 added, 6 failed" in errors

    again = run("library", "add", str(files))
    assert {line.split("\t")[0] for line in again.stdout.splitlines()} == {"unchanged"}


def test_library_add_shows_its_progress_against_the_works_it_counted_first(run, tmp_path):
    lines = [
        json.dumps({"id": f"w{n}", "text": t}, ensure_ascii=False) for n, t in enumerate(ZH[:5])
    ]
    works = tmp_path / "works.jsonl"  # a blank line, and no newline after the last work
    works.write_text(lines[0] + "\n\n" + "\n".join(lines[1:]), encoding="utf-8")
    result = run("library", "add", "--progress", str(works))
    assert result.exit_code == 0 and len(result.stdout.splitlines()) == 5
    assert "100%" in result.stderr and "5/5" in result.stderr


def test_library_add_reads_gzip_jsonl_and_says_where_damaged_gzip_breaks(run, tmp_path):
    lines = [json.dumps({"id": f"w{n}", "text": t}, ensure_ascii=False) for n, t in enumerate(ZH)]
    data = gzip.compress(("\n".join(lines) + "\n").encode())
    (tmp_path / "whole.jsonl.gz").write_bytes(data)
    whole = run("library", "add", "--progress", str(tmp_path / "whole.jsonl.gz"))
    assert whole.exit_code == 0 and len(whole.stdout.splitlines()) == len(ZH)
    assert f"{len(ZH)}/{len(ZH)}" in whole.stderr

    more = [
        json.dumps({"id": f"v{n}", "text": t[::-1]}, ensure_ascii=False) for n, t in enumerate(ZH)
    ]
    data = gzip.compress(("\n".join(more) + "\n").encode())
    (tmp_path / "cut.jsonl.gz").write_bytes(data[: len(data) * 2 // 3])  # a download cut short
    cut = run("library", "add", str(tmp_path / "cut.jsonl.gz"))
    added = cut.stdout.splitlines()
    assert cut.exit_code == 1 and 0 < len(added) < len(ZH)
    assert f"cut.jsonl.gz:{len(added) + 1}: not readable as gzip" in cut.stderr
    assert "compress the file again" in cut.stderr and "Traceback" not in cut.stderr

    (tmp_path / "garbled.jsonl.gz").write_bytes(data[:10] + bytes(range(256)) * 4)
    garbled = run("library", "add", str(tmp_path / "garbled.jsonl.gz"))
    assert garbled.exit_code == 1 and not garbled.stdout
    assert "garbled.jsonl.gz:1: not readable as gzip" in garbled.stderr


def test_library_list_and_rm(run, files):
    run("library", "add", str(files / "a.txt"), str(files / "sub"))
    listed = run("library", "list", "--json").stdout.splitlines()
    assert [json.loads(line)["external_id"] for line in listed] == ["a", "b"]
    assert run("library", "rm", "a").stdout == "removed\ta\t0 findings deleted, 0 kept as records\n"
    missing = run("library", "rm", "a")
    assert missing.exit_code == 1 and "no work 'a'" in missing.stderr
    assert [
        json.loads(line)["external_id"]
        for line in run("library", "list", "--json").stdout.splitlines()
    ] == ["b"]


def test_check_prints_the_copied_work_with_passages(run, files, tmp_path):
    run("library", "add", str(files / "a.txt"))
    suspect = tmp_path / "suspect.txt"
    suspect.write_text("转载自某网站：\n" + ZH[0][:500] + "\n" + ZH[9], encoding="utf-8")
    out = run("check", str(suspect)).stdout
    assert out.startswith("a — a\n")
    assert "of the work" in out and "work [" in out and "text [" in out
    assert run("check", "-", stdin=ZH[10]).stdout.startswith("no match")


def test_check_jsonl_writes_one_line_per_pair(run, files, tmp_path):
    run("library", "add", str(files / "a.txt"), str(files / "sub"))
    suspects = tmp_path / "suspects.jsonl"
    suspects.write_text(
        "\n".join(
            [
                json.dumps({"id": "s1", "text": ZH[0] + ZH[1]}, ensure_ascii=False),
                json.dumps({"id": "s2", "text": ZH[11]}, ensure_ascii=False),
                "][",
                json.dumps({"id": "s3", "text": ZH[1]}, ensure_ascii=False),
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    result = run("check", "--jsonl", str(suspects))
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    # Matched by several threads, printed in the file's order.
    assert [r["suspect_id"] for r in rows] == ["s1", "s1", "s3"]
    assert sorted((r["suspect_id"], r["master_id"]) for r in rows) == [
        ("s1", "a"),
        ("s1", "b"),
        ("s3", "b"),
    ]
    assert set(rows[0]) == {
        "suspect_id",
        "master_id",
        "score",
        "master_coverage",
        "suspect_coverage",
        "latency_ms",
    }
    assert result.exit_code == 1 and "suspects.jsonl:3: invalid JSON" in result.stderr


def _many_suspects(path, count: int) -> None:
    """count suspects of a few thousand characters as JSONL at path: in turn copies of ZH[0]
    and ZH[1], and a text copying neither."""
    rows = [
        json.dumps({"id": f"s{n}", "text": ZH[n % 3] + ZH[9 + n % 3]}, ensure_ascii=False)
        for n in range(count)
    ]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


def test_check_jsonl_on_several_processes_prints_what_one_does(run, files, tmp_path, tracker_env):
    # Past SMALL_FILE_BYTES per process the suspects go to worker processes, in batches:
    # the pairs and their order are those of matching them all here.
    run("library", "add", str(files / "a.txt"), str(files / "sub"))
    # The add leaves the library's size counted for the checks that follow (each of their
    # processes would wait for one to count it).
    ctx = open_ready(Settings.from_env(tracker_env))
    try:
        assert ctx.redis.get(ctx.keys.library_size) == b"2"
    finally:
        ctx.close()
    suspects = tmp_path / "suspects.jsonl"
    _many_suspects(suspects, 1500)
    assert suspects.stat().st_size > 2 * SMALL_FILE_BYTES

    def pairs(processes: str) -> list[tuple[str, str]]:
        # As a user runs it (a process of its own, which forks its workers).
        result = subprocess.run(
            [*CHECK, "--processes", processes, "--jsonl", str(suspects)],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        rows = map(json.loads, result.stdout.splitlines())
        return [(row["suspect_id"], row["master_id"]) for row in rows]

    alone = pairs("1")
    assert len(alone) == 1500 * 2 // 3  # ZH[0] copies a, ZH[1] copies b, ZH[2] neither
    assert pairs("3") == alone


def test_check_jsonl_reports_a_killed_matching_process_in_one_line(run, files, tmp_path):
    run("library", "add", str(files / "sub"))
    suspects = tmp_path / "suspects.jsonl"
    _many_suspects(suspects, 3000)
    command = subprocess.Popen(
        [*CHECK, "--processes", "2", "--jsonl", str(suspects)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        os.kill(_a_worker(command.pid), signal.SIGKILL)
        out, err = command.communicate(timeout=120)
    finally:
        command.kill()
    assert command.returncode == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"a process matching {suspects} died" in err
    assert all(json.loads(line)["master_id"] == "b" for line in out.splitlines())


def _a_worker(pid: int) -> int:
    """A matching process of the command pid, once it has one: forked by the command itself
    (no forkserver: it ran no thread yet)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for child in _children(pid):
            command = _cmdline(child)
            assert b"forkserver" not in command
            if b"resource_tracker" not in command:
                return child
        time.sleep(0.05)
    raise AssertionError("no worker process started")


def _children(pid: int) -> list[int]:
    """The child processes of pid (of any of its threads)."""
    threads = Path(f"/proc/{pid}/task").iterdir()
    return [int(child) for thread in threads for child in (thread / "children").read_text().split()]


def _cmdline(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def test_console_script_exits_with_all_its_output_and_its_status(run, files, tmp_path):
    # The console script (`run`) skips the interpreter's teardown: every line printed into
    # a pipe must still arrive, and the exit status stay the command's.
    run("library", "add", str(files / "sub"))
    suspects = tmp_path / "suspects.jsonl"
    rows = [json.dumps({"id": f"s{n}", "text": ZH[1]}, ensure_ascii=False) for n in range(40)]
    suspects.write_text("\n".join(rows) + "\n", encoding="utf-8")
    script = [sys.executable, "-c", "from copytrack.cli import run; run()", "check", "--jsonl"]
    done = subprocess.run([*script, str(suspects)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["suspect_id"] for line in done.stdout.splitlines()] == [
        f"s{n}" for n in range(40)
    ]
    suspects.write_text(rows[0] + "\n][\n", encoding="utf-8")
    done = subprocess.run([*script, str(suspects)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert len(done.stdout.splitlines()) == 1
    assert "suspects.jsonl:2: invalid JSON" in done.stderr


def test_bad_configuration_is_one_clear_line(run, monkeypatch):
    monkeypatch.setenv("COPYTRACK_REDIS_URL", "http://nope")
    result = CliRunner().invoke(main, ["library", "list"])
    assert result.exit_code == 2
    assert "invalid COPYTRACK_REDIS_URL" in result.output


def test_admin_on_a_busy_port_says_so_in_one_line(tracker_env):
    """A second admin on a port another serves stops with one line naming the port."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "copytrack.cli", "admin", "--port", str(port)],
            env=os.environ | tracker_env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert f"cannot listen on 127.0.0.1:{port} (Address already in use)" in last, done.stderr
    assert "another --port" in last and "Traceback" not in done.stderr
