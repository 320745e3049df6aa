"""The model fingerprint (the key of embedding caches and the check that an index matches its query model).

Invariants:
* a trained model never shares its base model's fingerprint, whether LoRA trained it (the adapters, merged on
  save, leave the word embeddings, LayerNorms and biases as they were) or all weights were trained;
* changing any single weight, anywhere, changes it; so do the settings that change embeddings (pooling,
  normalisation, maximum lengths) and the cross-attention block's weights;
* the same model dir loaded twice gives the same fingerprint, and encoding texts (which sets the tokenizer's
  truncation) does not change it.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from infembed.model import InFEmbed, ModelConfig
from infembed.train.config import TrainConfig
from infembed.train.trainer import Trainer


def _train(rows, output, **settings) -> InFEmbed:
    # the base model's own maximum lengths, so that only the weights differ
    config = TrainConfig(batch_size=2, max_steps=2, device="cpu", output=str(output), **settings)
    path = Trainer(config, rows=rows[:4]).train()
    return InFEmbed.load(str(path), device="cpu")


@pytest.fixture(scope="module")
def lora_trained(rows, tmp_path_factory):
    output = tmp_path_factory.mktemp("fingerprint") / "lora"
    return _train(rows, output, lora=True, lora_r=4, lora_alpha=8, lora_dropout=0.0, learning_rate=1e-3), output


def test_a_lora_trained_model_differs_from_its_base(minilm, lora_trained):
    trained, _ = lora_trained
    assert trained.config.passage_max_length == minilm.config.passage_max_length
    texts = ["heat conduction in composite slabs"]
    assert np.abs(trained.encode_passages(texts) - minilm.encode_passages(texts)).max() > 1e-4  # it did train
    assert trained.fingerprint() != minilm.fingerprint()


def test_eval_does_not_reuse_the_base_models_cached_corpus_embeddings(minilm, lora_trained):
    """The symptom: the corpus cache is keyed by the fingerprint, so a trained model got its base's embeddings."""
    from infembed.data.records import Document
    from infembed.evaluate.retrievers import DenseRetriever

    trained, _ = lora_trained
    corpus = {f"d{i}": Document(title="", text=text) for i, text in enumerate(
        ["A sourdough loaf needs four to six hours of bulk rise.", "Wind makes the deck of a bridge oscillate."]
    )}
    DenseRetriever(minilm, show_progress=False).index(corpus)  # fills the cache with the base's embeddings
    retriever = DenseRetriever(trained, show_progress=False)
    retriever.index(corpus)
    expected = trained.encode_passages([d.text for d in corpus.values()])
    np.testing.assert_allclose(retriever._embeddings, expected, atol=1e-6)


def test_a_fully_trained_model_differs_from_its_base(minilm, rows, tmp_path):
    trained = _train(rows, tmp_path / "full", learning_rate=1e-4)
    assert trained.fingerprint() != minilm.fingerprint()


def test_the_same_dir_loaded_twice_has_the_same_fingerprint(minilm, lora_trained):
    first, path = lora_trained
    before = first.fingerprint()
    first.encode_queries(["a query"], ["an instruction"])  # sets the tokenizer's truncation and padding
    first.encode_passages(["a passage " * 100])
    assert first.fingerprint() == before
    assert InFEmbed.load(str(path), device="cpu").fingerprint() == before
    assert InFEmbed.load(None, device="cpu").fingerprint() == minilm.fingerprint()


def test_any_single_weight_changes_it(minilm):
    model = InFEmbed.load(None, device="cpu")
    base = model.fingerprint()
    assert base == minilm.fingerprint()
    # a weight in the middle of layer 3, far from the first 64 KB of any tensor, moved by one float step
    weight = model.encoder.backbone.encoder.layer[3].attention.self.query.weight
    with torch.no_grad():
        weight[300, 200] = torch.nextafter(weight[300, 200], torch.tensor(1.0))
    assert model.fingerprint() != base


@pytest.mark.parametrize(
    "overrides",
    [{"pooling": "cls"}, {"normalize": False}, {"query_max_length": 64}, {"passage_max_length": 128}],
    ids=lambda o: next(iter(o)),
)
def test_settings_that_change_embeddings_change_it(minilm, overrides):
    assert InFEmbed.load(None, device="cpu", **overrides).fingerprint() != minilm.fingerprint()


def test_cross_attention_weights_change_it():
    model = InFEmbed.from_pretrained(None, config=ModelConfig(interaction="cross_attention"), device="cpu")
    base = model.fingerprint()
    with torch.no_grad():
        model.interaction.attention.in_proj_weight[1000, 300] += 1e-3  # the value projection
    assert model.fingerprint() != base
