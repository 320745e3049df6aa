"""How a model's backbone runs at inference time: ``torch`` (the default) or ``openvino`` (the CPU).

The backend is declared here once: :data:`BACKENDS`, :data:`BACKEND_HELP` and :func:`backend_setting` give
``IndexSettings``/``ServeSettings`` their field (so ``infembed index``/``serve`` their ``--backend`` flag) and
``infembed eval``/``search`` the same flag; :func:`check_backend` is the one check.

Only the backbone changes. Tokenisation (template, truncation, padding side, EOS), pooling, normalisation, the
query/passage encoders and a cross-attention block stay in :class:`~infembed.model.encoder.Encoder` and
:class:`~infembed.model.InFEmbed`, so both backends give the same embeddings up to float rounding (cosine
>= 0.99999 on Cranfield; tests/model/test_backend_openvino.py, bench/encode.py). The export is
sentence-transformers' OpenVINO backend, i.e. optimum-intel's exporter, applied to the in-memory torch backbone
(so what is exported is exactly what :meth:`InFEmbed.fingerprint` hashed); the exported graph then runs on the
plain OpenVINO runtime (``import openvino``: about 1 s, against 17-20 s for ``optimum.intel`` on 2 busy cores).

The export is cached under ``infembed.cache_dir() / "openvino"``, one dir per backbone: its name and its
``export.json`` hold the digest of the backbone's weights and architecture and the export settings (format,
precision, OpenVINO/optimum-intel/transformers versions). It is written with ``atomic_dir`` (a half-written
export never has the final name), reused while ``export.json`` names the same backbone and settings and every
file has the size and SHA-256 recorded there, and rebuilt otherwise (another model never matches; a truncated or
altered file is detected and replaced).

int8 (NNCF post-training quantisation) is measured by bench/encode.py but not offered as a backend: on the
packaged MiniLM it is ~2.7-3.3x torch with a minimum cosine of 0.89, or ~1.9-2.3x at 0.996 with the FFN output
projections left in float (docs/search.md, "Choosing a backend"): below the >= 3x at >= 0.99 asked for.
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
import threading
import warnings
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from infembed.data.errors import SettingsError

BACKENDS = ("torch", "openvino")
DEFAULT_BACKEND = "torch"
BACKEND_HELP = (
    "How the model runs: torch (default) | openvino (CPU only, same embeddings within 1e-5 cosine; needs "
    "pip install 'infembed[openvino]'; the export is cached). docs/search.md, 'Choosing a backend'."
)
#: bump when the export or what export.json records changes: older exports are then rebuilt
EXPORT_FORMAT = 1
EXPORT_MANIFEST = "export.json"
XML_NAME = "openvino_model.xml"
BIN_NAME = "openvino_model.bin"
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")


def backend_setting() -> Any:
    """The ``backend`` field of a settings dataclass (its flag, help and default come from here). Its default is
    None, "not given": torch for a model loaded by name, a given model object's own backend otherwise."""
    from infembed.settings import setting

    return setting(None, BACKEND_HELP)


def check_backend(backend: str | None, device: Any = None) -> str:
    """``backend`` (None: the default) if it is known and can run here on ``device``, else one SettingsError."""
    name = DEFAULT_BACKEND if backend is None else backend
    if name not in BACKENDS:
        raise SettingsError(f"backend must be one of {', '.join(BACKENDS)}, got {name!r}")
    if name == "openvino":
        if device is not None and str(device).split(":")[0] != "cpu":
            raise SettingsError(
                f"the openvino backend runs on the CPU; leave --device out or give --device cpu (got {device})"
            )
        try:
            import openvino  # noqa: F401
        except ImportError:
            raise SettingsError(
                "the openvino backend needs OpenVINO: pip install 'infembed[openvino]'"
            ) from None
    return name


# ----------------------------------------------------------------------------------------- the runtime


