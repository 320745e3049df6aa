"""The OpenVINO backend (infembed.model.backends) on tiny real models: the same embeddings and rankings as torch
for every pooling and for a cross-attention model, one cached export per backbone (reused, never shared with
another model), and a damaged or half-written export detected and rebuilt."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from tiny_models import make_tiny_model

pytest.importorskip(
    "openvino", reason="the openvino extra is not installed (pip install 'infembed[openvino]')"
)

from infembed.data.errors import SettingsError  # noqa: E402
from infembed.model import InFEmbed, backends  # noqa: E402

PASSAGES = [
    "An experimental study of heat conduction through layered slabs.",
    "A theoretical analysis of transient heat conduction in a slab.",
    "Measurements of supersonic flow past a circular cylinder.",
    "Hypersonic flow past a cylinder at very high Mach number.",
    "Transition of the boundary layer on a flat plate at low speed, a long passage " * 3,
    "Flutter of thin panels.",
]
QUERIES = ["heat conduction in slabs", "flow past a cylinder", "boundary layer"]
INSTRUCTIONS = ["Only experimental studies are relevant.", None, "Documents about wings are not relevant."]


def export_of(model: InFEmbed):
    return backends.export_dir(backends.backbone_digest(model.encoder.backbone))


def assert_same_embeddings(torch_model: InFEmbed, ov_model: InFEmbed) -> None:
    p_t, p_o = torch_model.encode_passages(PASSAGES), ov_model.encode_passages(PASSAGES)
    q_t = torch_model.encode_queries(QUERIES, INSTRUCTIONS)
    q_o = ov_model.encode_queries(QUERIES, INSTRUCTIONS)
    for a, b in ((p_t, p_o), (q_t, q_o)):
        assert a.shape == b.shape and a.dtype == b.dtype == np.float32
        assert float(np.abs(a - b).max()) < 1e-5
        assert float((a * b).sum(1).min()) > 0.99999
    # the same ranking of the passages for every query
    assert (np.argsort(-(q_t @ p_t.T), axis=1) == np.argsort(-(q_o @ p_o.T), axis=1)).all()


@pytest.mark.parametrize("pooling", ["mean", "cls", "last"])
def test_openvino_gives_the_torch_embeddings_and_rankings(tmp_path, pooling):
    path = make_tiny_model(tmp_path / "model", pooling=pooling)
    torch_model = InFEmbed.load(str(path), device="cpu")
    ov_model = InFEmbed.load(str(path), backend="openvino")
    assert (torch_model.backend, ov_model.backend) == ("torch", "openvino")
    assert ov_model.encoder.runtime is not None and ov_model.config.pooling == pooling
    # the model's identity does not depend on what runs it: an index built with one is searched with the other
    assert ov_model.fingerprint() == torch_model.fingerprint()
    assert_same_embeddings(torch_model, ov_model)
    # and back: use_backend switches in place
    assert ov_model.use_backend("torch").encoder.runtime is None
    assert np.array_equal(ov_model.encode_passages(PASSAGES), torch_model.encode_passages(PASSAGES))


def test_a_cross_attention_model_runs_its_block_on_the_exported_backbone(tmp_path):
    path = make_tiny_model(tmp_path / "model", interaction="cross_attention", gate=0.05)
    torch_model = InFEmbed.load(str(path), device="cpu")
    assert torch_model.interaction is not None and torch_model.interaction.gate_value() != 0.0
    ov_model = InFEmbed.load(str(path), backend="openvino")
    assert_same_embeddings(torch_model, ov_model)


def test_the_export_is_cached_and_reused(tiny_model):
    first = InFEmbed.load(str(tiny_model), backend="openvino")
    where = export_of(first)
    files = {name: os.stat(where / name) for name in (backends.XML_NAME, backends.BIN_NAME, "export.json")}
    manifest = json.loads((where / "export.json").read_text())
    assert manifest["backbone"] == backends.backbone_digest(first.encoder.backbone)
    assert manifest["settings"] == backends.export_settings()
    # no temporary dir of the atomic write is left behind
    assert [p.name for p in where.parent.iterdir() if p.name.startswith(".")] == []
    second = InFEmbed.load(str(tiny_model), backend="openvino")
    assert export_of(second) == where
    for name, before in files.items():  # the very same files: nothing was exported again
        after = os.stat(where / name)
        assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns), name
    assert np.array_equal(first.encode_passages(PASSAGES), second.encode_passages(PASSAGES))


def test_another_model_never_uses_this_models_export(tiny_model, tmp_path):
    mine = InFEmbed.load(str(tiny_model), backend="openvino")
    other_path = make_tiny_model(tmp_path / "other", seed=1)
    other = InFEmbed.load(str(other_path), backend="openvino")
    assert export_of(other) != export_of(mine)
    assert_same_embeddings(InFEmbed.load(str(other_path), device="cpu"), other)
    assert float(np.abs(other.encode_passages(PASSAGES) - mine.encode_passages(PASSAGES)).max()) > 1e-2


def _truncate_bin(where):
    path = where / backends.BIN_NAME
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip_a_byte_of_the_bin(where):  # same size: only the recorded SHA-256 tells
    path = where / backends.BIN_NAME
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _garble_the_xml(where):
    (where / backends.XML_NAME).write_text("<net>not a model", encoding="utf-8")


def _no_manifest(where):  # a copy interrupted before its manifest, the last file written
    (where / "export.json").unlink()


def _manifest_of_another_model(where):
    manifest = json.loads((where / "export.json").read_text())
    manifest["backbone"] = "0" * 64
    (where / "export.json").write_text(json.dumps(manifest))


def _torn_manifest(where):
    text = (where / "export.json").read_text()
    (where / "export.json").write_text(text[: len(text) // 2])


@pytest.mark.parametrize(
    "damage",
    [
        _truncate_bin,
        _flip_a_byte_of_the_bin,
        _garble_the_xml,
        _no_manifest,
        _manifest_of_another_model,
        _torn_manifest,
    ],
)
def test_a_damaged_export_is_detected_and_rebuilt(tiny_model, damage):
    torch_model = InFEmbed.load(str(tiny_model), device="cpu")
    model = InFEmbed.load(str(tiny_model), backend="openvino")
    where = export_of(model)
    digest = backends.backbone_digest(model.encoder.backbone)
    assert backends.export_problem(where, digest, backends.export_settings()) is None
    damage(where)
    assert backends.export_problem(where, digest, backends.export_settings()) is not None
    rebuilt = InFEmbed.load(str(tiny_model), backend="openvino")
    assert backends.export_problem(where, digest, backends.export_settings()) is None
    assert_same_embeddings(torch_model, rebuilt)


def test_a_half_written_export_is_never_used(tiny_model):
    """An export killed half-way leaves only atomic_dir's temporary dir (``.<name>.*.tmp``), never a dir under
    the final name: the next load exports again and ignores it."""
    model = InFEmbed.load(str(tiny_model), device="cpu")
    where = export_of(model)
    if where.exists():
        import shutil

        shutil.rmtree(where)
    leftover = where.parent / f".{where.name}.killed.tmp"
    leftover.mkdir(parents=True)
    (leftover / backends.XML_NAME).write_text("<net>half", encoding="utf-8")
    ov_model = InFEmbed.load(str(tiny_model), backend="openvino")
    assert (where / "export.json").is_file()
    assert_same_embeddings(model, ov_model)


def test_a_backend_that_cannot_run_is_one_settings_error(tiny_model):
    with pytest.raises(SettingsError, match="backend must be one of torch, openvino, got 'onnx'"):
        InFEmbed.load(str(tiny_model), backend="onnx")
    with pytest.raises(SettingsError, match="runs on the CPU"):
        InFEmbed.load(str(tiny_model), backend="openvino", device="cuda")
    model = InFEmbed.load(str(tiny_model), backend="openvino")
    import torch

    with torch.enable_grad(), pytest.raises(SettingsError, match="train with the torch backend"):
        model.embed_passages(PASSAGES[:2])
