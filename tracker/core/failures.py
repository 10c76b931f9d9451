"""Server, disk and data-dir failures said in one line: what failed, where, what to do.

The command line prints `describe(err, settings)` instead of a traceback; a worker logs it.
For the embedded servers the line also says how much room is left in the data dir, since
a full disk is what most often makes them refuse writes.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import redis
from pymongo.errors import ConnectionFailure, OperationFailure, PyMongoError

from .config import Settings

#: A server cannot be reached (restarting, dead, a failover): worth retrying once it is back.
#: ConnectionFailure covers pymongo's AutoReconnect and ServerSelectionTimeoutError.
CONNECTION_ERRORS = (redis.ConnectionError, redis.TimeoutError, ConnectionFailure)

#: OS errors that mean "this directory cannot take writes".
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM})


def free_space(path: Path) -> str:
    """How much room is left for writes at path (or its nearest existing parent)."""
    path = Path(path)
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        stat = os.statvfs(path)
    except OSError as err:
        return f"free space unknown ({err.strerror})"
    free: float = stat.f_bavail * stat.f_frsize
    for unit in ("bytes", "kB", "MB", "GB"):
        if free < 1000 or unit == "GB":
            break
        free /= 1000
    return f"{free:.0f} {unit} free" if unit == "bytes" else f"{free:.1f} {unit} free"


def data_dir_error(data_dir: Path, err: OSError) -> str:
    """One line for an OS error met starting the embedded servers in data_dir."""
    reason = err.strerror or str(err)
    if err.errno in DISK_ERRNOS:
        return (
            f"cannot write to the data dir {data_dir} ({reason}; {free_space(data_dir)}): "
            f"free space or make it writable, or set COPYTRACK_DATA_DIR to another directory"
        )
    return f"cannot start the embedded servers of {data_dir}: {err.filename or ''}: {reason}"


#: Room a data dir needs before a server whose storage failed is started again (SecantusDB
#: makes room for a 10 MB log as it starts): while its disk is full, a failed server still
#: answers reads, a stopped one nothing.
ROOM_TO_RESTART = 32 * 2**20
#: Below this, a disk counts as full (`out_of_room`).
NO_ROOM = 2**20


def out_of_room(data_dir: Path) -> bool:
    """Whether data_dir's disk is full: a server there may still take a small write into
    space it holds already (a probe's), and fail the next real one."""
    try:
        stat = os.statvfs(data_dir)
    except OSError:
        return False
    return stat.f_bavail * stat.f_frsize < NO_ROOM


def room_to_restart(data_dir: Path) -> bool:
    """Whether data_dir's disk has ROOM_TO_RESTART free for writes."""
    try:
        stat = os.statvfs(data_dir)
    except OSError:
        return False
    return stat.f_bavail * stat.f_frsize >= ROOM_TO_RESTART


def storage_failed(err: BaseException) -> bool:
    """Whether ``err`` says a server runs but its storage failed: SecantusDB answers
    InternalError to every request once a write failed (a full disk), until it is started
    again (`ensure_servers` replaces a server that does not answer)."""
    return isinstance(err, OperationFailure) and err.code == 1


def _server(settings: Settings, name: str) -> tuple[str, str]:
    """How to name a server in a message (the embedded one by its data dir and free
    space), and what to do when it does not answer."""
    if settings.embedded_redis if name == "Redis" else settings.embedded_mongo:
        space = free_space(settings.data_dir)
        return (
            f"the embedded {name} (data dir {settings.data_dir}, {space})",
            "the next copytrack command restarts it if it died (`copytrack status`)",
        )
    variable = "COPYTRACK_REDIS_URL" if name == "Redis" else "COPYTRACK_MONGO_URL"
    return f"{name} at {variable}", "check that server (`copytrack status`)"


def first_line(err: BaseException) -> str:
    """The reason an error gives, in one line of 200 characters at most: pymongo appends
    its timeouts, topology and the server's whole reply (``full error``) to it."""
    line = (str(err).splitlines() or [type(err).__name__])[0]
    for appended in (" (configured timeouts", ", Timeout: ", ", full error: "):
        line = line.split(appended, 1)[0]
    return line[:200]


def describe(err: BaseException, settings: Settings) -> str | None:
    """One line for a server, disk or data-dir failure; None for any other error."""
    redis_at, redis_remedy = _server(settings, "Redis")
    mongo_at, mongo_remedy = _server(settings, "MongoDB")
    if isinstance(err, redis.ResponseError) and str(err).startswith("MISCONF"):
        reason = first_line(err).partition(": ")[2] or "disk error"
        return (
            f"{redis_at} refuses writes: it cannot write its append-only file ({reason}): "
            f"free space, then run the command again"
        )
    if isinstance(err, redis.ConnectionError | redis.TimeoutError):
        return f"{redis_at} does not answer ({first_line(err)}): {redis_remedy}"
    if isinstance(err, ConnectionFailure):
        return f"{mongo_at} does not answer ({first_line(err)}): {mongo_remedy}"
    if isinstance(err, OperationFailure) and (storage_failed(err) or err.code is None):
        # SecantusDB answers InternalError (code 1) once its storage failed a write.
        return (
            f"{mongo_at} failed a request ({first_line(err)}): if its disk is full, free "
            f"space and run the command again (that restarts the server)"
        )
    if isinstance(err, PyMongoError):
        return f"{mongo_at} failed a request: {first_line(err)}"
    if isinstance(err, redis.RedisError):
        return f"{redis_at} failed a request: {first_line(err)}"
    if isinstance(err, OSError) and err.errno in DISK_ERRNOS and err.filename:
        return f"cannot write {err.filename} ({err.strerror}; {free_space(Path(err.filename))})"
    return None
