"""transformers 5.5 (pinned by the openvino extra) prints a load report for the packaged MiniLM's unexpected
``position_ids`` buffer on every load; infembed drops that report, and only that one."""

from __future__ import annotations

import logging

from infembed.model.encoder import _HarmlessLoadReport


def record(message: str) -> logging.LogRecord:
    return logging.LogRecord("transformers.modeling_utils", logging.WARNING, __file__, 1, message, None, None)


def test_loading_the_default_model_prints_no_report_for_position_ids(capfd):
    from infembed.model import InFEmbed

    InFEmbed.load("default", device="cpu")
    assert "LOAD REPORT" not in capfd.readouterr().err


def test_a_report_of_anything_else_is_kept():
    harmless = (
        "BertModel LOAD REPORT from: x\nKey | Status\n---+---\nembeddings.position_ids | UNEXPECTED |  | \n"
    )
    missing = harmless + "encoder.layer.0.attention.self.query.weight | MISSING |  | \n"
    keep = _HarmlessLoadReport()
    assert not keep.filter(record(harmless))
    assert keep.filter(record(missing))
    assert keep.filter(record("some other warning"))
