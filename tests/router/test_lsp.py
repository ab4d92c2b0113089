"""`complement lsp` end to end with a real LSP client (pygls's) over stdio: open a document,
type, receive a suggestion, accept it, reject the next by typing past it, cancel a request,
and merge a sketch by code action — and see the feedback in the event store with the
policy version that made each suggestion."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from lsprotocol import types as t

from specialists.tab.events import EventStore, sqlite_url

REPO = Path(__file__).resolve().parents[2]
ACCEPT_COMMAND = "complement.accept"
CANCEL_TRIES = 40
"""A cancel races the answer it cancels: tried until one lands (a loaded machine slows
both sides), so the test waits for the event, not for a lucky timing."""
URI = "file:///work/calc.py"
TYPED = ("def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\n"
         "def mul(a, b):\n    return a * b\n\n\ndef div(a, b):\n    return a / b\n")


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "lsp.yaml"
    path.write_text(yaml.safe_dump({
        "data_dir": str(tmp_path / "data"), "events": {"feedback_timeout_s": 600},
        "specialists": {"tab": {"class": "specialists.tab:TabSpecialist",
                                "options": {"sample": True, "log_features": True}},
                        "apply": {"class": "specialists.apply.specialist:ApplySpecialist"}}}))
    return path


async def _client(config: Path, *extra: str) -> Any:
    from pygls.lsp.client import LanguageClient

    client = LanguageClient("complement-test", "1")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    await client.start_io(sys.executable, "-m", "router.cli", "lsp", "--config", str(config),
                          *extra, env=env, cwd=str(REPO))
    client.init_result = await client.initialize_async(  # type: ignore[attr-defined]
        t.InitializeParams(capabilities=t.ClientCapabilities()))
    client.initialized(t.InitializedParams())
    return client


def _change(client: Any, version: int, text: str) -> None:
    client.text_document_did_change(t.DidChangeTextDocumentParams(
        text_document=t.VersionedTextDocumentIdentifier(uri=URI, version=version),
        content_changes=[t.TextDocumentContentChangeWholeDocument(text=text)]))


def _offset(text: str, pos: t.Position) -> int:
    """A position's offset in ``text`` (ASCII: UTF-16 units are characters)."""
    lines = text.split("\n")
    return sum(len(line) + 1 for line in lines[:pos.line]) + pos.character


def _at_end(text: str) -> t.Position:
    lines = text.split("\n")
    return t.Position(line=len(lines) - 1, character=len(lines[-1]))


def _ask(client: Any, text: str, msg_id: str | None = None) -> Any:
    params = t.InlineCompletionParams(
        text_document=t.TextDocumentIdentifier(uri=URI), position=_at_end(text),
        context=t.InlineCompletionContext(trigger_kind=t.InlineCompletionTriggerKind.Automatic))
    return client.protocol.send_request_async("textDocument/inlineCompletion", params,
                                              msg_id=msg_id)


async def _type_until_suggested(client: Any, start: int, version: int
                                ) -> tuple[t.InlineCompletionItem | None, int, int]:
    """Type TYPED from ``start`` a character at a time until a suggestion is shown."""
    for cut in range(start, len(TYPED)):
        version += 1
        _change(client, version, TYPED[:cut])
        result = await _ask(client, TYPED[:cut])
        if result.items:
            return result.items[0], cut, version
    return None, len(TYPED), version


