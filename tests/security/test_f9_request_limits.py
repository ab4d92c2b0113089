"""F9 (issue 41): files and bytes per /v1/apply and /v1/edit request are limited
(``server.max_files_per_request``, ``server.max_text_bytes_per_request``), refused with a
413 naming the limit and its key before the applier sees the request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest

from router.audit import f9_request_limits as f9
from router.audit.raw import port_of


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with f9.target(tmp_path_factory.mktemp("f9")) as url:
        yield port_of(url)


def _files(count: int, size: int = 60) -> list[dict[str, str]]:
    return f9._files(count, size)


def test_apply_with_too_many_files_is_413_naming_the_key(port: int) -> None:
    answer = f9.send(port, "/v1/apply", json.dumps({"files": _files(f9.MAX_FILES + 1)}).encode())
    assert answer.status == 413, answer.body[:300]
    error = answer.json()["error"]
    assert error["code"] == "too_many_files"
    assert "server.max_files_per_request" in error["message"]
    assert str(f9.MAX_FILES) in error["message"] and str(f9.MAX_FILES + 1) in error["message"]


def test_twenty_thousand_files_are_refused_in_seconds(port: int) -> None:
    answer = f9.send(port, "/v1/apply", json.dumps({"files": _files(f9.FILES)}).encode(),
                     timeout=f9.QUICK_S * 3)
    assert answer.status == 413, answer.body[:300]
    assert answer.seconds < f9.QUICK_S


def test_edit_with_too_many_inline_texts_is_413(port: int) -> None:
    texts = {f["path"]: f["original"] for f in _files(f9.MAX_FILES + 1)}
    answer = f9.send(port, "/v1/edit", json.dumps({"instruction": "x", "texts": texts}).encode())
    assert answer.status == 413, answer.body[:300]
    assert "server.max_files_per_request" in answer.error_message()


def test_too_much_text_is_413_naming_its_key(port: int) -> None:
    big = _files(2, 600_000)
    for path, body in (("/v1/apply", {"files": big}),
                       ("/v1/apply", {"original": big[0]["original"] * 2, "sketch": "x\n"}),
                       ("/v1/edit", {"instruction": "x",
                                     "texts": {f["path"]: f["original"] for f in big}})):
        answer = f9.send(port, path, json.dumps(body).encode())
        assert answer.status == 413, (path, answer.body[:300])
        assert "server.max_text_bytes_per_request" in answer.error_message()


def test_the_limit_itself_is_served(port: int) -> None:
    answer = f9.send(port, "/v1/apply", json.dumps({"files": _files(f9.MAX_FILES)}).encode())
    assert answer.status == 200, answer.body[:300]
    assert len(answer.json()["files"]) == f9.MAX_FILES


def test_the_defaults_and_old_configs_load() -> None:
    from router.config import load_config, parse_config

    server = parse_config({}, env={}).server
    assert (server.max_files_per_request, server.max_text_bytes_per_request) == (200, 2 * 1024 * 1024)
    shipped = load_config(Path(__file__).resolve().parents[2] / "configs" / "default.yaml",
                          env={}).server
    assert shipped.max_files_per_request == 200


def test_probe_is_clean(tmp_path: Path) -> None:
    tally = f9.probe(tmp_path)
    assert tally.ok, tally.as_dict()
    assert tally.attempts >= 8
