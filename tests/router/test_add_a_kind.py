"""A new specialist kind with its own endpoint, in three files and no edit to the router
(issue 39; ``docs/adding-a-specialist.md``).

The worked example is ``tests/router/outline/``: ``specialist.py`` (the kind),
``api.py`` (its endpoint, an APIRouter) and ``config.yaml`` (the two blocks that serve
them). The real app serves that config over real HTTP: the endpoint answers, its area
labels the response and the metrics, a virtual key can be limited to it, and the other
endpoints are still there. Then what a wrong ``endpoints:`` block says.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from router.app import create_app
from router.config import load_config, parse_config
from router.errors import ConfigError
from router.serving import running

EXAMPLE = Path(__file__).parent / "outline"
MODULE = "def area(r):\n    return 3.14 * r * r\n\n\nclass Circle:\n    pass\n\n\ndef _cache():\n    pass\n"


def test_the_example_is_three_files() -> None:
    assert sorted(p.name for p in EXAMPLE.iterdir() if p.name != "__pycache__") == \
        ["api.py", "config.yaml", "specialist.py"]


def test_a_kind_and_its_endpoint_from_config_over_http(tmp_path: Path) -> None:
    config = load_config(EXAMPLE / "config.yaml", env={"COMPLEMENT_DATA_DIR": str(tmp_path)})
    with running(create_app(config)) as url, httpx.Client(base_url=url, timeout=30) as client:
        r = client.post("/v1/outline", json={"source": MODULE})
        assert r.status_code == 200, r.text
        assert r.json() == {"names": ["area", "Circle"], "abstained": False, "reason": None,
                            "version": "1"}
        assert r.headers["x-complement-route"] == "outline"
        assert r.headers["x-complement-model"] == "OutlineSpecialist@1"
        bad = client.post("/v1/outline", json={"source": "def f(:\n"}).json()
        assert bad["abstained"] is True and bad["reason"].startswith("not Python: line 1")
        typo = client.post("/v1/outline", json={"sorce": MODULE})
        assert typo.status_code == 400 and "source" in typo.text  # the nearest known name
        ready = client.get("/readyz").json()
        assert ready["specialists"]["outline"]["ok"] is True
        assert 'route="outline"' in client.get("/metrics").text
        assert "/v1/outline" in client.get("/openapi.json").json()["paths"]
        assert client.get("/v1/models").status_code == 200  # the built-in groups still serve


def test_a_virtual_key_can_be_limited_to_the_new_area(tmp_path: Path) -> None:
    env = {"COMPLEMENT_DATA_DIR": str(tmp_path)}
    config = load_config(EXAMPLE / "config.yaml", env=env)
    config.server.admin_keys = ["sk-admin-test"]
    admin = {"Authorization": "Bearer sk-admin-test"}
    with running(create_app(config)) as url, httpx.Client(base_url=url, timeout=30) as client:
        made = client.post("/key/generate", headers=admin, json={"allowed_routes": ["outline"]})
        assert made.status_code == 200, made.text
        key = {"Authorization": f"Bearer {made.json()['key']}"}
        assert client.post("/v1/outline", headers=key, json={"source": MODULE}).status_code == 200
        other = client.post("/v1/apply", headers=key, json={"original": "a\n", "sketch": "b\n"})
        assert other.status_code == 403 and "'apply'" in other.text
        wrong = client.post("/key/generate", headers=admin, json={"allowed_routes": ["outlin"]})
        assert wrong.status_code == 400 and "'outline']" in wrong.json()["error"]["message"]
        schema = client.get("/openapi.json", headers=admin).json()["components"]["schemas"]["GenerateBody"]
        assert "outline" in str(schema["properties"]["allowed_routes"])


@pytest.mark.parametrize("endpoints, says", [
    ({"tab": {"router": "tests.router.outline.api:router"}}, "endpoints: 'tab' is a built-in"),
    ({"Out line": {"router": "tests.router.outline.api:router"}}, "'Out line': an area name"),
    ({"outline": {"router": "tests.router.outline.nowhere:router"}},
     "endpoints.outline.router: cannot load 'tests.router.outline.nowhere:router'"),
    ({"outline": {"router": "tests.router.outline.api:OutlineBody"}},
     "is a ModelMetaclass, not a FastAPI APIRouter"),
    ({"outline": {"router": "tests.router.outline.api"}}, "endpoints.outline.router"),
    ({"outline": {"router": "router.api.apply:router"}}, "path '/v1/apply' is served already"),
])
def test_a_wrong_endpoints_block_fails_the_start_naming_it(endpoints: dict, says: str) -> None:
    with pytest.raises(ConfigError, match=says.replace("(", r"\(").replace(".", r"\.")):
        create_app(parse_config({"endpoints": endpoints}, env={}))