def test_lsp_suggests_accepts_rejects_cancels_and_applies(tmp_path: Path) -> None:
    config = _config(tmp_path)

    async def session() -> dict[str, Any]:
        client = await _client(config)
        try:
            client.text_document_did_open(t.DidOpenTextDocumentParams(text_document=t.TextDocumentItem(
                uri=URI, language_id="python", version=1, text=TYPED[:20])))
            first, cut, version = await _type_until_suggested(client, 20, 1)
            assert first is not None and first.command is not None, "no suggestion while typing"
            rid_accepted = first.command.arguments[0]
            # the editor puts the suggestion in, runs its command, and the person deletes it
            text = TYPED[:cut]
            lo, hi = _offset(text, first.range.start), _offset(text, first.range.end)
            version += 1
            _change(client, version, text[:lo] + str(first.insert_text) + text[hi:])
            await client.workspace_execute_command_async(t.ExecuteCommandParams(
                command=first.command.command, arguments=first.command.arguments))
            version += 1
            _change(client, version, text)  # an undo: the accepted text deleted
            second, cut2, version = await _type_until_suggested(client, cut + 1, version)
            assert second is not None and second.command is not None
            rid_rejected = second.command.arguments[0]
            version += 1
            _change(client, version, TYPED[:cut2] + "\x7f#")  # typed on, not what was shown
            cancelled = 0
            for n in range(CANCEL_TRIES):  # until one is cancelled while the model works on it
                # a text of its own each time: no cache answers it before the cancel arrives
                version += 1
                text = f"{TYPED[:cut2]}# {n} {version}\n"
                _change(client, version, text)
                pending = _ask(client, text, msg_id=f"cancel-{n}")
                client.cancel_request(t.CancelParams(id=f"cancel-{n}"))
                try:
                    await pending
                except Exception as exc:  # the server's RequestCancelled error
                    cancelled += "cancel" in str(exc).lower()
                if cancelled:
                    break
            original = "def f():\n    return 1\n\n\ndef g():\n    return 2\n"
            sketch = "# ... existing code ...\ndef g():\n    return 20\n"
            version += 1
            _change(client, version, original + sketch)
            lines = len(original.split("\n")) - 1
            actions = await client.text_document_code_action_async(t.CodeActionParams(
                text_document=t.TextDocumentIdentifier(uri=URI),
                range=t.Range(t.Position(lines, 0), t.Position(lines + 3, 0)),
                context=t.CodeActionContext(diagnostics=[])))
            return {"accepted": rid_accepted, "rejected": rid_rejected, "actions": actions,
                    "cancelled": cancelled, "merged": original.replace("return 2", "return 20")}
        finally:
            await client.shutdown_async(None)
            client.exit(None)
            await client.stop()

    out = asyncio.run(session())
    assert out["cancelled"] >= 1, f"$/cancelRequest cancelled none of {CANCEL_TRIES} requests"
    action = out["actions"][0]
    assert action.title.startswith("complement: apply sketch") and action.disabled is None
    edit = action.edit.changes[URI][0]
    assert edit.new_text == out["merged"]
    store = EventStore(sqlite_url(tmp_path / "data"))
    try:
        outcomes = {e.request_id: e for e in store.labelled(str(_deployed(tmp_path)))}
    finally:
        store.close()
    accepted, rejected = outcomes[out["accepted"]], outcomes[out["rejected"]]
    assert accepted.outcome == "accepted" and accepted.shown
    assert accepted.undone and accepted.chars_kept == 0  # issue 35: the LSP saw the undo
    assert not rejected.undone and rejected.chars_kept is None
    assert rejected.outcome == "rejected" and rejected.shown
    assert accepted.policy_version == rejected.policy_version == str(_deployed(tmp_path))


def _deployed(tmp_path: Path) -> int:
    from specialists.tab.loop.versions import PolicyStore

    version = PolicyStore(tmp_path / "data" / "tab").deployed()
    assert version is not None
    return version


@pytest.mark.parametrize("sketch", ["# ...\nno_anchor_here()\n# ...\n"])
def test_lsp_offers_the_apply_action_disabled_with_the_reason(tmp_path: Path,
                                                             sketch: str) -> None:
    config = _config(tmp_path)

    async def session() -> Any:
        client = await _client(config)
        try:
            text = "def f():\n    return 1\n" + sketch
            client.text_document_did_open(t.DidOpenTextDocumentParams(text_document=t.TextDocumentItem(
                uri=URI, language_id="python", version=1, text=text)))
            return await client.text_document_code_action_async(t.CodeActionParams(
                text_document=t.TextDocumentIdentifier(uri=URI),
                range=t.Range(t.Position(2, 0), t.Position(5, 0)),
                context=t.CodeActionContext(diagnostics=[])))
        finally:
            await client.shutdown_async(None)
            client.exit(None)
            await client.stop()

    actions = asyncio.run(session())
    assert actions[0].disabled is not None and "abstained" in actions[0].disabled.reason


