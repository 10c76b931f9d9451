"""Campaign definitions: validation, YAML/JSON import with clear errors, storage, the CLI."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from copytrack.cli import main
from tracker.campaigns import (
    Campaign,
    CampaignBusy,
    CampaignError,
    due_at,
    get_campaign,
    load_campaign_file,
    remove_campaign,
    save_campaign,
    start_run,
)
from tracker.context import Context

GOOD = {"name": "news-sites", "seeds": ["https://pirate.example.com/", "https://x.example/rss"]}


def test_defaults_and_domains() -> None:
    assert Campaign.from_dict({**GOOD, "name": "盗版小说站_2"}).name == "盗版小说站_2"
    campaign = Campaign.from_dict(GOOD)
    assert campaign.enabled and campaign.schedule is None and campaign.max_depth is None
    assert campaign.domains() == ("pirate.example.com", "x.example")
    ported = Campaign.from_dict({**GOOD, "allowed_domains": ["127.0.0.1:8001", "Example.COM."]})
    assert ported.domains() == ("127.0.0.1:8001", "example.com")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": "bad name"}, "name: 'bad name' is not a valid name"),
        ({"name": "盗版/站"}, "name: '盗版/站' is not a valid name"),
        ({"name": "_hidden"}, "name: '_hidden' is not a valid name"),
        ({"seeds": []}, "seeds: give at least one seed URL"),
        ({"seeds": ["ftp://x.example/"]}, "seeds: 'ftp://x.example/' is not an http(s) URL"),
        ({"seeds": "https://x.example/", "sedes": []}, "unknown field(s) sedes"),
        (
            {"allowed_domains": ["https://x.example/path"]},
            "allowed_domains: 'https://x.example/path'",
        ),
        ({"allow": ["(unclosed"]}, "allow: '(unclosed' is not a valid regular expression"),
        ({"schedule": "61 * * * *"}, "schedule: '61 * * * *' is not a cron expression"),
        ({"max_pages": 0}, "max_pages: expected a whole number ≥ 1, got 0"),
        ({"max_depth": True}, "max_depth: expected a whole number ≥ 0, got True"),
        ({"delay": -1}, "delay: expected a number ≥ 0"),
        ({"enabled": "yes"}, "enabled: expected true or false"),
    ],
)
def test_invalid_definitions_say_what_is_wrong(change: dict, message: str) -> None:
    with pytest.raises(CampaignError) as err:
        Campaign.from_dict({**GOOD, **change})
    assert message in str(err.value)


def test_import_yaml_and_json(tmp_path: Path) -> None:
    yaml_file = tmp_path / "c.yaml"
    yaml_file.write_text(
        "campaigns:\n"
        "  - name: daily\n"
        "    seeds: [https://a.example/sitemap.xml]\n"
        "    schedule: '0 3 * * *'\n"
        "    deny: ['/login']\n"
        "  - name: once\n"
        "    seeds: https://b.example/\n"
        "    max_depth: 2\n"
    )
    daily, once = load_campaign_file(yaml_file)
    assert daily.schedule == "0 3 * * *" and daily.deny == ("/login",)
    assert once.seeds == ("https://b.example/",) and once.max_depth == 2
    json_file = tmp_path / "c.json"
    json_file.write_text(json.dumps(GOOD))
    assert load_campaign_file(json_file) == [Campaign.from_dict(GOOD)]


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("bad.yaml", "campaigns:\n  - name: x\n   seeds: [", "not valid YAML (line 3, column 4)"),
        ("bad.json", '{"name": "x",}', "not valid JSON (line 1, column 14)"),
        ("list.yaml", "- 3\n", "campaign #1 (no name): a campaign must be a mapping"),
        ("empty.yaml", "", "expected a campaign, a list of campaigns"),
        ("twice.yaml", "- {name: a, seeds: [http://a.example/]}\n"
                       "- {name: a, seeds: [http://b.example/]}\n", "name 'a' appears twice"),
        ("field.yaml", "name: a\nseeds: [http://a.example/]\nmax_pages: many\n",
         "campaign #1 (a): max_pages: expected a whole number"),
    ],
)  # fmt: skip
def test_bad_files_give_clear_errors(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(CampaignError) as err:
        load_campaign_file(path)
    assert str(err.value).startswith(str(path)) and message in str(err.value)


def test_private_seeds_are_refused_unless_allowed(ctx: Context) -> None:
    for seed in ("http://127.0.0.1:8080/", "http://10.1.2.3/", "http://169.254.169.254/",
                 "http://[::1]/", "http://localhost/"):  # fmt: skip
        with pytest.raises(CampaignError, match=r"refused: .* (loopback|private|link-local)"):
            save_campaign(ctx, Campaign.from_dict({"name": "lan", "seeds": [seed]}))
    assert ctx.db.campaigns.count_documents({}) == 0


def test_storage_replace_and_remove(ctx: Context, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ctx, "settings", replace(ctx.settings, allow_private_networks=True))
    local = {"name": "local", "seeds": ["http://127.0.0.1:9/"]}
    assert save_campaign(ctx, Campaign.from_dict(local)) == "added"
    with pytest.raises(CampaignError, match="exists"):
        save_campaign(ctx, Campaign.from_dict(local))
    assert save_campaign(ctx, Campaign.from_dict(local), replace=True) == "unchanged"
    changed = Campaign.from_dict({**local, "max_pages": 5})
    assert save_campaign(ctx, changed, replace=True) == "updated"
    assert get_campaign(ctx, "local") == changed
    run_id = start_run(ctx, "local")
    with pytest.raises(CampaignBusy) as busy:
        start_run(ctx, "local")
    assert busy.value.run_id == str(run_id)
    with pytest.raises(CampaignBusy):
        remove_campaign(ctx, "local")  # not while it runs
    ctx.redis.delete(ctx.keys.campaign_lock("local"))
    remove_campaign(ctx, "local")
    with pytest.raises(CampaignError, match="no campaign named 'local'"):
        get_campaign(ctx, "local")


def test_due_at_is_the_latest_fire_time() -> None:
    assert due_at("0 * * * *", datetime(2024, 1, 1, 10, 0, tzinfo=UTC)).hour == 10
    assert due_at("0 * * * *", datetime(2024, 1, 1, 10, 59, tzinfo=UTC)).hour == 10
    assert due_at("0 3 * * *", datetime(2024, 1, 1, 2, 0, tzinfo=UTC)).day == 31


def test_cli_add_list_show_rm(tracker_env: dict[str, str], tmp_path: Path) -> None:
    runner = CliRunner()
    added = runner.invoke(main, ["campaign", "add", "c1", "--seed", "http://127.0.0.1:9/",
                                 "--schedule", "0 3 * * *"])  # fmt: skip
    assert added.exit_code == 1 and "loopback" in added.output  # private networks not allowed
    env = {"COPYTRACK_ALLOW_PRIVATE_NETWORKS": "1"}
    args = ["campaign", "add", "c1", "--seed", "http://127.0.0.1:9/", "--deny", "/login",
            "--schedule", "0 3 * * *", "--depth", "3"]  # fmt: skip
    assert runner.invoke(main, args, env=env).exit_code == 0
    listed = runner.invoke(main, ["campaign", "list"]).output
    assert listed.startswith("c1\tenabled\t0 3 * * *\t1 seed(s)\tnever run")
    shown = runner.invoke(main, ["campaign", "show", "c1"]).output
    assert "/login" in shown and "max_depth        3" in shown and "none yet" in shown
    bad = runner.invoke(main, ["campaign", "add", "c2", "--seed", "http://x.example/",
                               "--schedule", "every day"])  # fmt: skip
    assert bad.exit_code == 1 and "not a cron expression" in bad.output
    assert runner.invoke(main, ["campaign", "rm", "c1"]).exit_code == 0
    missing = runner.invoke(main, ["campaign", "show", "c1"])
    assert missing.exit_code == 1 and "no campaign named 'c1'" in missing.output
