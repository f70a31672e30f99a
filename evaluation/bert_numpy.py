"""A BERT sentence encoder (mean pooling, optionally normalized) run with numpy
and the ``tokenizers`` library alone, its weights mapped from the model's
safetensors file rather than read into memory (issue 35, memory): the same
vectors as transformers and torch give (to float32 rounding), in a worker
that then holds about 100 MB for the model instead of the 300 MB torch and
transformers take. Only the plain BERT shape is run (absolute positions, GELU,
post-layer-norm); other models go to evaluation.matcher's torch encoders."""

from __future__ import annotations

import json
import math
import struct
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

_DTYPES = {"F32": "<f4", "F16": "<f2", "I64": "<i8"}


def _mapped_tensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a safetensors file as read-only arrays over one map of
    the file: its pages are read when used, and are the page cache's, not the
    process's own memory."""
    with open(path, "rb") as file:
        (length,) = struct.unpack("<Q", file.read(8))
        header = json.loads(file.read(length))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + length)
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__" or entry["dtype"] not in _DTYPES:
            continue
        start, end = entry["data_offsets"]
        tensors[name] = (
            data[start:end].view(_DTYPES[entry["dtype"]]).reshape(entry["shape"])
        )
    return tensors


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz and Stegun 7.1.26 (absolute error under 1.5e-7, below float32's
    # resolution of GELU's output): numpy has no erf, and SciPy's would add its
    # import to the worker.
    sign = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (
        0.254829592
        + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return sign * (1.0 - poly * np.exp(-x * x))


def _gelu(x: np.ndarray) -> np.ndarray:
    # BERT's exact GELU, x * Phi(x), computed in float64.
    x64 = x.astype(np.float64)
    return (0.5 * x64 * (1.0 + _erf(x64 / math.sqrt(2.0)))).astype(np.float32)


def _layer_norm(x: np.ndarray, weight, bias, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + eps) * weight + bias


class NumpyBertEncoder:
    """Runs a sentence-transformers model of BERT architecture that
    evaluation.matcher.MeanPoolingEncoder also runs, without torch.
    ``encode`` takes sentence-transformers' arguments; calls are serialized,
    as a fast tokenizer refuses to be used by two threads at once."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        config = json.loads((path / "config.json").read_text())
        st_config = json.loads((path / "sentence_bert_config.json").read_text())
        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.max_length = min(
            int(st_config.get("max_seq_length") or 512),
            int(config["max_position_embeddings"]),
        )
        self.normalize = "Normalize" in (path / "modules.json").read_text()
        self.weights = _mapped_tensors(path / "model.safetensors")
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.enable_truncation(self.max_length)
        self.tokenizer.no_padding()
        self._lock = threading.Lock()

    @staticmethod
    def fits(path: Path | None) -> bool:
        """Whether the model folder is a BERT this class runs: the shape
        MeanPoolingEncoder runs, plain BERT weights in safetensors, and a
        fast tokenizer's file."""
        if path is None or not all(
            (path / name).is_file()
            for name in ("config.json", "model.safetensors", "tokenizer.json")
        ):
            return False
        try:
            config = json.loads((path / "config.json").read_text())
        except (OSError, ValueError):
            return False
        return (
            config.get("model_type") == "bert"
            and config.get("hidden_act") == "gelu"
            and config.get("position_embedding_type", "absolute") == "absolute"
        )

    def get_embedding_dimension(self) -> int:
        return self.hidden

    def _w(self, name: str) -> np.ndarray:
        return self.weights[name]

    def _linear(self, x: np.ndarray, prefix: str) -> np.ndarray:
        # One 2-D product (BLAS): numpy's stacked 3-D matmul was 20 times slower.
        flat = x.reshape(-1, x.shape[-1]) @ self._w(f"{prefix}.weight").T
        return flat.reshape(*x.shape[:-1], -1) + self._w(f"{prefix}.bias")

    def _forward(self, ids: np.ndarray, types: np.ndarray, mask: np.ndarray):
        """The last hidden state of a batch (batch, tokens, hidden)."""
        batch, length = ids.shape
        x = (
            self._w("embeddings.word_embeddings.weight")[ids]
            + self._w("embeddings.position_embeddings.weight")[:length]
            + self._w("embeddings.token_type_embeddings.weight")[types]
        )
        x = _layer_norm(
            x,
            self._w("embeddings.LayerNorm.weight"),
            self._w("embeddings.LayerNorm.bias"),
            self.eps,
        )
        size = self.hidden // self.heads
        # Padding keys get no attention weight.
        blocked = np.where(mask[:, None, None, :] > 0, 0.0, -1e9).astype(np.float32)
        for i in range(self.layers):
            layer = f"encoder.layer.{i}"

            def heads(t):
                return t.reshape(batch, length, self.heads, size).transpose(0, 2, 1, 3)

            q = heads(self._linear(x, f"{layer}.attention.self.query"))
            k = heads(self._linear(x, f"{layer}.attention.self.key"))
            v = heads(self._linear(x, f"{layer}.attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / np.float32(math.sqrt(size))
            scores = scores + blocked
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, -1)
            x = _layer_norm(
                self._linear(context, f"{layer}.attention.output.dense") + x,
                self._w(f"{layer}.attention.output.LayerNorm.weight"),
                self._w(f"{layer}.attention.output.LayerNorm.bias"),
                self.eps,
            )
            inner = _gelu(self._linear(x, f"{layer}.intermediate.dense"))
            x = _layer_norm(
                self._linear(inner, f"{layer}.output.dense") + x,
                self._w(f"{layer}.output.LayerNorm.weight"),
                self._w(f"{layer}.output.LayerNorm.bias"),
                self.eps,
            )
        return x

    def _mean_pooled(self, texts: list[str]) -> np.ndarray:
        """The mean of each text's token vectors (padding left out)."""
        encodings = self.tokenizer.encode_batch(texts)
        length = max(len(e.ids) for e in encodings)
        ids, types, mask = (
            np.zeros((len(texts), length), dtype=np.int64) for _ in range(3)
        )
        for row, encoding in enumerate(encodings):
            size = len(encoding.ids)
            ids[row, :size] = encoding.ids
            types[row, :size] = encoding.type_ids
            mask[row, :size] = encoding.attention_mask
        hidden = self._forward(ids, types, mask)
        weights = mask[:, :, None].astype(np.float32)
        return (hidden * weights).sum(1) / np.maximum(weights.sum(1), 1e-9)

    def encode(self, texts: Sequence[str], **options: Any) -> np.ndarray:
        """sentence-transformers' ``encode``: ``batch_size`` and
        ``normalize_embeddings`` are read, the other options ignored."""
        texts = [str(t).strip() for t in texts]
        size = int(options.get("batch_size") or 32)
        with self._lock:
            pooled = [
                self._mean_pooled(texts[start : start + size])
                for start in range(0, len(texts), size)
            ]
        if not pooled:
            return np.zeros((0, self.hidden), dtype=np.float32)
        vectors = np.concatenate(pooled)
        if self.normalize or options.get("normalize_embeddings"):
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = vectors / np.maximum(norms, 1e-12)
        return vectors.astype(np.float32)
