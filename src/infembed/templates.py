"""How an instruction and a query are joined into one text (torch-free, so BM25 and the CLI stay light)."""

from __future__ import annotations

from string import Formatter

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
_FIELDS = ("query", "instruction")


def resolve_template(template: str | None, flag: str = "--template") -> str:
    """A template name or string as the string :func:`join` fills, checked once here: it must be something
    ``str.format`` can fill with exactly a query and an instruction (``{{`` and ``}}`` are literal braces).
    Raises :class:`SettingsError` naming ``flag`` and the problem."""
    template = template or DEFAULT_TEMPLATE
    template = TEMPLATES.get(template, template).replace("\\n", "\n")
    known = f"(a template holds {{query}} and {{instruction}}, or is one of {', '.join(sorted(TEMPLATES))})"
    try:
        fields = [name for _, name, _, _ in Formatter().parse(template) if name is not None]
    except ValueError as error:  # '{query', a lone '}'
        raise SettingsError(
            f"{flag} {template!r}: unbalanced braces ({error}; write {{{{ or }}}} for a literal brace)"
        ) from None
    for name in fields:
        if name not in _FIELDS:
            raise SettingsError(f"{flag} {template!r}: unknown field {{{name}}} {known}")
    for name in _FIELDS:
        if name not in fields:
            raise SettingsError(f"{flag} {template!r}: no {{{name}}} field {known}")
    return template


def join(template: str, query: str, instruction: str | None) -> str:
    """The joined text. An empty instruction gives the query alone (no dangling separator)."""
    if not instruction:
        return query
    return template.format(query=query, instruction=instruction).strip()
