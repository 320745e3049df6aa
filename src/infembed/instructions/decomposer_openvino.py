"""The learned decomposer's graph (:class:`~infembed.instructions.decomposer.Decomposer`'s ``TaggingGraph``:
the backbone and the head as one module) on OpenVINO: traced once to IR, cached per weights with the export cache
of a retriever's backbone (:func:`infembed.model.backends.cached_export`), compiled for the CPU in float32, and
used only if it gives torch's tag probabilities on a probe text. docs/instructions.md, "Runtime"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: a text the exported graph must tag as torch does before it is used (largest probability difference allowed)
PROBE, PROBE_TOLERANCE = (
    "Reports on solar farms in Spain, but nothing on wind turbines or rooftop kits.",
    1e-4,
)


#: OpenVINO's CPU plugin prepares each new input shape on its first run (36 -> 24 ms p50 per long narrative when
#: lengths are rounded up to a multiple of this; the padding is masked, so the tags are the same)
SHAPE_STEP = 16


def pad_to_step(input_ids, mask, pad: int):
    """``input_ids`` and ``mask`` padded (masked) to a length that is a multiple of :data:`SHAPE_STEP`."""
    import torch

    extra = -input_ids.shape[1] % SHAPE_STEP
    if not extra:
        return input_ids, mask
    return (
        torch.nn.functional.pad(input_ids, (0, extra), value=pad),
        torch.nn.functional.pad(mask, (0, extra), value=0),
    )


def _export_graph(graph, example: tuple[Any, Any], tmp: Path) -> None:
    """Trace ``graph`` and save it as OpenVINO IR in ``tmp`` (dynamic batch and length, float32)."""
    import warnings

    import openvino as ov
    import torch
    from transformers.utils import logging as hf_logging

    from infembed.model.backends import XML_NAME

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # transformers' notes while it is traced ("loss_type=None ...") are not news
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on shape checks it keeps as constants
            traced = torch.jit.trace(graph, example, check_trace=False, strict=False)
            exported = ov.convert_model(traced, example_input=example, input=[([-1, -1], ov.Type.i64)] * 2)
    finally:
        hf_logging.set_verbosity(verbosity)
    for port, name in zip(exported.inputs, ("input_ids", "attention_mask")):
        port.get_tensor().set_names({name})
    ov.save_model(exported, str(tmp / XML_NAME), compress_to_fp16=False)


def openvino_graph(graph, example: tuple[Any, Any]):
    """``graph`` exported to OpenVINO (cached per weights and settings like a retriever's backbone,
    :func:`infembed.model.backends.cached_export`) and compiled for the CPU; refused (RuntimeError) where it does
    not give torch's probabilities on ``example``."""
    import numpy as np
    import torch

    from infembed.model import backends

    settings = {
        **backends.export_settings(),
        "graph": "decomposer",
        "layers": graph.layers,
        "torch": torch.__version__,
    }
    digest = backends.backbone_digest(graph)
    path = backends.cached_export(digest, settings, lambda tmp: _export_graph(graph, example, tmp))
    runtime = backends.OpenVINOBackbone(path / backends.XML_NAME)
    ids, mask = example
    got = runtime.run({"input_ids": ids.numpy(), "attention_mask": mask.numpy()})
    with torch.inference_mode():
        expected = graph(ids, mask).numpy()
    if got.shape != expected.shape or float(np.abs(got - expected).max()) > PROBE_TOLERANCE:
        raise RuntimeError("the OpenVINO graph does not tag as torch does")
    return runtime
