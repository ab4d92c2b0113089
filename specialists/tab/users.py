"""A user world: simulated people who are not oracles (issue 35, first step).

The replay's judgement (:meth:`specialists.tab.replay.Session.judge`) says whether a
suggestion is the real next text. A *person* starts from that judgement and acts on it
with traits drawn once, seeded, from a *population* (a YAML file in ``configs/users/``):

* ``taste`` — per language, the chance a correct suggestion is wanted at all;
* ``flow`` — while keys come fast (``seconds_since_last`` under ``seconds``), a correct
  suggestion is dismissed with ``p``;
* ``length_tolerance`` — a correct suggestion longer than ``chars`` is dismissed with ``p``;
* ``min_length`` — a correct suggestion shorter than ``chars`` is not worth the Tab key (the
  person reads the ghost text in whole lines, and a word is quicker typed than judged):
  dismissed with ``p``;
* ``noise`` — a correct one is dismissed with ``dismiss``; a wrong one is accepted with
  ``accept_wrong`` and undone ``undo_after`` keystrokes later;
* ``partial_accept`` — with ``p`` only the first ``unit`` (``word`` or ``line``) of a correct
  completion is taken; so is the first word of a wrong completion when that word is what
  the person was about to type (VS Code's accept-word: still the real next text);
* ``patience`` — after ``rejections`` dismissals in a row, Tab is off for the next
  ``off_requests`` requests (nothing is seen and nothing is asked; the switch costs
  :attr:`KeptReward.off`);
* ``typing`` — ``per_char`` seconds a character (the replay's clock; the default 0.18 is
  about 65 words a minute): a fast typist's requests come closer together, so ``flow``
  holds more often, and the server sees the speed (``specialists.tab.personal``).

A trait left out does nothing; a population whose people have no traits is the oracle.
A trait's number is a constant or a distribution: ``{uniform: [a, b]}``, ``{beta: [a, b]}``,
``{normal: [mean, sd]}`` (clipped to the field's range) or ``{choice: [x, y, ...]}``.

    name: default
    people:
      - type: steady
        weight: 0.7
        traits:
          length_tolerance: {chars: {uniform: [20, 60]}, p: 0.5}
          noise: {dismiss: 0.1, accept_wrong: 0.01}

:class:`KeptReward` scores what was kept, not the accept key: characters of accepted text
still present after ``window`` keystrokes, minus the cost of a dismissal, of an undo and of
Tab being switched off. The old ±0.75/−0.25 (:class:`~specialists.tab.replay.RewardConfig`)
stays the default.
"""

from __future__ import annotations

import difflib
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from specialists.tab.rewards import KeptReward

__all__ = ["PopulationError", "Dist", "PersonType", "Population", "Person", "Verdict", "World",
           "KeptReward", "load_population", "parse_population", "first_unit", "TRAITS"]


class PopulationError(ValueError):
    """A population file that does not validate; the message names the key path."""


# trait -> field -> (low, high, default); ``unit`` is the one field that is a word
TRAITS: dict[str, dict[str, tuple[float, float, float]]] = {
    "taste": {},  # language -> probability; ``default`` for the others (see _parse_taste)
    "flow": {"seconds": (0.0, 3600.0, 0.6), "p": (0.0, 1.0, 0.5)},
    "length_tolerance": {"chars": (0.0, 10_000.0, 40.0), "p": (0.0, 1.0, 1.0)},
    "min_length": {"chars": (0.0, 10_000.0, 10.0), "p": (0.0, 1.0, 1.0)},
    "noise": {"dismiss": (0.0, 1.0, 0.0), "accept_wrong": (0.0, 1.0, 0.0),
              "undo_after": (0.0, 1000.0, 2.0)},
    "partial_accept": {"p": (0.0, 1.0, 1.0)},
    "patience": {"rejections": (1.0, 1000.0, 8.0), "off_requests": (0.0, 100_000.0, 20.0)},
    "typing": {"per_char": (0.01, 5.0, 0.18)},
}
COUNTS = {("patience", "rejections"), ("patience", "off_requests"), ("noise", "undo_after"),
          ("length_tolerance", "chars"), ("min_length", "chars")}
