"""Every API endpoint belongs to an area (issue 39: ``router/app.py``'s path table was an
undocumented list, and an endpoint missing from it got no metrics of its own; since issue
37 it is also what a virtual key's ``allowed_routes`` is checked against)."""

from __future__ import annotations

from router.app import SYSTEM_PATHS, _route_of, _route_methods, create_app
from router.config import parse_config
from router.keys import AREAS


def test_every_v1_endpoint_has_an_area_a_key_can_be_limited_to() -> None:
    app = create_app(parse_config({}, env={}))
    paths = sorted(p for p in _route_methods(app) if p.startswith("/v1/"))
    assert len(paths) >= 12, paths
    unnamed = [p for p in paths if p not in SYSTEM_PATHS and _route_of(p) == "system"]
    assert unnamed == [], f"add these to router.app._PATH_ROUTES: {unnamed}"
    assert {_route_of(p) for p in paths} <= set(AREAS)
