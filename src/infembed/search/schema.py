"""The service's request and response bodies (pydantic models): what /search and /embed accept and answer,
and what the OpenAPI docs at /docs show. :mod:`infembed.search.service` checks the limits."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class QueryItem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(..., description="The search query.", examples=["heat transfer in hypersonic flow"])
    instruction: str | None = Field(
        None,
        description="What makes a passage relevant (optional).",
        examples=["Only wind-tunnel experiments are relevant."],
    )


class SearchRequest(BaseModel):
    """One search (``query``, ``instruction``) or a batch (``queries``); ``k`` results each."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "query": "heat transfer in hypersonic flow",
                    "instruction": "Only experimental studies.",
                    "k": 5,
                },
                {
                    "queries": [
                        {"query": "protein folding"},
                        {"query": "solar eclipses", "instruction": "history"},
                    ],
                    "k": 3,
                },
            ]
        },
    )
    query: str | None = Field(None, description="One query (or use 'queries' for a batch).")
    instruction: str | None = Field(None, description="The instruction for 'query'.")
    queries: list[QueryItem] | None = Field(
        None, description="A batch of queries (at most max_batch, see /health)."
    )
    k: int = Field(10, ge=1, strict=True, description="Results per query, 1 to max_k (see /health).")
    exclusions: Literal["off", "auto", "rules"] | None = Field(
        None,
        description="How instructions that exclude are handled: 'auto' (the learned decomposer) or 'rules' (search "
        "with what the instruction keeps, push down passages matching what it excludes) or 'off'. Default: the "
        "server's (see /health).",
    )

    @model_validator(mode="after")
    def _one_form(self) -> SearchRequest:
        if (self.query is None) == (self.queries is None):
            raise ValueError(
                "give either 'query' (one search) or 'queries' (a batch), not both and not neither"
            )
        if self.queries is not None and self.instruction is not None:
            raise ValueError("with 'queries', put each 'instruction' inside its item")
        return self


class HitOut(BaseModel):
    rank: int
    id: str
    score: float
    title: str
    text: str


class InstructionSplit(BaseModel):
    keep: str
    exclude: list[str]
    guards: list[str] | None = None
    dropped: list[str] | None = Field(
        None, description="Excluded aspects left out: they hold no searchable word (only stop words)."
    )


class SearchResult(BaseModel):
    query: str
    instruction: str | None
    k: int
    exclusions: str
    split: InstructionSplit | None = Field(
        None,
        description="How the instruction was split (present when it excludes something, or names an aspect "
        "that was dropped for holding no searchable word).",
    )
    hits: list[HitOut]


class BatchSearchResult(BaseModel):
    results: list[SearchResult]


class EmbedRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "texts": ["heat transfer in hypersonic flow"],
                    "kind": "query",
                    "instructions": ["Only experiments."],
                },
                {"texts": ["A wind-tunnel study of ..."], "kind": "passage"},
            ]
        },
    )
    texts: list[str] = Field(..., min_length=1, description="1 to max_batch texts (see /health).")
    kind: Literal["query", "passage"] = Field(
        ..., description="Queries get the instruction template; passages do not."
    )
    instructions: list[str | None] | None = Field(None, description="One per text (kind 'query' only).")
    instruction: str | None = Field(None, description="One instruction for all texts (kind 'query' only).")

    @model_validator(mode="after")
    def _instructions(self) -> EmbedRequest:
        if self.kind == "passage" and (self.instructions is not None or self.instruction is not None):
            raise ValueError("instructions apply to kind 'query' only")
        if self.instructions is not None and self.instruction is not None:
            raise ValueError("give 'instructions' (one per text) or 'instruction' (for all), not both")
        if self.instructions is not None and len(self.instructions) != len(self.texts):
            raise ValueError(f"{len(self.texts)} texts but {len(self.instructions)} instructions")
        return self


class EmbedResult(BaseModel):
    embeddings: list[list[float]]
    dim: int
    kind: str
    model: str | None
