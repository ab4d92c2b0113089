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
