"""The data layer: records, file formats and training batches. The only place that reads or writes files."""

from infembed.data.errors import DataError
from infembed.data.records import Benchmark, Document, InstructionQuery, Pair, Triplet

__all__ = ["Benchmark", "DataError", "Document", "InstructionQuery", "Pair", "Triplet"]
