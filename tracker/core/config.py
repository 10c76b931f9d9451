"""copytrack configuration, read from environment variables.

Every setting is declared once, in ``SETTINGS``: its variable, how its text is read and
checked, its default and its help. ``Settings.from_env`` reads them, errors name the
variable and what it accepts, and the tables of settings are generated from them: every one
in docs/deploy.md's, a first installation's in the README's (``make docs``; tests check
both hold the generated tables). Every setting has a default, so a fresh checkout runs
with no configuration at all (embedded servers, data in ``./.copytrack``).
"""

from __future__ import annotations

import ipaddress
import math
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
    help: str  # a line for the README's table
    detail: str = ""  # what an operator needs to know, for docs/deploy.md's table


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


def _seconds(low: float, high: float) -> Reader:
    def read(raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not low <= value <= high:  # nan too
            raise _Expected(f"a number of seconds from {low:g} to {high:g}")
        return value

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
            "", "(unset: embedded SecantusDB)", "MongoDB ≥ 6 URL",
            detail=(
            "MongoDB URL (`mongodb://` or `mongodb+srv://`; credentials and `tls=true` go "
            "here). Unset outside the fleet: an embedded SecantusDB is started.")),
    Setting("COPYTRACK_REDIS_URL", "redis_url",
            _url(("redis://", "rediss://", "unix://"), "for the embedded server"),
            "", "(unset: embedded Valkey)",
            "Redis/Valkey ≥ 7 URL (index, Celery broker, sessions)",
            detail=(
            "Redis URL (`redis://`, `rediss://` for TLS, `unix://`). Unset outside the fleet: "
            "an embedded Valkey is started.")),
    Setting("COPYTRACK_INDEX_CLUSTER_URL", "index_cluster_url",
            _url(("redis://", "rediss://"), "to keep the index in COPYTRACK_REDIS_URL"),
            "", "(unset)",
            "a Redis/Valkey Cluster node: the index lives on that cluster instead "
            "(docs/deploy.md)",
            detail=(
            "A node of a Redis/Valkey Cluster (`redis://host:port`) that holds the index "
            "instead of `COPYTRACK_REDIS_URL`, which keeps the queues, task results and "
            "sessions (see [Ten million works](#ten-million-works)). Its nodes need "
            "`appendonly yes`: commands wait for every primary's append-only file before "
            "reporting a work added.")),
    Setting("COPYTRACK_REDIS_PREFIX", "redis_prefix", _key_prefix, "copytrack", "copytrack",
            "first part of every Redis key (index, queues, sessions, locks): installations "
            "sharing one Redis each need their own",
            detail=(
            "First part of every Redis key copytrack writes: the index, the Celery queues, "
            "sessions, locks, the dashboard cache. Two installations sharing one Redis need "
            "different prefixes (and different `COPYTRACK_MONGO_DB`), or they share one index "
            "and one queue.")),
    Setting("COPYTRACK_TRUSTED_PROXIES", "trusted_proxies", _proxies, "", "(unset)",
            "reverse proxies whose `X-Forwarded-For` the admin believes",
            detail=(
            "Addresses or networks (comma-separated) of the reverse proxies in front of the "
            "admin: only from them is `X-Forwarded-For` taken as the client's address (login "
            "throttling, logs). Empty: the connecting address is the client, forged headers "
            "are ignored. Set it to your proxy's address, or every client behind it shares "
            "one throttle.")),
    Setting("COPYTRACK_ADMIN_CONNECTIONS", "admin_connections",
            _whole_number(10, 100_000, "connections"), "200", "200",
            "connections the admin keeps open; past it, one waiting for a request is closed "
            "for a new one",
            detail=(
            "Connections the admin keeps open in all. Past it, the oldest connection that "
            "waits for a request (idle, or its request head still coming) is closed for the "
            "new one; only when all are busy with requests is a new one answered 503.")),
    Setting("COPYTRACK_ADMIN_CONNECTIONS_PER_CLIENT", "admin_connections_per_client",
            _whole_number(1, 100_000, "connections"), "32", "32",
            "connections the admin keeps open from one address (not counted for "
            "`COPYTRACK_TRUSTED_PROXIES`)",
            detail=(
            "Connections the admin keeps open from one address (a browser opens about 6): "
            "more are answered 503. Not counted for the addresses in "
            "`COPYTRACK_TRUSTED_PROXIES`, which carry everybody's; bound clients at the "
            "proxy.")),
    Setting("COPYTRACK_SECURE_COOKIES", "secure_cookies", _boolean, "false", "false",
            "always `Secure`, `__Host-` cookies (set it when the admin is reached only over "
            "HTTPS)",
            detail=(
            "`true`: the admin's cookies are always `Secure` and named with the `__Host-` "
            "prefix (browsers then send them only over HTTPS, and no other host or plain-HTTP "
            "page can set them). Set it when browsers reach the admin only through your TLS "
            "proxy; without it, cookies are `Secure` only when the admin sees HTTPS "
            "(directly, or through a proxy in `COPYTRACK_TRUSTED_PROXIES`).")),
    Setting("COPYTRACK_DATA_DIR", "data_dir", _directory, "./.copytrack", "./.copytrack",
            "data, logs and state of the embedded servers",
            detail=(
            "Crawl logs and process records (and, outside the fleet, the embedded servers' "
            "data).")),
    Setting("COPYTRACK_MONGO_DB", "mongo_db", _database, "copytrack", "copytrack",
            "database name",
            detail=(
            "MongoDB database name.")),
    Setting("COPYTRACK_ALLOW_PRIVATE_NETWORKS", "allow_private_networks", _boolean,
            "false", "false",
            "let campaigns crawl private/loopback addresses (tests and the demo)",
            detail=(
            "Let the crawler fetch private and loopback addresses. Keep it off: inside the "
            "fleet, `mongo` and `redis` are such addresses.")),
    Setting("COPYTRACK_LOG_LEVEL", "log_level", _log_level, "INFO", "INFO",
            "logging level",
            detail=(
            "`DEBUG`, `INFO`, `WARNING`, `ERROR` or `CRITICAL`.")),
    Setting("COPYTRACK_LOG_FORMAT", "log_format", _choice(LOG_FORMATS), "text", "text",
            "`json`: one JSON object per log line, with `page_id`, `url`, `campaign`, "
            "`run_id` fields where an event concerns them",
            detail=(
            "`json`: one object per line (`time`, `level`, `logger`, `message`, and "
            "`page_id`, `url`, `campaign`, `run_id`, `findings` where an event concerns a "
            "page), for a log pipeline; a page can be followed from its scan to its findings.")),
    Setting("COPYTRACK_VISIBILITY_TIMEOUT", "visibility_timeout",
            _whole_number(1, 10**7, "seconds"), "3600", "3600",
            "seconds before a dead worker's task is redelivered, or a lost scan queued again",
            detail=(
            "Seconds before a task delivered to a worker that died is handed to another, and "
            "before a page whose scan was lost (no task queued or held for it) gets its scan "
            "queued again. Keep it above the longest task, or that task runs twice.")),
    Setting("COPYTRACK_CRAWL_FRONTIER", "crawl_frontier", _choice(CRAWL_FRONTIERS),
            "memory", "memory",
            "`redis`: several crawler processes share one queue (scrapy-redis)",
            detail=(
            "`redis` puts a run's request queue and seen-URL filter in Redis, so crawl "
            "processes on several machines can share one run.")),
    Setting("COPYTRACK_CRAWL_DISPATCH", "crawl_dispatch", _choice(CRAWL_DISPATCHES),
            "local", "local",
            "where a run crawls: `local`, a process started where the run is (CLI, "
            "scheduler, admin); `queue`, a task on the `crawl` queue for crawler workers "
            "(`copytrack worker --queues crawl`; the run shows `queued` until one takes it)",
            detail=(
            "Where a campaign run crawls: `queue` sends it to the `crawler` workers (see "
            "[Crawls](#crawls)); `local` (the default outside the fleet) starts the crawl "
            "process in the container that starts the run.")),
    Setting("COPYTRACK_SCAN_QUEUE_MAX", "scan_queue_max", _whole_number(0, 10**9, "tasks"),
            "10000", "10000",
            "crawls pause while more scans than this wait for a worker, until half are "
            "done; `0`: no bound",
            detail=(
            "A crawl pauses while more scans than this wait in the `scan` queue, and goes on "
            "once the workers have taken it down to half (see "
            "[Back-pressure](#back-pressure)). `0`: no bound.")),
    Setting("COPYTRACK_SEARCH_PROVIDER", "search_provider", _choice(SEARCH_PROVIDERS),
            "searxng", "searxng",
            "the search engine `discover` campaigns ask: `searxng` (your own instance) or "
            "`brave` (Brave Search API)",
            detail=(
            "The search engine `discover` campaigns ask: `searxng`, your own SearXNG (the "
            "`searxng` service, `docker compose --profile discovery up -d`, with "
            "`SEARXNG_SECRET` set), or `brave`, the Brave Search API.")),
    Setting("COPYTRACK_SEARCH_URL", "search_url", _url(("http://", "https://"), ""),
            "", "(unset)",
            "the SearXNG instance (`http://searxng:8080`; `json` among its formats), or "
            "another Brave API endpoint",
            detail=(
            "The SearXNG to ask (its `settings.yml` must list `json` under `search.formats`: "
            "`deploy/searxng/settings.yml` does), or another Brave API endpoint. Not under "
            "the crawl's private-network rule: an operator's endpoint.")),
    Setting("COPYTRACK_SEARCH_API_KEY", "search_api_key", _secret, "", "(unset)",
            "the commercial search API's key (sent in a header only, never logged)",
            detail=(
            "The Brave Search subscription token. Sent in a request header only; never in a "
            "URL, a log line, an error or a run.")),
    Setting("COPYTRACK_SEARCH_DAILY_QUERIES", "search_daily_queries",
            _whole_number(0, 10**7, "queries"), "100", "100",
            "search queries all `discover` campaigns may ask per day (UTC) together; answers "
            "are cached 30 days",
            detail=(
            "Queries all discover campaigns together may send per UTC day, counted in MongoDB "
            "(never overspent by parallel runs). Answers are cached for 30 days, so a run "
            "asks only what was not asked lately.")),
    Setting("COPYTRACK_MASTER_CACHE_MB", "master_cache_mb", _whole_number(0, 10**6, "MB"),
            "256", "256",
            "work texts each process keeps for matching, least recently used dropped first "
            "(any edit of a work empties it everywhere); `0`: none",
            detail=(
            "Work texts each matching process (worker pool process, `check`) keeps in memory, "
            "least recently used dropped first. Most candidates of a page are works met a "
            "moment ago, so this spares most of MongoDB's reads when matching; an edit of any "
            "work empties every process's copy. Count it per pool process when sizing "
            "workers, with up to 512 MB more per process for the works' letter streams and "
            "sorted k-grams that alignment keeps (`check --jsonl` runs one more process than "
            "there are cores). `0`: none.")),
    Setting("COPYTRACK_INDEX_CACHE_MB", "index_cache_mb", _whole_number(0, 10**6, "MB"),
            "128", "128",
            "index blocks each process keeps after reading them for matching, oldest dropped "
            "first, read again once their shard changed; none while it is under half the "
            "index; `0`: none",
            detail=(
            "Index blocks each matching process keeps after reading them, oldest dropped "
            "first. A page's fingerprints meet many blocks earlier pages met (boilerplate, "
            "popular works, several copies of one work): those are not read from Redis again "
            "until their shard changes (every index write counts in its shard, so a kept "
            "block is always the stored one). 128 MB holds the whole index of ~10,000 works; "
            "at 10,000 works it takes Redis's CPU for a `check` of 1,500 pages from 2.0 to "
            "0.5 s. A process keeps nothing while the budget is under half of what the whole "
            "index would take (about 12.5 bytes a posting): most reads would miss, and "
            "keeping cost more than it saved (at 100,000 works, 128 MB: p50 0.2–1.4 ms "
            "slower). About 1 GB holds the index of 100,000 works (76 M postings). Count it "
            "per pool process like the work texts. `0`: none.")),
    Setting("COPYTRACK_INDEX_SNAPSHOT", "index_snapshot", _boolean, "true", "true",
            "keep the index's postings in a mapped snapshot (copied to each host's data dir) "
            "plus a small delta in Redis (`false`: all in Redis's blocks); `copytrack "
            "reindex` after changing it",
            detail=(
            "Keep the index's postings as of the last compaction in a read-only snapshot "
            "file (sorted arrays, 13 bytes a posting, kept in Redis too and copied to each "
            "host's data dir once per compaction) and only the postings added since in "
            "Redis's blocks: a page reads the blocks of the recent postings and searches the "
            "snapshot in memory, and an add rewrites only the recent blocks. A compaction "
            "follows `copytrack reindex`, and `library add` or a `maintenance` worker (works "
            "added through the API or the admin) once the recent postings pass a tenth of the "
            "snapshot; the first batches of a library are written straight into a snapshot. "
            "Each process maps the snapshot (the OS shares its pages). `false` keeps every "
            "posting in Redis's blocks: a page then reads ~1,000 times the bytes of its "
            "postings, and an add rewrites blocks in proportion to the library. "
            "The index's layout differs: run `copytrack reindex` after changing this.")),
    Setting("COPYTRACK_INDEX_SNAPSHOT_IN_REDIS", "index_snapshot_in_redis", _boolean, "true",
            "true",
            "keep a copy of the index snapshot's files in Redis, for processes on other hosts "
            "(`false`: every process shares one data dir, and Redis holds none of it)",
            detail=(
            "Keep each snapshot file's bytes in Redis too (16 MB keys), from which a process "
            "whose data dir lacks the file copies it: workers on several hosts need this. "
            "The copy costs Redis as much memory as the files (13 bytes a posting: ~1 GB at "
            "100,000 works, ~10 GB at 1,000,000), twice that while a compaction uploads the "
            "next one. `false` on one host, or where every process mounts the same data "
            "dir: the files are the only copy (written and fsynced before the index names "
            "them; `copytrack reindex` rebuilds them), and a process without them stops "
            "with a line saying so. Takes effect at the next compaction.")),
    Setting("COPYTRACK_SYNONYMS", "synonyms", _boolean, "false", "false",
            "also fingerprint Chinese texts by their skeleton and English ones by their "
            "function words, to find rewrites (洗稿, heavy revisions); ~2.4× the CPU of "
            "matching a Chinese page, ~7× of adding a Chinese work; needs `copytrack reindex`",
            detail=(
            "`true`: Chinese works and pages get a second fingerprint stream, their "
            "skeleton: every common word one letter, names, numbers, rare words and "
            "punctuation kept (`fingerprinter.skeleton`), so copies that swap words for "
            "synonyms (洗稿) are found (docs/accuracy.md, \"Rewrites\"). It costs ~2.4× the "
            "CPU of matching a Chinese page, ~7× that of adding a Chinese work and ~1.07× its "
            "postings in the index. English works and pages get one of their function "
            "words (`fingerprinter.english`), so heavily revised copies are found "
            "(docs/accuracy.md, \"English heavy revision\"), for ~1.5× the CPU of an English "
            "page and ~1.24× an English work's postings. Turning it on or off changes the "
            "fingerprint version: "
            "run `copytrack reindex` after changing it (the index refuses other versions).")),
    Setting("COPYTRACK_TIME_ZONE", "time_zone", _time_zone, "UTC", "UTC",
            "the installation's time zone (IANA, e.g. `Asia/Shanghai`): the admin shows times "
            "in it with their offset, unless a user chose another in their account, and the "
            "dashboard counts findings per day of it; evidence keeps UTC beside it"),
    Setting("COPYTRACK_TSA_URL", "tsa_url",
            _url(("http://", "https://"), "to keep captures without trusted time-stamps"),
            "", "(unset)",
            "an RFC 3161 time-stamping authority: every capture's SHA-256 is time-stamped "
            "there by a worker, retried until it answers (docs/evidence.md)",
            detail=(
            "An RFC 3161 time-stamping authority (`http://` or `https://`). Set, a "
            "`maintenance` worker time-stamps every stored capture's SHA-256 there, retrying "
            "until the authority answers; the tokens go into evidence bundles beside the "
            "files they stamp (see docs/evidence.md). Empty: captures are kept and hashed, "
            "without a trusted time.")),
    Setting("COPYTRACK_TSA_CA_FILE", "tsa_ca_file", _pem_file, "", "(unset: the system's)",
            "PEM certificates of the authority's chain, against which the admin verifies "
            "the tokens it shows",
            detail=(
            "PEM certificates of the authority's chain, against which the admin and "
            "`copytrack evidence` verify the tokens (`openssl ts -verify`). A path inside the "
            "containers: mount the file.")),
    Setting("COPYTRACK_SMTP_URL", "smtp_url",
            _url(("smtp://", "smtps://"), "to send no e-mail"), "", "(unset)",
            "the mail relay alerts and notices go through: `smtp://host:587` (STARTTLS "
            "whenever the relay offers it) or `smtps://host:465` (TLS from the start); "
            "`smtp://user:password@host`, or `COPYTRACK_SMTP_USER` and `_PASSWORD`, for its "
            "login",
            detail=(
            "The mail relay alerts and takedown notices go through: `smtp://relay:587` "
            "(STARTTLS whenever the relay offers it; a login is never sent in clear to a "
            "relay off this machine) or `smtps://relay:465` (TLS from the first byte). "
            "Credentials may sit in the URL (`smtp://user:password@relay:587`, "
            "percent-encoded) or in the two settings below. The sender (`From`) is the notice "
            "sender's e-mail in the admin's Settings. Empty: nothing is e-mailed (webhook "
            "alerts still go out). See docs/operations.md.")),
    Setting("COPYTRACK_SMTP_USER", "smtp_user", _secret, "", "(unset)",
            "the relay's login, when not in `COPYTRACK_SMTP_URL`",
            detail=(
            "The relay's login, when it is not in the URL.")),
    Setting("COPYTRACK_SMTP_PASSWORD", "smtp_password", _secret, "", "(unset)",
            "the relay's password (never shown, logged or exported)",
            detail=(
            "The relay's password. Never shown in the admin, written to a log or put in an "
            "export; pass it as a secret of the environment.")),
    Setting("COPYTRACK_SMTP_CA_FILE", "smtp_ca_file", _pem_file, "", "(unset: the system's)",
            "PEM certificates the relay's TLS certificate is verified against",
            detail=(
            "PEM certificates against which the relay's TLS certificate is verified (a relay "
            "with a private CA). A path inside the containers: mount the file.")),
    Setting("COPYTRACK_RDAP_BOOTSTRAP_URL", "rdap_bootstrap_url",
            _url(("http://", "https://"), "for IANA's"), "https://data.iana.org/rdap/",
            "https://data.iana.org/rdap/",
            "where the RDAP bootstrap files (`dns.json`, `ipv4.json`, `ipv6.json`) are: which "
            "registry answers for a domain or an address (cached a day)",
            detail=(
            "Where IANA's RDAP bootstrap files (`dns.json`, `ipv4.json`, `ipv6.json`) are "
            "read: they name the registry that answers for a domain (its registrar) and for "
            "an address (its hosting network), asked for abuse contacts when a reviewer "
            "prepares a notice. Bootstrap files are cached a day, answers a week.")),

)  # fmt: skip


