"""Instruction decomposition: what to find (``keep``) and what to leave out (``exclude``).

Retrievers treat an instruction as more words to match, so "documents on supersonic flow are not relevant" pulls
exactly the supersonic documents *up*. :func:`split_instruction` separates the exclusion clauses from the rest,
so that exclusion-aware scoring (:mod:`infembed.exclusions`) can search with ``keep`` and penalise documents
that match an excluded aspect::

    >>> split_instruction("Find reviews of hybrid cars. Anything about electric cars is not relevant.")
    Instruction(keep='Find reviews of hybrid cars.', exclude=['electric cars'])

Two splitters give the same :class:`Instruction`:

* ``rules`` (default): English clause patterns, no model, microseconds per instruction. It recognises predicate
  exclusions ("X are not relevant / irrelevant / off-topic / out of scope / should be excluded"), imperative ones
  ("ignore / skip / leave out / avoid / exclude / rule out / filter out / disregard X", "do not return X"), first
  person ones ("I am not interested in X", "I don't want X"), short forms ("no X", "nothing on X", "not X",
  "but not X", "excluding X", "except X", "other than X"), a list continued in the next sentence ("Also X.",
  "Nor X."), and it leaves alone negations that do not exclude ("need not", "not only ... but", "does not
  matter", "not necessarily", "whether or not"). Positive constraints ("only X are relevant") stay in ``keep``.
* ``llm``: any OpenAI-compatible endpoint through the synthesis client (cache, retries), asked for the same JSON
  (:func:`llm_splitter`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from infembed.data.errors import SettingsError

__all__ = ["Instruction", "split_instruction", "split_instructions", "SPLITTERS", "llm_splitter"]

SPLITTERS = ("off", "rules", "llm")


@dataclass(frozen=True)
class Instruction:
    """An instruction decomposed: ``keep`` is what to search with, ``exclude`` the aspects to leave out."""

    keep: str
    exclude: list[str] = field(default_factory=list)
    #: per excluded aspect, the positive requirement stated in the same sentence ("Only X are relevant; Y is
    #: not"), or "" when the exclusion stands alone. Scoring spares documents that match it at least as well.
    guards: list[str] = field(default_factory=list, compare=False, repr=False)

    def guard_of(self, index: int) -> str:
        return self.guards[index] if index < len(self.guards) else ""

    @property
    def has_exclusions(self) -> bool:
        return bool(self.exclude)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"keep": self.keep, "exclude": list(self.exclude)}
        if any(self.guards):
            out["guards"] = list(self.guards)
        return out


# ----------------------------------------------------------------------------------------- vocabulary
# Nouns people use for "the things retrieved"; they are not part of an excluded aspect.
_ITEM = (
    r"(?:documents?|docs?|passages?|articles?|papers?|pages?|web ?pages?|results?|texts?|studies|study|reports?|sources?|"
    r"items?|entries|entry|records?|hits?|links?|posts?|content|materials?|information|info|stuff|things?|ones|those|"
    r"anything|everything|something|any|abstracts?|publications?|works?|answers?|responses?|snippets?|sites?|websites?|"
    r"listings?|reviews?(?= (?:that|which|who|about|on|of)\b)|threads?|mentions?|discussions?)"
)
_VERB_LEAD = (
    r"(?:deal(?:s|ing)?|discuss(?:es|ing)?|describ(?:e|es|ing)|mention(?:s|ing)?|cover(?:s|ing)?|address(?:es|ing)?|"
    r"focus(?:es|ing)?|talk(?:s|ing)?|concern(?:s|ing)?|treat(?:s|ing)?|giv(?:e|es|ing)|list(?:s|ing)?|provid(?:e|es|ing)|"
    r"present(?:s|ing)?|report(?:s|ing)?|contain(?:s|ing)?|includ(?:e|es|ing)|explain(?:s|ing)?|relat(?:e|es|ing)|"
    r"refer(?:s|ring)?|centr?e(?:s|d)?|center(?:s|ed)?|revolv(?:e|es|ing)|rely|relies|relying|consider(?:s|ing)?|"
    r"examin(?:e|es|ing)|analy[sz](?:e|es|ing)|stud(?:y|ies|ying)|show(?:s|ing)?|recommend(?:s|ing)?|"
    r"offer(?:s|ing)?|promot(?:e|es|ing)|advertis(?:e|es|ing)|sell(?:s|ing)?|use(?:s)?|using|apply|applies|applying)"
)
_LEAD_PREP = r"(?:with|on|about|of|in|to|upon|around|for)"

# "X are not relevant", "X is irrelevant", "X should be excluded" ...
_NOT_WANTED = (
    r"(?:(?:is|are|was|were|will be|would be|should be|shall be|must be|seems?|seem to be|count as|counts as)\s+)?"
    r"(?:(?:not|n't|never|no longer)\s+(?:be\s+)?(?:considered\s+|deemed\s+|counted\s+(?:as\s+)?|judged\s+)?"
    r"(?:relevant|wanted|needed|useful|helpful|of interest|interesting|pertinent|appropriate|acceptable|desired|"
    r"required|applicable|in scope|within (?:the )?scope|on[- ]topic|what i(?:'m| am) (?:looking for|after)|"
    r"what we(?:'re| are) (?:looking for|after))"
    r"|(?:irrelevant|off[- ]topic|out of scope|out[- ]of[- ]scope|outside (?:the |my |our )?(?:scope|focus|topic|remit)|"
    r"beyond (?:the |my |our )?scope|not in scope|unwanted|undesired|excluded|to be excluded|of no (?:interest|use|relevance)|"
    r"no good|unhelpful|not what i(?:'m| am) (?:looking for|after)|not what we(?:'re| am| are) (?:looking for|after)|"
    r"not what (?:i|we) (?:need|want|have in mind)|off[- ]limits|not needed|not wanted|"
    r"ruled out|disqualified|not applicable|inapplicable))"
)
_PASSIVE_REMOVE = (
    r"(?:should|must|shall|need to|needs to|can|may|will|are to|is to|ought to)\s+(?:not\s+be\s+"
    r"(?:retrieved|returned|included|shown|listed|considered|counted|ranked|surfaced|recommended|used)|be\s+"
    r"(?:excluded|ignored|left out|omitted|skipped|discarded|filtered out|dropped|removed|disregarded|avoided|"
    r"ranked (?:low|lower|last)|penali[sz]ed|rejected|set aside))"
    r"|(?:do|does|did)\s*(?:not|n't)\s+(?:count|qualify|apply|matter|belong|fit)"
)
_REMOVE_VERB = (
    r"(?:ignore|skip|leave out|leave aside|avoid|exclude|rule out|filter out|omit|drop|discard|disregard|remove|"
    r"eliminate|set aside|pass over|steer clear of|stay away from|forget about|forget|throw out|weed out|screen out|"
    r"cut out|strip out|take out|don't bother with|do not bother with|no need for|spare me)"
)
_DONT_RETURN = (
    r"(?:do not|don't|dont|never|please do not|please don't|you should not|you shouldn't|we do not|we don't)\s+"
    r"(?:(?:want to\s+)?(?:return|retrieve|include|show|give(?: me| us)?|provide|list|consider|bring up|surface|"
    r"recommend|send(?: me| us)?|suggest|fetch|pull up|find|rank|count|use|mix in|add)|want|need|care (?:about|for))"
)
_NOT_INTERESTED = (
    r"(?:i(?:'m| am)|we(?:'re| are)|i'?m|user is|the user is)\s+(?:really\s+|just\s+|also\s+)?not\s+"
    r"(?:(?:at all|really|very|particularly)\s+)?(?:interested in|looking for|after|concerned with|asking about|"
    r"searching for|seeking|keen on|into|bothered about|curious about)"
    r"|(?:i|we)\s+(?:do not|don't|dont|won't|will not|really don't|do not really)\s+"
    r"(?:want|need|care about|care for|like|wish to see|want to see|want to read|want to hear about|need to see|"
    r"need to know about|want to know about|want anything about|want anything on)"
    r"|(?:i|we)\s+(?:have no (?:interest|use) (?:in|for)|am uninterested in|are uninterested in|dislike|hate)"
    r"|(?:i'd|i would|we'd|we would|i'd much|i would much)\s+(?:much\s+)?rather not\s+(?:see|get|read|have|hear about|be shown)"
    r"|no interest in|not interested in|uninterested in"
)
# negations that do not exclude anything
_NOT_EXCLUSION = re.compile(
    r"\b(?:need(?:s)? not|needn't|do(?:es)? not (?:have|need) to|don't (?:have|need) to|not necessarily|not only|"
    r"not just|not merely|not limited to|(?:does|do|did) not matter|doesn't matter|don't matter|no matter|"
    r"whether or not|not required to|not strictly|not always|not all|cannot|can not|can't|not sure|not yet|"
    r"no more than|no less than|no later than|no earlier than|no longer than|not more than|not less than|"
    r"not older than|not earlier than|not later than|not exceed|no need to|not so much|not too|no doubt|"
    r"nothing else|not important|is not essential|are not essential|is not a requirement|are not a requirement|"
    r"not a must|none of the requirements|is not critical|(?:are|is) still (?:relevant|fine|welcome|acceptable|ok|useful))\b",
    re.IGNORECASE,
)
_FILLER_HEAD = re.compile(
    r"^(?:(?:please|kindly|also|and|but|so|then|however|additionally|moreover|furthermore|in addition|too|"
    r"finally|lastly|importantly|note that|note:|n\.b\.|nb:|just|simply|you can|you may|you should|feel free to|"
    r"be sure to|make sure to|try to|we want to|i want you to|i'd like you to|go ahead and|it is fine to|it's fine to|"
    r"it is ok to|it's ok to|ok to)[\s,:]+)+",
    re.IGNORECASE,
)
_TRAILING = re.compile(
    r"(?:[\s,;:]+(?:please|thanks|thank you|either|as well|too|at all|entirely|altogether|completely|for now|"
    r"for this search|for this query|for me|for us|here|in the results|from the results|from results|"
    r"in this search|in your results|whatsoever|though|however|anyway|thx|pls|plz))+\s*$",
    re.IGNORECASE,
)
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.", "al.", "approx.", "fig.", "no.", "dr.", "mr.", "mrs.", "ms.",
                  "st.", "u.s.", "u.k.", "e.u.", "jr.", "sr.", "inc.", "ltd.", "co.", "resp.", "incl.", "excl.", "esp.")


# ----------------------------------------------------------------------------------------- sentences
def _sentences(text: str) -> list[str]:
    """Split into sentences on . ! ? and line breaks, sparing abbreviations and decimals."""
    masked = text
    for i, abbr in enumerate(_ABBREVIATIONS):
        masked = re.sub(re.escape(abbr), lambda m, i=i: f"\x00{i}\x00" + "_" * (len(m.group(0)) - len(str(i)) - 2),
                        masked, flags=re.IGNORECASE)
    masked = re.sub(r"(?<=\d)\.(?=\d)", "\x01", masked)
    out, start = [], 0
    for match in re.finditer(r"[.!?]+(?=\s|$)|\n+", masked):
        end = match.end()
        piece = text[start:end].strip()
        if piece:
            out.append(piece)
        start = end
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


def _strip_end(text: str) -> str:
    return text.strip().rstrip(".!?;:,").strip()


# ----------------------------------------------------------------------------------------- aspects
_DETERMINER = re.compile(r"^(?:any|all|the|those|these|such|other|another|more|further|some|every|each)\s+", re.IGNORECASE)
_SUBJECT_HEAD = re.compile(
    rf"^(?:(?:any|all|the|those|these|such|other|some|every|each)\s+)*(?:relevant\s+|retrieved\s+|similar\s+)?{_ITEM}"
    rf"(?:\s*,)?(?:\s+(?:that|which|who|whose subject is|whose topic is|where))?"
    rf"(?:\s+(?:are|is|were|was))?"
    rf"(?:\s+(?:only|mainly|mostly|primarily|purely|solely|merely|exclusively|just|simply|largely|entirely|wholly))?"
    rf"(?:\s+(?:about|on|regarding|concerning|covering|related to|relating to|dealing with|dedicated to|devoted to|"
    rf"limited to|restricted to|specific to|focused on|focusing on|centered on|centred on|based on|"
    rf"that (?:deal|discuss|describe|mention|cover|focus|talk|concern|treat)s?(?:\s+(?:only|mainly|mostly|primarily|solely|merely))?"
    rf"(?:\s+{_LEAD_PREP})?|{_VERB_LEAD}(?:\s+(?:only|mainly|mostly|primarily|solely|merely|exclusively|just))?(?:\s+{_LEAD_PREP})?))?"
    rf"(?=\s|$)",
    re.IGNORECASE,
)
_ASPECT_HEAD = re.compile(
    r"^(?:(?:only|mainly|mostly|purely|solely|merely|exclusively|just|simply|primarily|specifically)\s+)?"
    r"(?:(?:anything|everything|something|stuff|material|content|information|info|things?|coverage|mentions?|"
    r"discussions?|talk|results?|documents?|passages?|articles?|papers?|pages?|items?|posts?|texts?)\s+)?"
    r"(?:(?:that|which)\s+(?:is|are)\s+)?"
    r"(?:about|on|regarding|concerning|covering|related to|relating to|relevant to|dealing with|to do with|"
    r"having to do with|pertaining to|involving|with respect to|referring to|in relation to|of|with|that (?:deal|discuss|"
    r"mention|cover|describe|focus|talk|treat)s?(?:\s+(?:only\s+)?(?:with|on|about))?)\s+",
    re.IGNORECASE,
)


def _clean_aspect(text: str) -> str:
    """The excluded aspect as a short standalone text: no item nouns, determiners, fillers or end punctuation."""
    aspect = _strip_end(text)
    aspect = _TRAILING.sub("", aspect)
    aspect = _FILLER_HEAD.sub("", aspect)
    for _ in range(3):
        before = aspect
        head = _SUBJECT_HEAD.match(aspect)
        if head and head.end() < len(aspect):
            aspect = aspect[head.end():].strip(" ,:")
        aspect = _ASPECT_HEAD.sub("", aspect).strip(" ,:")
        aspect = _DETERMINER.sub("", aspect).strip(" ,:")
        if aspect == before:
            break
    aspect = re.sub(r"^(?:with|on|about|of|in|for|to)\s+", "", aspect, flags=re.IGNORECASE)
    aspect = re.sub(r"\s*[,(]\s*(?:or|and)?\s*$", "", aspect)
    return _strip_end(_TRAILING.sub("", aspect))


def _is_aspect(text: str) -> bool:
    words = re.findall(r"[^\W_]+", text)
    return bool(words) and not (len(words) == 1 and words[0].lower() in {"it", "this", "that", "them", "these", "those", "one", "ones"})


# ----------------------------------------------------------------------------------------- clause rules
def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


# subject first: "<X> are not relevant", "<X> should be excluded", "<X>: not relevant"
_SUBJECT_RULE = _compile(rf"^(?P<aspect>.+?)[\s,]*(?::\s*|\s+)(?:{_NOT_WANTED}|{_PASSIVE_REMOVE})(?P<rest>\b.*)?$")
# predicate first: "Not relevant: X", "Irrelevant are X", "Excluded: X"
_PREDICATE_FIRST = _compile(
    r"^(?:not relevant|irrelevant|off[- ]topic|off[- ]limits|out of scope|excluded|exclusions?|exclude|not wanted|unwanted|"
    r"not needed|not interested|no thanks|"
    r"not of interest|do not include|don't include|avoid|skip|ignore|no)\s*[:\-–—]\s*(?P<aspect>.+)$"
)
_NOT_RELEVANT_ARE = _compile(r"^(?:not relevant|irrelevant|off[- ]topic|excluded) (?:are|is|would be|will be) (?P<aspect>.+)$")
# imperative: "ignore X", "please leave out X", "you can disregard X", "do not return X"
_IMPERATIVE = _compile(rf"^(?:{_REMOVE_VERB}|{_DONT_RETURN})\s+(?P<aspect>.+)$")
_FIRST_PERSON = _compile(rf"^(?:{_NOT_INTERESTED})\s+(?P<aspect>.+)$")
# short forms: "no X", "nothing on X", "not X", "none about X", "without X", "excluding X"
_SHORT = _compile(
    r"^(?:no|nothing|none|not|nor|neither|never|without|excluding|except|except for|minus|sans|but not|and not|"
    r"not any|zero)\b\s*(?:on|about|regarding|concerning|related to|relating to|to do with|of|from|that (?:is|are) about|"
    r"dealing with|involving)?\s*(?P<aspect>.+)$"
)
# an exclusion inside a longer clause: "..., but not X", "..., excluding X", "... except X"
# Found with finditer (the first cue after a word), not one anchored regex: ".*?" before and after an alternation
# backtracks quadratically on long clauses ("a, a, a, ..." of 15,000 characters took 21 s).
_TAIL_CUE = _compile(
    r"(?:,\s*|\s+|\s*[(\-–—]\s*)(?P<cue>but not|and not|not including|excluding|except for|except|"
    r"with the exception of|apart from|aside from|other than|save for|leaving out|ignoring|skipping|avoiding|minus|"
    r"without any|without(?! (?:regard|doubt|necessarily|exception|loss))|but nothing (?:on|about)|"
    r"(?:pls|plz|please) no|(?:pls |plz |please )?(?:dont|don't|do not) (?:show(?: me)?|include|return|want|give me)|but no|though not|rather than|instead of|as opposed to|but please (?:skip|ignore|"
    r"exclude|avoid|leave out|omit|drop)|but (?:skip|ignore|exclude|avoid|leave out|omit|drop|don't include|do not include|"
    r"not interested in|i(?:'m| am) not interested in|i don't want|i do not want|please don't return|"
    r"don't return|do not return|don't show|do not show))\s+"
)


class _TailMatch:
    def __init__(self, keep: str, cue: str, aspect: str):
        self._groups = {"keep": keep, "cue": cue, "aspect": aspect}

    def group(self, name: str) -> str:
        return self._groups[name]


def _tail_match(body: str) -> _TailMatch | None:
    """``keep <cue> aspect`` at the first cue that follows a word and is followed by a parenthesis-free aspect
    (a trailing ")" allowed)."""
    for m in _TAIL_CUE.finditer(body):
        keep, aspect = body[: m.start()], body[m.end():]
        if aspect.endswith(")"):
            aspect = aspect[:-1]
        if not re.search(r"\w", keep) or not aspect.strip() or "(" in aspect or ")" in aspect:
            continue
        return _TailMatch(keep, m.group("cue"), aspect)
    return None
# "Not X but Y (is what I want)": X excluded, Y kept ("not only X but also Y" is guarded as no exclusion)
_NOT_BUT = _compile(r"^not\s+(?P<aspect>[^,;]+?),?\s+but(?: rather)?\s+(?P<keep>.+)$")
# a list continued in the same clause: "X is not relevant, as is Y / and so are Y / nor are Y"
_SAME_CLAUSE_MORE = _compile(
    r"^,?\s*(?:as (?:is|are|do|does)|and so (?:is|are|do|does)|nor (?:is|are|do|does)|and neither (?:is|are)|"
    r"as are|and the same (?:goes )?for|and likewise|and also|and)\s+(?P<aspect>.+?)(?:,?\s+(?:either|too|as well))?$"
)
# list continued: "Also X." after an exclusion sentence
_CONTINUATION = _compile(
    r"^(?:also|and also|and|or|nor|same (?:goes )?for|likewise|similarly|ditto|as well as|plus|or any|and any|"
    r"and no|or no|also no|nor any|neither)\b[\s,:]*(?P<aspect>.+)$"
)
_SHORT_STOP = re.compile(
    r"^(?:no|not|none|nothing|never|nor|neither|without|except|excluding|minus|zero)\s+"
    r"(?:more|less|later|earlier|longer|shorter|matter|need|doubt|one|other|further|exception|problem|worries|"
    r"difference|preference|particular|specific|strict|hard|restriction|limit|limitation|requirement|constraint|"
    r"date|time|language|format|region|length|age|year|more than|less than|only|just|merely|necessarily|always|"
    r"all|everything|surprise|wonder|way|relevant|irrelevant|applicable|important|needed|required|sure|exactly|"
    r"really|quite|bad|good|much|many|too|very|yet|now|here|there)\b",
    re.IGNORECASE,
)
_VERB_IN_ASPECT = re.compile(
    r"\b(?:is|are|was|were|be|been|being|has|have|had|must|should|may|might|can|could|will|would|shall|do|does|did)\b",
    re.IGNORECASE,
)


def _split_list(aspect: str) -> list[str]:
    """One aspect per top-level list item ("X; Y", "X, or only Y", "X, nor Y"); "X or Y" stays one aspect."""
    parts = re.split(
        r"\s*;\s*|,\s*(?:or|and|nor)\s+(?=(?:only|those|ones|any|anything|documents?|passages?|articles?|papers?|"
        r"about|on|with|that|which)\b)|,?\s+(?:or|and|nor)\s+(?:only|those|ones|anything|documents?|passages?|"
        r"articles?|papers?)\s+(?:that|which|about|on|with|dealing)\b(?:\s+(?:only\s+)?(?:with|on|about))?|,\s*nor\s+",
        aspect,
        flags=re.IGNORECASE,
    )
    cleaned = [_clean_aspect(p) for p in parts]
    return [p for p in cleaned if _is_aspect(p)]


def _exclusion_of_clause(clause: str) -> tuple[str, list[str]] | None:
    """``(kept text, aspects)`` when the clause excludes something, else None."""
    body = _FILLER_HEAD.sub("", _strip_end(clause)).strip()
    if not body:
        return None
    guarded = _NOT_EXCLUSION.search(body)

    def aspects_of(text: str) -> list[str]:
        return _split_list(text)

    # "Only X are relevant; anything other than X is not relevant" is a positive constraint, not an exclusion
    if re.match(r"^(?:only|just|solely|exclusively)\b", body, re.IGNORECASE) or re.search(
        r"\b(?:other than|except|apart from|aside from|besides|but|save for)\b.*\b(?:not relevant|irrelevant|excluded|off[- ]topic)\b",
        body, re.IGNORECASE,
    ) and re.match(rf"^(?:any|all|no|other)?\s*{_ITEM}?\s*(?:other than|except|apart from|aside from|besides|but|save for)\b",
                   body, re.IGNORECASE):
        return None
    if not guarded:
        for rule in (_PREDICATE_FIRST, _NOT_RELEVANT_ARE):
            m = rule.match(body)
            if m and aspects_of(m.group("aspect")):
                return "", aspects_of(m.group("aspect"))
        m = _SUBJECT_RULE.match(body)
        if m and not re.match(r"^(?:relevant )?(?:documents?|passages?|results?)$", _strip_end(m.group("aspect")), re.IGNORECASE):
            rest = (m.group("rest") or "").strip(" ,")
            # "X are not relevant unless/if Y": conditional; the aspect is still X
            aspect = m.group("aspect")
            if aspects_of(aspect) and not re.match(r"^(?:it|this|that|they|these|those)$", _strip_end(aspect), re.IGNORECASE):
                keep = ""
                more: list[str] = []
                if rest and re.match(r"^(?:but|however|;|,)?\s*(?:documents?|passages?|those|ones|anything)\b", rest, re.IGNORECASE):
                    keep = rest
                elif rest and (extra := _SAME_CLAUSE_MORE.match(rest)) and not _VERB_IN_ASPECT.search(extra.group("aspect")):
                    more = aspects_of(extra.group("aspect"))
                return keep, aspects_of(aspect) + more
        for rule in (_IMPERATIVE, _FIRST_PERSON):
            m = rule.match(body)
            if m and aspects_of(m.group("aspect")):
                return "", aspects_of(m.group("aspect"))
        m = _NOT_BUT.match(body)
        if m and aspects_of(m.group("aspect")):
            return m.group("keep").strip(" ,"), aspects_of(m.group("aspect"))
        m = _SHORT.match(body)
        if m and not _SHORT_STOP.match(body) and not _VERB_IN_ASPECT.search(m.group("aspect")) and aspects_of(m.group("aspect")):
            return "", aspects_of(m.group("aspect"))
    m = _tail_match(body)
    if m and m.group("cue").lower().startswith("without") and _VERB_IN_ASPECT.search(m.group("aspect")):
        m = None
    if m and not _NOT_EXCLUSION.search(m.group("cue") + " " + m.group("aspect")):
        keep = m.group("keep").strip(" ,")
        if re.search(r"\b(?:not only|not just|not merely)\s*$", keep, re.IGNORECASE):
            return None
        cue = m.group("cue").lower()
        if cue in ("other than", "except", "except for", "apart from", "aside from", "save for") and re.search(
            r"\b(?:anything|everything|all|any)\s*$", keep, re.IGNORECASE
        ):
            # "I want anything other than X": excludes X; "Anything except X" keeps nothing specific
            keep = re.sub(r"\b(?:anything|everything|all|any)\s*$", "", keep).strip()
        elif cue in ("rather than", "instead of", "as opposed to") and not re.search(r"\w", keep):
            return None
        if aspects_of(m.group("aspect")):
            return keep, aspects_of(m.group("aspect"))
    return None


def _clauses(sentence: str) -> list[str]:
    """A sentence's clauses: split at ';' and at ', but' / ', while' / ', and I ...' boundaries."""
    parts = re.split(
        r"\s*;\s*|,\s*(?=(?:but|however|though|while|whereas|yet)\s+(?!not\b|no\b|nothing\b|also\b))"
        r"|,\s*(?=(?:no|not|nothing|none|never|ignore|skip|leave out|exclude|excluding|avoid|omit|drop|disregard|"
        r"except|please (?:don't|do not|skip|ignore|exclude|leave out|omit))\b)"
        r"|\s*\((?=(?:not|no|excluding|except|but not)\b)|\s+-\s+|\s+—\s+",
        sentence,
        flags=re.IGNORECASE,
    )
    return [p.strip().rstrip(")").strip() if p.strip().endswith(")") and "(" not in p else p for p in parts if p and p.strip()]


