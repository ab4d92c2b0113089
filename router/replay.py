"""The replay frontier: an offline stand-in for a frontier model that answers with the *true*
change of a recorded edit, written in the format the pipeline asked for.

It is a litellm ``CustomLLM`` provider registered under the prefix ``replay/``, so a replay
call goes through exactly the same path as a real one (``FrontierClient.complete`` →
``litellm.acompletion`` → retries, cost accounting). The model name after the prefix
(``replay/gpt-5``) names the real model whose prices litellm's local cost map supplies.

The pipeline tells the provider which recorded task and which format it wants through the
request's ``metadata`` (``replay_task``, ``replay_format``); a real provider ignores it.
Formats:

- ``sketch``: a lazy sketch made by ``specialists.apply.make_sketch`` (``k`` context lines);
- ``search_replace``: aider-style SEARCH/REPLACE blocks, each SEARCH grown until unique;
- ``whole_file``: the whole ``after`` file.

Latency is *modelled*, not measured: time to first token plus output tokens over a
configured decode rate (``LatencyModel``). Every number derived from it says so.
"""

from __future__ import annotations

import difflib
import threading
from dataclasses import dataclass, field
from typing import Any, Sequence

__all__ = [
    "DEFAULT_LATENCY",
    "FORMATS",
    "LatencyModel",
    "ReplayStore",
    "ReplayTask",
    "count_tokens",
    "fence",
    "install",
    "render_answer",
    "search_replace_blocks",
]

FORMATS = ("sketch", "search_replace", "whole_file")
PROVIDER = "replay"


@dataclass(frozen=True)
class LatencyModel:
    """Modelled latency of one call: ``ttft_s + output_tokens / tokens_per_s``."""

    ttft_s: float = 0.6
    tokens_per_s: float = 80.0

    def seconds(self, output_tokens: int) -> float:
        return self.ttft_s + output_tokens / self.tokens_per_s


#: Used for a replay model the eval config gives no figures for.
DEFAULT_LATENCY = LatencyModel()


@dataclass(frozen=True)
class ReplayTask:
    key: str
    path: str
    before: str
    after: str
    language: str | None = None


@dataclass
class ReplayStore:
    """Recorded tasks by key, and how the replay writes sketches."""

    tasks: dict[str, ReplayTask] = field(default_factory=dict)
    sketch_k: int = 3
    """Context lines a replayed sketch keeps around each change (unified diff's default; the
    applier places k=3 sketches best, see BENCHMARKS.md)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, task: ReplayTask) -> None:
        with self.lock:
            self.tasks[task.key] = task

    def get(self, key: str | None) -> ReplayTask | None:
        with self.lock:
            return self.tasks.get(key or "")


def fence(text: str, language: str | None = None, path: str | None = None) -> str:
    """A fenced block long enough that no backtick run inside the text closes it."""
    run, longest = 0, 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    ticks = "`" * max(3, longest + 1)
    info = " ".join(x for x in (language or "", path or "") if x)
    body = text if text.endswith("\n") else text + "\n"
    return f"{ticks}{info}\n{body}{ticks}\n"


def search_replace_blocks(before: str, after: str, path: str) -> str:
    """SEARCH/REPLACE blocks turning ``before`` into ``after``. Blocks apply in order, so
    each SEARCH is grown until it occurs once in the text as the earlier blocks left it."""
    b = before.splitlines(keepends=True)
    a = after.splitlines(keepends=True)
    ops = [op for op in difflib.SequenceMatcher(None, b, a, autojunk=False).get_opcodes()
           if op[0] != "equal"]
    out = []
    done = ""  # the text before the current block, as the earlier blocks left it
    pos = 0  # lines of ``before`` consumed into ``done``
    for i1, i2, j1, j2 in _merge_close(ops, gap=3):
        current = done + "".join(b[pos:])
        lo, hi = _unique_window(b, i1, i2, pos, lambda w: current.count(w) == 1)
        search = "".join(b[lo:hi])
        replace = "".join(b[lo:i1]) + "".join(a[j1:j2]) + "".join(b[i2:hi])
        out.append(f"{path}\n<<<<<<< SEARCH\n{_nl(search)}=======\n{_nl(replace)}"
                   ">>>>>>> REPLACE\n")
        done += "".join(b[pos:lo]) + replace
        pos = hi
    return "\n".join(out)


def _nl(text: str) -> str:
    return text if not text or text.endswith("\n") else text + "\n"


def _merge_close(ops: Sequence[tuple[str, int, int, int, int]],
                 gap: int) -> list[tuple[int, int, int, int]]:
    groups: list[list[int]] = []
    for _, i1, i2, j1, j2 in ops:
        if groups and i1 - groups[-1][1] <= gap:
            groups[-1][1], groups[-1][3] = i2, j2
        else:
            groups.append([i1, i2, j1, j2])
    return [(g[0], g[1], g[2], g[3]) for g in groups]


def _unique_window(b: list[str], i1: int, i2: int, floor: int,
                   unique: Any) -> tuple[int, int]:
    """Grow context around before[i1:i2] (one line each side at least, never above
    ``floor``: those lines belong to an earlier block) until ``unique(window)``."""
    lo, hi = max(floor, i1 - 1), min(len(b), i2 + 1)
    while True:
        window = "".join(b[lo:hi])
        if window.strip() and unique(window):
            return lo, hi
        if lo == floor and hi == len(b):
            return lo, hi
        lo, hi = max(floor, lo - 1), min(len(b), hi + 1)


def render_answer(task: ReplayTask, fmt: str, sketch_k: int = 3) -> str:
    """The answer a perfect frontier model would give for ``task`` in format ``fmt``."""
    if fmt == "whole_file":
        return fence(task.after, task.language, task.path)
    if fmt == "search_replace":
        return search_replace_blocks(task.before, task.after, task.path)
    if fmt == "sketch":
        from specialists.apply import make_sketch

        sketch = make_sketch(task.before, task.after, task.language, k=sketch_k)
        return fence(sketch.text, task.language, task.path)
    raise ValueError(f"unknown replay format {fmt!r}; one of {FORMATS}")


def count_tokens(text: str) -> int:
    """Tokens of ``text`` in cl100k, from litellm's bundled tokenizer files (no download)."""
    return len(_encoding().encode(text, disallowed_special=()))


