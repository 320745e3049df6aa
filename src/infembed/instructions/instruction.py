"""The result of splitting an instruction: :class:`Instruction` (``keep``, ``exclude``, ``guards``, ``dropped``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Instruction:
    """An instruction decomposed: ``keep`` is what to search with, ``exclude`` the aspects to leave out."""

    keep: str
    exclude: list[str] = field(default_factory=list)
    #: per excluded aspect, the positive requirement stated in the same sentence ("Only X are relevant; Y is
    #: not"), or "" when the exclusion stands alone. Scoring spares documents that match it at least as well.
    guards: list[str] = field(default_factory=list, compare=False, repr=False)
    #: excluded aspects left out because they hold no searchable word (only stop words: "Documents about the
    #: are not relevant."): nothing could match them, so they exclude nothing; kept here so the split says so.
    dropped: list[str] = field(default_factory=list, compare=False, repr=False)

    def guard_of(self, index: int) -> str:
        return self.guards[index] if index < len(self.guards) else ""

    @property
    def has_exclusions(self) -> bool:
        return bool(self.exclude)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"keep": self.keep, "exclude": list(self.exclude)}
        if any(self.guards):
            out["guards"] = list(self.guards)
        if self.dropped:
            out["dropped"] = list(self.dropped)
        return out
