"""The router's service layer: what the front ends (the HTTP endpoints in ``router.api``, the
LSP server, the Ray engine, the CLI) call to change the server's state, below them and
above the specialists. It never imports a front end (import-linter contract
``router-layers``, pyproject.toml).

``router.service.tab``: the Tab service, the one owner of the online loop's state in a
server process (policy store, event store, deploy, canary, rollback, the followers).
"""
