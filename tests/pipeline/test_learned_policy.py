"""The learned routing policy on a chat route: the classifier decides cascade or strong."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from router.app import create_app
from router.config import parse_config
from router.errors import ConfigError
from router.learned import RouteClassifier, calibrate, features, features_from_messages
from tests.conftest import running
from tests.fakes.fake_frontier import FakeFrontier


def constant_classifier(path: Path, p: float, threshold: float) -> Path:
    import math

    names = sorted(features("x", "", None))
    clf = RouteClassifier(names, [0.0] * len(names), [1.0] * len(names), [0.0] * len(names),
                          math.log(p / (1 - p)), threshold)
    clf.save(path)
    return path


def config(fake: FakeFrontier, tmp_path: Path, classifier: Path) -> object:
    return parse_config({
        "data_dir": str(tmp_path / "data"),
        "frontier": {"retry": {"attempts": 1}},
        "models": {
            "small": {"model": "openai/fake-small", "api_base": fake.url, "api_key": "k",
                      "input_cost_per_token": 1e-7, "output_cost_per_token": 1e-7},
            "big": {"model": "openai/fake-big", "api_base": fake.url, "api_key": "k",
                    "input_cost_per_token": 1e-5, "output_cost_per_token": 1e-5},
        },
        "routes": {"smart": {"policy": "learned", "targets": ["small", "big"],
                             "classifier": str(classifier)}},
    }, env={})


@pytest.mark.parametrize("p,expected", [(0.9, "fake-small"), (0.1, "fake-big")])
def test_learned_route_picks_by_probability(fake: FakeFrontier, tmp_path: Path, p: float,
                                            expected: str) -> None:
    clf = constant_classifier(tmp_path / "clf.json", p, threshold=0.5)
    with running(create_app(config(fake, tmp_path, clf))) as base:
        r = httpx.post(f"{base}/v1/chat/completions", json={
            "model": "smart", "messages": [{"role": "user", "content": "hi"}]}, timeout=30)
    assert r.status_code == 200, r.text
    assert fake.requests[0]["model"] == expected


def test_learned_route_without_classifier_fails_at_startup(fake: FakeFrontier,
                                                           tmp_path: Path) -> None:
    with pytest.raises((ConfigError, RuntimeError)):
        with running(create_app(config(fake, tmp_path, tmp_path / "missing.json"))):
            pass


def test_calibration_respects_the_cost_target() -> None:
    from router.learned import _Example

    ex = [_Example({}, cheap_ok=i % 4 != 0, strong_ok=True, cheap_cost=1.0, strong_cost=10.0)
          for i in range(40)]
    probs = [0.2 if i % 4 == 0 else 0.8 for i in range(40)]
    t, table = calibrate(probs, ex, target_cost=4.0)
    chosen = next(r for r in table if r["threshold"] == round(t, 6))
    assert chosen["cost_usd"] <= 4.0 and chosen["quality"] == 1.0
    t_tight, _ = calibrate(probs, ex, target_cost=1.0)
    assert t_tight <= 0.2  # only all-cheap fits


def test_message_features_use_the_code_block() -> None:
    f = features_from_messages([{"role": "user",
                                 "content": "fix the bug\n```python\na = 1\nb = 2\n```"}])
    assert f["log_lines"] > 0 and f["kw_fix"] == 1.0