"""Fields that count things: a drawn value is rounded to a whole number."""
UNITS = ("word", "line")
_FIRST_WORD = re.compile(r"\s*(\w+|[^\w\s]+)")


def _close(key: str, known: Any) -> str:
    near = difflib.get_close_matches(key, list(known), n=1)
    return f" (did you mean {near[0]!r}?)" if near else f" (known: {', '.join(sorted(known))})"


def _unknown(where: str, got: Mapping[str, Any], known: Any) -> None:
    for key in got:
        if key not in known:
            raise PopulationError(f"{where}: unknown key {key!r}{_close(str(key), known)}")


@dataclass(frozen=True)
class Dist:
    """A trait's number: a constant or a distribution drawn once per person."""

    kind: str  # const, uniform, beta, normal, choice
    args: tuple[float, ...]
    low: float
    high: float

    def draw(self, rng: random.Random) -> float:
        if self.kind == "const":
            return self.args[0]
        if self.kind == "uniform":
            x = rng.uniform(*self.args)
        elif self.kind == "beta":
            x = rng.betavariate(*self.args)
        elif self.kind == "normal":
            x = rng.gauss(*self.args)
        else:
            x = rng.choice(self.args)
        return min(self.high, max(self.low, x))


def _number(where: str, x: Any, low: float, high: float) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise PopulationError(f"{where}: expected a number, got {x!r}")
    if not low <= x <= high:
        raise PopulationError(f"{where}: {x} is outside [{low:g}, {high:g}]")
    return float(x)


def _dist(where: str, spec: Any, low: float, high: float) -> Dist:
    if not isinstance(spec, dict):
        return Dist("const", (_number(where, spec, low, high),), low, high)
    kinds = ("uniform", "beta", "normal", "choice")
    _unknown(where, spec, kinds)
    if len(spec) != 1:
        raise PopulationError(f"{where}: one distribution of {', '.join(kinds)}, got {sorted(spec)}")
    kind, args = next(iter(spec.items()))
    if not isinstance(args, list) or not args or (kind != "choice" and len(args) != 2):
        raise PopulationError(f"{where}.{kind}: expected a list of {'values' if kind == 'choice' else 'two numbers'}")
    if kind in ("uniform", "choice"):  # its values are the trait's values: in range
        vals = tuple(_number(f"{where}.{kind}[{i}]", a, low, high) for i, a in enumerate(args))
        if kind == "uniform" and vals[0] > vals[1]:
            raise PopulationError(f"{where}.uniform: low {vals[0]} above high {vals[1]}")
    elif kind == "beta":
        vals = tuple(_number(f"{where}.beta[{i}]", a, 1e-9, 1e9) for i, a in enumerate(args))
        if (low, high) != (0.0, 1.0):
            raise PopulationError(f"{where}: beta is for probabilities in [0, 1]")
    else:
        vals = (_number(f"{where}.normal[0]", args[0], low, high),
                _number(f"{where}.normal[1]", args[1], 0.0, 1e9))
    return Dist(kind, vals, low, high)


@dataclass(frozen=True)
class PersonType:
    """One kind of person in a population: its share and its traits' distributions."""

    name: str
    weight: float = 1.0
    traits: dict[str, dict[str, Any]] = field(default_factory=dict)
    """trait -> field -> :class:`Dist` (``partial_accept.unit``: a word; ``taste``: language -> Dist)."""


def _parse_taste(where: str, spec: Any) -> dict[str, Any]:
    if not isinstance(spec, dict):
        raise PopulationError(f"{where}: expected language: probability (and default:)")
    return {str(lang): _dist(f"{where}.{lang}", p, 0.0, 1.0) for lang, p in spec.items()}


