"""The service's settings and what it answers to bodies it cannot read (issue 23, items 5 and 9).

Invariants: every numeric setting of ``serve`` (port, max_batch, max_text_chars, max_k, max_wait_ms, the
timeouts, limit_concurrency) is checked in one place (:class:`~infembed.search.settings.ServeSettings`) before
anything is loaded: a bad value is one line naming the setting, exit 2 (``--max-wait-ms inf`` made every /search
hang and SIGTERM not stop the server); a busy port is one line naming it, exit 2, before the model loads; a body
not sent as JSON is told what is expected; a UTF-16 or UTF-32 body is a 422, as the docs say.
"""

from __future__ import annotations

import dataclasses
import json
import socket

import httpx
import pytest
import typer
from background_server import BackgroundServer
from typer.testing import CliRunner

from infembed.cli.search import register
from infembed.data.errors import SettingsError
from infembed.search.service import create_app
from infembed.search.settings import ServeSettings


@pytest.fixture(scope="module")
def cli() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--max-wait-ms", "inf", "max_wait_ms must be a number >= 0 and <= 1000"),
        ("--max-wait-ms", "nan", "max_wait_ms must be a number"),
        ("--max-wait-ms", "-5", "max_wait_ms must be a number >= 0"),
        ("--max-k", "0", "max_k must be a whole number >= 1; got 0"),
        ("--max-batch", "-1", "max_batch must be a whole number >= 1; got -1"),
        ("--max-text-chars", "0", "max_text_chars must be a whole number >= 1; got 0"),
        ("--port", "-1", "port must be a whole number >= 1 and <= 65535; got -1"),
        ("--port", "70000", "port must be a whole number >= 1 and <= 65535; got 70000"),
        ("--header-timeout", "0", "header_timeout must be a number > 0"),
        ("--body-timeout", "inf", "body_timeout must be a number > 0"),
        ("--limit-concurrency", "0", "limit_concurrency must be a whole number >= 1; got 0"),
    ],
)
def test_a_bad_serve_setting_is_one_line_before_anything_loads(cli, tmp_path, flag, value, message):
    # the index does not exist: the setting is refused first, before the index (and its model) is read
    result = CliRunner().invoke(cli, ["serve", "--index", str(tmp_path / "absent"), flag, value])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines
    assert "Traceback" not in result.output


def test_the_library_takes_the_same_checks(flat_index):
    with pytest.raises(SettingsError, match="max_wait_ms"):
        create_app(flat_index, max_wait_ms=float("inf"))
    with pytest.raises(SettingsError, match="max_k"):
        create_app(flat_index, settings=ServeSettings(), max_k=0)
    with pytest.raises(SettingsError, match="unknown serve setting"):
        ServeSettings.of(max_wait=3)
    assert ServeSettings.of(ServeSettings(max_k=7), max_batch=3) == ServeSettings(max_k=7, max_batch=3)


def test_every_serve_setting_is_a_flag(cli):
    result = CliRunner().invoke(cli, ["serve", "--help"], terminal_width=200)
    assert result.exit_code == 0
    for field in dataclasses.fields(ServeSettings):
        name = {"batching": "--no-batching"}.get(field.name, f"--{field.name.replace('_', '-')}")
        assert name in result.output, name


def test_a_busy_port_is_one_line_before_the_model_loads(cli, tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        # the index does not exist: the port is checked before it is read
        result = CliRunner().invoke(cli, ["serve", "--index", str(tmp_path / "absent"), "--port", str(port)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and f"port {port}" in lines[-1] and "in use" in lines[-1], lines
    assert "Traceback" not in result.output


@pytest.fixture(scope="module")
def client(bm25_index):
    with BackgroundServer(create_app(bm25_index)) as url, httpx.Client(base_url=url, timeout=60) as c:
        yield c


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
def test_a_body_not_sent_as_json_is_told_what_is_expected(client, content_type):
    response = client.post("/search", content=b'{"query": "bees"}', headers={"content-type": content_type})
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert "JSON object" in detail and "Content-Type: application/json" in detail and content_type in detail
    assert "valid dictionary" not in detail


def test_a_json_body_that_is_not_an_object_is_told_so(client):
    response = client.post("/search", json=["bees"])
    assert response.status_code == 422 and "JSON object" in response.json()["detail"], response.text


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_a_body_that_is_not_utf8_is_422(client, encoding):
    body = json.dumps({"query": "how do bees make honey"}).encode(encoding)
    response = client.post("/search", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    assert "UTF-8" in response.json()["detail"]
    assert client.post("/search", json={"query": "how do bees make honey"}).status_code == 200
