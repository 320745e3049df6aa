"""The service names a local model dir by its folder only (/health, /openapi.json): no server paths revealed."""

from __future__ import annotations

import json

from infembed.search import Index

CORPUS = {"a": "Bees make honey.", "b": "Tides follow the moon.", "c": "Inflation and central banks."}


def test_service_does_not_reveal_the_model_path(model, tmp_path):
    import httpx
    from background_server import BackgroundServer

    from infembed.search.service import create_app

    model_dir = tmp_path / "secret-place" / "my-model"
    model.save(model_dir)
    from infembed.model import InFEmbed

    index = Index.build(InFEmbed.load(str(model_dir)), CORPUS, tmp_path / "idx")
    assert str(tmp_path) in json.dumps(index.meta)  # the index itself records where to reload the model from
    with BackgroundServer(create_app(index)) as base, httpx.Client(base_url=base, timeout=60) as client:
        health, spec = client.get("/health").text, client.get("/openapi.json").text
    assert "my-model" in health and str(tmp_path) not in health and "secret-place" not in health
    assert "secret-place" not in spec