def _parse_trait(where: str, name: str, spec: Any) -> dict[str, Any]:
    if name == "taste":
        return _parse_taste(where, spec)
    if not isinstance(spec, dict):
        raise PopulationError(f"{where}: expected a mapping of {', '.join(TRAITS[name])}")
    known = list(TRAITS[name]) + (["unit"] if name == "partial_accept" else [])
    _unknown(where, spec, known)
    out: dict[str, Any] = {}
    for key, (low, high, default) in TRAITS[name].items():
        out[key] = _dist(f"{where}.{key}", spec.get(key, default), low, high)
    if name == "partial_accept":
        unit = spec.get("unit", "word")
        if unit not in UNITS:
            raise PopulationError(f"{where}.unit: {unit!r} is not one of {', '.join(UNITS)}")
        out["unit"] = unit
    return out


def _parse_type(where: str, spec: Any) -> PersonType:
    if not isinstance(spec, dict):
        raise PopulationError(f"{where}: expected a mapping with type, weight, traits")
    _unknown(where, spec, ("type", "weight", "traits"))
    name = spec.get("type")
    if not isinstance(name, str) or not name:
        raise PopulationError(f"{where}.type: a name is required")
    weight = _number(f"{where}.weight", spec.get("weight", 1.0), 0.0, 1e9)
    traits = spec.get("traits") or {}
    if not isinstance(traits, dict):
        raise PopulationError(f"{where}.traits: expected a mapping of traits")
    _unknown(f"{where}.traits", traits, TRAITS)
    return PersonType(name, weight, {t: _parse_trait(f"{where}.traits.{t}", t, s) for t, s in traits.items()})


@dataclass(frozen=True)
class Population:
    """People to draw: types with weights (a mixture)."""

    name: str
    types: tuple[PersonType, ...]
    description: str = ""

    def draw(self, rng: random.Random, index: int = 0) -> "Person":
        """One person: a type by weight, then each trait's numbers."""
        kind = rng.choices(self.types, weights=[t.weight for t in self.types])[0]
        values: dict[str, dict[str, Any]] = {}
        for trait, fields in kind.traits.items():
            values[trait] = {k: (round(v.draw(rng)) if (trait, k) in COUNTS else v.draw(rng))
                             if isinstance(v, Dist) else v for k, v in fields.items()}
        return Person(kind=kind.name, traits=values, rng=rng, index=index)


def parse_population(data: Any, where: str = "population") -> Population:
    """A validated :class:`Population` from parsed YAML; :class:`PopulationError` names the key."""
    if not isinstance(data, dict):
        raise PopulationError(f"{where}: expected a mapping with name, people")
    _unknown(where, data, ("name", "description", "people"))
    people = data.get("people")
    if not isinstance(people, list) or not people:
        raise PopulationError(f"{where}.people: a non-empty list of person types is required")
    types = tuple(_parse_type(f"{where}.people[{i}]", p) for i, p in enumerate(people))
    if sum(t.weight for t in types) <= 0:
        raise PopulationError(f"{where}.people: the weights sum to 0")
    return Population(str(data.get("name") or "population"), types, str(data.get("description") or ""))


