"""The ``rules`` splitter: English clause patterns, no model, microseconds per instruction.

:func:`rules_split` cuts an instruction into sentences and clauses, matches each clause against the patterns
of :mod:`infembed.instructions.phrasing`, and collects the excluded aspects (cleaned to short standalone
texts), the kept text, and per aspect the positive requirement stated in the same sentence (its guard).
"""

from __future__ import annotations

import re

from infembed.instructions.instruction import Instruction
from infembed.instructions.phrasing import (
    ABSENT_SUBJECT,
    CONDITION_REST,
    CONDITION_SUBJECT,
    CONDITION_THEN_DROP,
    CONTINUATION,
    ELLIPTIC,
    FILLER_HEAD,
    FIND_VERDICT,
    FIRST_PERSON,
    GENERIC_LOOSENING,
    GENERIC_NEGATION,
    GENERIC_VERDICT,
    IMPERATIVE,
    ITEM,
    ITEM_ONLY,
    KEEP_OUT,
    LABEL_THEN_RULE,
    LEADING_CUE,
    MUST_AVOID,
    MUST_NOT,
    NEITHER_NOR,
    NONRELEVANT_INCLUDE,
    NOT_BUT,
    NOT_EXCLUSION,
    NOT_RELEVANT_ARE,
    PAREN_ASIDE,
    PREDICATE_FIRST,
    RELEVANT_IF,
    RELEVANT_SAID,
    SAME_CLAUSE_MORE,
    SHORT,
    SHORT_STOP,
    SUBJECT_RULE,
    THEN_REQUEST,
    TOPIC_EXCLUDES,
    TOPIC_EXCLUDES_MORE,
    VERB_IN_ASPECT,
    VERDICT_ALONE,
    VERDICT_SCOPE,
    WITH_REMOVED,
    YES_NO,
)
from infembed.instructions.rules_text import (
    _condition_aspect,
    _quoted_spans,
    _sentences,
    _split_list,
    _tail_match,
    strip_end,
)


def _exclusion_of_clause(clause: str, context: str = "") -> tuple[str, list[str]] | None:
    """``(kept text, aspects)`` when the clause excludes something, else None. ``context``: the instruction's
    text before this clause (an elliptical "X are not." excludes only after something was said relevant)."""
    body = FILLER_HEAD.sub("", strip_end(clause)).strip()
    if not body:
        return None
    label = LABEL_THEN_RULE.match(body)  # "Constraint: exclude guidance written for adults"
    if label:
        inner = _exclusion_of_clause(label.group("rule"), context)
        if inner is not None:
            return inner
    found = _specific_exclusion(body, context)
    if found is not None:
        return found
    return _generic_verdict(body)


def _generic_verdict(body: str) -> tuple[str, list[str]] | None:
    """The last resort: a subject, then a verb phrase that holds a negation and a word about relevance
    ("Smartphone reviews contribute nothing to this topic"), with nothing that loosens instead of excluding."""
    m = NONRELEVANT_INCLUDE.match(body)
    if m and not VERB_IN_ASPECT.search(m.group("aspect")) and _split_list(m.group("aspect")):
        return "", _split_list(m.group("aspect"))
    m = GENERIC_VERDICT.match(body)
    if not m or NOT_EXCLUSION.search(body) or GENERIC_LOOSENING.search(m.group("verdict")):
        return None
    aspect = m.group("aspect")
    if (
        not GENERIC_NEGATION.search(m.group("verdict"))
        or GENERIC_NEGATION.search(aspect)
        or VERB_IN_ASPECT.search(aspect)
        or len(aspect.split()) > 12
        or re.search(r"\b(?:that|which|who|whose|where|when|if|whether)\s*$", aspect, re.IGNORECASE)
        or re.match(
            r"^(?:even|if|when|whenever|although|though|while|whether|because|since|as long as|unless|once)\b",
            aspect,
            re.IGNORECASE,
        )
        or re.match(
            r"^(?:relevant|a relevant|the relevant|this|that|it|they|these|those|the topic|this topic|only|just|"
            r"solely|exclusively|merely)\b",
            aspect,
            re.IGNORECASE,
        )
    ):
        return None
    aspects = _split_list(aspect)
    return ("", aspects) if aspects else None


