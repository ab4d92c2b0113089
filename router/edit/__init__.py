"""The edit path behind ``POST /v1/edit`` and ``complement edit``.

``cascade`` runs a request (retrieve → sketch → apply → verify → escalate); ``planning``
writes the prompts and reads the answers; ``workspace`` confines every path and writes all
or nothing; ``verify`` holds the checks, commands from the config among them; ``outcome``
is the request, the result and its trace.
"""

from router.edit.cascade import EditPipeline, ModelApplier
from router.edit.outcome import EditRequest, EditResult, Step
from router.edit.planning import (
    CHAINS,
    apply_search_replace,
    build_messages,
    parse_blocks,
    parse_search_replace,
)
from router.edit.verify import Check, CommandCheck, ParseCheck, Verifier, verifiers_for
from router.edit.workspace import Workspace

__all__ = [
    "CHAINS",
    "Check",
    "CommandCheck",
    "EditPipeline",
    "EditRequest",
    "EditResult",
    "ModelApplier",
    "ParseCheck",
    "Step",
    "Verifier",
    "Workspace",
    "apply_search_replace",
    "build_messages",
    "parse_blocks",
    "parse_search_replace",
    "verifiers_for",
]
