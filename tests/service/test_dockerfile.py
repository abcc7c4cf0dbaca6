"""The Dockerfile keeps its promises; no image can be built here, so it is read instead."""

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

from tests.support.webserver import Reply

DOCKERFILE = Path(__file__).resolve().parents[2] / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order: continuation lines joined, comments dropped."""
    found: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        pending += line.rstrip().removesuffix("\\") + " "
        if not line.rstrip().endswith("\\"):
            keyword, _, arguments = pending.strip().partition(" ")
            found.append((keyword.upper(), " ".join(arguments.split())))
            pending = ""
    return found


def stages() -> list[list[tuple[str, str]]]:
    """The instructions of each stage, FROM first; the global ARGs are substituted."""
    args = {}
    result: list[list[tuple[str, str]]] = []
    for keyword, arguments in instructions():
        if keyword == "ARG" and not result:
            name, _, default = arguments.partition("=")
            args[name] = default
            continue
        if keyword == "FROM":
            arguments = re.sub(r"\$\{(\w+)\}", lambda m: args[m[1]], arguments)
            result.append([])
        result[-1].append((keyword, arguments))
    return result


def runs(stage: list[tuple[str, str]]) -> str:
    return "\n".join(arguments for keyword, arguments in stage if keyword == "RUN")


def test_every_stage_is_python_slim_pinned_by_digest():
    """Both stages start from python:3.11-slim pinned to a sha256 digest."""
    bases = [stage[0][1].split()[0] for stage in stages()]
    assert 2 <= len(bases)
    for base in bases:
        assert re.fullmatch(r"python:3\.11-slim@sha256:[0-9a-f]{64}", base), base
    assert "docker buildx imagetools inspect python:3.11-slim" in DOCKERFILE.read_text()


def test_dependencies_come_from_the_lock_without_dev_tools():
    """The build stage copies uv.lock and every `uv sync` is --frozen --no-dev."""
    build = stages()[0]
    copied = " ".join(arguments for keyword, arguments in build if keyword == "COPY")
    syncs = [line for line in runs(build).splitlines() if "uv sync" in line]
    assert "uv.lock" in copied.split()
    assert syncs
    assert all("--frozen" in sync and "--no-dev" in sync for sync in syncs)


def test_the_runtime_stage_has_no_uv_nor_build_tools():
    """The last stage installs nothing: it copies the environment from the build stage."""
    runtime = stages()[-1]
    commands = runs(runtime)
    assert not re.search(r"\b(uv|pip|apt-get|apk)\b", commands), commands
    copies = [arguments for keyword, arguments in runtime if keyword == "COPY"]
    assert ["--from=build /app/.venv /app/.venv"] == copies


def test_the_runtime_runs_as_a_user_and_checks_its_health():
    """A non-root USER before CMD; HEALTHCHECK GETs /healthz with Python (no curl)."""
    runtime = stages()[-1]
    keywords = [keyword for keyword, _ in runtime]
    user = [arguments for keyword, arguments in runtime if keyword == "USER"]
    (health,) = [arguments for keyword, arguments in runtime if keyword == "HEALTHCHECK"]
    options, _, command = health.partition("CMD ")
    argv = json.loads(command)
    assert user and user[-1] not in ("root", "0")
    assert keywords.index("USER") < keywords.index("CMD")
    assert ["python", "-c"] == argv[:2]
    assert "urllib.request.urlopen" in argv[2] and "/healthz" in argv[2]
    assert "--timeout=" in options and "curl" not in health


def test_the_healthcheck_command_passes_on_200_and_fails_otherwise(web):
    """The HEALTHCHECK's Python, run here: exit 0 while /healthz answers 200; non-zero on a
    503 or with nothing listening."""
    (health,) = [arguments for keyword, arguments in stages()[-1] if keyword == "HEALTHCHECK"]
    argv = json.loads(health.partition("CMD ")[2])
    port = web.base_url.rsplit(":", 1)[1]

    def status(port: str) -> int:
        env = {**os.environ, "INGEST_PORT": port}
        command = [sys.executable, *argv[1:]]
        return subprocess.run(command, env=env, capture_output=True, timeout=30).returncode

    healthy = status(port)
    web.script("/healthz", Reply(503))
    unhealthy = status(port)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        refused = status(str(sock.getsockname()[1]))
    assert (0, True, True) == (healthy, unhealthy != 0, refused != 0)


def test_the_image_does_not_start_open():
    """The image serves on every address and sets neither API keys nor
    INGEST_ALLOW_OPEN_API, so `ingest serve` refuses to start unless the operator passes one
    (tests/service/test_serve.py: serve on 0.0.0.0 without keys exits 2)."""
    runtime = stages()[-1]
    (command,) = [json.loads(arguments) for keyword, arguments in runtime if keyword == "CMD"]
    environment = " ".join(arguments for keyword, arguments in runtime if keyword in ("ENV", "ARG"))
    assert ["ingest", "serve", "--host", "0.0.0.0"] == command
    assert "INGEST_ALLOW_OPEN_API" not in environment
    assert "INGEST_API_KEYS" not in environment
