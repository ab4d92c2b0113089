"""Specialist registry: build specialists from config blocks, by import string or entry point.

A config block names a class either as ``package.module:Class`` or as the name of an entry
point in the ``complement.specialists`` group; its ``options`` are validated against the
class's ``Options`` model and become keyword arguments. Swapping a specialist is a YAML
edit, never a code change.

Every path that needs a specialist takes it from here: the HTTP endpoints through the
``uses(kind)`` dependency, the edit pipeline and the CLI through ``Registry.by_kind``.
"""

from __future__ import annotations

import importlib
import logging
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterator, Mapping

from fastapi import Request

from router.errors import ConfigError, Unavailable
from specialists.base import Closable, OptionsError, Specialist, capabilities, validate_options

if TYPE_CHECKING:
    from router.config import SpecialistConfig

__all__ = ["Registry", "check_block", "configures", "load_class", "specialist_for",
           "specialist_from_config", "uses"]

ENTRY_POINT_GROUP = "complement.specialists"
log = logging.getLogger(__name__)


def load_class(ref: str, *, where: str = "class") -> type[Specialist]:
    """Resolve ``module:Class`` or an entry-point name to a Specialist subclass."""
    if ":" in ref:
        module_name, _, attr = ref.partition(":")
        try:
            obj: Any = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"{where}: cannot import {ref!r}: {exc}") from exc
    else:
        matches = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == ref]
        if not matches:
            raise ConfigError(
                f"{where}: {ref!r} is neither 'package.module:Class' nor an entry point "
                f"in the {ENTRY_POINT_GROUP!r} group"
            )
        obj = matches[0].load()
    if not (isinstance(obj, type) and issubclass(obj, Specialist)):
        raise ConfigError(f"{where}: {ref!r} is not a subclass of specialists.base.Specialist")
    return obj


def check_block(name: str, block: "SpecialistConfig") -> tuple[type[Specialist], dict[str, Any]]:
    """The class a config block names and its validated options; ``ConfigError`` naming the
    key path (``specialists.NAME.options.FIELD``) of anything wrong."""
    klass = load_class(block.class_, where=f"specialists.{name}.class")
    try:
        options = validate_options(klass, block.options, where=f"specialists.{name}.options")
    except OptionsError as exc:
        raise ConfigError(exc.message) from None
    return klass, options


def build(name: str, klass: type[Specialist], options: Mapping[str, Any]) -> Specialist:
    """Construct one specialist; a constructor's own refusal is a ``ConfigError`` too."""
    try:
        spec = klass(**options)
    except OptionsError as exc:
        raise ConfigError(f"specialists.{name}.options: {exc.message}") from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"specialists.{name}.options: {exc}") from exc
    capabilities(spec)  # worked out once, here: the endpoints read it on every request
    return spec


def _block_of_kind(blocks: dict[str, "SpecialistConfig"], kind: str
                   ) -> tuple[str, "SpecialistConfig"] | None:
    """The first enabled block whose class is a specialist of ``kind``."""
    for name, block in blocks.items():
        if block.enabled and load_class(block.class_,
                                        where=f"specialists.{name}.class").kind == kind:
            return name, block
    return None


def configures(blocks: dict[str, "SpecialistConfig"], kind: str) -> bool:
    """Does the config declare an enabled specialist of ``kind``?"""
    return _block_of_kind(blocks, kind) is not None


def specialist_from_config(blocks: dict[str, "SpecialistConfig"], kind: str,
                           setup: bool = True, **overrides: Any) -> Specialist:
    """Build the first enabled specialist of ``kind`` the config declares, with
    ``overrides`` laid over its options (the CLI's flags), validated like the rest."""
    found = _block_of_kind(blocks, kind)
    if found is None:
        raise ConfigError(f"no specialist of kind {kind!r} is configured; add one under "
                          "'specialists:' in the config (see configs/default.yaml)")
    name, block = found
    merged = {**block.options, **{k: v for k, v in overrides.items() if v is not None}}
    klass, options = check_block(name, block.model_copy(update={"options": merged}))
    spec = build(name, klass, options)
    if setup:
        spec.setup()
    return spec