def _rules_split(text: str) -> Instruction:
    keep_parts: list[str] = []
    exclude: list[str] = []
    guards: list[str] = []
    previous_excluded = False
    for sentence in _sentences(text):
        sentence_keep: list[str] = []
        sentence_excluded = False
        first_new = len(exclude)
        for clause in _clauses(sentence):
            found = _exclusion_of_clause(clause)
            if found is None and previous_excluded:
                m = _CONTINUATION.match(_strip_end(clause))
                if m and not _VERB_IN_ASPECT.search(m.group("aspect")) and _split_list(m.group("aspect")):
                    found = ("", _split_list(m.group("aspect")))
            if found is None:
                sentence_keep.append(clause)
                previous_excluded = False
                continue
            kept, aspects = found
            for aspect in aspects:
                if aspect.lower() not in {e.lower() for e in exclude}:
                    exclude.append(aspect)
                    guards.append("")
            if kept:
                sentence_keep.append(kept)
            sentence_excluded = previous_excluded = True
        if sentence_keep:
            joined = "; ".join(_strip_end(p) if sentence_excluded else p.strip() for p in sentence_keep)
            if sentence_excluded or not re.search(r"[.!?;]$", joined):
                terminal = re.search(r"[.!?]$", sentence.strip())
                joined = _strip_end(joined) + (terminal.group(0) if terminal else "")
            keep_parts.append(joined)
            if sentence_excluded:
                for index in range(first_new, len(exclude)):
                    guards[index] = _strip_end(joined)
    keep = " ".join(p for p in keep_parts if p.strip()).strip()
    return Instruction(keep=keep, exclude=exclude, guards=guards)