def _specific_exclusion(body: str, context: str) -> tuple[str, list[str]] | None:
    guarded = NOT_EXCLUSION.search(body)

    def aspects_of(text: str) -> list[str]:
        return _split_list(text)

    # "Only X are relevant; anything other than X is not relevant" is a positive constraint, not an exclusion
    if (
        re.match(r"^(?:only|just|solely|exclusively)\b", body, re.IGNORECASE)
        or re.search(
            r"\b(?:other than|except|apart from|aside from|besides|but|save for)\b.*\b(?:not relevant|irrelevant|excluded|off[- ]topic)\b",
            body,
            re.IGNORECASE,
        )
        and re.match(
            rf"^(?:any|all|no|other)?\s*{ITEM}?\s*(?:other than|except|apart from|aside from|besides|but|save for)\b",
            body,
            re.IGNORECASE,
        )
    ):
        return None
    if not guarded:
        for rule in (PREDICATE_FIRST, NOT_RELEVANT_ARE):
            m = rule.match(body)
            if m and aspects_of(m.group("aspect")):
                return "", aspects_of(m.group("aspect"))
        m = FIND_VERDICT.match(
            body
        )  # "I find X unhelpful": before the subject rule, whose subject would be "I find X"
        if m and aspects_of(m.group("aspect")):
            return "", aspects_of(m.group("aspect"))
        m = SUBJECT_RULE.match(body)
        if m and re.search(r"\b(?:which|that|who|whom)\s*$", m.group("aspect"), re.IGNORECASE):
            m = None  # the verdict belongs to a relative clause ("..., which the user has already searched")
        if m and ITEM_ONLY.match(strip_end(m.group("aspect"))):
            # "Documents are not relevant if they mention X": the condition holds the aspect
            condition = CONDITION_REST.match((m.group("rest") or "").strip(" ,"))
            if condition and not VERB_IN_ASPECT.search(condition.group("aspect")):
                if aspects_of(condition.group("aspect")):
                    return "", aspects_of(condition.group("aspect"))
        if m and not re.match(
            r"^(?:relevant )?(?:documents?|passages?|results?)$", strip_end(m.group("aspect")), re.IGNORECASE
        ):
            rest = VERDICT_SCOPE.sub("", (m.group("rest") or "").strip(" ,")).strip(" ,")
            # "X are not relevant unless/if Y": conditional; the aspect is still X
            aspect = m.group("aspect")
            condition = CONDITION_SUBJECT.match(strip_end(aspect))
            if condition:  # "If a document talks about X, it is not relevant"
                aspect = _condition_aspect(condition.group("condition"))
            if ABSENT_SUBJECT.search(
                aspect
            ):  # "Articles that do not discuss X are not relevant": X is required
                return None
            if aspects_of(aspect) and not re.match(
                r"^(?:it|this|that|they|these|those)$", strip_end(aspect), re.IGNORECASE
            ):
                keep = ""
                more: list[str] = []
                if rest and re.match(
                    r"^(?:but|however|;|,)?\s*(?:documents?|passages?|those|ones|anything)\b",
                    rest,
                    re.IGNORECASE,
                ):
                    keep = rest
                elif (
                    rest
                    and (extra := SAME_CLAUSE_MORE.match(rest))
                    and not VERB_IN_ASPECT.search(extra.group("aspect"))
                ):
                    more = aspects_of(extra.group("aspect"))
                return keep, aspects_of(aspect) + more
        m = TOPIC_EXCLUDES.match(body)  # "This topic does not cover X, and it does not cover Y"
        if m and not VERB_IN_ASPECT.search(TOPIC_EXCLUDES_MORE.sub(" ", m.group("aspect"))):
            found = [a for part in TOPIC_EXCLUDES_MORE.split(m.group("aspect")) for a in aspects_of(part)]
            if found:
                return "", found
        m = YES_NO.match(body)  # "surface codes yes, topological codes no"
        if m and aspects_of(m.group("aspect")) and not VERB_IN_ASPECT.search(m.group("aspect")):
            return m.group("keep").strip(), aspects_of(m.group("aspect"))
        m = LEADING_CUE.match(body)  # "Excluding anything on X, find studies on Y"
        if m and aspects_of(m.group("aspect")) and not VERB_IN_ASPECT.search(m.group("aspect")):
            return m.group("keep").strip(), aspects_of(m.group("aspect"))
        m = NEITHER_NOR.match(body)
        if m and aspects_of(m.group("first")) and aspects_of(m.group("second")):
            return "", aspects_of(m.group("first")) + aspects_of(m.group("second"))
        for rule in (IMPERATIVE, FIRST_PERSON):
            m = rule.match(body)
            if m and aspects_of(m.group("aspect")):
                aspect, request = m.group("aspect"), ""
                then = THEN_REQUEST.search(aspect)  # "Steer clear of X and find Y": Y is the request
                if then and not re.search(r"\b(?:that|which|who)\b", aspect[: then.start()], re.IGNORECASE):
                    aspect, request = aspect[: then.start()], aspect[then.end() :]
                if aspects_of(aspect):
                    return request.strip(), aspects_of(aspect)
        m = KEEP_OUT.match(body)  # "..., keep Roman glass out of the results"
        if m and aspects_of(m.group("aspect")) and not VERB_IN_ASPECT.search(m.group("aspect")):
            return m.group("keep").strip(" ,;"), aspects_of(m.group("aspect"))
        m = WITH_REMOVED.match(body)  # "Sources on X, with property listings filtered out, are what I need"
        if m and aspects_of(m.group("aspect")) and not VERB_IN_ASPECT.search(m.group("aspect")):
            return (m.group("before") + m.group("after")).strip(" ,"), aspects_of(m.group("aspect"))
        m = MUST_AVOID.match(body)
        if m and not VERB_IN_ASPECT.search(m.group("aspect")) and aspects_of(m.group("aspect")):
            subject = m.group("subject").strip(" ,")
            return ("" if ITEM_ONLY.match(subject) else subject), aspects_of(m.group("aspect"))
        m = MUST_NOT.match(body)
        if m and not VERB_IN_ASPECT.search(m.group("aspect")) and aspects_of(m.group("aspect")):
            subject = m.group("subject").strip(" ,")
            return ("" if ITEM_ONLY.match(subject) or RELEVANT_IF.match(subject) else subject), aspects_of(
                m.group("aspect")
            )
        m = ELLIPTIC.match(body)
        if (
            m
            and RELEVANT_SAID.search(context)
            and not VERB_IN_ASPECT.search(m.group("aspect"))
            and not ITEM_ONLY.match(strip_end(m.group("aspect")))
            and aspects_of(m.group("aspect"))
        ):
            return "", aspects_of(m.group("aspect"))
        m = NOT_BUT.match(body)
        if m and aspects_of(m.group("aspect")):
            return m.group("keep").strip(" ,"), aspects_of(m.group("aspect"))
        m = SHORT.match(body)
        if (
            m
            and not SHORT_STOP.match(body)
            and not VERB_IN_ASPECT.search(m.group("aspect"))
            and aspects_of(m.group("aspect"))
        ):
            return "", aspects_of(m.group("aspect"))
    m = _tail_match(body)
    if m and m.group("cue").lower().startswith("without") and VERB_IN_ASPECT.search(m.group("aspect")):
        m = None
    if m and not NOT_EXCLUSION.search(m.group("cue") + " " + m.group("aspect")):
        keep = m.group("keep").strip(" ,")
        if re.search(r"\b(?:not only|not just|not merely)\s*$", keep, re.IGNORECASE):
            return None
        cue = m.group("cue").lower()
        if cue in (
            "other than",
            "except",
            "except for",
            "apart from",
            "aside from",
            "save for",
        ) and re.search(r"\b(?:anything|everything|all|any)\s*$", keep, re.IGNORECASE):
            # "I want anything other than X": excludes X; "Anything except X" keeps nothing specific
            keep = re.sub(r"\b(?:anything|everything|all|any)\s*$", "", keep).strip()
        elif cue in ("rather than", "instead of", "as opposed to") and not re.search(r"\w", keep):
            return None
        if aspects_of(m.group("aspect")):
            return keep, aspects_of(m.group("aspect"))
    return None


