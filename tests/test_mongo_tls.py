"""pymongo's TLS library: Python's ssl unless the MongoDB URL mentions TLS, in which case
pyOpenSSL (installed with Scrapy) and its OCSP checks stay (copytrack.mongo_tls)."""

from __future__ import annotations

import os
import subprocess
import sys

import pymongo
import pytest

from copytrack.mongo_tls import mentions_tls

PROBE = (
    "import sys; from copytrack.cli import run; import pymongo.ssl_support as tls; "
    "print(tls.HAVE_PYSSL, 'OpenSSL' in sys.modules, 'requests' in sys.modules)"
)


def _command_line_loads(mongo_url: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "COPYTRACK_MONGO_URL"}
    if mongo_url is not None:
        env["COPYTRACK_MONGO_URL"] = mongo_url
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.mark.parametrize("url", [None, "mongodb://db.example:27017/copytrack"])
def test_without_tls_the_command_line_does_not_load_pyopenssl(url: str | None) -> None:
    # copytrack.mongo_tls blocks a private module of pymongo by its name.
    assert _command_line_loads(url) == "False False False", (
        f"pymongo {pymongo.__version__} loads pyOpenSSL other than through "
        "pymongo.pyopenssl_context: update copytrack/mongo_tls.py"
    )


@pytest.mark.parametrize(
    "url",
    [
        "mongodb://db.example:27017/copytrack?tls=true",
        "mongodb://db.example/?replicaSet=rs0&ssl=true",
        "mongodb+srv://cluster0.example.net/copytrack",
    ],
)
def test_a_url_with_tls_keeps_pyopenssl_and_its_ocsp_checks(url: str) -> None:
    assert _command_line_loads(url).startswith("True True")


def test_what_counts_as_asking_for_tls() -> None:
    assert mentions_tls(" MongoDB+SRV://x.example/db ")
    assert mentions_tls("mongodb://x/?tlsCAFile=/etc/ca.pem")
    assert not mentions_tls("")
    assert not mentions_tls("mongodb://127.0.0.1:27017/?directConnection=true")