# ----------------------------------------------------------------------------------------- the API
_RULES_CACHE: dict[str, Instruction] = {}


def split_instruction(text: str | None, splitter: str | Callable[[str], Instruction] = "rules") -> Instruction:
    """Decompose one instruction. ``splitter`` is ``"rules"``, ``"off"`` (no split) or a callable such as
    :func:`llm_splitter`'s result. ``None``/empty gives ``Instruction("")``; an instruction with no exclusion gives
    ``keep`` equal to the (stripped) input and no exclusions, so plain scoring is unchanged."""
    if text is None:
        return Instruction("")
    if not isinstance(text, str):
        raise TypeError(f"an instruction must be a string, got {type(text).__name__}")
    stripped = text.strip()
    if not stripped or splitter == "off":
        return Instruction(stripped)
    if callable(splitter):
        return splitter(stripped)
    if splitter == "llm":
        raise SettingsError("the llm splitter needs an endpoint: use llm_splitter(...) and pass the callable")
    if splitter != "rules":
        raise SettingsError(f"unknown splitter {splitter!r}; choose one of {SPLITTERS}")
    cached = _RULES_CACHE.get(stripped)
    if cached is None:
        cached = _rules_split(stripped)
        if not cached.exclude:
            cached = Instruction(stripped)
        if len(_RULES_CACHE) > 100_000:
            _RULES_CACHE.clear()
        _RULES_CACHE[stripped] = cached
    return cached


