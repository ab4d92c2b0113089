"""``complement lsp``: Tab and the applier in any editor, over the Language Server Protocol.

A stdio language server (pygls) with:

* ``textDocument/inlineCompletion`` (LSP 3.18): the Tab specialist's suggestion for the
  document, the cursor and the recent edits (tracked from ``didChange``), as ghost text.
  The document's URI, with how many times it was opened, is the Tab ``session`` and its
  version the ``seq``, so a request made stale by typing is cancelled by the specialist;
  ``$/cancelRequest`` cancels it here. A document closed and opened again (its version
  counts again from where the editor starts it) is a new session, so Tab answers at once.
* feedback: accepting runs the item's command (``complement.accept``), which posts
  ``accepted``; a shown suggestion the next change does not take is posted ``rejected``.
  An accepted suggestion is then followed through the document's changes: deleted whole,
  it is reported ``undone``; else what is left of it after ``KEPT_AFTER`` changes (or at
  close) is reported as ``chars_kept`` (the final report, issue 35).
* a code action, "Apply sketch from selection": the selected text is a lazy sketch of the
  rest of the document; the applier's merge replaces the document (``WorkspaceEdit``), or
  the action is offered disabled with the applier's reason. The command
  ``complement.applySketch`` takes the sketch as an argument instead (from the clipboard).

It talks to a running server (``--server URL``), or loads the config's specialists
in-process when none is given (decisions and feedback then go to the config's event store,
as the server's would).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol

# pygls reads the handlers' annotations at run time: the types they name live at module level
from lsprotocol import types as t
from pygls.lsp.server import LanguageServer

__all__ = ["Backend", "HttpBackend", "LocalBackend", "build_server"]

log = logging.getLogger(__name__)
ACCEPT = "complement.accept"
APPLY = "complement.applySketch"
MAX_RECENT_EDITS = 8


class Backend(Protocol):
    """Where suggestions, feedback and merges come from."""

    def suggest(self, payload: dict[str, Any]) -> dict[str, Any]: ...

    def feedback(self, request_id: str, outcome: str, chars: int | None = None,
                 **final: Any) -> None: ...

    def apply(self, original: str, sketch: str, path: str | None) -> dict[str, Any]: ...


class HttpBackend:
    """A running ``complement serve``: ``/v1/tab``, ``/v1/feedback``, ``/v1/apply``."""

    def __init__(self, url: str, api_key: str | None = None, timeout: float = 10.0) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout)

    def suggest(self, payload: dict[str, Any]) -> dict[str, Any]:
        r = self.client.post("/v1/tab", json=payload)
        r.raise_for_status()
        return dict(r.json())

    def feedback(self, request_id: str, outcome: str, chars: int | None = None,
                 **final: Any) -> None:
        """``final``: the final report (``chars_kept`` and ``kept_after``, or ``undone``)."""
        body: dict[str, Any] = {"request_id": request_id, "outcome": outcome, **final}
        if chars is not None:
            body["chars_accepted"] = chars
        r = self.client.post("/v1/feedback", json=body)
        if r.status_code >= 400:  # too late, already answered: say so, never crash the editor
            log.warning("feedback for %s: %s %s", request_id, r.status_code, r.text[:200])

    def apply(self, original: str, sketch: str, path: str | None) -> dict[str, Any]:
        r = self.client.post("/v1/apply", json={"original": original, "sketch": sketch,
                                                "path": path})
        r.raise_for_status()
        return dict(r.json())


class LocalBackend:
    """The config's Tab and apply specialists in this process, logging to its event store."""

    def __init__(self, config: Any) -> None:
        from router.registry import specialist_from_config
        from router.service.tab import TabService
        from specialists.tab.events import EventStore

        self.tab = specialist_from_config(config.specialists, "tab")
        self.applier = specialist_from_config(config.specialists, "apply")
        self.events = EventStore(config.events_url(), **config.events.store_options())
        # the policy and event stores as the server has them (the Tab service's)
        self.tab_service = TabService(self.tab, config.data_path(), self.events)
        self.tab_service.sync_at_start()

    def suggest(self, payload: dict[str, Any]) -> dict[str, Any]:
        from router.api.tab import tab_response

        result = self.tab.answer(payload)
        self.tab_service.log_action(result)
        return tab_response(result)

    def feedback(self, request_id: str, outcome: str, chars: int | None = None,
                 **final: Any) -> None:
        from specialists.base import SpecialistError
        from specialists.tab.events import Feedback

        try:
            self.events.record_feedback(Feedback(request_id, outcome,  # type: ignore[arg-type]
                                                 chars, **final))
        except SpecialistError as exc:
            log.warning("feedback for %s: %s", request_id, exc.message)

    def apply(self, original: str, sketch: str, path: str | None) -> dict[str, Any]:
        from router.api.apply import apply_response

        return apply_response(self.applier.answer({"original": original, "sketch": sketch,
                                                   "path": path}))


