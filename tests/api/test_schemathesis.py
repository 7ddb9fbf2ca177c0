"""Schemathesis over the whole REST API: generated requests (examples, coverage, fuzzing and
stateful link chains) against the running ASGI app, as an admin. Every response must be a
non-5xx answer that matches the OpenAPI schema (status documented, body valid).

Slow (minutes): marked ``schemathesis``, which ``.ci/run`` runs once, not per database.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.models import APIToken
from fleet.models import Cluster
from tests.servers import asgi_server  # noqa: F401  (fixture)

pytestmark = pytest.mark.schemathesis
MIN_REQUESTS = 2000
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def seeded(admin_user):
    """Something for the generated requests to find: a simulated cluster and a token."""
    Cluster.objects.create(name="fuzz-1", connector=Cluster.ConnectorKind.SIMULATED, connector_config={"node_count": 5})
    return APIToken.issue(admin_user)[1]


def test_the_api_answers_every_generated_request_within_its_schema(asgi_server, seeded, tmp_path):  # noqa: F811
    har = tmp_path / "requests.har"
    command = [
        str(Path(sys.executable).parent / "schemathesis"), "run", f"{asgi_server}/api/schema/",
        "--url", asgi_server,
        "--header", f"Authorization: Token {seeded}",
        # Revoking tokens by id would revoke the run's own token (id 1) and turn the rest of the
        # run into 401s; token revocation has its own tests.
        "--exclude-operation-id", "auth_tokens_destroy",
        "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
        "--phases", "examples,coverage,fuzzing,stateful",
        "--max-examples", os.environ.get("MERIDIAN_SCHEMATHESIS_EXAMPLES", "10"),
        "--seed", "20261126", "--request-timeout", "30", "--workers", "1", "--continue-on-failure",
        "--generation-allow-x00", "false", "--suppress-health-check", "all",
        "--report", "har", "--report-har-path", str(har), "--no-color",
    ]
    if os.environ.get("MERIDIAN_SCHEMATHESIS_PATHS"):  # a developer narrowing a run: a path regex
        command += ["--include-path-regex", os.environ["MERIDIAN_SCHEMATHESIS_PATHS"]]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "tests.api.schemathesis_hooks", "PYTHONPATH": str(ROOT)}
    result = subprocess.run(command, capture_output=True, text=True, timeout=3000, cwd=ROOT, env=env)
    entries = json.loads(har.read_text())["log"]["entries"] if har.exists() else []
    server_errors = [f"{e['request']['method']} {e['request']['url']} -> {e['response']['status']}"
                     for e in entries if e["response"]["status"] >= 500]
    assert server_errors == [], "\n".join(server_errors[:20])
    assert result.returncode == 0, failures_of(result.stdout)
    assert len(entries) >= MIN_REQUESTS or os.environ.get("MERIDIAN_SCHEMATHESIS_PATHS"), f"only {len(entries)} requests were generated"
    unauthorized = sum(e["response"]["status"] == 401 for e in entries)
    assert unauthorized < len(entries) / 20, f"{unauthorized} of {len(entries)} requests were refused as unauthenticated"


def failures_of(output: str) -> str:
    """The FAILURES section of schemathesis' report, long lines (generated bodies) cut short."""
    start = output.find("FAILURES")
    end = output.find("WARNINGS", start)
    section = output[start:end] if start >= 0 else output[-8000:]
    return "\n".join(line if len(line) <= 300 else line[:300] + " …" for line in section.splitlines())
