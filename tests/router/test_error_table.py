"""No specialist error reaches a client as a 500: each type in specialists.base has a row in
the router's one table, and a real server answers its status in OpenAI's error shape."""

from __future__ import annotations

import inspect
from pathlib import Path

import httpx
import pytest
import yaml

import specialists.base as base
from router.app import create_app
from router.config import load_config
from router.errors import SPECIALIST_ERRORS
from tests.conftest import running

EXPECTED = {"SpecialistError": (400, "invalid_request_error"),
            "NotFoundError": (404, "not_found_error"),
            "ForbiddenError": (403, "permission_error"),
            "ConflictError": (409, "conflict_error"),
            "UnavailableError": (503, "service_unavailable"),
            "OptionsError": (503, "service_unavailable")}


def test_every_specialist_error_type_has_a_row() -> None:
    types = {obj for _, obj in inspect.getmembers(base, inspect.isclass)
             if issubclass(obj, base.SpecialistError)}
    assert types == set(SPECIALIST_ERRORS), "add the new type to router.errors.SPECIALIST_ERRORS"
    assert {t.__name__ for t in types} == set(EXPECTED)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("errors")
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump({
        "data_dir": str(tmp / "data"),
        "specialists": {"apply": {"class": "tests.router.swap_specialists:Raiser"}}}))
    with running(create_app(load_config(path))) as url:
        yield url


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_raised_specialist_error_answers_its_status(server: str, name: str) -> None:
    r = httpx.post(f"{server}/v1/apply", json={"original": "", "sketch": name}, timeout=30)
    status, kind = EXPECTED[name]
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["type"] == kind and "raised on purpose" in error["message"]
    if name != "OptionsError":  # a config fault is the server's, not the request's field
        assert error["param"] == "sketch"
