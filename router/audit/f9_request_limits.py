"""F9: no limit on the files one ``/v1/apply`` or ``/v1/edit`` request carries.

Reproduced by hand: four concurrent 3 MB requests of 20,000 files each took 23-44 s apiece
on the applier and pushed Tab's p99 from 13 to 542 ms. Here the same requests (and ones
over the text-bytes limit) go to the real server at once; each must be answered with the
limit's error (a 413 naming the limit and its key) within seconds, and a small request sent
meanwhile must not wait behind them.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from router.audit.common import Tally, serve
from router.audit.raw import Answer, exchange, port_of, request

__all__ = ["FILES", "MAX_FILES", "MAX_TEXT", "oversized", "probe", "target"]

#: The limits the probe's server runs with (the defaults are 200 files, 2 MiB).
MAX_FILES = 200
MAX_TEXT = 1_000_000
#: Files in each oversized request, as in the report (about 3 MB of JSON).
FILES = 20_000
#: Seconds an oversized request may take to be refused (parsing 3 MB of JSON included).
QUICK_S = 10.0


@contextmanager
def target(tmp: Path) -> Iterator[str]:
    config = {"data_dir": str(tmp / "data"),
              "server": {"max_files_per_request": MAX_FILES,
                         "max_text_bytes_per_request": MAX_TEXT},
              "specialists": {"apply": {"class": "specialists.apply.specialist:ApplySpecialist"}}}
    with serve(config) as url:
        yield url


def _files(count: int, size: int) -> list[dict[str, str]]:
    body = "x = 1\n" * max(1, size // 6)
    return [{"original": f"def f{i}():\n{body}", "path": f"f{i}.py",
             "sketch": f"def f{i}():\n    # ... existing code ...\n    return {i}\n"}
            for i in range(count)]


def oversized() -> list[tuple[str, str, bytes, str]]:
    """(name, path, JSON body, the config key the refusal must name)."""
    many = _files(FILES, 60)
    big = _files(2, 600_000)  # 1.2 MB of text in 2 files: under the body limit, over MAX_TEXT
    return [
        ("apply: 20,000 files", "/v1/apply", json.dumps({"files": many}).encode(),
         "server.max_files_per_request"),
        ("edit: 20,000 inline texts", "/v1/edit", json.dumps({
            "instruction": "rename f", "texts": {f["path"]: f["original"] for f in many}}).encode(),
         "server.max_files_per_request"),
        ("apply: 1.2 MB of text in 2 files", "/v1/apply", json.dumps({"files": big}).encode(),
         "server.max_text_bytes_per_request"),
        ("edit: 1.2 MB of inline text", "/v1/edit", json.dumps({
            "instruction": "rename f", "texts": {f["path"]: f["original"] for f in big}}).encode(),
         "server.max_text_bytes_per_request"),
    ]


def send(port: int, path: str, body: bytes, timeout: float = 60.0) -> Answer:
    return exchange(port, request("POST", path, body=body,
                                  headers={"Content-Type": "application/json"}), timeout=timeout)


def probe(tmp: Path) -> Tally:
    tally = Tally("f9_request_limits")
    with target(tmp) as url:
        port = port_of(url)
        attacks = oversized() * 2  # two of each at once: eight concurrent requests
        small = json.dumps({"files": _files(3, 60)}).encode()
        with ThreadPoolExecutor(len(attacks) + 1) as pool:
            futures = [pool.submit(send, port, path, body, QUICK_S * 3)
                       for _, path, body, _ in attacks]
            time.sleep(0.2)
            legit = send(port, "/v1/apply", small, timeout=QUICK_S * 3)
            answers = [f.result() for f in futures]
        for (name, _, _, key), answer in zip(attacks, answers):
            tally.attempts += 1
            tally.expect(answer.status == 413 and key in answer.error_message(),
                         f"{name}: answered {answer.status} {answer.body[:160]!r}, not a 413 "
                         f"naming {key}")
            tally.expect(answer.seconds < QUICK_S,
                         f"{name}: refused only after {answer.seconds:.1f}s")
        tally.expect(legit.status == 200 and legit.seconds < QUICK_S,
                     f"a 3-file request sent meanwhile: {legit.status} after "
                     f"{legit.seconds:.1f}s")
        at_limit = send(port, "/v1/apply", json.dumps({"files": _files(MAX_FILES, 60)}).encode())
        tally.expect(at_limit.status == 200,
                     f"{MAX_FILES} files (the limit) answered {at_limit.status}")
    return tally