@dataclass
class _Shown:
    request_id: str
    text: str
    start: int
    end: int


KEPT_AFTER = 20
"""Changes of the document after an accept at which what is left of it is reported (the
final report's ``kept_after``: a change is about a keystroke while typing)."""


@dataclass
class _Kept:
    """An accepted suggestion in the document, followed until its final report (issue 35)."""

    request_id: str
    start: int
    end: int
    left: int
    """Its characters still there."""
    changes: int = 0


def _follow(kept: _Kept, edit: dict[str, Any]) -> None:
    """Move ``kept``'s region through one edit, counting what the edit deleted of it."""
    o, lo, ln = int(edit["offset"]), len(edit["old"]), len(edit["new"])
    s, e = kept.start, kept.end
    if o + lo <= s and not (lo == 0 and o == s and s == e):  # wholly before it
        kept.start, kept.end = s + ln - lo, e + ln - lo
    elif o >= e:  # wholly after it
        return
    else:
        kept.left -= max(0, min(e, o + lo) - max(s, o))
        kept.start = s if s < o else o + ln
        kept.end = e + ln - lo if o + lo < e else max(kept.start, min(o, e))


@dataclass
class _Doc:
    text: str
    session: str = ""
    """The Tab session: the URI and which opening of it (``uri#N``)."""
    edits: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=MAX_RECENT_EDITS))
    shown: _Shown | None = None
    taken: _Shown | None = None
    """The suggestion the last change put in the document (an accept's edit comes before
    its command in most editors)."""
    accepting: _Shown | None = None
    """Accepted, its text not in the document yet: the next change should bring it."""
    kept: _Kept | None = None


def _edit_between(old: str, new: str) -> dict[str, Any] | None:
    """The one contiguous edit that turns ``old`` into ``new`` (common prefix and suffix)."""
    if old == new:
        return None
    start = 0
    limit = min(len(old), len(new))
    while start < limit and old[start] == new[start]:
        start += 1
    end_old, end_new = len(old), len(new)
    while end_old > start and end_new > start and old[end_old - 1] == new[end_new - 1]:
        end_old -= 1
        end_new -= 1
    return {"old": old[start:end_old], "new": new[start:end_new], "offset": start}


def _took(shown: _Shown, new_text: str) -> bool:
    """Does the document now hold the suggestion where it was shown?"""
    return new_text[shown.start:shown.start + len(shown.text)] == shown.text


