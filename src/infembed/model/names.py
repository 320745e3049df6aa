"""What a model name given on the command line means, and the one line to print when it names nothing.

A name is a local directory or a Hugging Face hub id (``name`` or ``org/name``). A name that can only be a path
(``my-model/``, ``./x``, ``~/x``, ``runs/x`` where ``runs`` exists, ``a/b/c``) that does not exist is a missing
directory, not a hub id that transformers would reject with its repo-id rules. A hub id that cannot be loaded is
explained by what stands in the way: offline mode (``HF_HUB_OFFLINE=1``), no network, or no such model.
"""

from __future__ import annotations

import os

from infembed.data.errors import DataError


class ModelNotFound(DataError, FileNotFoundError):
    """A model name that names no model: one line from the CLI (a DataError), and still a FileNotFoundError for
    callers that add their own context to a model that cannot be found."""


#: what a bare word that is not a model could have meant (``eval -r bogus`` reaches the model loader)
RETRIEVERS = "bm25, or dense with --model"


def looks_like_path(name: str) -> bool:
    """True for a name that cannot be a hub id: it ends with a separator, starts with ``./``, ``../``, ``/`` or
    ``~``, has more than one ``/`` (a hub id has at most one), or its first part exists here (``runs/x``)."""
    text = name.replace(os.sep, "/")
    if text in (".", "..") or text.endswith("/") or text.startswith(("./", "../", "/", "~")):
        return True
    parts = text.split("/")
    return len(parts) > 2 or (len(parts) == 2 and os.path.exists(parts[0]))


def hub_offline() -> bool:
    """Whether huggingface_hub runs offline (``HF_HUB_OFFLINE``, read by it at import time)."""
    try:
        from huggingface_hub import constants
    except ImportError:  # pragma: no cover - sentence-transformers depends on it
        return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    return bool(constants.HF_HUB_OFFLINE)


def missing_directory(name: str) -> ModelNotFound:
    """A path-like model name that does not exist."""
    path = os.path.expanduser(name)
    existing = next((p for p in _parents(path) if os.path.isdir(p)), None)
    hint = (
        f"the nearest directory that exists is {existing}" if existing not in (None, "", ".", "/") else None
    )
    return ModelNotFound("model directory does not exist", name, hint=hint)


def _parents(path: str) -> list[str]:
    out = []
    path = os.path.normpath(path)
    while True:
        parent = os.path.dirname(path)
        if not parent or parent == path:
            return out
        out.append(parent)
        path = parent


def unloadable_hub_name(name: str, error: BaseException) -> ModelNotFound:
    """A name that is not a local directory and that the hub did not give: say what stands in the way, in one
    line, suggesting ``HF_HUB_OFFLINE=1`` only when it is not set already."""
    bare = "/" not in name
    what = (
        f"{name!r} is neither a retriever ({RETRIEVERS}) nor a model directory here"
        if bare
        else (f"{name!r} is not a model directory here")
    )
    text = str(error)
    if hub_offline():
        return ModelNotFound(
            f"{what}, nor a hub model in the local cache; hub models cannot be fetched offline "
            "(HF_HUB_OFFLINE=1 is set: unset it to download one)"
        )
    if "couldn't connect" in text.lower() or "connection" in text.lower():
        return ModelNotFound(
            f"{what}, and the Hugging Face hub cannot be reached to fetch it "
            "(no network? HF_HUB_OFFLINE=1 uses the models already in the local cache)"
        )
    if "not a valid model identifier" in text or "repository not found" in text.lower() or "404" in text:
        return ModelNotFound(f"{what}, nor a model on the Hugging Face hub")
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(error).__name__)
    return ModelNotFound(f"{what}, and it could not be loaded from the hub ({first})")
