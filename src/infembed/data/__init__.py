"""The data layer: records and the shared file formats (benchmarks, InF-IR rows, qrels, runs), read and written
here; see docs/architecture.md for who writes what."""

from infembed.data.errors import DataError
from infembed.data.records import Benchmark, Document, InstructionQuery, Pair, Triplet

__all__ = ["Benchmark", "DataError", "Document", "InstructionQuery", "Pair", "Triplet"]