def _limit(
    variable: str, read: Reader, default: str, shown: str, help: str, detail: str
) -> Setting:
    # A crawl limit is the Scrapy setting of its variable's name.
    return Setting(variable, variable, read, default, shown, help, detail)


#: The crawl process's limits: read from its environment by crawl_limits (they are Scrapy
#: settings of the crawl, not fields of Settings), checked like the settings above.
CRAWL_LIMITS: tuple[Setting, ...] = (
    _limit("COPYTRACK_MAX_HEADER_BYTES", _whole_number(0, 2**31, "bytes"), "262144", "262144",
            "bytes a response's head (status line and headers) may take; `0`: no limit",
            detail=("Bytes a response's head (status line and headers) may take; the "
                    "download limit does not count them. Browsers take 256 KB; a site's head is "
                    "a few KB. Over it: the URL fails `headers_too_large`. `0`: no limit.")),
    _limit("COPYTRACK_MAX_HEADERS", _whole_number(0, 10**6, "lines"),
            "100", "100", "header lines a response may send; `0`: no limit",
            detail=("Header lines a response may send (a site sends a few dozen). Over it: "
                    "the URL fails `headers_too_large`. `0`: no limit.")),
    _limit("COPYTRACK_HEADER_SECONDS", _seconds(0, 3600), "10",
            "10", "seconds from a response's first byte to the end of its head",
            detail=("Seconds from a response's first byte to the end of its head: a server "
                    "that trickles headers fails `headers_too_slow` instead of holding a "
                    "connection. `0`: no limit.")),
    _limit("COPYTRACK_BOOK_MAXSIZE", _whole_number(0, 2**40, "bytes"),
            "67108864", "67108864 (64 MB)",
            "bytes a whole-book download (.txt, .zip, .epub, .pdf) may take",
            detail=("Bytes a whole-book download (a link to a .txt, .zip, .epub or .pdf, or "
                    "one saying TXT下载 / 全本下载) may take, and what an archive may inflate "
                    "to; pages keep the 3 MB page cap.")),
    _limit("COPYTRACK_MAX_LINKS_PER_PAGE", _whole_number(0, 10**7, "links"), "500", "500",
            "links followed from one page or feed, in document order; `0`: no limit",
            detail=("Links followed from one page (or feed) in document order; the rest are "
                    "dropped and counted `links_over_limit`: generated link farms and calendar "
                    "traps would otherwise flood the queue. `0`: no limit.")),
    _limit("COPYTRACK_MAX_SITEMAP_URLS", _whole_number(0, 10**9, "URLs"), "50000", "50000",
            "URLs followed from one sitemap (the protocol's maximum)",
            detail=("URLs followed from one sitemap, or sitemaps from one index: the "
                    "protocol's maximum. `0`: no limit.")),
    _limit("COPYTRACK_EXTRACT_PROCESSES", _whole_number(0, 1024, "processes"), "0", "0",
            "processes of a crawl that decode, extract and store pages; `0`: one per CPU",
            detail=("Processes of a crawl that decode, extract and store its pages "
                    "(CPU-bound; the crawl keeps downloading meanwhile). `0`: one per CPU.")),
    _limit("COPYTRACK_EXTRACT_NICENESS", _whole_number(0, 19, "niceness steps"), "10", "10",
            "how much nicer than the crawl its extraction processes run (Linux)",
            detail=("How much nicer than the crawl its extraction processes run (Linux): "
                    "downloading comes first, since extraction competing for the CPU delays the "
                    "reading of responses and AutoThrottle would take that for the sites' "
                    "latency.")),
    _limit("COPYTRACK_EXTRACT_CPU_SECONDS", _seconds(0, 86400),
            "60", "60", "CPU seconds a page's decoding and extraction may take",
            detail=("CPU seconds a page's decoding and extraction may take (pages take "
                    "0.01–0.5 s); past it the page is stored with its raw bytes and no text, "
                    "skipped `too_slow`, rather than hold a process.")),
    _limit("COPYTRACK_RENDER_PAGES", _whole_number(1, 256, "pages"),
            "4", "4", "pages a rendering campaign runs in Chromium at once",
            detail=("Pages a campaign with `render` runs in Chromium at once (see "
                    "[Rendering](#rendering)).")),
    _limit("COPYTRACK_RENDER_TIMEOUT", _seconds(1, 3600), "20", "20",
            "seconds a rendered page is given to load, and as much for its scripts' requests",
            detail=("Seconds a rendered page is given to load, and as much again for its "
                    "scripts' requests to be done.")),
    _limit("COPYTRACK_RENDER_REQUESTS", _whole_number(0, 10**4, "requests"), "50", "50",
            "requests of a rendered page's scripts fetched (no images, styles or fonts)",
            detail=("Requests of its own a rendered page may make (scripts, XHR, fetch); "
                    "images, styles and fonts are never fetched.")),
    _limit("COPYTRACK_RENDER_OFFSITE", _whole_number(0, 1, "(0 or 1)"),
            "1", "1", "`0`: a rendered page's scripts fetch from the campaign's domains only",
            detail=("`1`: a rendered page's scripts may fetch from other sites too (the CDN "
                    "its reader script loads from); `0`: only from the campaign's domains.")),
    _limit("COPYTRACK_OCR_IMAGES", _whole_number(1, 1000, "images"), "20", "20",
            "images of one page an `ocr` campaign fetches and reads",
            detail=("Images of one page's article a campaign with `ocr` fetches and reads, in "
                    "document order (see [OCR](#ocr)); the rest are counted "
                    "`ocr_images_over_limit`.")),
    _limit("COPYTRACK_OCR_MAX_BYTES", _whole_number(1, 2**31, "bytes"),
            "8388608", "8388608 (8 MB)", "bytes one image read by OCR may take",
            detail=("Bytes one image read by OCR may take: a bigger one is not downloaded "
                    "past it, counted `image_too_large`; the page keeps its other text.")),
    _limit("COPYTRACK_OCR_MAX_PIXELS", _whole_number(1, 2**40, "pixels"),
            "40000000", "40000000", "pixels one image read by OCR may have (decompression bombs)",
            detail=("Pixels (width × height, from its header, before anything is decoded) one "
                    "image read by OCR may have: a decompression bomb is refused, counted "
                    "`image_too_many_pixels`. A 1000-pixel-wide chapter 40 000 pixels long fits.")),
    _limit("COPYTRACK_OCR_MIN_PIXELS", _whole_number(0, 2**31, "pixels"), "20000", "20000",
            "images with fewer pixels are icons or buttons, not read",
            detail=("Images with fewer pixels (width × height) are icons, buttons and logos: "
                    "not fetched when the page's `width` and `height` say so, else not read.")),
    _limit("COPYTRACK_OCR_CPU_SECONDS", _seconds(0, 3600), "60", "60",
            "CPU seconds Tesseract may spend on one image",
            detail=("CPU seconds Tesseract may spend on one image, all its readings together "
                    "(a 1,000-character chapter took 2 s); past it the image is counted "
                    "`image_too_slow`. `0`: no limit.")),
    _limit("COPYTRACK_PROGRESS_EVERY", _seconds(0.1, 3600), "2", "2",
            "seconds between a crawl's progress counts reaching its run",
            detail="Seconds between a crawl's counts reaching its run (the admin's live page)."),
    _limit("COPYTRACK_STORE_PATIENCE", _seconds(0, 86400), "120", "120",
            "seconds a crawl keeps trying to store a page before its run fails",
            detail=("Seconds a crawl keeps storing a page that cannot be stored (a server "
                    "down or moved, a full disk), looking for the servers between tries; then "
                    "the crawl stops and its run fails naming the failure.")),
)  # fmt: skip

