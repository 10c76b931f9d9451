"""The JSON API keeps the contract its OpenAPI document states, checked by schemathesis.

schemathesis (the command-line fuzzer integrators use) reads /api/v1/openapi.json from the
admin served on loopback and sends generated requests, valid and invalid, with the token of
each role: every response must have a documented status code, match the documented schema
and content type; schema-valid requests must be accepted and invalid ones refused; a
request without the token must be refused. Any finding fails the test with its report.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.admin_seed import seed
from tests.served_admin import served_admin
from tracker.context import Context
from tracker.users import create_token

ST = Path(sys.executable).with_name("st")  # schemathesis's command, beside this interpreter
EXAMPLES = 15  # generated requests per operation and phase; a bound, so the suite stays quick
ROLES = (("ada", "admin"), ("rui", "reviewer"), ("vic", "viewer"))


@pytest.mark.slow
@pytest.mark.parametrize(("name", "role"), ROLES)
def test_the_api_keeps_its_documented_contract(
    ctx: Context, tmp_path: Path, name: str, role: str
) -> None:
    seed(ctx, pages=6)
    token = create_token(ctx, name, f"{role} contract test", role=role)
    with served_admin(ctx) as port:
        done = subprocess.run(
            [
                str(ST), "run", f"http://127.0.0.1:{port}/api/v1/openapi.json",
                "--header", f"Authorization: Bearer {token}",
                "--checks", "all",
                "--phases", "examples,coverage,fuzzing",
                "--max-examples", str(EXAMPLES),
                "--generation-deterministic",
                "--workers", "1",
                "--request-timeout", "30",
                "--no-color",
            ],
            capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
