"""A sketch that opens below import lines it does not show, with no marker above, is read
the way the code agrees with (``specialists.apply.usage``): the imports stay where
deleting them would leave a name the file still reads unbound; otherwise the applier
still abstains (a change that took an import's last use does not say it was dropped)."""

from __future__ import annotations

from specialists.apply import apply_sketch
from specialists.apply.usage import head_choice, imported_names, unbound_names

PY = ("import io\nimport os\n\nfrom setuptools import setup\n\n"
      "with io.open('README.rst') as f:\n    readme = f.read()\n\n"
      "setup(\n    name='demo',\n    version='1.0',\n)\n")
UNSAID = "does not say whether they stay"


def test_imports_the_file_still_uses_stay() -> None:
    # a forgotten first marker: io is still read below, so deleting it would break the file
    sketch = ("from setuptools import setup\n\nwith io.open('README.rst') as f:\n"
              "    readme = f.read().strip()\n\nsetup(\n    # ... rest unchanged ...\n")
    result = apply_sketch(PY, sketch, language="python", path="setup.py")
    assert result.applied, result.reason
    assert result.merged == PY.replace("f.read()", "f.read().strip()")


def test_a_change_that_takes_the_last_use_still_abstains() -> None:
    # io's last use goes: the writer may have dropped the import or left it; both happen
    original = PY.replace("import os\n", "")
    sketch = ("from setuptools import setup\n\nwith open('README.rst') as f:\n"
              "    readme = f.read()\n\nsetup(\n    # ... rest unchanged ...\n")
    result = apply_sketch(original, sketch, language="python", path="setup.py")
    assert not result.applied and UNSAID in (result.reason or "")


def test_a_name_only_in_a_string_or_bound_again_decides_nothing() -> None:
    # io only in a string, and os bound again by a definition: no reading leaves a name
    # unbound, so the abstain stands
    original = ("import io\nimport os\n\nfrom m import setup\n\n"
                "def os():\n    return 'io'\n\nsetup(\n    name=os(),\n)\n")
    sketch = ("from m import setup\n\ndef os():\n    return 'io!'\n\n"
              "setup(\n    # ... rest unchanged ...\n")
    result = apply_sketch(original, sketch, language="python", path="m.py")
    assert not result.applied and UNSAID in (result.reason or "")


def test_other_languages_keep_the_abstain() -> None:
    original = ["import \"fmt\"", "", "func main() {", "\tfmt.Println(1)", "}"]
    assert head_choice(original, {0, 1}, original[2:], original[2:], "go") is None


def test_names_and_unbound_reads() -> None:
    names = imported_names("import a.b\nimport c as d\nfrom e import (f,\n    g as h)\n"
                           "from __future__ import annotations\nx = 1\n")
    assert names is not None
    assert names[0] == {"a"} and names[1] == {"d"} and names[2] == names[3] == {"f", "h"}
    assert names[4] == set() and 5 not in names
    assert imported_names("import (\n") is None
    code = ("import os\n\ndef f(x):\n    y = x + len(z)\n    return os.sep + w.attr\n\n"
            "class C:\n    k = f\n    def m(self):\n        return self.k, q\n")
    assert unbound_names(code) == {"z", "w", "q"}
    assert unbound_names("from m import *\nprint(anything)\n") == set()
    assert unbound_names("def (:\n") is None