#: variable -> its declaration.
BY_VARIABLE: dict[str, Setting] = {s.variable: s for s in SETTINGS + CRAWL_LIMITS}


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
    index_snapshot: bool = _DEFAULTS["index_snapshot"]
    index_snapshot_in_redis: bool = _DEFAULTS["index_snapshot_in_redis"]
    synonyms: bool = _DEFAULTS["synonyms"]
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


def crawl_limits(environ: Mapping[str, str]) -> dict[str, int | float]:
    """Every crawl limit (``CRAWL_LIMITS``), as ``environ`` sets it or by default, under its
    Scrapy setting's name; ConfigError names a variable set to something unusable."""
    limits = {}
    for limit in CRAWL_LIMITS:
        raw = environ.get(limit.variable, "").strip() or limit.default
        try:
            limits[limit.field] = limit.read(raw)
        except _Expected as expected:
            raise _invalid(limit, raw, str(expected)) from None
    return limits


#: Every crawl limit by its name, as it is when the environment sets none.
CRAWL_DEFAULTS: dict[str, int | float] = crawl_limits({})

#: Variables only the compose file reads (docker-compose.yml), documented with the rest.
COMPOSE_ONLY: tuple[tuple[str, str, str], ...] = (
    ("COPYTRACK_WORKER_QUEUES", "`ingest,scan,maintenance`",
     "Queues of the `worker` service"),
    ("FLOWER_BASIC_AUTH", "none: must be set", "`user:password` for Flower"),
    ("ADMIN_PUBLISH`, `FLOWER_PUBLISH", "`127.0.0.1:8000`, `127.0.0.1:5555`",
     "Host address and port of the admin and Flower"),
    ("COPYTRACK_IMAGE_TAG", "`latest`", "Tag of the `copytrack` image the fleet builds and runs"),
)  # fmt: skip


