"""Reviewers and integrations: users with argon2-hashed passwords, API tokens, login throttling.

Roles are ordered: a ``viewer`` reads, a ``reviewer`` also moves findings through the
workflow and registers works, an ``admin`` also manages users, campaigns and settings.
There is no default account: the first admin is made with ``copytrack user add``.

API tokens look like ``ct_<id>_<secret>``; only the SHA-256 of the secret is stored (a
256-bit random secret needs no slow hash), and a token never has more rights than the user
who owns it, even after that user is demoted.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from ..context import Context
from ..core.times import now

ROLES = ("viewer", "reviewer", "admin")
MIN_PASSWORD_CHARS = 10
TOKEN_PREFIX = "ct"
TOKEN_DAYS = 90  # a token's default life: a leaked one stops working on its own
MAX_TOKEN_DAYS = 730

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
_TOKEN = re.compile(rf"^{TOKEN_PREFIX}_([0-9a-f]{{12}})_([A-Za-z0-9_-]{{43}})$")
# OWASP's recommended minimum for argon2id (19 MiB, 2 passes, 1 lane): about 0.15 s a hash on
# a small server, so logins stay quick while guessing stays expensive. Hashes made with other
# parameters are upgraded at the next successful login.
_hasher = PasswordHasher(time_cost=2, memory_cost=19456, parallelism=1)


@cache
def _dummy_hash() -> str:
    """Verified when the user does not exist, so a wrong name costs as much as a wrong password."""
    return _hasher.hash(secrets.token_urlsafe(16))


class UserError(ValueError):
    """A user or token operation that cannot be done, with the reason."""


@dataclass(frozen=True)
class Principal:
    """Who makes a request: a user, with the role it acts with (a token's may be lower)."""

    name: str
    role: str
    token_id: str | None = None
    session_epoch: int = 0

    def can(self, role: str) -> bool:
        """Whether this principal has at least ``role``."""
        return has_role(self.role, role)


def has_role(role: str, needed: str) -> bool:
    """Whether ``role`` is ``needed`` or above it."""
    return ROLES.index(role) >= ROLES.index(needed)


def _check_role(role: str) -> None:
    if role not in ROLES:
        raise UserError(f"unknown role {role!r}: use one of {', '.join(ROLES)}")


def _check_password(password: str) -> None:
    if len(password) < MIN_PASSWORD_CHARS:
        raise UserError(f"password too short: use at least {MIN_PASSWORD_CHARS} characters")
    if len(set(password)) < 4:
        raise UserError("password too simple: use more different characters")


def get_user(ctx: Context, name: str) -> dict[str, Any] | None:
    """The user document (with its password hash), or None."""
    return ctx.db.users.find_one({"_id": name})


def set_time_zone(ctx: Context, name: str, zone_name: str | None) -> None:
    """The zone ``name`` reads times in (IANA); None: the installation's. UserError for a
    zone this system does not know."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if zone_name:
        try:
            ZoneInfo(zone_name)
        except (ZoneInfoNotFoundError, ValueError):
            raise UserError(
                f"{zone_name!r} is not a time zone: give an IANA name such as Asia/Shanghai"
            ) from None
        ctx.db.users.update_one({"_id": name}, {"$set": {"time_zone": zone_name}})
    else:
        ctx.db.users.update_one({"_id": name}, {"$unset": {"time_zone": ""}})


def list_users(ctx: Context) -> list[dict[str, Any]]:
    """Every user, by name, without password hashes."""
    return list(ctx.db.users.find({}, {"password_hash": 0}).sort("_id", 1))


def add_user(ctx: Context, name: str, password: str, role: str) -> None:
    """Create a user; raises UserError for a bad name, role, weak password or existing user."""
    if not _NAME.match(name):
        raise UserError(
            f"invalid user name {name!r}: letters, digits and _ . @ - (at most 64 characters)"
        )
    _check_role(role)
    _check_password(password)
    if get_user(ctx, name) is not None:
        raise UserError(f"user {name!r} already exists")
    ctx.db.users.insert_one(
        {
            "_id": name,
            "role": role,
            "password_hash": _hasher.hash(password),
            # Random, not 0: sessions of a removed user of the same name stay dead.
            "session_epoch": secrets.randbelow(2**31),
            "created_at": now(),
        }
    )


def _admins_besides(ctx: Context, name: str) -> int:
    return ctx.db.users.count_documents({"role": "admin", "_id": {"$ne": name}})


def _require(ctx: Context, name: str) -> dict[str, Any]:
    user = get_user(ctx, name)
    if user is None:
        raise UserError(f"no user {name!r}")
    return user


def set_role(ctx: Context, name: str, role: str) -> None:
    """Change a user's role; the last admin cannot be demoted (nobody could manage users)."""
    _check_role(role)
    user = _require(ctx, name)
    if user["role"] == "admin" and role != "admin" and not _admins_besides(ctx, name):
        raise UserError(f"{name!r} is the last admin: make another admin first")
    ctx.db.users.update_one({"_id": name}, {"$set": {"role": role}})


def set_password(ctx: Context, name: str, password: str, keep_tokens: bool = False) -> None:
    """Set a new password and end the user's sessions everywhere; its API tokens are
    revoked too (a password change is how a compromise is answered), unless keep_tokens."""
    _check_password(password)
    _require(ctx, name)
    ctx.db.users.update_one(
        {"_id": name},
        {"$set": {"password_hash": _hasher.hash(password)}, "$inc": {"session_epoch": 1}},
    )
    if not keep_tokens:
        ctx.db.tokens.delete_many({"user": name})


def remove_user(ctx: Context, name: str) -> None:
    """Remove a user and revoke its tokens; the last admin cannot be removed."""
    user = _require(ctx, name)
    if user["role"] == "admin" and not _admins_besides(ctx, name):
        raise UserError(f"{name!r} is the last admin: make another admin first")
    ctx.db.tokens.delete_many({"user": name})
    ctx.db.users.delete_one({"_id": name})


def verify_password(ctx: Context, name: str, password: str) -> Principal | None:
    """The user's principal when the password is right, else None (timing-safe)."""
    user = get_user(ctx, name)
    try:
        _hasher.verify(user["password_hash"] if user else _dummy_hash(), password)
    except (VerificationError, InvalidHashError):
        return None
    if user is None:
        return None
    if _hasher.check_needs_rehash(user["password_hash"]):
        ctx.db.users.update_one({"_id": name}, {"$set": {"password_hash": _hasher.hash(password)}})
    return Principal(name, user["role"], session_epoch=user.get("session_epoch", 0))


def _secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def create_token(
    ctx: Context, user: str, label: str, role: str | None = None, days: int = TOKEN_DAYS
) -> str:
    """A new API token for ``user`` (shown once: only its hash is stored), valid for
    ``days`` days.

    ``role`` lowers the token's rights below the user's (e.g. a read-only integration).
    """
    if not 1 <= days <= MAX_TOKEN_DAYS:
        raise UserError(f"a token lives 1 to {MAX_TOKEN_DAYS} days, not {days}")
    owner = _require(ctx, user)
    role = role or owner["role"]
    _check_role(role)
    if not has_role(owner["role"], role):
        raise UserError(f"a token cannot have more rights than its user ({owner['role']})")
    label = label.strip()
    if not label or len(label) > 100:
        raise UserError("give the token a label of 1 to 100 characters (what uses it)")
    token_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
    ctx.db.tokens.insert_one(
        {
            "_id": token_id,
            "user": user,
            "label": label,
            "role": role,
            "hash": _secret_hash(secret),
            "created_at": now(),
            "expires_at": now() + timedelta(days=days),
            "last_used": None,
        }
    )
    return f"{TOKEN_PREFIX}_{token_id}_{secret}"


def verify_token(ctx: Context, token: str) -> Principal | None:
    """The principal a token acts as, or None when it is malformed, unknown, expired or
    revoked."""
    parsed = _TOKEN.match(token.strip())
    if parsed is None:
        return None
    token_id, secret = parsed.groups()
    doc = ctx.db.tokens.find_one({"_id": token_id})
    if doc is None or not hmac.compare_digest(doc["hash"], _secret_hash(secret)):
        return None
    expires = doc.get("expires_at") or _date_undated_tokens(ctx)
    if expires <= now():
        return None
    user = get_user(ctx, doc["user"])
    if user is None:
        return None
    ctx.db.tokens.update_one({"_id": token_id}, {"$set": {"last_used": now()}})
    # The lower of the token's and the user's current role: demoting a user demotes its tokens.
    role = min(doc["role"], user["role"], key=ROLES.index)
    return Principal(doc["user"], role, token_id=token_id)


def _date_undated_tokens(ctx: Context) -> datetime:
    """Give the tokens made before tokens expired their expiry: ``TOKEN_DAYS`` from now,
    the first time one is used or listed (``dated_at`` says when); returns that expiry."""
    expires = now() + timedelta(days=TOKEN_DAYS)
    ctx.db.tokens.update_many(
        {"expires_at": None}, {"$set": {"expires_at": expires, "dated_at": now()}}
    )
    return expires


def list_tokens(ctx: Context, user: str | None = None) -> list[dict[str, Any]]:
    """Tokens (without hashes), newest first, of one user or all."""
    _date_undated_tokens(ctx)
    query = {"user": user} if user else {}
    return list(ctx.db.tokens.find(query, {"hash": 0}).sort("created_at", -1))


def revoke_token(ctx: Context, token_id: str, user: str | None = None) -> bool:
    """Delete a token (only one of ``user``'s when given); whether one was deleted."""
    query: dict[str, Any] = {"_id": token_id}
    if user:
        query["user"] = user
    return ctx.db.tokens.delete_one(query).deleted_count == 1


# Refuses an attempt while any of its counters is backing off, else counts it on all of them
# (one script, so concurrent guesses cannot slip under a limit together). Per counter:
# ARGV free, base ms, cap ms; it backs off min(cap, base * 2^(failures - free)) after its
# last failure once it holds `free` failures. Returns the milliseconds to wait, or 0.
_LUA_ATTEMPT = """
local now = redis.call('TIME')
local t = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local window = tonumber(ARGV[1])
local wait = 0
for i, key in ipairs(KEYS) do
  local free = tonumber(ARGV[3 * i - 1])
  local base = tonumber(ARGV[3 * i])
  local cap = tonumber(ARGV[3 * i + 1])
  local seen = redis.call('HMGET', key, 'failures', 'last')
  local failures = tonumber(seen[1]) or 0
  if failures >= free then
    local left = math.min(cap, base * 2 ^ (failures - free)) - (t - (tonumber(seen[2]) or 0))
    if left > wait then wait = left end
  end
end
if wait > 0 then return math.ceil(wait) end
for _, key in ipairs(KEYS) do
  redis.call('HINCRBY', key, 'failures', 1)
  redis.call('HSET', key, 'last', t)
  redis.call('PEXPIRE', key, window)
end
return 0
"""


@dataclass(frozen=True)
class Backoff:
    """How one failure counter slows logins down: ``free`` failures pass, then each further
    attempt waits ``base_s`` doubled per failure, at most ``cap_s``, after the last one."""

    free: int
    base_s: float
    cap_s: float


@dataclass(frozen=True)
class LoginThrottle:
    """Counts failed logins in Redis and backs off, over a window since the last failure.

    Three counters, so that no single one can lock everybody out: one (client, name) pair
    is locked for the window after a guessing run; an account backs off exponentially,
    whatever addresses guess at it (a distributed run gets a guess per minute at most,
    while its owner waits that long at worst); a client that tries many names backs off
    too, but briefly, because behind an untrusted proxy every user shares one address.
    Redis makes the limits hold across admin processes.
    """

    pair: Backoff = Backoff(free=5, base_s=900, cap_s=900)
    account: Backoff = Backoff(free=10, base_s=5, cap_s=60)
    client: Backoff = Backoff(free=30, base_s=5, cap_s=60)
    window_s: int = 900

    def _keys(self, ctx: Context, client: str, name: str) -> tuple[str, str, str]:
        prefix = ctx.keys.login_failures
        name_digest = hashlib.sha256(name.lower().encode()).hexdigest()[:32]
        pair_digest = hashlib.sha256(f"{client}\0{name.lower()}".encode()).hexdigest()[:32]
        return (
            f"{prefix}:pair:{pair_digest}",
            f"{prefix}:account:{name_digest}",
            f"{prefix}:client:{client}",
        )

    def attempt(self, ctx: Context, client: str, name: str) -> int:
        """Count an attempt before the password is checked (so concurrent guesses cannot
        all slip under the limit); returns 0 when this attempt may go on, else the seconds
        until another is allowed (this one is not counted then)."""
        args: list[float] = [self.window_s * 1000]
        for rule in (self.pair, self.account, self.client):
            args += [rule.free, rule.base_s * 1000, rule.cap_s * 1000]
        keys = self._keys(ctx, client, name)
        wait_ms = int(ctx.redis.eval(_LUA_ATTEMPT, len(keys), *keys, *args))
        return -(-wait_ms // 1000)

    def succeeded(self, ctx: Context, client: str, name: str) -> None:
        """Forget the failures of this name (from anywhere), and this attempt from the
        client's count."""
        pair, account, whole = self._keys(ctx, client, name)
        with ctx.redis.pipeline() as pipe:
            pipe.delete(pair, account)
            pipe.hincrby(whole, "failures", -1)
            pipe.expire(whole, self.window_s)  # never a counter without an end
            pipe.execute()
