"""The CLI's subcommands, one module per group, each with ``register(subparsers)``."""
