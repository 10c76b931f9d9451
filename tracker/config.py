"""copytrack configuration, read from environment variables.

Every setting has a documented default, so a fresh checkout runs with no
configuration at all (embedded servers, data in ``./.copytrack``).

=================================  ===============  ==========================================
variable                           default          meaning
=================================  ===============  ==========================================
COPYTRACK_MONGO_URL                (unset)          MongoDB URL (``mongodb://`` or
                                                    ``mongodb+srv://``). Unset or empty: start
                                                    an embedded SecantusDB on loopback.
COPYTRACK_REDIS_URL                (unset)          Redis URL (``redis://``, ``rediss://`` or
                                                    ``unix://``). Unset or empty: start an
                                                    embedded Valkey on loopback.
COPYTRACK_INDEX_CLUSTER_URL        (unset)          A node of a Redis/Valkey Cluster
                                                    (``redis://host:port``) that holds the
                                                    index instead of COPYTRACK_REDIS_URL
                                                    (which keeps the queues and sessions).
COPYTRACK_TRUSTED_PROXIES          (unset)          Addresses (comma-separated, CIDR allowed)
                                                    of reverse proxies whose X-Forwarded-For
                                                    the admin believes; unset: none, the
                                                    client is the connecting address.
COPYTRACK_SECURE_COOKIES           false            Always mark the admin's cookies ``Secure``
                                                    with the ``__Host-`` prefix (set it when
                                                    the admin is reached only over HTTPS).
COPYTRACK_DATA_DIR                 ./.copytrack     Where embedded servers keep data, logs and
                                                    their state file (made absolute at load).
COPYTRACK_MONGO_DB                 copytrack        MongoDB database name.
COPYTRACK_ALLOW_PRIVATE_NETWORKS   false            Let the crawler fetch private / loopback
                                                    addresses (1/true/yes/on or
                                                    0/false/no/off). Off protects against SSRF.
COPYTRACK_LOG_LEVEL                INFO             DEBUG, INFO, WARNING, ERROR or CRITICAL.
COPYTRACK_LOG_FORMAT               text             ``text`` (lines for people) or ``json`` (one
                                                    object per line, with page, campaign and
                                                    run ids as fields, for log pipelines).
COPYTRACK_VISIBILITY_TIMEOUT       3600             Seconds before Redis hands a task whose
                                                    worker died (unacknowledged) to another
                                                    worker. Keep it above the longest task,
                                                    or that task runs twice.
COPYTRACK_CRAWL_FRONTIER           memory           Where a crawl keeps its request queue and
                                                    seen-URL filter: ``memory`` (one crawler
                                                    process per run) or ``redis`` (scrapy-redis:
                                                    several crawler processes share a run).
COPYTRACK_CRAWL_DISPATCH           local            Where a campaign run crawls: ``local`` (a
                                                    child process of whoever starts the run) or
                                                    ``queue`` (a task on the ``crawl`` queue,
                                                    run by a crawler worker).
COPYTRACK_SCAN_QUEUE_MAX           10000            Crawls pause while more scans than this
                                                    wait in the ``scan`` queue, and go on once
                                                    it is down to half; 0: no bound.
=================================  ===============  ==========================================
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

#: name -> (default shown to users, one-line help); the single source for docs and errors.
ENV_VARS: dict[str, tuple[str, str]] = {
    "COPYTRACK_MONGO_URL": ("(unset: embedded SecantusDB)", "MongoDB URL"),
    "COPYTRACK_REDIS_URL": ("(unset: embedded Valkey)", "Redis URL"),
    "COPYTRACK_INDEX_CLUSTER_URL": ("(unset)", "a Redis Cluster node for the index"),
    "COPYTRACK_TRUSTED_PROXIES": ("(unset)", "proxies whose X-Forwarded-For the admin believes"),
    "COPYTRACK_SECURE_COOKIES": ("false", "always Secure, __Host- cookies (HTTPS only)"),
    "COPYTRACK_DATA_DIR": ("./.copytrack", "data directory of the embedded servers"),
    "COPYTRACK_MONGO_DB": ("copytrack", "MongoDB database name"),
    "COPYTRACK_ALLOW_PRIVATE_NETWORKS": ("false", "allow crawling private/loopback addresses"),
    "COPYTRACK_LOG_LEVEL": ("INFO", "logging level"),
    "COPYTRACK_LOG_FORMAT": ("text", "log lines: text or json (structured, with ids)"),
    "COPYTRACK_VISIBILITY_TIMEOUT": ("3600", "seconds before a dead worker's task is redelivered"),
    "COPYTRACK_CRAWL_FRONTIER": ("memory", "crawl queue: memory or redis (shared by processes)"),
    "COPYTRACK_CRAWL_DISPATCH": ("local", "where runs crawl: local process or queue (crawlers)"),
    "COPYTRACK_SCAN_QUEUE_MAX": ("10000", "crawls pause while more scans wait (0: no bound)"),
}

DEFAULT_DATA_DIR = "./.copytrack"
DEFAULT_MONGO_DB = "copytrack"
DEFAULT_LOG_LEVEL = "INFO"
DEFAULT_VISIBILITY_TIMEOUT = 3600
DEFAULT_SCAN_QUEUE_MAX = 10_000
CRAWL_FRONTIERS = ("memory", "redis")
CRAWL_DISPATCHES = ("local", "queue")
LOG_FORMATS = ("text", "json")

_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})
_MONGO_SCHEMES = ("mongodb://", "mongodb+srv://")
_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
# MongoDB refuses these characters in database names (on any platform).
_BAD_DB_CHARS = frozenset('/\\. "$\0')


class ConfigError(ValueError):
    """A COPYTRACK_* variable has a value copytrack cannot use."""


@dataclass(frozen=True)
class Settings:
    """Resolved copytrack settings; build with :meth:`Settings.from_env`."""

    mongo_url: str | None = None
    redis_url: str | None = None
    index_cluster_url: str | None = None
    trusted_proxies: tuple[str, ...] = ()
    secure_cookies: bool = False
    data_dir: Path = Path(DEFAULT_DATA_DIR)
    mongo_db: str = DEFAULT_MONGO_DB
    allow_private_networks: bool = False
    log_level: str = DEFAULT_LOG_LEVEL
    log_format: str = LOG_FORMATS[0]
    visibility_timeout: int = DEFAULT_VISIBILITY_TIMEOUT
    crawl_frontier: str = CRAWL_FRONTIERS[0]
    crawl_dispatch: str = CRAWL_DISPATCHES[0]
    scan_queue_max: int = DEFAULT_SCAN_QUEUE_MAX

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

        Raises ValueError naming the variable and the accepted values when one is invalid.
        """
        env = os.environ if environ is None else environ

        def get(name: str) -> str:
            return env.get(name, "").strip()

        mongo_url = get("COPYTRACK_MONGO_URL") or None
        if mongo_url is not None and not mongo_url.startswith(_MONGO_SCHEMES):
            raise _invalid(
                "COPYTRACK_MONGO_URL",
                mongo_url,
                "a URL starting with mongodb:// or mongodb+srv://, "
                "or leave it unset for the embedded server",
            )
        redis_url = get("COPYTRACK_REDIS_URL") or None
        if redis_url is not None and not redis_url.startswith(_REDIS_SCHEMES):
            raise _invalid(
                "COPYTRACK_REDIS_URL",
                redis_url,
                "a URL starting with redis://, rediss:// or unix://, "
                "or leave it unset for the embedded server",
            )

        index_cluster_url = get("COPYTRACK_INDEX_CLUSTER_URL") or None
        if index_cluster_url is not None and not index_cluster_url.startswith(
            ("redis://", "rediss://")
        ):
            raise _invalid(
                "COPYTRACK_INDEX_CLUSTER_URL",
                index_cluster_url,
                "a URL starting with redis:// or rediss:// (a node of the cluster), "
                "or leave it unset to keep the index in COPYTRACK_REDIS_URL",
            )

        trusted_proxies = tuple(
            p.strip() for p in (get("COPYTRACK_TRUSTED_PROXIES") or "").split(",") if p.strip()
        )
        for proxy in trusted_proxies:
            try:
                ipaddress.ip_network(proxy, strict=False)
            except ValueError:
                raise _invalid(
                    "COPYTRACK_TRUSTED_PROXIES",
                    proxy,
                    "IP addresses or networks (10.0.0.2, 10.0.0.0/24) separated by commas",
                ) from None

        raw_dir = get("COPYTRACK_DATA_DIR") or DEFAULT_DATA_DIR
        if "\0" in raw_dir:
            raise _invalid("COPYTRACK_DATA_DIR", raw_dir, "a directory path")
        # Absolute, so the state file and child processes don't depend on the cwd.
        data_dir = Path(raw_dir).expanduser().resolve()
        if data_dir.exists() and not data_dir.is_dir():
            raise _invalid(
                "COPYTRACK_DATA_DIR", raw_dir, "a directory (this path exists and is a file)"
            )

        mongo_db = get("COPYTRACK_MONGO_DB") or DEFAULT_MONGO_DB
        if any(c in _BAD_DB_CHARS for c in mongo_db) or len(mongo_db.encode()) >= 64:
            raise _invalid(
                "COPYTRACK_MONGO_DB",
                mongo_db,
                'a database name under 64 bytes without / \\ . " $ or spaces',
            )

        def boolean(name: str) -> bool:
            raw = get(name).lower()
            if raw not in _TRUE | _FALSE:
                raise _invalid(name, raw, "one of 1/true/yes/on or 0/false/no/off")
            return raw in _TRUE

        log_level = (get("COPYTRACK_LOG_LEVEL") or DEFAULT_LOG_LEVEL).upper()
        if log_level not in _LOG_LEVELS:
            raise _invalid("COPYTRACK_LOG_LEVEL", log_level, "one of " + ", ".join(_LOG_LEVELS))

        def whole_number(name: str, default: int, low: int, high: int, unit: str) -> int:
            raw = get(name) or str(default)
            if not (raw.isascii() and raw.isdigit()) or not low <= int(raw) <= high:
                raise _invalid(name, raw, f"a whole number of {unit} from {low} to {high}")
            return int(raw)

        visibility_timeout = whole_number(
            "COPYTRACK_VISIBILITY_TIMEOUT", DEFAULT_VISIBILITY_TIMEOUT, 1, 10**7, "seconds"
        )
        scan_queue_max = whole_number(
            "COPYTRACK_SCAN_QUEUE_MAX", DEFAULT_SCAN_QUEUE_MAX, 0, 10**9, "tasks"
        )

        def choice(name: str, choices: tuple[str, ...]) -> str:
            value = (get(name) or choices[0]).lower()
            if value not in choices:
                raise _invalid(name, value, " or ".join(choices))
            return value

        return cls(
            mongo_url=mongo_url,
            redis_url=redis_url,
            index_cluster_url=index_cluster_url,
            trusted_proxies=trusted_proxies,
            data_dir=data_dir,
            mongo_db=mongo_db,
            secure_cookies=boolean("COPYTRACK_SECURE_COOKIES"),
            allow_private_networks=boolean("COPYTRACK_ALLOW_PRIVATE_NETWORKS"),
            log_level=log_level,
            log_format=choice("COPYTRACK_LOG_FORMAT", LOG_FORMATS),
            visibility_timeout=visibility_timeout,
            crawl_frontier=choice("COPYTRACK_CRAWL_FRONTIER", CRAWL_FRONTIERS),
            crawl_dispatch=choice("COPYTRACK_CRAWL_DISPATCH", CRAWL_DISPATCHES),
            scan_queue_max=scan_queue_max,
        )


def _invalid(name: str, value: str, expected: str) -> ConfigError:
    default, _ = ENV_VARS[name]
    # Never echo a password from a URL into logs or terminals.
    value = re.sub(r"//[^/@]*@", "//***@", value)
    return ConfigError(f"invalid {name}={value!r}: set it to {expected} (default: {default})")
