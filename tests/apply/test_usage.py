"""A sketch that opens below import lines it does not show, with no marker above, is read
the way the code agrees with (``specialists.apply.usage``): the imports stay where the
file still uses their names, go where the change took their last use, and otherwise the
applier still abstains."""

from __future__ import annotations

from specialists.apply import apply_sketch
from specialists.apply.usage import head_choice, imports_of

PY = ("import io\nimport os\n\nfrom setuptools import setup\n\n"
      "with io.open('README.rst') as f:\n    readme = f.read()\n\n"
      "setup(\n    name='demo',\n    version='1.0',\n)\n")


def test_imports_the_change_took_the_last_use_of_are_deleted() -> None:
    # io's one use becomes open(); os was never used: not every hidden import is dead by
    # the change, so the code does not say -- but with os gone from the original it does
    original = PY.replace("import os\n", "")
    sketch = ("from setuptools import setup\n\nwith open('README.rst') as f:\n"
              "    readme = f.read()\n\nsetup(\n    # ... rest unchanged ...\n")
    result = apply_sketch(original, sketch, language="python", path="setup.py")
    assert result.applied, result.reason
    assert result.merged == original.replace("import io\n\n", "").replace(
        "io.open('README.rst')", "open('README.rst')")


def test_imports_the_file_still_uses_stay() -> None:
    # a forgotten first marker: io is still used below, so deleting it would break the file
    sketch = ("from setuptools import setup\n\nwith io.open('README.rst') as f:\n"
              "    readme = f.read().strip()\n\nsetup(\n    # ... rest unchanged ...\n")
    result = apply_sketch(PY, sketch, language="python", path="setup.py")
    assert result.applied, result.reason
    assert result.merged == PY.replace("f.read()", "f.read().strip()")


def test_when_the_code_does_not_say_the_applier_abstains() -> None:
    # io's last use goes, but os was never used: deleting both is not the code's word
    sketch = ("from setuptools import setup\n\nwith open('README.rst') as f:\n"
              "    readme = f.read()\n\nsetup(\n    # ... rest unchanged ...\n")
    result = apply_sketch(PY, sketch, language="python", path="setup.py")
    assert not result.applied
    assert "does not say whether they stay" in (result.reason or "")


def test_names_bound_by_each_language() -> None:
    py = imports_of(["import a.b", "import c as d", "from e import (f,", "    g as h)", "x = 1"],
                    "python")
    assert py is not None and py.bound() == {"a", "d", "f", "h"} and py.lines == {0, 1, 2, 3}
    assert imports_of(["import (", "x = "], "python") is None  # does not parse: no word
    js = imports_of(["import React, { useState as us } from 'react';",
                     "const { join, resolve: res } = require('path');",
                     "import * as fs from 'fs'", "import './side.css';", "let y = 2"],
                    "javascript")
    assert js is not None and js.bound() == {"React", "us", "join", "res", "fs"}
    assert not js.complete  # the side-effect import binds nothing to check
    go = imports_of(["package main", "import (", '\t"fmt"', '\tstr "strings"',
                     '\t"github.com/spf13/cobra/v2"', ")", "func main() {}"], "go")
    assert go is not None and go.bound() == {"fmt", "str", "cobra"} and go.lines == {1, 2, 3, 4, 5}


def test_head_choice_in_go() -> None:
    original = ["package main", "", "import \"fmt\"", "import \"os\"", "", "func main() {",
                "\tfmt.Println(os.Args)", "}"]
    keep = list(original)
    keep[6] = "\tfmt.Println(len(os.Args))"
    drop = keep[4:]
    assert head_choice(original, keep, list(range(8)), drop, list(range(4, 8)), "go") == "keep"
    assert head_choice(original, keep, list(range(8)), keep, list(range(8)), "go") is None