def _code(shown: str) -> str:
    return shown if shown.startswith("(") else f"`{shown}`"


#: The settings the README shows, those a first installation looks for; docs/deploy.md's
#: table has every one.
README_SETTINGS = (
    "COPYTRACK_MONGO_URL", "COPYTRACK_REDIS_URL", "COPYTRACK_DATA_DIR", "COPYTRACK_REDIS_PREFIX",
    "COPYTRACK_TIME_ZONE", "COPYTRACK_SMTP_URL", "COPYTRACK_SEARCH_URL", "COPYTRACK_LOG_LEVEL",
)  # fmt: skip


def markdown_table() -> str:
    """The README's configuration table (``README_SETTINGS``), generated from ``SETTINGS``."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    rows += [
        f"| `{s.variable}` | {_code(s.shown)} | {s.help} |"
        for s in (BY_VARIABLE[name] for name in README_SETTINGS)
    ]
    return "\n".join(rows)


def _fleet_default(setting: Setting, fleet: Mapping[str, str]) -> str:
    # docker-compose.yml passes `${VARIABLE:-default}` (or a fixed value) to every service.
    value = fleet.get(setting.variable)
    if value is None:
        return _code(setting.shown)
    default = value.split(":-", 1)[1].rstrip("}") if value.startswith("${") else value
    if default:
        return f"`{default}`"
    # "(unset: the system's)": what an empty value stands for.
    return (
        "(empty" + setting.shown[setting.shown.find(":") :] if ":" in setting.shown else "(empty)"
    )


def deploy_table(fleet: Mapping[str, str]) -> str:
    """docs/deploy.md's table of settings: every setting and crawl limit with its default in
    the fleet (``fleet``: the compose file's `x-copytrack-env`), then the compose-only ones."""
    rows = ["| variable | default in the fleet | meaning |", "|---|---|---|"]
    rows += [
        f"| `{s.variable}` | {_fleet_default(s, fleet)} | {s.detail or s.help} |"
        for s in SETTINGS + CRAWL_LIMITS
    ]
    rows += [
        f"| `{name}` | {default} | {text} (compose only). |" for name, default, text in COMPOSE_ONLY
    ]
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
