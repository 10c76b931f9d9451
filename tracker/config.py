"""copytrack configuration, read from environment variables.

Every setting is declared once, in ``SETTINGS``: its variable, how its text is read and
checked, its default and its help. ``Settings.from_env`` reads them, errors name the
variable and what it accepts, and the README's configuration table is generated from them
(``python -m tracker.config``; a test checks the README holds the generated table). Every
setting has a default, so a fresh checkout runs with no configuration at all (embedded
servers, data in ``./.copytrack``).
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CRAWL_FRONTIERS = ("memory", "redis")
CRAWL_DISPATCHES = ("local", "queue")
SEARCH_PROVIDERS = ("searxng", "brave")
LOG_FORMATS = ("text", "json")

_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})
# MongoDB refuses these characters in database names (on any platform).
_BAD_DB_CHARS = frozenset('/\\. "$\0')
_KEY_PREFIX = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class ConfigError(ValueError):
    """A COPYTRACK_* variable has a value copytrack cannot use."""


class _Expected(ValueError):
    """Raised by a reader: the value is not usable; the message says what is."""


Reader = Callable[[str], Any]


@dataclass(frozen=True)
class Setting:
    """One environment variable: the field it sets, how it is read, its default, its help."""

    variable: str
    field: str
    read: Reader
    default: str  # the text an unset (or empty) variable stands for
    shown: str  # the default as the docs show it
    help: str


def _url(schemes: tuple[str, ...], unset: str) -> Reader:
    def read(raw: str) -> str | None:
        if not raw:
            return None
        if not raw.startswith(schemes):
            names = ", ".join(schemes[:-1]) + " or " + schemes[-1]
            raise _Expected(f"a URL starting with {names}, or leave it unset {unset}")
        return raw

    return read


def _proxies(raw: str) -> tuple[str, ...]:
    proxies = tuple(p.strip() for p in raw.split(",") if p.strip())
    for proxy in proxies:
        try:
            ipaddress.ip_network(proxy, strict=False)
        except ValueError:
            raise _Expected(
                "IP addresses or networks (10.0.0.2, 10.0.0.0/24) separated by commas"
            ) from None
    return proxies


def _boolean(raw: str) -> bool:
    if raw.lower() not in _TRUE | _FALSE:
        raise _Expected("one of 1/true/yes/on or 0/false/no/off")
    return raw.lower() in _TRUE


def _directory(raw: str) -> Path:
    if "\0" in raw:
        raise _Expected("a directory path")
    # Absolute, so the state file and child processes don't depend on the cwd.
    path = Path(raw).expanduser().resolve()
    if path.exists() and not path.is_dir():
        raise _Expected("a directory (this path exists and is a file)")
    return path


def _pem_file(raw: str) -> Path | None:
    if not raw:
        return None
    path = Path(raw).expanduser().resolve()
    if not path.is_file():
        raise _Expected("a PEM file of certificates (this path is no file)")
    return path


def _time_zone(raw: str) -> str:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(raw)
    except (ZoneInfoNotFoundError, ValueError):
        raise _Expected("an IANA time zone name, such as Asia/Shanghai or UTC") from None
    return raw


def _database(raw: str) -> str:
    if any(c in _BAD_DB_CHARS for c in raw) or len(raw.encode()) >= 64:
        raise _Expected('a database name under 64 bytes without / \\ . " $ or spaces')
    return raw


def _key_prefix(raw: str) -> str:
    if not _KEY_PREFIX.fullmatch(raw):
        raise _Expected("up to 64 letters, digits, '_', '-' or '.'")
    return raw


def _log_level(raw: str) -> str:
    if raw.upper() not in _LOG_LEVELS:
        raise _Expected("one of " + ", ".join(_LOG_LEVELS))
    return raw.upper()


def _secret(raw: str) -> str | None:
    return raw or None


def _whole_number(low: int, high: int, unit: str) -> Reader:
    def read(raw: str) -> int:
        if not (raw.isascii() and raw.isdigit()) or not low <= int(raw) <= high:
            raise _Expected(f"a whole number of {unit} from {low} to {high}")
        return int(raw)

    return read


def _choice(choices: tuple[str, ...]) -> Reader:
    def read(raw: str) -> str:
        if raw.lower() not in choices:
            raise _Expected(" or ".join(choices))
        return raw.lower()

    return read


SETTINGS: tuple[Setting, ...] = (
    Setting("COPYTRACK_MONGO_URL", "mongo_url",
            _url(("mongodb://", "mongodb+srv://"), "for the embedded server"),
            "", "(unset: embedded SecantusDB)", "MongoDB ≥ 6 URL"),
    Setting("COPYTRACK_REDIS_URL", "redis_url",
            _url(("redis://", "rediss://", "unix://"), "for the embedded server"),
            "", "(unset: embedded Valkey)",
            "Redis/Valkey ≥ 7 URL (index, Celery broker, sessions)"),
    Setting("COPYTRACK_INDEX_CLUSTER_URL", "index_cluster_url",
            _url(("redis://", "rediss://"), "to keep the index in COPYTRACK_REDIS_URL"),
            "", "(unset)",
            "a Redis/Valkey Cluster node: the index lives on that cluster instead "
            "(docs/deploy.md)"),
    Setting("COPYTRACK_REDIS_PREFIX", "redis_prefix", _key_prefix, "copytrack", "copytrack",
            "first part of every Redis key (index, queues, sessions, locks): installations "
            "sharing one Redis each need their own"),
    Setting("COPYTRACK_TRUSTED_PROXIES", "trusted_proxies", _proxies, "", "(unset)",
            "reverse proxies whose `X-Forwarded-For` the admin believes"),
    Setting("COPYTRACK_ADMIN_CONNECTIONS", "admin_connections",
            _whole_number(10, 100_000, "connections"), "200", "200",
            "connections the admin keeps open; past it, one waiting for a request is closed "
            "for a new one"),
    Setting("COPYTRACK_ADMIN_CONNECTIONS_PER_CLIENT", "admin_connections_per_client",
            _whole_number(1, 100_000, "connections"), "32", "32",
            "connections the admin keeps open from one address (not counted for "
            "`COPYTRACK_TRUSTED_PROXIES`)"),
    Setting("COPYTRACK_SECURE_COOKIES", "secure_cookies", _boolean, "false", "false",
            "always `Secure`, `__Host-` cookies (set it when the admin is reached only over "
            "HTTPS)"),
    Setting("COPYTRACK_DATA_DIR", "data_dir", _directory, "./.copytrack", "./.copytrack",
            "data, logs and state of the embedded servers"),
    Setting("COPYTRACK_MONGO_DB", "mongo_db", _database, "copytrack", "copytrack",
            "database name"),
    Setting("COPYTRACK_ALLOW_PRIVATE_NETWORKS", "allow_private_networks", _boolean,
            "false", "false",
            "let campaigns crawl private/loopback addresses (tests and the demo)"),
    Setting("COPYTRACK_LOG_LEVEL", "log_level", _log_level, "INFO", "INFO",
            "logging level"),
    Setting("COPYTRACK_LOG_FORMAT", "log_format", _choice(LOG_FORMATS), "text", "text",
            "`json`: one JSON object per log line, with `page_id`, `url`, `campaign`, "
            "`run_id` fields where an event concerns them"),
    Setting("COPYTRACK_VISIBILITY_TIMEOUT", "visibility_timeout",
            _whole_number(1, 10**7, "seconds"), "3600", "3600",
            "seconds before a dead worker's task is redelivered, or a lost scan queued again"),
    Setting("COPYTRACK_CRAWL_FRONTIER", "crawl_frontier", _choice(CRAWL_FRONTIERS),
            "memory", "memory",
            "`redis`: several crawler processes share one queue (scrapy-redis)"),
    Setting("COPYTRACK_CRAWL_DISPATCH", "crawl_dispatch", _choice(CRAWL_DISPATCHES),
            "local", "local",
            "where a run crawls: `local`, a process started where the run is (CLI, "
            "scheduler, admin); `queue`, a task on the `crawl` queue for crawler workers "
            "(`copytrack worker --queues crawl`; the run shows `queued` until one takes it)"),
    Setting("COPYTRACK_SCAN_QUEUE_MAX", "scan_queue_max", _whole_number(0, 10**9, "tasks"),
            "10000", "10000",
            "crawls pause while more scans than this wait for a worker, until half are "
            "done; `0`: no bound"),
    Setting("COPYTRACK_SEARCH_PROVIDER", "search_provider", _choice(SEARCH_PROVIDERS),
            "searxng", "searxng",
            "the search engine `discover` campaigns ask: `searxng` (your own instance) or "
            "`brave` (Brave Search API)"),
    Setting("COPYTRACK_SEARCH_URL", "search_url", _url(("http://", "https://"), ""),
            "", "(unset)",
            "the SearXNG instance (`http://searxng:8080`; `json` among its formats), or "
            "another Brave API endpoint"),
    Setting("COPYTRACK_SEARCH_API_KEY", "search_api_key", _secret, "", "(unset)",
            "the commercial search API's key (sent in a header only, never logged)"),
    Setting("COPYTRACK_SEARCH_DAILY_QUERIES", "search_daily_queries",
            _whole_number(0, 10**7, "queries"), "100", "100",
            "search queries all `discover` campaigns may ask per day (UTC) together; answers "
            "are cached 30 days"),
    Setting("COPYTRACK_MASTER_CACHE_MB", "master_cache_mb", _whole_number(0, 10**6, "MB"),
            "256", "256",
            "work texts each process keeps for matching, least recently used dropped first "
            "(any edit of a work empties it everywhere); `0`: none"),
    Setting("COPYTRACK_INDEX_CACHE_MB", "index_cache_mb", _whole_number(0, 10**6, "MB"),
            "128", "128",
            "index blocks each process keeps after reading them for matching, oldest dropped "
            "first, read again once their shard changed; none while it is under half the "
            "index; `0`: none"),
    Setting("COPYTRACK_TIME_ZONE", "time_zone", _time_zone, "UTC", "UTC",
            "the installation's time zone (IANA, e.g. `Asia/Shanghai`): the admin shows times "
            "in it with their offset, unless a user chose another in their account, and the "
            "dashboard counts findings per day of it; evidence keeps UTC beside it"),
    Setting("COPYTRACK_TSA_URL", "tsa_url",
            _url(("http://", "https://"), "to keep captures without trusted time-stamps"),
            "", "(unset)",
            "an RFC 3161 time-stamping authority: every capture's SHA-256 is time-stamped "
            "there by a worker, retried until it answers (docs/evidence.md)"),
    Setting("COPYTRACK_TSA_CA_FILE", "tsa_ca_file", _pem_file, "", "(unset: the system's)",
            "PEM certificates of the authority's chain, against which the admin verifies "
            "the tokens it shows"),
    Setting("COPYTRACK_SMTP_URL", "smtp_url",
            _url(("smtp://", "smtps://"), "to send no e-mail"), "", "(unset)",
            "the mail relay alerts and notices go through: `smtp://host:587` (STARTTLS "
            "whenever the relay offers it) or `smtps://host:465` (TLS from the start); "
            "`smtp://user:password@host` or the two settings below for its login"),
    Setting("COPYTRACK_SMTP_USER", "smtp_user", _secret, "", "(unset)",
            "the relay's login, when not in `COPYTRACK_SMTP_URL`"),
    Setting("COPYTRACK_SMTP_PASSWORD", "smtp_password", _secret, "", "(unset)",
            "the relay's password (never shown, logged or exported)"),
    Setting("COPYTRACK_SMTP_CA_FILE", "smtp_ca_file", _pem_file, "", "(unset: the system's)",
            "PEM certificates the relay's TLS certificate is verified against"),
    Setting("COPYTRACK_RDAP_BOOTSTRAP_URL", "rdap_bootstrap_url",
            _url(("http://", "https://"), "for IANA's"), "https://data.iana.org/rdap/",
            "https://data.iana.org/rdap/",
            "where the RDAP bootstrap files (`dns.json`, `ipv4.json`, `ipv6.json`) are: which "
            "registry answers for a domain or an address (cached a day)"),
)  # fmt: skip

#: variable -> its declaration.
BY_VARIABLE: dict[str, Setting] = {s.variable: s for s in SETTINGS}


#: field -> its value when its variable is unset (the data directory stays relative
#: until read: resolving it here would check the file system at import).
_DEFAULTS: dict[str, Any] = {
    s.field: Path(s.default) if s.read is _directory else s.read(s.default) for s in SETTINGS
}


@dataclass(frozen=True)
class Settings:
    """Resolved copytrack settings; build with :meth:`Settings.from_env`."""

    mongo_url: str | None = None
    redis_url: str | None = None
    index_cluster_url: str | None = None
    redis_prefix: str = _DEFAULTS["redis_prefix"]
    trusted_proxies: tuple[str, ...] = ()
    admin_connections: int = _DEFAULTS["admin_connections"]
    admin_connections_per_client: int = _DEFAULTS["admin_connections_per_client"]
    secure_cookies: bool = False
    data_dir: Path = _DEFAULTS["data_dir"]
    mongo_db: str = _DEFAULTS["mongo_db"]
    allow_private_networks: bool = False
    log_level: str = _DEFAULTS["log_level"]
    log_format: str = _DEFAULTS["log_format"]
    visibility_timeout: int = _DEFAULTS["visibility_timeout"]
    crawl_frontier: str = _DEFAULTS["crawl_frontier"]
    crawl_dispatch: str = _DEFAULTS["crawl_dispatch"]
    scan_queue_max: int = _DEFAULTS["scan_queue_max"]
    search_provider: str = _DEFAULTS["search_provider"]
    search_url: str | None = None
    search_api_key: str | None = field(default=None, repr=False)
    search_daily_queries: int = _DEFAULTS["search_daily_queries"]
    master_cache_mb: int = _DEFAULTS["master_cache_mb"]
    index_cache_mb: int = _DEFAULTS["index_cache_mb"]
    time_zone: str = _DEFAULTS["time_zone"]
    tsa_url: str | None = None
    tsa_ca_file: Path | None = None
    smtp_url: str | None = field(default=None, repr=False)
    smtp_user: str | None = None
    smtp_password: str | None = field(default=None, repr=False)
    smtp_ca_file: Path | None = None
    rdap_bootstrap_url: str | None = _DEFAULTS["rdap_bootstrap_url"]

    @property
    def embedded_mongo(self) -> bool:
        """True when no MongoDB URL is configured and an embedded server is used."""
        return self.mongo_url is None

    @property
    def embedded_redis(self) -> bool:
        """True when no Redis URL is configured and an embedded server is used."""
        return self.redis_url is None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read settings from ``environ`` (default ``os.environ``).

        Raises ConfigError naming the variable and the accepted values when one is invalid.
        """
        env = os.environ if environ is None else environ
        values = {}
        for setting in SETTINGS:
            raw = env.get(setting.variable, "").strip() or setting.default
            try:
                values[setting.field] = setting.read(raw)
            except _Expected as expected:
                raise _invalid(setting, raw, str(expected)) from None
        return cls(**values)

    def to_env(self) -> dict[str, str]:
        """The COPYTRACK_* variables that give these settings back (``from_env``): the
        environment of a child process that must work on the same installation."""
        return {s.variable: _text(getattr(self, s.field)) for s in SETTINGS}


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


def _invalid(setting: Setting, value: str, expected: str) -> ConfigError:
    # Never echo a password from a URL into logs or terminals.
    value = re.sub(r"//[^/@]*@", "//***@", value)
    return ConfigError(
        f"invalid {setting.variable}={value!r}: set it to {expected} (default: {setting.shown})"
    )


def _code(shown: str) -> str:
    return shown if shown.startswith("(") else f"`{shown}`"


def markdown_table() -> str:
    """The README's configuration table, generated from ``SETTINGS``."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    rows += [f"| `{s.variable}` | {_code(s.shown)} | {s.help} |" for s in SETTINGS]
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