def split_instructions(texts: Sequence[str | None], splitter: str | Callable[[str], Instruction] = "rules") -> list[Instruction]:
    """:func:`split_instruction` over a list; an LLM splitter with a ``batch`` method answers them concurrently."""
    batch = getattr(splitter, "batch", None)
    if batch is not None:
        return batch(texts)
    return [split_instruction(t, splitter) for t in texts]


# ----------------------------------------------------------------------------------------- the llm splitter
LLM_SYSTEM_PROMPT = (
    "You decompose search instructions. Given an instruction that a user wrote to narrow a document search, "
    "return JSON with two keys: \"keep\", the instruction rewritten without any clause that excludes something "
    "(keep every positive requirement, including 'only X are relevant', in the user's words), and \"exclude\", a list "
    "of the excluded aspects, each a short standalone noun phrase naming what the unwanted documents are about "
    "(for 'Documents on supersonic flow are not relevant' the aspect is 'supersonic flow'). A negation that does not "
    "exclude documents ('documents need not be recent', 'not only X but also Y') is not an exclusion. If nothing is "
    "excluded, \"keep\" is the instruction unchanged and \"exclude\" is []. Answer with the JSON object only."
)
LLM_SCHEMA = {
    "type": "object",
    "properties": {"keep": {"type": "string"}, "exclude": {"type": "array", "items": {"type": "string"}}},
    "required": ["keep", "exclude"],
}