class OpenVINOBackbone:
    """An exported backbone compiled for the CPU, called like a transformers model (inference only):
    ``backbone(input_ids=..., attention_mask=..., token_type_ids=...) -> .last_hidden_state`` (a CPU tensor)."""

    def __init__(self, xml: Path, threads: int | None = None):
        import openvino as ov
        import torch

        threads = int(threads or torch.get_num_threads())
        core = ov.Core()
        model = core.read_model(str(xml))
        self.input_names = {name for port in model.inputs for name in port.get_names()}
        config = {
            "PERFORMANCE_HINT": "LATENCY",  # one request at a time, all threads on it
            "INFERENCE_NUM_THREADS": threads,  # as many as torch would use (OMP_NUM_THREADS, torch.set_num_threads)
            "INFERENCE_PRECISION_HINT": "f32",  # never bf16 on CPUs that have it: the same numbers everywhere
            # pinned threads cannot move off a core another process is busy on: 0.86x torch instead of 1.37x
            # on 2 shared cores (passages, bench/encode.py)
            "ENABLE_CPU_PINNING": False,
        }
        self.compiled = core.compile_model(model, "CPU", config)
        names = [port.get_names() for port in self.compiled.outputs]
        self.output = next(
            (i for i, n in enumerate(names) if "last_hidden_state" in n), 0
        )  # the token states
        self._request = self.compiled.create_infer_request()
        self._lock = threading.Lock()  # one infer request: one call at a time
        self.threads = threads

    def __call__(self, input_ids, attention_mask, token_type_ids=None, **_: Any) -> SimpleNamespace:
        import numpy as np
        import torch

        ids = input_ids.cpu().numpy().astype(np.int64, copy=False)
        inputs = {
            "input_ids": ids,
            "attention_mask": attention_mask.cpu().numpy().astype(np.int64, copy=False),
        }
        if "token_type_ids" in self.input_names:
            inputs["token_type_ids"] = (
                token_type_ids.cpu().numpy().astype(np.int64, copy=False)
                if token_type_ids is not None
                else np.zeros_like(ids)
            )
        if "position_ids" in self.input_names:  # decoders: 0..n-1 whatever the padding, as transformers does
            inputs["position_ids"] = np.broadcast_to(
                np.arange(ids.shape[1], dtype=np.int64), ids.shape
            ).copy()
        hidden = self.run({k: v for k, v in inputs.items() if k in self.input_names})
        return SimpleNamespace(last_hidden_state=torch.from_numpy(hidden))

    def run(self, inputs: dict[str, Any]) -> Any:
        """The graph's output (the token states of a backbone) for ``inputs`` (numpy arrays by input name)."""
        import numpy as np

        with self._lock:
            result = self._request.infer(inputs)  # outputs are copied out of the request's buffers
            return np.asarray(result[self.compiled.outputs[self.output]])


# ----------------------------------------------------------------------------------------- the export cache


def digest_module(digest: Any, prefix: str, module: Any) -> None:
    """Feed every parameter and buffer of ``module`` (name, dtype, shape, bytes) into ``digest``; shared with
    :meth:`InFEmbed.fingerprint`, whose ids it must not change."""
    import torch

    for name, tensor in [*module.named_parameters(), *module.named_buffers()]:
        tensor = tensor.detach()
        digest.update(f"{prefix}.{name}:{tensor.dtype}:{tuple(tensor.shape)};".encode())
        digest.update(tensor.cpu().contiguous().reshape(-1).view(torch.uint8).numpy())


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "absent"


def export_settings() -> dict[str, Any]:
    """What besides the backbone decides the exported graph (a change rebuilds the export)."""
    return {
        "format": EXPORT_FORMAT,
        "backend": "openvino",
        "precision": "f32",
        "openvino": _version("openvino"),
        "optimum-intel": _version("optimum-intel"),
        "transformers": _version("transformers"),
    }


def backbone_digest(backbone: Any) -> str:
    """The identity of a torch backbone: its class, configuration and every weight."""
    digest = hashlib.sha256()
    config = getattr(backbone, "config", None)
    digest.update(type(backbone).__name__.encode())
    # the settings that differ from the class defaults: an attribute the exporter adds at its default value
    # (``torchscript: false``) leaves the identity as it was
    digest.update((config.to_json_string(use_diff=True) if config is not None else "").encode())
    digest_module(digest, "backbone", backbone)
    return digest.hexdigest()


def export_dir(digest: str, settings: dict[str, Any] | None = None) -> Path:
    """Where the export of the backbone with this digest, under these export settings, is cached."""
    from infembed import cache_dir

    settings = settings or export_settings()
    key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:8]
    return cache_dir() / "openvino" / f"{digest[:16]}-{key}"


def _file_record(path: Path) -> dict[str, Any]:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 22), b""):
            digest.update(chunk)
    return {"size": path.stat().st_size, "sha256": digest.hexdigest()}


