"""``complement keys``: virtual keys with budgets and rate limits (issue 37), managed in the
event store's database named by the config, or through a running server (``--server``,
with the admin key).

    complement keys generate --max-budget 5 --rpm-limit 60 --name ci
    complement keys list
    complement keys info TOKEN
    complement keys update TOKEN --max-budget 10
    complement keys delete TOKEN
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

__all__ = ["register"]

_LIMITS = ("key_name", "max_budget", "rpm_limit", "tpm_limit", "allowed_routes", "models",
           "metadata", "duration")


def _body(args: argparse.Namespace) -> dict[str, Any]:
    """The limits given on the command line (``none`` clears one, on update)."""
    body: dict[str, Any] = {}
    for name in _LIMITS:
        value = getattr(args, name, None)
        if value is None:
            continue
        if value == "none":
            body[name] = None
        elif name in ("max_budget",):
            body[name] = float(value)
        elif name in ("rpm_limit", "tpm_limit"):
            body[name] = int(value)
        elif name in ("allowed_routes", "models"):
            body[name] = [v for v in value.split(",") if v]
        elif name == "metadata":
            body[name] = json.loads(value)
        else:
            body[name] = value
    if getattr(args, "spend", None) is not None:
        body["spend"] = float(args.spend)
    return body


def cmd_keys(args: argparse.Namespace) -> int:
    from router.errors import ConfigError

    try:
        body = _body(args)
    except ValueError as exc:
        raise ConfigError(f"keys {args.action}: {exc}; --max-budget takes USD (e.g. 5), the "
                          "limits whole numbers, --metadata a JSON object") from None
    out = _via_server(args, body) if args.server else _via_database(args, body)
    if args.action == "list" and not args.json:
        _table(out["keys"])
    else:
        print(json.dumps(out, indent=2))
        if args.action == "generate":
            print("complement: the key is shown only now; the server keeps only its hash",
                  file=sys.stderr)
    return 0


def _via_server(args: argparse.Namespace, body: dict[str, Any]) -> dict[str, Any]:
    import httpx

    from router.errors import ConfigError

    key = args.admin_key or os.environ.get("COMPLEMENT_ADMIN_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    url = args.server.rstrip("/")
    method, path = {"generate": ("POST", "/key/generate"), "list": ("GET", "/key/list"),
                    "info": ("GET", "/key/info"), "update": ("POST", "/key/update"),
                    "delete": ("POST", "/key/delete")}[args.action]
    if args.action == "update":
        body["key"] = args.key
    if args.action == "delete":
        body = {"keys": args.keys}
    try:
        r = httpx.request(method, f"{url}{path}", headers=headers, timeout=60,
                          params={"key": args.key} if args.action == "info" else None,
                          json=body if method == "POST" else None)
    except httpx.TransportError as exc:
        raise ConfigError(f"cannot reach {url}: {exc}") from None
    if r.status_code != 200:
        try:
            message = r.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = r.text[:300]
        raise ConfigError(f"{method} {path}: {r.status_code}: {message}")
    return r.json()  # type: ignore[no-any-return]


def _via_database(args: argparse.Namespace, body: dict[str, Any]) -> dict[str, Any]:
    from pydantic import ValidationError

    from router.api.keys import GenerateBody, UpdateBody, key_fields, token_of
    from router.config import load_config
    from router.errors import ComplementError, ConfigError
    from router.keys import KeyStore
    from specialists.tab.events import EventStore

    config = load_config(args.config)
    events = EventStore(config.events_url(), **config.events.store_options())
    store = KeyStore(events.engine)
    try:
        if args.action == "generate":
            key, record = store.create(**key_fields(GenerateBody.model_validate(body),
                                                    config.routes, config.endpoints))
            return {"key": key, **record.info()}
        if args.action == "list":
            return {"keys": [k.info() for k in store.all()]}
        if args.action == "info":
            token = token_of(args.key)
            record = store.get(token)
            if record is None:
                raise ConfigError(f"no key with token {token[:12]}...; "
                                  "`complement keys list` shows the keys")
            return {**record.info(), "held": store.held(token)}
        if args.action == "update":
            fields = key_fields(UpdateBody.model_validate({**body, "key": args.key}),
                                config.routes, config.endpoints)
            return store.update(token_of(args.key), **fields).info()
        return {"deleted_keys": store.revoke([token_of(k) for k in args.keys])}
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ConfigError(f"keys {args.action}: {'.'.join(map(str, err['loc']))}: "
                          f"{err['msg']}") from None
    except ComplementError as exc:
        raise ConfigError(f"keys {args.action}: {exc.message}") from None
    finally:
        store.close()
        events.close()


def _table(keys: list[dict[str, Any]]) -> None:
    """One line per key: alias, name, spend / budget, limits, state."""
    print(f"{'key':<22} {'name':<16} {'spend $':>11} {'budget $':>10} {'rpm':>6} {'tpm':>8} "
          "state")
    for k in keys:
        state = "revoked" if k["revoked_at"] else "active"
        budget = "-" if k["max_budget"] is None else f"{k['max_budget']:.4f}"
        print(f"{k['key_alias']:<22} {(k['key_name'] or '-')[:16]:<16} {k['spend']:>11.6f} "
              f"{budget:>10} {k['rpm_limit'] or '-':>6} {k['tpm_limit'] or '-':>8} {state}")


def _limits(p: argparse.ArgumentParser, update: bool) -> None:
    clear = " ('none' clears it)" if update else ""
    p.add_argument("--name", dest="key_name", help="a name for people" + clear)
    p.add_argument("--max-budget", help="USD the key may spend in all" + clear)
    p.add_argument("--rpm-limit", help="requests per minute, Tab's included" + clear)
    p.add_argument("--tpm-limit", help="tokens per minute (chat usage)" + clear)
    p.add_argument("--allowed-routes", help="API areas, comma-separated: chat,tab,feedback,"
                                            "apply,edit,retrieval" + clear)
    p.add_argument("--models", help="routes (chat's model, edit's route), comma-separated"
                   + clear)
    p.add_argument("--metadata", help="a JSON object kept with the key")
    p.add_argument("--duration", help="valid for this long from now: 30s, 15m, 12h, 30d"
                   + clear)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "keys", help="virtual keys: budgets, rate limits and spend per team or program",
        description="Issue, inspect, change and revoke virtual keys (issue 37). By default "
                    "in the event store's database the config names (the server sees a "
                    "change within server.key_cache_s); with --server, through a running "
                    "server and its admin key. The server checks virtual keys only when it "
                    "has an admin key (COMPLEMENT_ADMIN_KEY or server.admin_keys). README, "
                    "'Teams'.")
    p.add_argument("--config", "-c", metavar="FILE",
                   help="config naming the database (default: configs/default.yaml)")
    p.add_argument("--server", default=None, metavar="URL",
                   help="a running server instead, e.g. http://127.0.0.1:8000")
    p.add_argument("--admin-key", default=None,
                   help="admin key for --server (default: COMPLEMENT_ADMIN_KEY)")
    p.add_argument("--json", action="store_true", help="list: JSON instead of a table")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    _limits(actions.add_parser("generate", help="issue a key (shown once)"), update=False)
    actions.add_parser("list", help="every key's spend and limits")
    info = actions.add_parser("info", help="one key's spend, limits and held budget")
    info.add_argument("key", help="the key's token (or the key)")
    update = actions.add_parser("update", help="change a key's limits, expiry or spend")
    update.add_argument("key", help="the key's token (or the key)")
    _limits(update, update=True)
    update.add_argument("--spend", help="set the spend in USD (0: a reset)")
    delete = actions.add_parser("delete", help="revoke keys (their spend stays on record)")
    delete.add_argument("keys", nargs="+", help="tokens (or keys)")
    p.set_defaults(func=cmd_keys)