_CLAUSE_BOUNDARY = re.compile(
    r"\s*;\s*|,\s*(?=(?:but|however|though|while|whereas|yet)\s+(?!not\b|no\b|nothing\b|also\b))"
    r"|(?:(?<=relevant)|(?<=wanted)|(?<=of interest)|(?<=useful)),\s*and\s+(?=(?:documents?|passages?|articles?|papers?|"
    r"results?|studies|those|anything|any)\s+(?:that|which|on|about|dealing|describing|discussing|treating|with|in)\b)"
    r"|,\s*(?=(?:no|not|nothing|none|never|ignore|skip|leave out|exclude|excluding|avoid|omit|drop|disregard|"
    r"except|please (?:don't|do not|skip|ignore|exclude|leave out|omit))\b)"
    r"|\s*\((?=(?:not|no|excluding|except|but not)\b)|\s+-\s+|\s+—\s+",
    re.IGNORECASE,
)


def _clauses(sentence: str) -> list[str]:
    """A sentence's clauses: split at ';' and at ', but' / ', while' / ', and I ...' boundaries, never inside
    quotes (a title such as 'No Woman, No Cry' is one piece of the sentence)."""
    quoted = _quoted_spans(sentence)
    parts, start = [], 0
    for m in _CLAUSE_BOUNDARY.finditer(sentence):
        if m.end() == m.start() or any(lo <= m.start() < hi for lo, hi in quoted):
            continue
        parts.append(sentence[start : m.start()])
        start = m.end()
    parts.append(sentence[start:])
    return [
        p.strip().rstrip(")").strip() if p.strip().endswith(")") and "(" not in p else p
        for p in parts
        if p and p.strip()
    ]


