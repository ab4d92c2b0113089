"""Issue 41 F6: the allowed root defaulted to the server's working directory, and dot-folders
were indexed: ``/v1/index {"path": "."}`` then ``/v1/retrieve`` returned
``.docker/config.json`` and ``.config/gcloud/application_default_credentials.json``
verbatim from a server started in a home directory.

Three parts, all against the real server over HTTP:

* a home-like folder (``.docker/``, ``.config/gcloud/``, ``.git/``, ``.env``, ``id_rsa``,
  ``server.pem``, a service-account JSON, each holding its own canary, beside ordinary
  code) is the allowed root; the probe indexes it (``"."`` and ``".config"``) and asks
  for the secrets by their words. An answer holding a canary is a leak.
* the default config's ``workspace`` and retriever blocks, read with no environment: the
  server must not index (``/v1/index {"path": "."}`` answers 403 naming
  ``COMPLEMENT_REPOS``) rather than index its working directory.
* configs whose allowed root (``workspace.allowed_roots`` or the retriever's
  ``allowed_root``) is ``/``, the home directory or its parent: each must be refused at
  start with a message naming what to set; one that starts is a failure.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from router.audit.common import Tally, serve

__all__ = ["QUERIES", "SECRETS", "probe", "write_home"]

#: path under the home-like folder -> its text; ``{c}`` is that file's canary
SECRETS: dict[str, str] = {
    ".docker/config.json": '{"auths": {"registry.example.com": {"auth": "{c}"}}}\n',
    ".config/gcloud/application_default_credentials.json":
        '{"client_id": "x.apps.googleusercontent.com", "client_secret": "{c}",\n'
        ' "refresh_token": "{c}", "type": "authorized_user"}\n',
    ".config/app/settings.yaml": "api_token: {c}\n",
    ".env": "API_KEY={c}\nDATABASE_PASSWORD={c}\n",
    ".git/config": '[remote "origin"]\n\turl = https://user:{c}@git.example.com/repo.git\n',
    "id_rsa": "-----BEGIN RSA PRIVATE KEY-----\n{c}\n-----END RSA PRIVATE KEY-----\n",
    "server.pem": "-----BEGIN PRIVATE KEY-----\n{c}\n-----END PRIVATE KEY-----\n",
    "deploy/gcp-service-account.json":
        '{"type": "service_account", "private_key": "{c}", "client_email": "x@y.iam"}\n',
    "credentials.json": '{"installed": {"client_secret": "{c}", "client_id": "x"}}\n',
}
CODE: dict[str, str] = {
    "app.py": "def load_config(path):\n    \"\"\"Read the docker registry auth and the api "
              "token from the config.\"\"\"\n    return open(path).read()\n",
    "lib/credentials_helper.py": "def refresh_token(client_secret, client_id):\n"
                                 "    return client_id + client_secret\n",
}
QUERIES = [
    "docker registry auths auth config", "gcloud client_secret refresh_token authorized_user",
    "api_token settings", "API_KEY DATABASE_PASSWORD env", "remote origin url git config",
    "BEGIN RSA PRIVATE KEY", "BEGIN PRIVATE KEY", "service_account private_key client_email",
    "installed client_secret client_id",
]


def write_home(home: Path) -> list[str]:
    """The home-like folder: the secrets above (each with a canary) and ordinary code; the
    canaries."""
    canaries = []
    for rel, text in {**SECRETS, **CODE}.items():
        canary = f"F6-CANARY-{uuid.uuid4().hex}"
        if rel in SECRETS:
            canaries.append(canary)
        path = home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.replace("{c}", canary))
    return canaries


def retriever(root: str | None, tmp: Path, **options: Any) -> dict[str, Any]:
    """A retrieval specialist block (a small, fast embedder) with ``root`` as its root."""
    opts = {"embedder": "hash:64", "index_dir": str(tmp / "data" / "indexes"), **options}
    if root is not None:
        opts["allowed_root"] = root
    return {"class": "retrieval.specialist:RetrievalSpecialist", "options": opts}


def _ready(client: Any, base: str) -> bool:
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if client.get(f"{base}/readyz").status_code == 200:
            return True
        time.sleep(0.05)
    return False


def _home_like(tmp: Path, tally: Tally) -> None:
    import httpx

    home = tmp / "home-like"
    canaries = write_home(home)
    config = {"data_dir": str(tmp / "data"), "workspace": {"allowed_roots": [str(home)]},
              "specialists": {"retrieval": retriever(str(home), tmp)}}
    with serve(config) as base, httpx.Client(timeout=60) as client:
        if not tally.expect(_ready(client, base), "the server never became ready"):
            return
        for path in (".", ".config", ".config/gcloud", ".docker"):
            r = client.post(f"{base}/v1/index", json={"path": path})
            tally.attempts += 1
            tally.leaks += any(c in r.text for c in canaries)
            if path == ".":
                tally.expect(r.status_code == 200, f"/v1/index '.' answered {r.status_code}: "
                                                   f"{r.text[:200]}")
            else:
                tally.expect(r.status_code == 403, f"/v1/index {path!r} (a dot-folder) "
                                                   f"answered {r.status_code}, not 403")
            for query in QUERIES:
                r = client.post(f"{base}/v1/retrieve", json={
                    "query": query, "k": 50, "repo": path, "mode": "bm25"})
                tally.attempts += 1
                leaked = [c for c in canaries if c in r.text]
                tally.leaks += bool(leaked)
                if leaked:
                    paths = sorted({h["path"] for h in r.json().get("results", [])
                                    if any(c in h["text"] for c in leaked)})
                    what = f"/v1/retrieve returned secret files: {paths}"
                    if what not in tally.failures:
                        tally.failures.append(what)
        # the ordinary code is still found (the index is not simply empty)
        r = client.post(f"{base}/v1/retrieve", json={"query": "load_config docker registry",
                                                     "k": 5, "repo": "."})
        tally.expect(r.status_code == 200 and "app.py" in r.text,
                     f"ordinary code was not retrieved ({r.status_code}): {r.text[:200]}")


def _default_config(tmp: Path, tally: Tally) -> None:
    """The default config's roots, with no environment: nothing may be indexed."""
    import httpx

    from router.config import default_config_path, interpolate, read_yaml

    default = interpolate(read_yaml(default_config_path(), "config"), env={})
    block = default["specialists"]["retrieval"]
    options = {**block["options"], "embedder": "hash:64",
               "index_dir": str(tmp / "data-default" / "indexes")}
    config = {"data_dir": str(tmp / "data-default"), "workspace": default["workspace"],
              "specialists": {"retrieval": {"class": block["class"], "options": options}}}
    with serve(config) as base, httpx.Client(timeout=60) as client:
        if not tally.expect(_ready(client, base), "the default-config server never got ready"):
            return
        r = client.post(f"{base}/v1/index", json={"path": "."})
        tally.attempts += 1
        tally.expect(r.status_code == 403 and "COMPLEMENT_REPOS" in r.text,
                     f"the default config indexed '.' (or did not say to set COMPLEMENT_REPOS):"
                     f" {r.status_code} {r.text[:200]}")