class Registry:
    """The specialists one server runs, by config name."""

    def __init__(self, specialists: dict[str, Specialist] | None = None) -> None:
        self._by_name: dict[str, Specialist] = dict(specialists or {})
        for spec in self._by_name.values():
            capabilities(spec)  # once, at load (``specialists.base.capabilities``)
        self.errors: dict[str, str] = {}

    @classmethod
    def from_config(cls, blocks: dict[str, "SpecialistConfig"]) -> "Registry":
        built: dict[str, Specialist] = {}
        for name, block in blocks.items():
            if not block.enabled:
                continue
            klass, options = check_block(name, block)
            built[name] = build(name, klass, options)
        return cls(built)

    def setup_all(self) -> None:
        """Load every specialist; one that fails is reported as not ready, not fatal."""
        for name, spec in self._by_name.items():
            try:
                spec.setup()
            except Exception as exc:  # a broken model file must not take the server down
                log.exception("specialist %s failed to load", name)
                self.errors[name] = f"{type(exc).__name__}: {exc}"

    def close_all(self) -> None:
        """Stop what specialists started (the Tab model worker's threads and processes)."""
        for name, spec in self._by_name.items():
            if Closable in capabilities(spec):
                try:
                    spec.close()
                except Exception:  # shutting down: report it, close the rest
                    log.exception("specialist %s failed to close", name)

    def get(self, name: str) -> Specialist:
        if name in self.errors:
            raise Unavailable(f"specialist {name!r} failed to load: {self.errors[name]}")
        try:
            return self._by_name[name]
        except KeyError:
            raise Unavailable(f"no specialist named {name!r} is configured; add it under "
                              f"'specialists:' in the config") from None

    def by_kind(self, kind: str) -> Specialist:
        """The first configured specialist of a kind (``tab``, ``apply``, ``retrieval``)."""
        for name, spec in self._by_name.items():
            if spec.kind == kind:
                return self.get(name)
        raise Unavailable(f"no specialist of kind {kind!r} is configured; add one under "
                          f"'specialists:' in the config")

    def __iter__(self) -> Iterator[tuple[str, Specialist]]:
        return iter(self._by_name.items())

    def __contains__(self, name: object) -> bool:
        return name in self._by_name


    def find(self, kind: str) -> Specialist | None:
        """The specialist of ``kind`` if one is configured and loaded, else ``None``."""
        try:
            return self.by_kind(kind)
        except Unavailable:
            return None


def specialist_for(request: Request, kind: str) -> Specialist:
    """For endpoint code: the running server's specialist of ``kind`` (503 if none)."""
    registry: Registry | None = getattr(request.app.state, "registry", None)
    if registry is None:
        raise Unavailable("the server is still starting: its specialists are not loaded yet")
    return registry.by_kind(kind)


def uses(kind: str) -> Callable[[Request], Awaitable[Specialist]]:
    """A FastAPI dependency giving the endpoint the registry's specialist of ``kind``;
    tests override it with ``app.dependency_overrides``."""
    found = _DEPENDENCIES.get(kind)  # the same function every time: overrides key on it
    return found if found is not None else _DEPENDENCIES.setdefault(kind, _dependency(kind))


def _dependency(kind: str) -> Callable[[Request], Awaitable[Specialist]]:
    # async: a dictionary lookup, so FastAPI runs it on the event loop instead of sending
    # it to the thread pool and back on every request (issue 17: one hop per keystroke)
    async def specialist(request: Request) -> Specialist:
        spec = specialist_for(request, kind)
        # what answers this request, for the x-complement-model header
        request.state.complement_model = f"{type(spec).__name__}@{spec.version}"
        return spec

    specialist.__name__ = f"uses_{kind}"
    return specialist


_DEPENDENCIES: dict[str, Callable[[Request], Awaitable[Specialist]]] = {}
