"""The applier's batch helpers give what their one-line forms give (they exist for speed)."""

from __future__ import annotations

import random

import pytest

from specialists.apply.languages import definition_name, definitions_of
from specialists.apply.text import indent_width, indent_widths

_LINES = [
    "function foo() {", "export default async function* gen(a) {", "const f = (a) => {",
    "let g = async function () {", "Router.prototype.use = function(fn) {",
    "res.send = function send(body) {", "public static void main(String[] args) {", "if (x) {",
    "class A extends B {", "interface I {", "type T = {", "func (r *R) Do() error {",
    "pub fn x() {", "pub(crate) async unsafe fn y() {", "impl Foo for Bar {", "def f(x):",
    "async def g():", "class C(object):", "return function() {", "while (true) {", "",
    "x = 1", "} else {", "static async load(path) {",
]


@pytest.mark.parametrize("seed", range(5))
def test_indent_widths_is_indent_width_of_each_line(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(300):
        lines = ["".join(rng.choice(" \t\tx a\r\u00a0") for _ in range(rng.randrange(12)))
                 for _ in range(rng.randrange(8))]
        assert indent_widths(lines) == [indent_width(line) for line in lines]


@pytest.mark.parametrize("language", ["python", "go", "rust", "javascript", "typescript", "tsx",
                                      "java", "c", None])
def test_definitions_of_is_definition_name_of_each_line(language: str | None) -> None:
    expected = {found for found in (definition_name(key, language) for key in _LINES if key)
                if found is not None}
    assert definitions_of(_LINES, language) == expected
    for key in _LINES:
        one = definition_name(key, language) if key else None
        assert definitions_of([key], language) == ({one} if one else set())


def test_spaces_are_what_isspace_takes() -> None:
    from specialists.apply.align import _SPACES

    assert _SPACES.tolist() == [c for c in range(0x110000) if chr(c).isspace()]


def _similar_reference(okeys: list[str], owidths: list[int], key: str, width: int) -> list[int]:
    """``_Problem.similar`` as difflib states it: the first 64 lines at this width whose first
    word starts with the key's (cut to 12 characters; under 12, the whole word), kept when
    real_quick_ratio and quick_ratio are both at least 0.7."""
    from difflib import SequenceMatcher

    head = key.split(None, 1)[0][:12]
    found = [p for p, okey in enumerate(okeys) if owidths[p] == width and okey.startswith(head)
             and (len(head) >= 12 or len(okey) == len(head) or okey[len(head)].isspace())]
    out = []
    for p in found[:64]:
        matcher = SequenceMatcher(None, okeys[p], key)
        if matcher.real_quick_ratio() >= 0.7 and matcher.quick_ratio() >= 0.7:
            out.append(p)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_compiled_similar_is_difflibs_quick_ratio(seed: int) -> None:
    from specialists.apply.align import Costs, _Problem

    rng = random.Random(seed)
    words = ["return", "value", "valueXYZ12345", "value_long_name_here", "é", "if", "x\u3000y"]
    chars = "abcde xyz()=\té\u00a0\u3000\u2028.,"
    for _ in range(40):
        okeys = [(rng.choice(words) + rng.choice(["", " ", "\t", "\u00a0", "("])
                  + "".join(rng.choice(chars) for _ in range(rng.randrange(15)))).strip()
                 for _ in range(rng.randrange(1, 90))]
        owidths = [rng.choice([0, 4]) for _ in okeys]
        skeys = [(rng.choice(words) + " " + "".join(rng.choice(chars) for _ in range(rng.randrange(15)))).strip()
                 for _ in range(6)]
        skeys = [k for k in skeys if k and k not in okeys]
        problem = _Problem(okeys, owidths, skeys, [0] * len(skeys), [4] * len(skeys), 0, {},
                           lambda key: len(key) <= 4, Costs())
        for j, key in enumerate(skeys):
            expected = [] if len(key) <= 4 else _similar_reference(okeys, owidths, key, 4)
            assert problem.similar(j).tolist() == expected


@pytest.mark.parametrize("seed", range(5))
def test_split_lines_indent_char_counts_lines(seed: int) -> None:
    from specialists.apply.text import _leading_tabs_spaces, split_lines

    rng = random.Random(seed)
    for _ in range(300):
        n = rng.choice([0, 1, 2, 5, 399, 400, 401, 450])
        text = "\n".join("".join(rng.choice("\t \t  x\r") for _ in range(rng.randrange(4)))
                         for _ in range(n)) + rng.choice(["", "\n", "\r\n"])
        lines = split_lines(text)
        head = lines.raw[:400]
        tabs = sum(line.startswith("\t") for line in head)
        spaces = sum(line.startswith(" ") for line in head)
        assert _leading_tabs_spaces(text, head) == (tabs, spaces)
        assert lines.indent_char == ("\t" if tabs > spaces else " ")