def _refused_roots(tmp: Path, tally: Tally) -> None:
    from router.errors import ConfigError

    home = Path.home()
    for root in ("/", str(home), "~", str(home.parent)):
        for where in ("workspace", "retriever"):
            config: dict[str, Any] = {"data_dir": str(tmp / "data-refused")}
            if where == "workspace":
                config["workspace"] = {"allowed_roots": [root]}
            else:
                config["specialists"] = {"retrieval": retriever(root, tmp)}
            tally.attempts += 1
            try:
                with serve(config):
                    tally.failures.append(f"a server started with {root!r} as the {where}'s "
                                          "allowed root")
            except ConfigError as exc:
                tally.expect("COMPLEMENT_REPOS" in str(exc) and "allowed_root" in str(exc),
                             f"refusing {root!r} as the {where}'s root did not say what to "
                             f"set: {exc}")
            except RuntimeError as exc:  # uvicorn's startup failed: refused, but unclearly
                tally.failures.append(f"{root!r} as the {where}'s root failed at start "
                                      f"without a config error: {exc}")


def probe(tmp: Path) -> Tally:
    tally = Tally("F6 default root and dot-folders")
    _home_like(tmp, tally)
    _default_config(tmp, tally)
    _refused_roots(tmp, tally)
    return tally


if __name__ == "__main__":
    import json
    import tempfile

    with tempfile.TemporaryDirectory(prefix="complement-sec-f6-") as tmp:
        print(json.dumps(probe(Path(tmp)).as_dict(), indent=1))
