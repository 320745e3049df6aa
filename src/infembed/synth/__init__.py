"""InF-IR synthesis: (query, passage) pairs + an LLM endpoint -> filtered InF-IR training rows.

Modules: :mod:`~infembed.synth.llm` (client, cache, retries), :mod:`~infembed.synth.batchfile` (Batch API
files), :mod:`~infembed.synth.local` (offline transformers backend), :mod:`~infembed.synth.prompts`,
:mod:`~infembed.synth.filters` (rule filters), :mod:`~infembed.synth.stages` (one row),
:mod:`~infembed.synth.pipeline` (many rows, resumable), :mod:`~infembed.synth.inputs` (seed pairs),
:mod:`~infembed.synth.stats` (APS, INGF, map, kappa, keep rates). Nothing heavy is imported here.

Example::

    from infembed.synth import LLMClient, OpenAIBackend, Pipeline, ResponseCache, SynthConfig, load_seed, run_sync

    seed = load_seed("msmarco-instructir-seed", limit=100)
    client = LLMClient(OpenAIBackend(), ResponseCache("out/cache.sqlite"), concurrency=16)
    summary = run_sync(Pipeline(seed, "out", client, SynthConfig(model="gpt-4o-mini", judge_model="o3-mini")))
"""

from infembed.synth.inputs import SeedData, SeedPair, load_seed
from infembed.synth.llm import ChatRequest, ChatResponse, LLMClient, OpenAIBackend, ResponseCache, Sampling
from infembed.synth.pipeline import Pipeline, SynthAborted, SynthConfig, run_sync

__all__ = [
    "ChatRequest",
    "ChatResponse",
    "LLMClient",
    "OpenAIBackend",
    "Pipeline",
    "ResponseCache",
    "Sampling",
    "SeedData",
    "SeedPair",
    "SynthAborted",
    "SynthConfig",
    "load_seed",
    "run_sync",
]