def load_population(path: str | Path) -> Population:
    """Read and validate a population file (``configs/users/*.yaml``)."""
    import yaml

    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise PopulationError(f"{p}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise PopulationError(f"{p}: not YAML: {exc}") from exc
    return parse_population(data, where=p.name)


@dataclass(frozen=True)
class Verdict:
    """What the person did with a shown suggestion."""

    seen: bool = True
    """False while Tab is switched off: the suggestion never reached the person."""
    accepted: bool = False
    """The accept key was pressed (a wrong accept too: it is undone afterwards)."""
    keep: int = 0
    """Characters of a correct suggestion taken (a partial accept takes fewer)."""
    undone_after: int | None = None
    """A wrong accept: undone this many keystrokes later."""
    switched_off: bool = False


@dataclass
class Person:
    """One simulated person: drawn traits, their own random stream, their patience."""

    kind: str
    traits: dict[str, dict[str, Any]]
    rng: random.Random
    index: int = 0
    streak: int = 0
    """Dismissals in a row."""
    off_left: int = 0
    """Requests left with Tab switched off."""

    def _chance(self, p: float) -> bool:
        return p > 0 and self.rng.random() < p

    def react(self, correct: bool, typed: str | None, text: str, language: str,
              seconds_since_last: float | None, right_prefix: str = "") -> Verdict:
        """The person's answer to a shown suggestion. ``correct``: the replay's judgement;
        ``typed``: a correct completion's text, which can be taken in part (None for a rewrite
        or a jump: taken whole or not at all); ``text``: what the suggestion shows;
        ``right_prefix``: for a wrong completion, how much of its start is what the person
        was about to type — a partial taker takes its first word when that lies inside."""
        if self.off_left > 0:
            self.off_left -= 1
            return Verdict(seen=False)
        t = self.traits
        unit = first_unit(text, t["partial_accept"]["unit"]) if "partial_accept" in t else ""
        if correct:
            verdict = self._on_correct(t, typed, text, language, seconds_since_last)
        elif unit.strip() and len(unit) <= len(right_prefix) and self._wanted(t, language, seconds_since_last) \
                and self._chance(t["partial_accept"]["p"]):
            verdict = Verdict(accepted=True, keep=len(unit))
        elif "noise" in t and self._chance(t["noise"]["accept_wrong"]):
            verdict = Verdict(accepted=True, undone_after=int(t["noise"]["undo_after"]))
        else:
            verdict = Verdict()
        return self._patience(verdict)

    def _on_correct(self, t: dict[str, dict[str, Any]], typed: str | None, text: str,
                    language: str, since: float | None) -> Verdict:
        n = len(typed) if typed is not None else len(text)
        if not self._wanted(t, language, since):
            return Verdict()
        if "length_tolerance" in t and len(text) > t["length_tolerance"]["chars"] \
                and self._chance(t["length_tolerance"]["p"]):
            return Verdict()
        if "min_length" in t and len(text) < t["min_length"]["chars"] \
                and self._chance(t["min_length"]["p"]):
            return Verdict()
        if "noise" in t and self._chance(t["noise"]["dismiss"]):
            return Verdict()
        if "partial_accept" in t and typed is not None and self._chance(t["partial_accept"]["p"]):
            n = len(first_unit(typed, t["partial_accept"]["unit"]))
        return Verdict(accepted=True, keep=n)

    def _wanted(self, t: dict[str, dict[str, Any]], language: str, since: float | None) -> bool:
        """Taste for the language, then flow: is any suggestion welcome now?"""
        if "taste" in t:
            taste = t["taste"]
            if not self._chance(taste.get(language, taste.get("default", 1.0))):
                return False
        in_flow = "flow" in t and since is not None and since < t["flow"]["seconds"]
        return not (in_flow and self._chance(t["flow"]["p"]))

    def _patience(self, v: Verdict) -> Verdict:
        if v.accepted and v.undone_after is None:
            self.streak = 0
            return v
        self.streak += 1
        if "patience" in self.traits and self.streak >= self.traits["patience"]["rejections"]:
            self.streak = 0
            self.off_left = int(self.traits["patience"]["off_requests"])
            return Verdict(seen=v.seen, accepted=v.accepted, keep=v.keep,
                           undone_after=v.undone_after, switched_off=True)
        return v

    def idle(self) -> None:
        """A request with nothing shown: Tab off counts down all the same."""
        if self.off_left > 0:
            self.off_left -= 1


def first_unit(text: str, unit: str) -> str:
    """The first word (an identifier, or a run of punctuation, after any blanks) or the
    first line of ``text`` — what a partial accept takes (VS Code's accept-word)."""
    if unit == "line":
        line = text.split("\n", 1)[0]
        return line if line.strip() else text
    m = _FIRST_WORD.match(text)
    return m.group(0) if m else text


class World:
    """A population with a seed: person ``i`` is drawn from ``Random((seed, i))``, so the same
    seed gives the same people whatever order they are asked for in."""

    def __init__(self, population: Population, seed: int = 0, people: int = 16) -> None:
        self.population = population
        self.seed = seed
        self.people = max(1, people)
        self._drawn: dict[int, Person] = {}

    def person(self, i: int) -> Person:
        """Person ``i`` (modulo the world's size): drawn once, then the same object."""
        i %= self.people
        if i not in self._drawn:
            self._drawn[i] = self.population.draw(random.Random(f"{self.population.name}:{self.seed}:{i}"), i)
        return self._drawn[i]
