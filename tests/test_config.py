"""Settings.from_env: defaults, parsing, and clear errors for bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracker.core.config import README_SETTINGS, SETTINGS, ConfigError, Settings, markdown_table


def test_defaults() -> None:
    s = Settings.from_env({})
    assert s.mongo_url is None and s.redis_url is None
    assert s.embedded_mongo and s.embedded_redis
    assert s.data_dir == Path("./.copytrack").resolve()
    assert s.data_dir.is_absolute()
    assert s.mongo_db == "copytrack"
    assert s.allow_private_networks is False
    assert s.log_level == "INFO"
    assert s.scan_queue_max == 10_000
    assert s.crawl_frontier == "memory" and s.crawl_dispatch == "local"


def test_all_values(tmp_path: Path) -> None:
    s = Settings.from_env(
        {
            "COPYTRACK_MONGO_URL": "mongodb://db.example:27017/",
            "COPYTRACK_REDIS_URL": " redis://cache.example:6379/2 ",
            "COPYTRACK_DATA_DIR": str(tmp_path / "d"),
            "COPYTRACK_MONGO_DB": "ct_prod",
            "COPYTRACK_ALLOW_PRIVATE_NETWORKS": "yes",
            "COPYTRACK_LOG_LEVEL": "debug",
            "COPYTRACK_SCAN_QUEUE_MAX": "0",
            "COPYTRACK_CRAWL_FRONTIER": "Redis",
            "COPYTRACK_CRAWL_DISPATCH": " queue ",
        }
    )
    assert s.mongo_url == "mongodb://db.example:27017/"
    assert s.redis_url == "redis://cache.example:6379/2"
    assert s.data_dir == tmp_path / "d"
    assert s.mongo_db == "ct_prod"
    assert s.allow_private_networks is True
    assert s.log_level == "DEBUG"
    assert s.scan_queue_max == 0  # no bound
    assert s.crawl_frontier == "redis" and s.crawl_dispatch == "queue"
    assert not s.embedded_mongo and not s.embedded_redis


def test_empty_url_means_embedded() -> None:
    s = Settings.from_env({"COPYTRACK_MONGO_URL": "", "COPYTRACK_REDIS_URL": "  "})
    assert s.mongo_url is None and s.redis_url is None


def test_reads_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COPYTRACK_MONGO_DB", "from_env")
    assert Settings.from_env().mongo_db == "from_env"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("1", True), ("true", True), ("YES", True), ("on", True),
     ("0", False), ("false", False), ("No", False), ("", False)],
)  # fmt: skip
def test_bool_values(raw: str, expected: bool) -> None:
    env = {"COPYTRACK_ALLOW_PRIVATE_NETWORKS": raw}
    assert Settings.from_env(env).allow_private_networks is expected


@pytest.mark.parametrize(
    ("name", "value", "hint"),
    [
        ("COPYTRACK_MONGO_URL", "localhost:27017", "mongodb://"),
        ("COPYTRACK_REDIS_URL", "http://x", "redis://"),
        ("COPYTRACK_MONGO_DB", "a.b", "database name"),
        ("COPYTRACK_MONGO_DB", "x" * 64, "database name"),
        ("COPYTRACK_ALLOW_PRIVATE_NETWORKS", "maybe", "1/true/yes/on"),
        ("COPYTRACK_LOG_LEVEL", "LOUD", "DEBUG, INFO"),
        ("COPYTRACK_VISIBILITY_TIMEOUT", "0", "seconds from 1"),
        ("COPYTRACK_SCAN_QUEUE_MAX", "lots", "tasks from 0"),
        ("COPYTRACK_CRAWL_FRONTIER", "disk", "memory or redis"),
        ("COPYTRACK_CRAWL_DISPATCH", "celery", "local or queue"),
    ],
)
def test_rejects_bad_values(name: str, value: str, hint: str) -> None:
    with pytest.raises(ValueError, match=name) as err:
        Settings.from_env({name: value})
    assert hint in str(err.value)
    assert "set it to" in str(err.value)


def test_data_dir_that_is_a_file(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ValueError, match="COPYTRACK_DATA_DIR"):
        Settings.from_env({"COPYTRACK_DATA_DIR": str(f)})


def test_url_password_not_echoed() -> None:
    with pytest.raises(ValueError) as err:
        Settings.from_env({"COPYTRACK_REDIS_URL": "http://user:s3cret@host/"})
    assert "s3cret" not in str(err.value)


def test_the_readme_shows_the_generated_table_of_a_first_installations_settings() -> None:
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    assert markdown_table() in readme, "run `make docs`"
    shown = [s.variable for s in SETTINGS if f"| `{s.variable}` |" in readme]
    assert sorted(shown) == sorted(README_SETTINGS)
    # The rest: in the deployment guide's table (tests/test_deploy.py checks it holds all).
    assert "(docs/deploy.md#configuration)" in readme


def test_a_redis_prefix_names_one_installation() -> None:
    assert Settings.from_env({}).redis_prefix == "copytrack"
    assert Settings.from_env({"COPYTRACK_REDIS_PREFIX": "press-2"}).redis_prefix == "press-2"
    with pytest.raises(ConfigError, match=r"COPYTRACK_REDIS_PREFIX='a b'.*letters, digits"):
        Settings.from_env({"COPYTRACK_REDIS_PREFIX": "a b"})


def test_settings_survive_the_trip_through_a_child_environment(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {
            "COPYTRACK_MONGO_URL": "mongodb://db.example:27017/",
            "COPYTRACK_TRUSTED_PROXIES": "10.0.0.2, 10.1.0.0/16",
            "COPYTRACK_SECURE_COOKIES": "yes",
            "COPYTRACK_DATA_DIR": str(tmp_path / "d"),
            "COPYTRACK_REDIS_PREFIX": "press",
            "COPYTRACK_SCAN_QUEUE_MAX": "0",
            "COPYTRACK_CRAWL_DISPATCH": "queue",
        }
    )
    assert Settings.from_env(settings.to_env()) == settings
    assert Settings.from_env(Settings.from_env({}).to_env()) == Settings.from_env({})