def _condition_then_drop(piece: str) -> list[str]:
    """The aspects of "If a patent is mainly about X, reject it" (one sentence or ';' piece), else []."""
    whole = strip_end(piece)
    dropped = CONDITION_THEN_DROP.match(whole)
    if not dropped or NOT_EXCLUSION.search(whole):
        return []
    aspects = _split_list(_condition_aspect(dropped.group("condition")))
    return [] if VERB_IN_ASPECT.search(" ".join(aspects)) else aspects


def _parenthetical_exclusions(sentence: str) -> tuple[str, list[str]]:
    """Exclusions said in parentheses ("(kinetic impactors aside)", "(but not cases involving oil pollution)"):
    their aspects, and the sentence without them."""
    aspects: list[str] = []

    def take(m: re.Match[str]) -> str:
        inner = m.group(1).strip()
        found = _exclusion_of_clause(inner)
        aside = PAREN_ASIDE.match(strip_end(inner))
        if found is None and aside and not VERB_IN_ASPECT.search(aside.group("aspect")):
            found = ("", _split_list(aside.group("aspect")))
        if found is None or found[0] or not found[1]:
            return m.group(0)
        aspects.extend(found[1])
        return ""

    rest = re.sub(r"\s*[(\[]([^()\[\]]{1,200})[)\]]", take, sentence)
    return (re.sub(r"\s+([,.;:!?])", r"\1", rest).strip() if aspects else sentence), aspects


