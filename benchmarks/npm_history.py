"""Real JavaScript edits from npm releases, for developing the applier in a language the
shared commit histories hold only in a held-out project (issue 36).

The shared data's development projects are all Python; JavaScript is only in express, which
is kept aside. Consecutive releases of a package on the npm registry are real edits of real
files: this diffs each JavaScript file between two consecutive releases and keeps the pairs
shaped like a commit's change to a file (1 to ``--max-hunks`` hunks of three lines of
context, as the shared histories count them). Each row has the shared histories' fields
(``repo``, ``commit``, ``path``, ``language``, ``hunks``, ``before``, ``after``), so
``benchmarks/apply.py`` reads them as it reads a project's history: one file per package,
``OUT/npm-NAME.jsonl.gz``.

A release squashes several commits, so a row can hold more than one commit's change; the
hunk filter keeps the ones of commit size.

This is a development step run by hand, and the one script here that uses the network: it
reads package metadata and tarballs from the npm registry (a package registry, like pip's),
keeping every tarball under ``--cache``. With ``--offline`` it reads only that cache.
Nothing at run time or in the tests calls the registry.

    python benchmarks/npm_history.py axios commander semver --pairs 20 \\
        --out runs/npm_js
"""

from __future__ import annotations

import argparse
import difflib
import gzip
import io
import json
import re
import sys
import tarfile
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

REGISTRY = "https://registry.npmjs.org/"
SUFFIXES = (".js", ".mjs", ".cjs")
_STABLE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
# Paths that hold built or vendored code rather than the package's own source.
_BUILT = re.compile(r"(^|/)(dist|build|umd|browser|bundles?|vendor|node_modules|min)(/|$)"
                    r"|\.min\.js$|\.bundle\.js$")
MAX_BYTES = 200_000
MAX_LINE = 400


def stable_versions(versions: list[str]) -> list[str]:
    """The release versions (no pre-releases), oldest first."""
    keyed = [(tuple(int(g) for g in m.groups()), v) for v in versions
             if (m := _STABLE.match(v))]
    return [v for _, v in sorted(keyed)]


def _get(url: str, timeout: float = 60.0) -> bytes:
    request = urllib.request.Request(
        url, headers={"Accept": "application/vnd.npm.install-v1+json; q=1.0, */*"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.read()


def _folder(cache: Path, package: str) -> Path:
    return cache / package.replace("/", "__")


def _tarball_path(cache: Path, package: str, version: str) -> Path:
    return _folder(cache, package) / f"{version}.tgz"


def fetch(package: str, pairs: int, cache: Path, offline: bool) -> list[str]:
    """The last ``pairs + 1`` release versions of ``package``, their tarballs in ``cache``."""
    folder = _folder(cache, package)
    if offline:
        if not folder.is_dir():
            raise SystemExit(f"--offline: no cached tarballs for {package} under {folder}; "
                             "run once without --offline to fetch them")
        return stable_versions([p.name[:-4] for p in folder.glob("*.tgz")])[-(pairs + 1):]
    meta = json.loads(_get(REGISTRY + urllib.parse.quote(package, safe="@")))
    versions = stable_versions(list(meta.get("versions", {})))[-(pairs + 1):]
    folder.mkdir(parents=True, exist_ok=True)
    for version in versions:
        target = _tarball_path(cache, package, version)
        if not target.exists():
            data = _get(meta["versions"][version]["dist"]["tarball"])
            partial = target.with_suffix(".part")
            partial.write_bytes(data)
            partial.replace(target)
    return versions


def sources(tarball: Path) -> dict[str, str]:
    """The package's own JavaScript files in a release tarball: path -> text."""
    out = {}
    with tarfile.open(tarball, "r:gz") as archive:
        for member in archive.getmembers():
            name = member.name.split("/", 1)[-1]
            if (not member.isfile() or not name.endswith(SUFFIXES) or _BUILT.search(name)
                    or member.size > MAX_BYTES):
                continue
            handle = archive.extractfile(member)
            if handle is None:
                continue
            try:
                text = io.TextIOWrapper(handle, encoding="utf-8").read()
            except UnicodeDecodeError:
                continue
            if any(len(line) > MAX_LINE for line in text.splitlines()):
                continue  # minified or generated
            out[name] = text
    return out


def diff_of(before: str, after: str) -> tuple[int, tuple[str, ...]]:
    """The hunks of a unified diff with three lines of context, as ``git diff`` counts them,
    and the lines it removes and adds, without indentation (the change, context aside)."""
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), n=3,
                                      lineterm=""))
    count = sum(1 for line in lines if line.startswith("@@"))
    return count, tuple(line[0] + line[1:].strip() for line in lines
                        if line[:1] in "+-" and not line.startswith(("+++", "---")))


def edits(package: str, versions: list[str], cache: Path,
          max_hunks: int) -> Iterator[dict]:
    """One row for each file changed between two consecutive releases by 1..max_hunks.

    A change a release makes to many files alike (a version string, a licence header, one
    rename everywhere) is kept once: the first file it is seen in stands for it."""
    previous, changes = None, set()
    for older, newer in zip(versions, versions[1:]):
        a = previous if previous is not None else sources(_tarball_path(cache, package, older))
        b = sources(_tarball_path(cache, package, newer))
        previous = b
        for path in sorted(a.keys() & b.keys()):
            if a[path] == b[path]:
                continue
            count, what = diff_of(a[path], b[path])
            if 1 <= count <= max_hunks and what not in changes:
                changes.add(what)
                yield dict(repo=f"npm:{package}", commit=f"{older}..{newer}", parent=older,
                           date="", message=f"{package} {older} -> {newer}", path=path,
                           language="javascript", hunks=count, before=a[path],
                           after=b[path])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Write real JavaScript edits (file changes between consecutive npm "
                    "releases) in the shared commit histories' format.")
    parser.add_argument("packages", nargs="+", help="npm package names")
    parser.add_argument("--pairs", type=int, default=20,
                        help="consecutive release pairs per package, newest (default 20)")
    parser.add_argument("--max-hunks", type=int, default=8,
                        help="keep file changes of at most this many hunks (default 8)")
    parser.add_argument("--cache", type=Path, default=Path("runs/npm_cache"),
                        help="where tarballs are kept (default runs/npm_cache)")
    parser.add_argument("--offline", action="store_true",
                        help="read only the cache; never call the registry")
    parser.add_argument("--out", type=Path, required=True,
                        help="folder for the histories, one npm-NAME.jsonl.gz per package")
    args = parser.parse_args(argv)
    if args.pairs < 1 or args.max_hunks < 1:
        parser.error("--pairs and --max-hunks must be at least 1")
    written = 0
    for package in args.packages:
        try:
            versions = fetch(package, args.pairs, args.cache, args.offline)
        except OSError as exc:
            print(f"{package}: skipped, could not fetch ({exc})", file=sys.stderr)
            continue
        rows = list(edits(package, versions, args.cache, args.max_hunks))
        print(f"{package}: {len(versions)} releases, {len(rows)} file edits", file=sys.stderr)
        if rows:
            args.out.mkdir(parents=True, exist_ok=True)
            target = args.out / f"npm-{package.replace('/', '__').lstrip('@')}.jsonl.gz"
            partial = target.with_name(target.name + ".part")
            with gzip.open(partial, "wt", encoding="utf-8") as handle:
                for row in rows:
                    handle.write(json.dumps(row) + "\n")
            partial.replace(target)
            written += 1
    if not written:
        print("no edits found; nothing written", file=sys.stderr)
        return 1
    print(f"wrote {written} histories under {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
