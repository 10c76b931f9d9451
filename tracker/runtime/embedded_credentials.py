"""Credentials of the embedded servers, so that no other local process reaches their data.

Without them any process of the machine could connect to the embedded Valkey and
SecantusDB on loopback: read a user's session epoch from MongoDB, write a session key into
Valkey, and sign in to the admin with that cookie. So:

- ``DATA/server-secret`` (mode 0600, random, made on the first start) is the password of
  both servers. Every URL the embedded runtime hands out (`tracker.runtime.servers.ensure_servers`,
  the state file ``DATA/servers.json``, also 0600) carries it.
- Valkey reads it as ``requirepass`` from ``DATA/valkey/valkey.conf`` (0600, written at
  each start): on its command line every local user could read it.
- SecantusDB runs with ``--auth`` (SCRAM-SHA-256) and has one user, ``copytrack``, whose
  password is the secret. It keeps its users in its storage and cannot create the first one
  while ``--auth`` is on, so the user is made (or given a new secret) with the server
  started once without ``--auth`` but with TLS that requires a client certificate signed by
  a CA made for that start alone (in a 0700 directory, deleted after): no other process can
  connect meanwhile. A marker in the storage directory records the secret's digest.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import ipaddress
import os
import secrets
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .processes import terminate

if TYPE_CHECKING:  # pymongo is imported where it is used: after copytrack.mongo_tls
    from pymongo import MongoClient
    from pymongo.database import Database

SECRET_FILE = "server-secret"
#: SecantusDB's user for copytrack (in its ``admin`` database, role ``root``).
MONGO_USER = "copytrack"
#: In the storage directory: the digest of the secret its user has.
USER_MARKER = "copytrack-user"
VALKEY_CONFIG = "valkey.conf"
_HOST = "127.0.0.1"
_POLL = 0.1


def _write_private(path: Path, text: str) -> None:
    """Write a file readable by its owner only, atomically."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def server_secret(data_dir: Path) -> str:
    """The embedded servers' secret, made on first use; its file is kept at mode 0600."""
    path = data_dir / SECRET_FILE
    with contextlib.suppress(FileNotFoundError):
        os.chmod(path, 0o600)  # a copy made with looser permissions is tightened
        secret = path.read_text().strip()
        if secret:
            return secret
    # Hex: nothing in it needs quoting in a URL or a config file.
    secret = secrets.token_hex(32)
    _write_private(path, secret + "\n")
    return secret


def valkey_config(data_dir: Path, secret: str) -> Path:
    """Valkey's config file (its password); the directory must exist."""
    path = data_dir / "valkey" / VALKEY_CONFIG
    _write_private(
        path, f"# written by copytrack at every start; see {SECRET_FILE}\nrequirepass {secret}\n"
    )
    return path


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def mongo_user_ready(storage: Path, secret: str) -> bool:
    """Whether the storage's user was given this secret."""
    try:
        return (storage / USER_MARKER).read_text().strip() == _digest(secret)
    except OSError:
        return False


def provision_mongo_user(
    storage: Path, secret: str, command: list[str], port: int, log_path: Path, timeout: float
) -> None:
    """Give the storage's user ``copytrack`` the secret, creating it if need be; drop any
    other user. ``command`` starts SecantusDB on ``port`` without ``--auth``; it runs here
    with TLS that only this function's certificate gets through."""
    import pymongo

    with tempfile.TemporaryDirectory(dir=storage.parent, prefix=".bootstrap-") as tmp:
        ca, server, client = _certificates(Path(tmp))  # mkdtemp: mode 0700
        tls = ["--tls-cert-file", str(server), "--tls-key-file", str(server),
               "--tls-ca-file", str(ca), "--tls-require-client-cert"]  # fmt: skip
        with open(log_path, "ab") as out:
            out.write(b"\n=== copytrack setting the server's user, TLS with a client certificate\n")
            out.flush()
            proc = subprocess.Popen(
                [*command, *tls], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                cwd=storage.parent, start_new_session=True,
            )  # fmt: skip
        url = (
            f"mongodb://{_HOST}:{port}/?directConnection=true&tls=true"
            f"&tlsCAFile={ca}&tlsCertificateKeyFile={client}"
        )
        mongo: MongoClient[dict[str, Any]] = pymongo.MongoClient(
            url, serverSelectionTimeoutMS=1000, connectTimeoutMS=1000
        )
        try:
            _await(mongo, proc, log_path, time.monotonic() + timeout)
            _set_user(mongo.admin, secret)
        finally:
            mongo.close()
            terminate([proc.pid], lambda _pid: proc.poll() is not None, 15.0)
    _write_private(storage / USER_MARKER, _digest(secret) + "\n")


def _await(
    mongo: MongoClient[dict[str, Any]],
    proc: subprocess.Popen[bytes],
    log_path: Path,
    deadline: float,
) -> None:
    import pymongo.errors

    while True:
        if proc.poll() is not None:
            raise OSError(f"SecantusDB exited with code {proc.returncode}; read {log_path}")
        try:
            mongo.admin.command("ping")
            return
        except pymongo.errors.PyMongoError:
            if time.monotonic() > deadline:
                raise
        time.sleep(_POLL)


def _set_user(admin: Database[dict[str, Any]], secret: str) -> None:
    users = admin.command("usersInfo", {"forAllDBs": True})["users"]
    found = False
    for user in users:
        if user["user"] == MONGO_USER and user["db"] == "admin":
            found = True
        else:  # nobody but copytrack makes users here: one left by someone else goes
            admin.client[user["db"]].command("dropUser", user["user"])
    if found:
        admin.command("updateUser", MONGO_USER, pwd=secret)
    else:
        admin.command("createUser", MONGO_USER, pwd=secret, roles=["root"])


def _certificates(directory: Path) -> tuple[Path, Path, Path]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, valid for an hour
    (PEM files in ``directory``: the CA's certificate, then key + certificate of each)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    def certificate(subject: str, key: ec.EllipticCurvePrivateKey) -> x509.CertificateBuilder:
        return (
            x509.CertificateBuilder()
            .subject_name(name(subject))
            .issuer_name(name("copytrack bootstrap CA"))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
        )

    def pem(path: Path, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> Path:
        key_bytes = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        _write_private(path, (key_bytes + cert.public_bytes(serialization.Encoding.PEM)).decode())
        return path

    ca_key, server_key, client_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    ca = (
        certificate("copytrack bootstrap CA", ca_key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    server = (
        certificate("copytrack embedded SecantusDB", server_key)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(_HOST))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    client = certificate("copytrack", client_key).sign(ca_key, hashes.SHA256())
    ca_path = directory / "ca.pem"
    _write_private(ca_path, ca.public_bytes(serialization.Encoding.PEM).decode())
    return (
        ca_path,
        pem(directory / "server.pem", server_key, server),
        pem(directory / "client.pem", client_key, client),
    )