def _add_aspects(exclude: list[str], guards: list[str], aspects: list[str]) -> None:
    for aspect in aspects:
        if aspect.lower() not in {e.lower() for e in exclude}:
            exclude.append(aspect)
            guards.append("")


def rules_split(text: str) -> Instruction:
    keep_parts: list[str] = []
    exclude: list[str] = []
    guards: list[str] = []
    previous_excluded = False
    said: list[str] = []  # the instruction so far
    previous_sentence = ""
    for sentence in _sentences(text):
        sentence_keep: list[str] = []
        sentence_excluded = False
        first_new = len(exclude)
        label = PREDICATE_FIRST.match(strip_end(sentence))  # "Irrelevant: opinion pieces; studies of adults."
        if label and ";" in label.group("aspect") and _split_list(label.group("aspect")):
            _add_aspects(exclude, guards, _split_list(label.group("aspect")))
            said.append(sentence)
            previous_excluded, previous_sentence = True, sentence
            continue
        sentence, aside = _parenthetical_exclusions(sentence)
        _add_aspects(exclude, guards, aside)
        pieces = re.split(r"\s*;\s*", sentence)
        dropped = [
            _condition_then_drop(piece) for piece in pieces
        ]  # "If a patent is mainly about X, reject it."
        if any(dropped):
            for aspects in dropped:
                _add_aspects(exclude, guards, aspects or [])
            sentence = "; ".join(piece for piece, aspects in zip(pieces, dropped) if not aspects)
            if not sentence.strip(" .;"):
                said.append(sentence)
                previous_excluded, previous_sentence = True, sentence
                continue
            sentence_excluded = True
        whole = strip_end(sentence)
        # a verdict on the previous short sentence: "crypto? not interested."
        if (
            VERDICT_ALONE.match(whole)
            and re.search(r"[?:]\s*$", previous_sentence)
            and not re.match(  # "Is this relevant? No." answers a question; it excludes nothing
                r"^(?:is|are|was|were|do|does|did|can|could|should|would|will|has|have|how|what|why|which|who)\b",
                previous_sentence.strip(),
                re.IGNORECASE,
            )
            and len(previous_sentence.split()) <= 6
            and keep_parts
            and keep_parts[-1] == previous_sentence.strip()
        ):
            aspects = _split_list(previous_sentence.rstrip(" ?:"))
            if aspects:
                keep_parts.pop()
                _add_aspects(exclude, guards, aspects)
                said.append(sentence)
                previous_excluded, previous_sentence = True, sentence
                continue
        previous_sentence = sentence
        for clause in _clauses(sentence):
            found = _exclusion_of_clause(clause, " ".join(said))
            said.append(clause)
            if found is None and previous_excluded:
                m = CONTINUATION.match(strip_end(clause))
                if m and not VERB_IN_ASPECT.search(m.group("aspect")) and _split_list(m.group("aspect")):
                    found = ("", _split_list(m.group("aspect")))
            if found is None:
                sentence_keep.append(clause)
                previous_excluded = False
                continue
            kept, aspects = found
            _add_aspects(exclude, guards, aspects)
            if kept:
                sentence_keep.append(kept)
            sentence_excluded = previous_excluded = True
        if sentence_keep:
            joined = "; ".join(strip_end(p) if sentence_excluded else p.strip() for p in sentence_keep)
            if sentence_excluded or not re.search(r"[.!?;]$", joined):
                terminal = re.search(r"[.!?]$", sentence.strip())
                joined = strip_end(joined) + (terminal.group(0) if terminal else "")
            keep_parts.append(joined)
            if sentence_excluded:
                for index in range(first_new, len(exclude)):
                    guards[index] = strip_end(joined)
    keep = " ".join(p for p in keep_parts if p.strip()).strip()
    return Instruction(keep=keep, exclude=exclude, guards=guards)
