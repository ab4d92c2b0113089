"""Synthetic JavaScript and Go files for the applier: edit shapes the development projects
(all Python) cannot show.

Three hand-written files in the held-out projects' styles, never read from their data: a
mocha test file (``it('…', function(done){`` blocks whose lines repeat from test to test), an
express-style ``lib/response.js`` (JSDoc'd ``res.x = function x(value) {`` methods) and a
Go test file (``func TestX(t *testing.T) {`` with repeated ``if err != nil {`` checks). Each
gets a few edits (a new unit that copies its neighbour, a deleted unit, the last unit
deleted, a body line added, an import added); each edit is sketched by both generators
(house style k = 0-3; frontier style ``context``, ``definition``, ``inner``, ``imports``)
over ``--seeds`` seeds, and the applier's answer is scored against the edited file.

Prints one line per (file, edit, generator): exact / abstained / wrong counts. Last line:
JSON summary.

    python benchmarks/apply_shapes.py [--seeds 30]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specialists.apply.sketch_styles import make_frontier_sketch  # noqa: E402
from specialists.apply import apply_sketch, make_sketch  # noqa: E402


def _mocha_test(name: str, extra: str = "") -> str:
    return f"""  it('should {name}', function(done){{
    var app = express();

    app.use(function(req, res){{
      res.send('{name}');
{extra}    }});

    request(app)
    .get('/')
    .expect(200, '{name}', done);
  }})
"""


def _mocha(names: list[str], extras: dict[str, str] | None = None) -> str:
    body = "\n".join(_mocha_test(n, (extras or {}).get(n, "")) for n in names)
    return ("var express = require('../')\n  , request = require('supertest');\n\n"
            "describe('res', function(){\n" + body + "})\n")


def _method(name: str, extra: str = "") -> str:
    return f"""/**
 * Set {name} on the response.
 *
 * @param {{String}} value
 * @return {{ServerResponse}} for chaining
 * @public
 */

res.{name} = function {name}(value) {{
  var self = this;
  if (value === undefined) {{
    return this;
  }}
{extra}  this.set('{name}', value);
  return this;
}};
"""


_RES_HEAD = """'use strict';

/**
 * Module dependencies.
 * @private
 */

var Buffer = require('safe-buffer').Buffer;
var deprecate = require('depd')('express');
var http = require('http');

var res = Object.create(http.ServerResponse.prototype);

module.exports = res;

"""


def _response(names: list[str], extras: dict[str, str] | None = None, head: str = _RES_HEAD) -> str:
    return head + "\n".join(_method(n, (extras or {}).get(n, "")) for n in names)


def _go_test(name: str, extra: str = "") -> str:
    return f"""func Test{name}(t *testing.T) {{
\tc := &Command{{Use: "{name.lower()}"}}
\toutput, err := executeCommand(c)
\tif err != nil {{
\t\tt.Errorf("Unexpected error: %v", err)
\t}}
{extra}\tif output != "" {{
\t\tt.Errorf("Unexpected output: %v", output)
\t}}
}}
"""


_GO_HEAD = 'package cobra\n\nimport (\n\t"testing"\n)\n\n'


def _go(names: list[str], extras: dict[str, str] | None = None, head: str = _GO_HEAD) -> str:
    return head + "\n".join(_go_test(n, (extras or {}).get(n, "")) for n in names)


def files() -> list[tuple[str, str, str, str, dict[str, str]]]:
    """(name, language, path, before, {edit: after})."""
    m = ["send a", "send b", "send c", "send d", "send e"]
    r = ["status", "links", "json", "jsonp", "type", "vary"]
    g = ["Alpha", "Beta", "Gamma", "Delta", "Eps"]
    line = "      res.set('X', '1');\n"
    return [
        ("mocha", "javascript", "test/res.send.js", _mocha(m), {
            "insert copy": _mocha(m[:2] + ["send x"] + m[2:]),
            "delete unit": _mocha([n for n in m if n != "send c"]),
            "delete last": _mocha(m[:-1]),
            "add line": _mocha(m, {"send c": line}),
        }),
        ("response.js", "javascript", "lib/response.js", _response(r), {
            "insert copy": _response(r[:3] + ["xyz"] + r[3:]),
            "delete unit": _response([n for n in r if n != "json"]),
            "delete last": _response(r[:-1]),
            "add line": _response(r, {"jsonp": "  value = String(value);\n"}),
            "add import": _response(r, head=_RES_HEAD.replace(
                "var http = require('http');\n",
                "var http = require('http');\nvar path = require('path');\n")),
        }),
        ("go test", "go", "command_test.go", _go(g), {
            "insert copy": _go(g[:2] + ["Xray"] + g[2:]),
            "delete unit": _go([n for n in g if n != "Gamma"]),
            "delete last": _go(g[:-1]),
            "add line": _go(g, {"Gamma": '\tcheckStringContains(t, output, "gamma")\n'}),
            "add import": _go(g, head=_GO_HEAD.replace('\t"testing"\n', '\t"strings"\n\t"testing"\n')),
        }),
    ]


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=30)
    args = parser.parse_args(argv)
    counts: Counter[tuple[str, str, str, str]] = Counter()
    for name, language, path, before, edits in files():
        for edit, after in edits.items():
            def score(generator: str, text: str) -> None:
                result = apply_sketch(before, text, language=language, path=path)
                outcome = ("abstained" if not result.applied
                           else "exact" if result.merged == after else "wrong")
                counts[(name, edit, generator, outcome)] += 1

            for seed in range(args.seeds):
                rng = random.Random(seed)
                for kind in ("context", "definition", "inner", "imports"):
                    sk = make_frontier_sketch(before, after, language, rng, kind)
                    if sk.changed:
                        score("frontier", sk.text)
                for k in (0, 1, 2, 3):
                    score("lines", make_sketch(before, after, language, k=k, seed=seed,
                                               deletions="mixed").text)
    rows = sorted({key[:3] for key in counts})
    print(f"{'file':12s} {'edit':12s} {'generator':10s} {'exact':>6s} {'abstain':>8s} {'wrong':>6s}",
          file=sys.stderr)
    for row in rows:
        print(f"{row[0]:12s} {row[1]:12s} {row[2]:10s} {counts[row + ('exact',)]:6d} "
              f"{counts[row + ('abstained',)]:8d} {counts[row + ('wrong',)]:6d}", file=sys.stderr)
    summary: dict[str, object] = {
        "seeds": args.seeds,
        "wrong": sum(v for k, v in counts.items() if k[3] == "wrong"),
        "exact": sum(v for k, v in counts.items() if k[3] == "exact"),
        "abstained": sum(v for k, v in counts.items() if k[3] == "abstained"),
        "wrong_by_file_edit": {f"{k[0]}/{k[1]}/{k[2]}": v for k, v in sorted(counts.items())
                               if k[3] == "wrong"},
    }
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