def parse_llm_answer(text: str, instruction: str) -> Instruction:
    """The LLM's JSON answer as an :class:`Instruction`; a malformed answer raises ``ValueError``."""
    match = re.search(r"\{.*\}", text or "", re.DOTALL)
    if not match:
        raise ValueError(f"no JSON object in the answer: {text[:80]!r}")
    data = json.loads(match.group(0))
    if not isinstance(data, dict) or not isinstance(data.get("keep", ""), str):
        raise ValueError("the answer's 'keep' must be a string")
    exclude = data.get("exclude") or []
    if isinstance(exclude, str):
        exclude = [exclude]
    if not isinstance(exclude, list) or not all(isinstance(e, str) for e in exclude):
        raise ValueError("the answer's 'exclude' must be a list of strings")
    exclude = [_strip_end(e) for e in exclude if _strip_end(e)]
    if not exclude:
        return Instruction(instruction)
    return Instruction(keep=(data.get("keep") or "").strip(), exclude=exclude)


def llm_splitter(base_url: str, model: str, *, api_key: str | None = None, cache: str | None = None,
                 concurrency: int = 8, timeout: float = 60.0, fallback: str = "rules") -> Callable[[str], Instruction]:
    """A splitter that asks an OpenAI-compatible endpoint (through :class:`infembed.synth.llm.LLMClient`: cache,
    retries). A malformed answer falls back to ``fallback`` (``"rules"`` or ``"off"``) for that instruction."""
    import asyncio

    from infembed.synth.llm import ChatRequest, LLMClient, OpenAIBackend, ResponseCache, Sampling

    def request(instruction: str) -> ChatRequest:
        return ChatRequest.build(
            model,
            [{"role": "system", "content": LLM_SYSTEM_PROMPT}, {"role": "user", "content": instruction}],
            sampling=Sampling(temperature=0.0, max_tokens=400),
        )

    async def run(texts: list[str]) -> list[Instruction]:
        backend = OpenAIBackend(base_url=base_url, api_key=api_key, timeout=timeout)
        client = LLMClient(backend, ResponseCache(cache) if cache else None, concurrency=concurrency)
        try:
            async def one(text: str) -> Instruction:
                response = await client.complete(request(text))
                try:
                    return parse_llm_answer(response.text, text)
                except (ValueError, json.JSONDecodeError):
                    return split_instruction(text, fallback)

            return list(await asyncio.gather(*(one(t) for t in texts)))
        finally:
            await client.aclose()

    memo: dict[str, Instruction] = {}

    def batch(texts: Sequence[str | None]) -> list[Instruction]:
        todo = sorted({t.strip() for t in texts if t and t.strip() and t.strip() not in memo})
        if todo:
            memo.update(zip(todo, asyncio.run(run(todo))))
        return [memo[t.strip()] if t and t.strip() else Instruction("") for t in texts]

    def splitter(text: str) -> Instruction:
        return batch([text])[0]

    splitter.batch = batch  # type: ignore[attr-defined]
    splitter.name = f"llm:{model}"  # type: ignore[attr-defined]
    return splitter