def build_server(backend: Backend) -> LanguageServer:
    """The pygls server over ``backend`` (not started: ``server.start_io()``)."""
    server = LanguageServer("complement", "0.1.0")
    docs: dict[str, _Doc] = {}
    openings = itertools.count(1)

    def language_of(uri: str) -> str:
        from specialists.apply import language_for_path

        return language_for_path(uri) or ""

    @server.feature(t.TEXT_DOCUMENT_DID_OPEN)
    def did_open(params: t.DidOpenTextDocumentParams) -> None:
        uri = params.text_document.uri
        docs[uri] = _Doc(params.text_document.text, session=f"{uri}#{next(openings)}")

    def report_kept(doc: _Doc, undone: bool = False) -> None:
        """The final report of the accepted suggestion ``doc`` follows: deleted whole (an
        undo), or the characters left after ``KEPT_AFTER`` changes (or at close)."""
        kept, doc.kept = doc.kept, None
        if kept is None:
            return
        if undone:
            backend.feedback(kept.request_id, "accepted", undone=True)
        else:
            backend.feedback(kept.request_id, "accepted", chars_kept=max(0, kept.left),
                             kept_after=kept.changes)

    def follow_kept(doc: _Doc, new: str, edit: dict[str, Any] | None) -> None:
        accepting, doc.accepting = doc.accepting, None
        if accepting is not None and _took(accepting, new):  # the accept's own edit
            doc.kept = _Kept(accepting.request_id, accepting.start,
                             accepting.start + len(accepting.text), len(accepting.text))
            return
        if doc.kept is None or edit is None:
            return
        _follow(doc.kept, edit)
        doc.kept.changes += 1
        if doc.kept.left <= 0:
            report_kept(doc, undone=True)  # the accepted text deleted: undone
        elif doc.kept.changes >= KEPT_AFTER:
            report_kept(doc)

    @server.feature(t.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(params: t.DidCloseTextDocumentParams) -> None:
        doc = docs.pop(params.text_document.uri, None)
        if doc is not None and doc.shown is not None:
            backend.feedback(doc.shown.request_id, "rejected")
        if doc is not None:
            report_kept(doc)

    @server.feature(t.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(params: t.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        new = server.workspace.get_text_document(uri).source
        doc = docs.setdefault(uri, _Doc(new))
        edit = _edit_between(doc.text, new)
        if edit is not None:
            doc.edits.append(edit)
        follow_kept(doc, new, edit)
        shown, doc.shown = doc.shown, None
        doc.taken = shown if shown is not None and _took(shown, new) else None
        if shown is not None and doc.taken is None:
            backend.feedback(shown.request_id, "rejected")  # typed on past it
        doc.text = new

    @server.feature(t.TEXT_DOCUMENT_INLINE_COMPLETION, t.InlineCompletionOptions())
    async def inline(params: t.InlineCompletionParams
                     ) -> t.InlineCompletionList | None:
        uri = params.text_document.uri
        document = server.workspace.get_text_document(uri)
        text = document.source
        doc = docs.setdefault(uri, _Doc(text))
        payload = {"file": text, "cursor": document.offset_at_position(params.position),
                   "language": language_of(uri), "path": uri,
                   "session": doc.session or f"{uri}#0",
                   "seq": document.version or 0, "recent_edits": list(doc.edits)}
        if server.workspace.root_uri:  # the project: its history is kept apart (issue 35)
            payload["project"] = server.workspace.root_uri[-200:]
        answer = await asyncio.get_running_loop().run_in_executor(None, backend.suggest,
                                                                  payload)
        suggestion = answer.get("suggestion")
        if not suggestion or answer.get("cancelled") or suggestion.get("kind") == "jump":
            # a jump (the next edit's line, issue 15) has no inline-completion form: an item
            # with empty text over its range would delete that line, so it is not shown
            return t.InlineCompletionList(items=[])
        start, end = int(suggestion["range"]["start"]), int(suggestion["range"]["end"])
        doc.shown = _Shown(str(answer["request_id"]), suggestion["text"], start, end)
        item = t.InlineCompletionItem(
            insert_text=suggestion["text"],
            range=t.Range(_position(document, text, start), _position(document, text, end)),
            command=t.Command(title="accept suggestion", command=ACCEPT,
                              arguments=[answer["request_id"], len(suggestion["text"])]))
        return t.InlineCompletionList(items=[item])

    @server.command(ACCEPT)
    def accept(request_id: str, chars: int) -> None:
        backend.feedback(str(request_id), "accepted", int(chars))
        for doc in docs.values():
            for shown in (doc.shown, doc.taken):
                if shown is None or shown.request_id != request_id:
                    continue
                doc.shown = doc.taken = None
                report_kept(doc)  # an earlier accept still followed: what is left of it now
                if _took(shown, doc.text):  # its edit came first: follow it from here
                    doc.kept = _Kept(shown.request_id, shown.start,
                                     shown.start + len(shown.text), len(shown.text))
                else:
                    doc.accepting = shown
                break

    @server.feature(t.TEXT_DOCUMENT_CODE_ACTION, t.CodeActionOptions(
        code_action_kinds=[t.CodeActionKind.RefactorRewrite]))
    def code_action(params: t.CodeActionParams) -> list[t.CodeAction]:
        uri = params.text_document.uri
        document = server.workspace.get_text_document(uri)
        text = document.source
        lo = document.offset_at_position(params.range.start)
        hi = document.offset_at_position(params.range.end)
        if hi <= lo:
            return []
        title = "complement: apply sketch from selection"
        answer = backend.apply(text[:lo] + text[hi:], text[lo:hi], uri)
        merged = _merged(answer)
        if merged is None:
            return [t.CodeAction(title=title, kind=t.CodeActionKind.RefactorRewrite,
                                 disabled=t.CodeActionDisabled(
                                     reason=f"the applier abstained: {answer.get('reason')}"))]
        return [t.CodeAction(title=title, kind=t.CodeActionKind.RefactorRewrite,
                             edit=_replace_all(document, text, merged))]

    @server.command(APPLY)
    def apply_sketch(uri: str, sketch: str) -> dict[str, Any]:
        """``[uri, sketch]``: merge a sketch (e.g. the clipboard) into the document."""
        document = server.workspace.get_text_document(uri)
        answer = backend.apply(document.source, sketch, uri)
        merged = _merged(answer)
        if merged is None:
            return {"applied": False, "reason": answer.get("reason")}
        server.workspace_apply_edit(t.ApplyWorkspaceEditParams(
            edit=_replace_all(document, document.source, merged), label="apply sketch"))
        return {"applied": True}

    return server


def _merged(answer: dict[str, Any]) -> str | None:
    """The merged file of a ``/v1/apply``-shaped answer, or ``None`` when it abstained."""
    merged = ((answer.get("files") or [{}])[0]).get("merged")
    return merged if answer.get("status") == "applied" else None


def _position(document: Any, text: str, offset: int) -> t.Position:
    """A Python string offset as an LSP position in the client's units (UTF-16 by default)."""
    line = text.count("\n", 0, offset)
    column = offset - (text.rfind("\n", 0, offset) + 1)
    return document.position_codec.position_to_client_units(document.lines,
                                                            t.Position(line, column))


def _replace_all(document: Any, text: str, merged: str) -> t.WorkspaceEdit:
    whole = t.Range(t.Position(0, 0), _position(document, text, len(text)))
    return t.WorkspaceEdit(changes={document.uri: [t.TextEdit(range=whole, new_text=merged)]})
