"""How an instruction and a query are joined into one text (torch-free, so BM25 and the CLI stay light)."""

from __future__ import annotations

from infembed.data.errors import SettingsError

DEFAULT_TEMPLATE = "{query} {instruction}"
TEMPLATES = {
    # mteb's FollowIR convention and the reference code's default: query first, one space
    "query-first": "{query} {instruction}",
    # the paper's text: "<Instruction> <Query>"
    "instruction-first": "{instruction} {query}",
    # e5-mistral / Qwen-embedding style prompt
    "instruct": "Instruct: {instruction}\nQuery: {query}",
}


def resolve_template(template: str | None) -> str:
    template = template or DEFAULT_TEMPLATE
    template = TEMPLATES.get(template, template)
    if "{query}" not in template or "{instruction}" not in template:
        raise SettingsError(
            f"template {template!r} must contain {{query}} and {{instruction}} (or be one of {sorted(TEMPLATES)})"
        )
    return template.replace("\\n", "\n")


def join(template: str, query: str, instruction: str | None) -> str:
    """The joined text. An empty instruction gives the query alone (no dangling separator)."""
    if not instruction:
        return query
    return template.format(query=query, instruction=instruction).strip()