def export_problem(path: Path, digest: str, settings: dict[str, Any]) -> str | None:
    """Why the cached export in ``path`` cannot be used for this backbone (None: it can)."""
    manifest_path = path / EXPORT_MANIFEST
    if not manifest_path.is_file():
        return "no export yet" if not path.exists() else f"{EXPORT_MANIFEST} is missing"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return f"{EXPORT_MANIFEST} is unreadable"
    if not isinstance(manifest, dict) or manifest.get("backbone") != digest:
        return "it was exported from another model"
    if manifest.get("settings") != settings:
        return "it was exported with other settings"
    for name in (XML_NAME, BIN_NAME):
        recorded = (manifest.get("files") or {}).get(name)
        file = path / name
        if not recorded or not file.is_file() or file.stat().st_size != recorded.get("size"):
            return f"{name} is missing or truncated"
        if _file_record(file)["sha256"] != recorded.get("sha256"):
            return f"{name} was altered"
    return None


def cached_export(digest: str, settings: dict[str, Any], write: Callable[[Path], None]) -> Path:
    """The cache dir of the export of the model with ``digest`` under ``settings``: reused when
    :func:`export_problem` finds nothing wrong with it, else written anew by ``write(tmp)`` (which puts
    :data:`XML_NAME` and :data:`BIN_NAME` in ``tmp``) and published atomically with its manifest."""
    from infembed.data.jsonl import atomic_dir, write_json

    path = export_dir(digest, settings)
    if export_problem(path, digest, settings) is None:
        return path
    with atomic_dir(path) as tmp:
        write(Path(tmp))
        for extra in Path(
            tmp
        ).iterdir():  # a tokenizer, a config: they stay with the model dir, not the export
            if extra.name not in (XML_NAME, BIN_NAME):
                shutil.rmtree(extra) if extra.is_dir() else extra.unlink()
        files = {name: _file_record(Path(tmp) / name) for name in (XML_NAME, BIN_NAME)}
        manifest = {"backbone": digest, "settings": settings, "files": files}
        write_json(Path(tmp) / EXPORT_MANIFEST, manifest)  # last: the files it describes are complete
    return path


def export_backbone(backbone: Any, tmp: Path) -> None:
    """Export ``backbone`` (a transformers model on the CPU) to OpenVINO IR in ``tmp`` (optimum-intel)."""
    import logging

    import torch

    if any(p.device.type != "cpu" for p in backbone.parameters()):
        raise SettingsError("the openvino backend exports a model loaded on the CPU (--device cpu)")
    try:
        from optimum.exporters.openvino import export_from_model
    except ImportError:
        raise SettingsError(
            "the openvino backend needs optimum-intel: pip install 'infembed[openvino]'"
        ) from None
    from transformers.utils import logging as hf_logging

    logging.getLogger("optimum").setLevel(logging.ERROR)
    config = getattr(backbone, "config", None)
    saved = copy.deepcopy(vars(config)) if config is not None else None
    verbosity = hf_logging.get_verbosity()
    try:
        # the tracer's notes (shape checks it records as constants: none of them change with the
        # input for these graphs, tests/model/test_backend_openvino.py) and transformers' are not the user's
        hf_logging.set_verbosity_error()
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            export_from_model(backbone, tmp, task="feature-extraction", stateful=False)
    except (ValueError, RuntimeError, KeyError, TypeError, NotImplementedError) as error:
        first = next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)
        raise SettingsError(
            f"this model's backbone ({type(backbone).__name__}) cannot be exported to OpenVINO ({first[:300]}); "
            "use --backend torch"
        ) from None
    finally:
        hf_logging.set_verbosity(verbosity)
        if saved is not None:  # the exporter sets attributes on the config: the model is left as it was
            vars(config).clear()
            vars(config).update(saved)


def openvino_backbone(backbone: Any, threads: int | None = None) -> OpenVINOBackbone:
    """The OpenVINO version of a torch ``backbone``: the cached export when it is this backbone's, else a new
    export (written atomically); an export the runtime cannot read is rebuilt once."""
    digest, settings = backbone_digest(backbone), export_settings()
    path = cached_export(digest, settings, lambda tmp: export_backbone(backbone, tmp))
    try:
        return OpenVINOBackbone(path / XML_NAME, threads)
    except RuntimeError:  # checked files the runtime still refuses (an OpenVINO change): export again
        shutil.rmtree(path, ignore_errors=True)
        path = cached_export(digest, settings, lambda tmp: export_backbone(backbone, tmp))
        return OpenVINOBackbone(path / XML_NAME, threads)