def test_lsp_against_a_running_server_sends_feedback_there(tmp_path: Path) -> None:
    from router.app import create_app
    from router.config import load_config
    from tests.conftest import running

    app = create_app(load_config(_config(tmp_path), env={}))
    with running(app) as url:
        async def session() -> str:
            client = await _client(tmp_path / "unused.yaml", "--server", url)
            try:
                client.text_document_did_open(t.DidOpenTextDocumentParams(
                    text_document=t.TextDocumentItem(uri=URI, language_id="python", version=1,
                                                     text=TYPED[:20])))
                item, _, _ = await _type_until_suggested(client, 20, 1)
                assert item is not None and item.command is not None
                await client.workspace_execute_command_async(t.ExecuteCommandParams(
                    command=item.command.command, arguments=item.command.arguments))
                return str(item.command.arguments[0])
            finally:
                await client.shutdown_async(None)
                client.exit(None)
                await client.stop()

        request_id = asyncio.run(session())
        accepted = [e for e in app.state.events.labelled(str(_deployed(tmp_path)))
                    if e.request_id == request_id]
    assert accepted and accepted[0].outcome == "accepted"


def test_lsp_a_reopened_document_gets_suggestions_again(tmp_path: Path) -> None:
    """Issue 34: an LSP client that closes and reopens a document counts its version from
    the start again; every request after the reopen was answered 'cancelled' until the
    version passed the old one, so Tab went silent in that file. Now each opening is a
    session of its own."""
    config = _config(tmp_path)

    async def session() -> t.InlineCompletionItem | None:
        client = await _client(config)
        try:
            client.text_document_did_open(t.DidOpenTextDocumentParams(text_document=t.TextDocumentItem(
                uri=URI, language_id="python", version=1, text=TYPED[:20])))
            _change(client, 5000, TYPED[:40])  # a long editing session: a high version
            await _ask(client, TYPED[:40])
            client.text_document_did_close(t.DidCloseTextDocumentParams(
                text_document=t.TextDocumentIdentifier(uri=URI)))
            client.text_document_did_open(t.DidOpenTextDocumentParams(text_document=t.TextDocumentItem(
                uri=URI, language_id="python", version=1, text=TYPED[:20])))
            item, _, _ = await _type_until_suggested(client, 20, 1)  # versions 2, 3, ...
            return item
        finally:
            await client.shutdown_async(None)
            client.exit(None)
            await client.stop()

    assert asyncio.run(asyncio.wait_for(session(), 240)) is not None, \
        "no suggestion after the document was reopened"


def test_lsp_advertises_inline_completion_and_a_gated_client_gets_ghost_text(
        tmp_path: Path) -> None:
    """Issue 40: editors (Neovim's ``client:supports_method``, vscode-languageclient) ask
    only for what ``initialize`` advertises; the server did not advertise inline completion,
    so a real editor never asked. This client asks only when it is advertised."""
    config = _config(tmp_path)

    async def session() -> tuple[Any, Any]:
        client = await _client(config)
        try:
            caps = client.init_result.capabilities
            if caps.inline_completion_provider in (None, False):
                return caps, None  # a real editor stops here
            client.text_document_did_open(t.DidOpenTextDocumentParams(text_document=t.TextDocumentItem(
                uri=URI, language_id="python", version=1, text=TYPED[:20])))
            item, _, _ = await _type_until_suggested(client, 20, 1)
            return caps, item
        finally:
            await client.shutdown_async(None)
            client.exit(None)
            await client.stop()

    caps, item = asyncio.run(asyncio.wait_for(session(), 240))
    assert caps.inline_completion_provider not in (None, False), caps
    assert caps.code_action_provider not in (None, False)
    assert ACCEPT_COMMAND in (caps.execute_command_provider.commands or [])
    assert item is not None, "advertised, asked, but no ghost text while typing"


def test_an_accepted_suggestion_is_followed_through_the_edits_after_it() -> None:
    """What the final report counts: the accepted text's characters still there, wherever
    edits before it moved it; none once deleted whole (an undo)."""
    from router.lsp import _edit_between, _follow, _Kept

    kept = _Kept("r", 3, 7, 4)  # "XYZW" accepted into "abc|def"
    text = "abcXYZWdef"
    for new in ("0abcXYZWdef",    # typed before it: it moves
                "0abcXYZWdef!",   # typed after it: nothing
                "0abcXZWdef!",    # one of its characters deleted
                "0abcXZW-def!"):  # typed right after it
        edit = _edit_between(text, new)
        assert edit is not None
        _follow(kept, edit)
        text = new
    assert (kept.left, text[kept.start:kept.end]) == (3, "XZW")
    edit = _edit_between(text, "0abc-def!")
    assert edit is not None
    _follow(kept, edit)
    assert kept.left == 0
