"""The eval config: the models (with their latency model for replay) and the routes compared.

```yaml
sketch_k: 3                    # context lines of a replayed sketch
models:
  sonnet:
    model: replay/claude-sonnet-4-5   # replay/<name>: offline; prices from litellm's map
    latency: {ttft_s: 1.2, tokens_per_s: 65}
routes:
  whole-file: {strategy: whole_file, targets: [sonnet]}
  cascade:    {strategy: cascade, targets: [sonnet]}
  learned:    {policy: learned, classifier: runs/router.json, cheap: cascade, strong: whole-file}
```

A model whose ``model`` does not start with ``replay/`` is a real provider (keys through
``${VAR}`` as in the main config); the report says which mode produced every number.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from router.errors import ConfigError

__all__ = ["EvalConfig", "EvalModel", "EvalRoute", "load_eval_config", "default_eval_config"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LatencySpec(_Strict):
    ttft_s: float = Field(0.6, ge=0)
    tokens_per_s: float = Field(80.0, gt=0)


class EvalModel(_Strict):
    model: str
    api_key: str | None = None
    api_base: str | None = None
    latency: LatencySpec = Field(default_factory=LatencySpec)
    """Used only when the model is a replay model: the call's latency is modelled."""
    input_cost_per_token: float | None = None
    output_cost_per_token: float | None = None


class EvalRoute(_Strict):
    policy: Literal["fixed", "learned"] = "fixed"
    strategy: str = "cascade"
    targets: list[str] = Field(default_factory=list)
    classifier: str | None = None
    """learned: the classifier file written by ``complement router train``."""
    threshold: float | None = None
    """learned: overrides the threshold calibrated for the target cost."""
    cheap: str | None = None
    strong: str | None = None
    model_applier: str | None = None
    """``package.module:factory``: called with no arguments, returns the model-based applier
    ``(original, sketch, language, path) -> ApplyResult`` tried after an abstained sketch."""
    description: str = ""

    @model_validator(mode="after")
    def _shape(self) -> "EvalRoute":
        if self.policy == "learned":
            if not (self.cheap and self.strong):
                raise ValueError("a learned route names 'cheap' and 'strong' routes")
        elif not self.targets:
            raise ValueError("a route needs at least one target model")
        return self


def _default_specialists() -> dict[str, Any]:
    return {"apply": {"class": "specialists.apply.specialist:ApplySpecialist"}}


class EvalConfig(_Strict):
    sketch_k: int = Field(3, ge=0, le=20)
    models: dict[str, EvalModel]
    routes: dict[str, EvalRoute]
    specialists: dict[str, Any] = Field(default_factory=_default_specialists)
    """Specialist blocks, as in the main config: the edit routes merge with its ``apply``."""
    source: str = "<eval config>"

    @model_validator(mode="after")
    def _refs(self) -> "EvalConfig":
        for name, route in self.routes.items():
            for t in route.targets:
                if t not in self.models:
                    raise ValueError(f"routes.{name}: target {t!r} is not under models")
            for sub in (route.cheap, route.strong):
                if sub is not None and (sub not in self.routes or
                                        self.routes[sub].policy == "learned"):
                    raise ValueError(f"routes.{name}: {sub!r} must be a fixed route")
        return self

    def main_config(self) -> Any:
        """A ``router.config.Config`` holding these models, for ``FrontierClient``."""
        from router.config import parse_config

        models = {}
        for name, m in self.models.items():
            block = m.model_dump(exclude={"latency"}, exclude_none=True)
            block["requires_key"] = not m.model.startswith("replay/") and not m.api_base
            models[name] = block
        return parse_config({"models": models, "specialists": self.specialists},
                            source=self.source)

    def latency_models(self) -> dict[str, Any]:
        from router.replay import LatencyModel

        return {n: LatencyModel(m.latency.ttft_s, m.latency.tokens_per_s)
                for n, m in self.models.items()}

    def mode_of(self, route: str) -> str:
        r = self.routes[route]
        if r.policy == "learned":
            modes = {self.mode_of(r.cheap or ""), self.mode_of(r.strong or "")}
            return modes.pop() if len(modes) == 1 else "mixed"
        replay = [self.models[t].model.startswith("replay/") for t in r.targets]
        return "replay" if all(replay) else "real" if not any(replay) else "mixed"


def default_eval_config() -> Path:
    local = Path("configs/eval/routes.yaml")
    if local.is_file():
        return local
    return Path(__file__).resolve().parents[2] / "configs" / "eval" / "routes.yaml"


def load_eval_config(path: str | Path | None = None,
                     env: dict[str, str] | None = None) -> EvalConfig:
    from router.config import interpolate, read_yaml  # the same rules as the main config

    p = Path(path) if path else default_eval_config()
    data = interpolate(read_yaml(p, "eval config", "; pass --config FILE") or {}, env)
    try:
        return EvalConfig.model_validate({**data, "source": str(p)})
    except ValidationError as exc:
        lines = [f"invalid eval config {str(p)!r}:"]
        for err in exc.errors():
            loc = ".".join(str(x) for x in err["loc"])
            lines.append(f"  {loc}: {err['msg'].removeprefix('Value error, ')}")
        raise ConfigError("\n".join(lines)) from None