def _encoding() -> Any:
    from router.frontier import litellm_module

    litellm_module()  # offline settings first
    # Importing this module points tiktoken at litellm's bundled files (TIKTOKEN_CACHE_DIR)
    # and loads cl100k once; tiktoken alone would try to download it.
    from litellm.litellm_core_utils.default_encoding import encoding

    return encoding


def _messages_text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages)


def _handler_class() -> type:
    from router.frontier import litellm_module

    litellm = litellm_module()

    class ReplayLLM(litellm.CustomLLM):  # type: ignore[misc,name-defined]
        """Answers from the store; an unknown task gets prose, as a confused model would."""

        def __init__(self, store: ReplayStore) -> None:
            super().__init__()
            self.store = store

        def _answer(self, messages: list[dict[str, Any]], model_response: Any,
                    litellm_params: dict[str, Any] | None) -> Any:
            from litellm.types.utils import Usage

            meta = (litellm_params or {}).get("metadata") or {}
            task = self.store.get(meta.get("replay_task"))
            fmt = str(meta.get("replay_format") or "sketch")
            if task is None:
                text = "I could not find the change you describe in this repository."
            else:
                text = render_answer(task, fmt, self.store.sketch_k)
            prompt_tokens = count_tokens(_messages_text(messages))
            completion_tokens = count_tokens(text)
            model_response.choices[0].message.content = text
            model_response.usage = Usage(prompt_tokens=prompt_tokens,
                                         completion_tokens=completion_tokens,
                                         total_tokens=prompt_tokens + completion_tokens)
            return model_response

        def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Any:
            return self._answer(messages, kwargs.get("model_response") or args[3],
                                kwargs.get("litellm_params"))

        async def acompletion(self, model: str, messages: list, *args: Any,
                              **kwargs: Any) -> Any:
            return self._answer(messages, kwargs.get("model_response") or args[3],
                                kwargs.get("litellm_params"))

    return ReplayLLM


_install_lock = threading.Lock()


def install(store: ReplayStore) -> None:
    """Register (or re-point) the ``replay/`` provider in litellm at ``store``.

    litellm keeps its provider map process-wide; the last store installed answers.
    """
    from router.frontier import litellm_module

    litellm = litellm_module()
    with _install_lock:
        handler = _handler_class()(store)
        others = [p for p in (litellm.custom_provider_map or [])
                  if p.get("provider") != PROVIDER]
        litellm.custom_provider_map = [*others, {"provider": PROVIDER,
                                                 "custom_handler": handler}]
        from litellm.utils import custom_llm_setup

        custom_llm_setup()
