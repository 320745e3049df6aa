"""JSON-constrained answers: ask for ``{"instruction": "..."}`` instead of a line ``Instruction: ...``, and let
the server enforce it.

Every synthesis prompt ends with a reply line ``... in the form\\nLabel: <what>``. With JSON output on,
:func:`json_messages` rewrites that line to ask for a JSON object with one key (the label in lower case),
:func:`response_format` gives the ``response_format`` that makes the server decode only JSON of that shape
(grammar-constrained sampling), and :func:`unwrap` turns the JSON answer back into ``Label: value``, so the
rule filters (:mod:`infembed.synth.filters`) read both kinds of answer alike. An answer that is not the
expected JSON is passed on unchanged (the filters then judge it as free text).

Modes (``--json-output``):

* ``off``: free text (the default; every endpoint).
* ``json_object``: ``{"type": "json_object", "schema": ...}``, the form of llama.cpp (``llama-server`` and
  ``llama-cpp-python``'s server); vLLM accepts it too (it ignores the schema and only enforces JSON).
* ``json_schema``: ``{"type": "json_schema", "json_schema": {"name", "schema", "strict": true}}``, OpenAI's
  structured outputs (also vLLM and ``llama-server``).

Example::

    messages = json_messages(prompts.instruction_prompt(query, passage), "Instruction")
    fmt = response_format("json_object", "Instruction")    # {"type": "json_object", "schema": {...}}
    unwrap('{"instruction": "Prefer recent studies."}', "Instruction")  # 'Instruction: Prefer recent studies.'
"""

from __future__ import annotations

import json
import re
from typing import Any

from infembed.data.errors import SettingsError

MODES = ("off", "json_object", "json_schema")
#: labels whose value is a number (the judge's passage number); all others are strings
_INTEGER_LABELS = {"Answer"}
_REPLY = re.compile(r"in the form\n([A-Z][A-Za-z ]*): (<[^>\n]*>)\s*$")


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise SettingsError(f"unknown JSON output mode '{mode}'; choose one of {', '.join(MODES)}")
    return mode


def _key(label: str) -> str:
    return label.lower().replace(" ", "_")


def schema(label: str, choices: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The JSON schema of an answer with one field named after ``label``; ``choices`` limits a string."""
    if label in _INTEGER_LABELS and not choices:
        value: dict[str, Any] = {"type": "integer"}
    elif choices:
        value = {"type": "string", "enum": list(choices)}
    else:
        value = {"type": "string"}
    return {
        "type": "object",
        "properties": {_key(label): value},
        "required": [_key(label)],
        "additionalProperties": False,
    }


def response_format(mode: str, label: str, choices: tuple[str, ...] | None = None) -> dict[str, Any] | None:
    """The ``response_format`` of a request in ``mode`` (``None`` for ``off``)."""
    check_mode(mode)
    if mode == "off":
        return None
    shape = schema(label, choices)
    if mode == "json_object":
        return {"type": "json_object", "schema": shape}
    return {"type": "json_schema", "json_schema": {"name": _key(label), "schema": shape, "strict": True}}


def json_messages(
    messages: list[dict[str, str]], label: str, choices: tuple[str, ...] | None = None
) -> list[dict[str, str]]:
    """The same prompt, its last reply line (``in the form\\nLabel: <what>``) asking for JSON instead."""
    last = messages[-1]
    match = _REPLY.search(last["content"])
    if match is None or match.group(1) != label:
        raise ValueError(f"the prompt does not end with a reply line for '{label}'")
    what = match.group(2)
    value = what if label in _INTEGER_LABELS and not choices else json.dumps(what)
    reply = f"as a JSON object, nothing else:\n{{{json.dumps(_key(label))}: {value}}}"
    content = last["content"][: match.start()] + reply
    return [*messages[:-1], {"role": last["role"], "content": content}]


def unwrap(text: str, label: str) -> str:
    """``{"label": value}`` (possibly in a code fence) -> ``Label: value``; anything else unchanged."""
    body = text.strip()
    fence = re.match(r"^```(?:json)?\s*(.*?)\s*```$", body, re.DOTALL)
    if fence:
        body = fence.group(1)
    try:
        obj = json.loads(body)
    except ValueError:
        return text
    if not isinstance(obj, dict):
        return text
    value = obj.get(_key(label))
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return text
    if isinstance(value, str) and re.fullmatch(r"\s*<[^<>]*>\s*", value):
        return f"{label}: "  # the prompt's placeholder copied back (small models do): an empty answer
    return f"{label}: {value}"


def strip_label(text: str, label: str) -> str:
    """Drop a leading ``Label:`` (with markdown noise around it) from a free-text answer."""
    pattern = rf"^[\s#>*_`]*{re.escape(label)}\s*[*_]*\s*[:：]\s*[*_]*\s*"
    return re.sub(pattern, "", text.lstrip(), count=1, flags=re.IGNORECASE)
