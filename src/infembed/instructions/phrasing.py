"""The English phrasings of an exclusion, as vocabulary tables and compiled regexes.

Data for the rules splitter (:mod:`infembed.instructions.rules`): the nouns for "the things retrieved", the
verbs and predicates that exclude ("are not relevant", "ignore", "I am not interested in"), the negations that
do not exclude ("need not", "not only"), and the clause patterns built from them. No logic lives here. The rules
are the fallback of the learned decomposer (:mod:`infembed.instructions.decomposer`), not where new phrasings go."""

from __future__ import annotations

import re

# ----------------------------------------------------------------------------------------- vocabulary
# Nouns people use for "the things retrieved"; they are not part of an excluded aspect.
ITEM = (
    r"(?:documents?|docs?|passages?|articles?|papers?|pages?|web ?pages?|results?|texts?|studies|study|reports?|sources?|"
    r"items?|entries|entry|records?|hits?|links?|posts?|content|materials?|information|info|stuff|things?|ones|those|"
    r"anything|everything|something|any|abstracts?|publications?|works?|answers?|responses?|snippets?|sites?|websites?|"
    r"listings?|reviews?(?= (?:that|which|who|about|on|of)\b)|threads?|mentions?|discussions?)"
)
VERB_LEAD = (
    r"(?:deal(?:s|ing)?|discuss(?:es|ing)?|describ(?:e|es|ing)|mention(?:s|ing)?|cover(?:s|ing)?|address(?:es|ing)?|"
    r"focus(?:es|ing)?|talk(?:s|ing)?|concern(?:s|ing)?|treat(?:s|ing)?|giv(?:e|es|ing)|list(?:s|ing)?|provid(?:e|es|ing)|"
    r"present(?:s|ing)?|report(?:s|ing)?|contain(?:s|ing)?|includ(?:e|es|ing)|explain(?:s|ing)?|relat(?:e|es|ing)|"
    r"refer(?:s|ring)?|centr?e(?:s|d)?|center(?:s|ed)?|revolv(?:e|es|ing)|rely|relies|relying|consider(?:s|ing)?|"
    r"examin(?:e|es|ing)|analy[sz](?:e|es|ing)|stud(?:y|ies|ying)|show(?:s|ing)?|recommend(?:s|ing)?|"
    r"offer(?:s|ing)?|promot(?:e|es|ing)|advertis(?:e|es|ing)|sell(?:s|ing)?|use(?:s)?|using|apply|applies|applying)"
)
LEAD_PREP = r"(?:with|on|about|of|in|to|upon|around|for)"

# "X are not relevant", "X is irrelevant", "X should be excluded" ...
NOT_WANTED = (
    r"(?:(?:is|are|was|were|will be|would be|should be|shall be|must be|seems?|seem to be|count as|counts as)(?:\s+|(?=n't))"
    r"(?:also\s+|likewise\s+|equally\s+)?)?"
    r"(?:(?:not|n't|never|no longer)\s+(?:be\s+)?(?:considered\s+|deemed\s+|counted\s+(?:as\s+)?|judged\s+)?"
    r"(?:relevant|wanted|needed|useful|helpful|of interest|interesting|pertinent|appropriate|acceptable|desired|"
    r"required|applicable|in scope|within (?:the )?scope|on[- ]topic|what i(?:'m| am) (?:looking for|after)|"
    r"what we(?:'re| are) (?:looking for|after))"
    r"|(?:(?:considered|deemed|judged|regarded as|treated as|counted as|classed as|classified as|marked(?: as)?|"
    r"labell?ed(?: as)?|rated(?: as)?|"
    r"(?:makes?|renders?)\s+(?:(?:a|the|any|that)\s+)?(?:documents?|passages?|results?|articles?|texts?|pages?|sources?|papers?))\s+)?"
    r"(?:irrelevant|non[- ]?relevant|not relevant|off[- ]topic|out of scope|out[- ]of[- ]scope|outside (?:the |my |our )?(?:scope|focus|topic|remit)|"
    r"beyond (?:the |my |our )?scope|not in scope|unwanted|undesired|excluded|to be excluded|of no (?:interest|use|relevance)|"
    r"no good|unhelpful|not what i(?:'m| am) (?:looking for|after)|not what we(?:'re| am| are) (?:looking for|after)|"
    r"not what (?:i|we|the user|users|the searcher|the requester|the reader|the client|they|he|she)(?:'re| are| is| am)?\s+"
    r"(?:need|needs|want|wants|have in mind|has in mind|looking for|after|seeking|asking for|asked for)|off[- ]limits|"
    r"(?:do|does|will|would)(?:\s+not|n't)\s+(?:by (?:itself|themselves)\s+|alone\s+|on (?:its|their) own\s+)?"
    r"(?:make|render)\s+(?:a|the|any|that)\s+(?:documents?|passages?|results?|articles?|texts?|pages?|sources?|papers?|"
    r"reports?|studies|study)\s+relevant|"
    r"(?:not enough|insufficient|not sufficient)(?:\s+(?:on (?:its|their) own|by (?:itself|themselves)|alone))?"
    r"\s+(?:to (?:make|render) (?:a|the|any) (?:documents?|passages?|results?|articles?|texts?|pages?|papers?) relevant|"
    r"for relevance|for (?:a|the) (?:document|passage|result|article|text|page|paper) to be relevant)|"
    r"not needed|not wanted|(?:(?<=\bis )|(?<=\bare ))out(?=\s*$)|(?:a )?no[- ]go|off the table|(?:a )?non[- ]starter|(?:a )?deal[- ]?breaker|"
    r"need not apply(?=\s*$)|needn't apply(?=\s*$)|(?:can|may) be (?:skipped|ignored|left out|dropped|omitted)|"
    r"not (?:a |the )?part of (?:this|the|my|our|the user's) (?:topic|search|query|request|scope|question|interest|review)|"
    r"(?:falls?|lies?|sits?|is|are)?\s*outside (?:of )?(?:the |my |our |this |its |the user's |their )?(?:scope|focus|topic|"
    r"remit|interests?|area of interest|request|coverage)|ineligible|not eligible|"
    r"beyond what (?:i|we|the user)(?:'m| am| are| is)? (?:want|wants|need|needs|looking for|after)|"
    r"(?:something )?(?:i|we) can do without|"
    r"(?:won't|will not|wouldn't|would not|do not|don't|does not|doesn't|cannot|can't)\s+help(?:\s+(?:me|us|the user|here))?|"
    r"(?:of )?no (?:help|use|value)(?: (?:to|for) (?:me|us|the user))?|"
    r"(?:something|stuff|things|material|ground|what)?\s*(?:i|we|the user)(?:'ve| have| has)\s+(?:already\s+)?"
    r"(?:covered|read|seen|reviewed|studied|searched|tried|looked at)\s+already|"
    r"(?:something|stuff|things|material|ground|what)?\s*(?:i|we|the user)(?:'ve| have| has)\s+already\s+"
    r"(?:covered|read|seen|reviewed|studied|searched|tried|looked at)|"
    r"ruled out|disqualified|not applicable|inapplicable|unsuitable|not suitable|inappropriate|unacceptable|"
    r"unsatisfactory|not pertinent|not germane|immaterial|extraneous|"
    r"(?:get|gets|receive|receives|score|scores|deserve|deserves)\s+(?:a\s+)?(?:score of\s+|rating of\s+|grade of\s+)?"
    r"(?:zero|0|no credit|no points|the lowest (?:score|grade|rating))|"
    r"(?:do|does|did|will|would)(?:\s+not|n't)\s+(?:satisfy|meet|fulfil|fulfill|answer|address|serve|match)\s+(?:the|this|my|our|"
    r"the user's)\s+(?:request|criteria|need|needs|query|question|information need|requirements?|purpose)|"
    r"fails?\s+(?:to\s+(?:meet|satisfy)\s+)?(?:the|these|our|my)\s+(?:criteria|request|requirements?|test)|"
    r"(?:disqualif(?:y|ies)|rules? out|invalidates?)\s+(?:a|the|any|that)\s+(?:documents?|passages?|results?|articles?|"
    r"texts?|pages?|sources?|papers?|studies|study|reports?)))"
)
PASSIVE_REMOVE = (
    r"(?:should|must|shall|need to|needs to|can|may|will|are to|is to|ought to)(?:\s+not\s+be\s+|n't\s+be\s+)"
    r"(?:retrieved|returned|included|shown|listed|considered|counted|ranked|surfaced|recommended|used)"
    r"|(?:are|is)\s+not\s+to\s+be\s+(?:retrieved|returned|included|shown|listed|considered|counted|ranked|surfaced|"
    r"recommended|used)"
    r"|won't\s+be\s+(?:retrieved|returned|included|shown|listed|considered|counted|ranked|surfaced|recommended|used)"
    r"|(?:should|must|shall|need to|needs to|can|may|will|are to|is to|ought to)\s+(?:not\s+be\s+"
    r"(?:retrieved|returned|included|shown|listed|considered|counted|ranked|surfaced|recommended|used)|be\s+"
    r"(?:excluded|ignored|left out|left aside|put aside|kept out|passed over|omitted|skipped|discarded|filtered out|"
    r"dropped|removed|disregarded|avoided|"
    r"ranked (?:low|lower|last)|penali[sz]ed|rejected|set aside))"
    r"|(?:do|does|did)\s*(?:not|n't)\s+(?:count|qualify|apply|matter|belong|fit)"
)
REMOVE_VERB = (
    r"(?:ignore|skip|leave out|leave aside|avoid|exclude|rule out|filter out|omit|drop|discard|disregard|remove|"
    r"eliminate|set aside|pass over|steer clear of|stay away from|forget about|forget|throw out|weed out|screen out|"
    r"cut out|strip out|take out|don't bother with|do not bother with|no need for|spare me|keep away from|"
    r"stay clear of|keep clear of|steer away from|shy away from|hold off on|don't give me|do not give me|"
    r"don't send me|do not send me|don't show me|do not show me)"
)
DONT_RETURN = (
    r"(?:do not|don't|dont|never|please do not|please don't|you should not|you shouldn't|we do not|we don't)\s+"
    r"(?:(?:want to\s+)?(?:return|retrieve|include|show|give(?: me| us)?|provide|list|consider|bring up|surface|"
    r"recommend|send(?: me| us)?|suggest|fetch|pull up|find|rank|count|use|mix in|add)|want|need|care (?:about|for))"
)
NOT_INTERESTED = (
    r"(?:i(?:'m| am)|we(?:'re| are)|i'?m|user is|the user is)\s+(?:really\s+|just\s+|also\s+)?not\s+"
    r"(?:(?:at all|really|very|particularly)\s+)?(?:interested in|looking for|after|concerned with|asking about|"
    r"searching for|seeking|keen on|into|bothered about|curious about)"
    r"|(?:i|we)\s+(?:do not|don't|dont|won't|will not|really don't|do not really)\s+"
    r"(?:want|need|care about|care for|like|wish to see|want to see|want to read|want to hear about|need to see|"
    r"need to know about|want to know about|want anything about|want anything on)"
    r"|(?:i|we)\s+(?:have no (?:interest|use) (?:in|for)|am uninterested in|are uninterested in|dislike|hate)"
    r"|(?:i'd|i would|we'd|we would|i'd much|i would much)\s+(?:much\s+)?rather not\s+(?:see|get|read|have|hear about|be shown)"
    r"|no interest in|not interested in|uninterested in"
    r"|(?:the (?:user|searcher|requester|requestor|reader|client|customer|patient|researcher|analyst|student)|users|they|he|she)"
    r"\s+(?:(?:has|have)\s+no\s+(?:interest|use)\s+(?:in|for)|(?:does not|doesn't|do not|don't)\s+(?:want|need|care about|"
    r"care for|wish to see|want to see|want to read|want anything (?:about|on))|(?:is|are)\s+not\s+(?:interested in|looking for|"
    r"after|concerned with|asking about|seeking))"
)
# negations that do not exclude anything
NOT_EXCLUSION = re.compile(
    r"\b(?:need(?:s)? not(?! apply\s*$)|needn't(?! apply\s*$)|do(?:es)? not (?:have|need) to|don't (?:have|need) to|not necessarily|not only|"
    r"not just|not merely|not limited to|(?:does|do|did) not matter|doesn't matter|don't matter|no matter|"
    r"whether or not|(?:may|might|can|could|do|does|will|would) or (?:may|might|can|could|do|does|will|would)(?:\s+not|n't)|"
    r"not required to|not strictly|not always|not all|"
    r"(?:cannot|can not|can't)(?!\s+(?:ever\s+)?(?:mention|discuss|describe|cover|address|focus|talk|concern|deal|treat|include|"
    r"contain|involve|refer|relate|feature|be about|be on|be related|be focused|be concerned|rely))|not sure|not yet|"
    r"no more than|no less than|no later than|no earlier than|no longer than|not more than|not less than|"
    r"not older than|not earlier than|not later than|not exceed|no need to|not so much|not too|no doubt|"
    r"nothing else|not important|is not essential|are not essential|is not a requirement|are not a requirement|"
    r"not a must|none of the requirements|(?:but )?not (?:required|necessary|essential|mandatory|obligatory|compulsory)|"
    r"optional|is not critical|(?:are|is) still (?:relevant|fine|welcome|acceptable|ok|useful)|(?:are|is|can be|may be|could be|might be|would be) (?:still |also |equally )+(?:relevant|fine|welcome|acceptable|useful))\b",
    re.IGNORECASE,
)
FILLER_HEAD = re.compile(
    r"^(?:(?:please|kindly|also|and|but|so|then|however|additionally|moreover|furthermore|in addition|too|"
    r"finally|lastly|importantly|note that|note:|n\.b\.|nb:|just|simply|you can|you may|you should|feel free to|"
    r"be sure to|make sure to|try to|we want to|i want you to|i'd like you to|go ahead and|it is fine to|it's fine to|"
    r"it is ok to|it's ok to|ok to)[\s,:]+)+",
    re.IGNORECASE,
)
TRAILING = re.compile(
    r"(?:[\s,;:]+(?:please|thanks|thank you|either|as well|too|at all|entirely|altogether|completely|for now|"
    r"for this search|for this query|for me|for us|here|in the results|from the results|from results|"
    r"in this search|in your results|whatsoever|though|however|anyway|thx|pls|plz))+\s*$",
    re.IGNORECASE,
)
ABBREVIATIONS = (
    "e.g.",
    "i.e.",
    "etc.",
    "vs.",
    "cf.",
    "al.",
    "approx.",
    "fig.",
    "no.",
    "dr.",
    "mr.",
    "mrs.",
    "ms.",
    "st.",
    "u.s.",
    "u.k.",
    "e.u.",
    "jr.",
    "sr.",
    "inc.",
    "ltd.",
    "co.",
    "resp.",
    "incl.",
    "excl.",
    "esp.",
)


# ----------------------------------------------------------------------------------------- aspects
DETERMINER = re.compile(
    r"^(?:a|an|any|all|the|those|these|such|other|another|more|further|some|every|each)\s+", re.IGNORECASE
)
SUBJECT_HEAD = re.compile(
    rf"^(?:(?:a|an|any|all|the|those|these|such|other|some|every|each)\s+)*(?:relevant\s+|retrieved\s+|similar\s+)?{ITEM}"
    rf"(?:\s*,)?(?:\s+(?:that|which|who|whose subject is|whose topic is|where))?"
    rf"(?:\s+(?:are|is|were|was))?"
    rf"(?:\s+(?:only|mainly|mostly|primarily|purely|solely|merely|exclusively|just|simply|largely|entirely|wholly))?"
    rf"(?:\s+(?:about|on|regarding|concerning|covering|related to|relating to|dealing with|dedicated to|devoted to|"
    rf"limited to|restricted to|specific to|focused on|focusing on|centered on|centred on|based on|"
    rf"that (?:deal|discuss|describe|mention|cover|focus|talk|concern|treat)s?(?:\s+(?:only|mainly|mostly|primarily|solely|merely))?"
    rf"(?:\s+{LEAD_PREP})?|{VERB_LEAD}(?:\s+(?:only|mainly|mostly|primarily|solely|merely|exclusively|just))?(?:\s+{LEAD_PREP})?))?"
    rf"(?=\s|$)",
    re.IGNORECASE,
)
ASPECT_HEAD = re.compile(
    r"^(?:(?:only|mainly|mostly|purely|solely|merely|exclusively|just|simply|primarily|specifically|mere|passing|"
    r"brief|incidental|casual|simple)\s+)?"
    r"(?:(?:anything|everything|something|stuff|material|content|information|info|things?|coverage|mentions?|"
    r"discussions?|talk|results?|documents?|passages?|articles?|papers?|pages?|items?|posts?|texts?)\s+)?"
    r"(?:(?:that|which)\s+(?:is|are)\s+)?"
    r"(?:about|on|regarding|concerning|covering|related to|relating to|relevant to|dealing with|to do with|"
    r"having to do with|pertaining to|involving|with respect to|referring to|in relation to|of|with|that (?:deal|discuss|"
    r"mention|cover|describe|focus|talk|treat)s?(?:\s+(?:only\s+)?(?:with|on|about))?)\s+",
    re.IGNORECASE,
)


# ----------------------------------------------------------------------------------------- clause rules
def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


# subject first: "<X> are not relevant", "<X> should be excluded", "<X>: not relevant"
SUBJECT_RULE = _compile(
    rf"^(?P<aspect>.+?)[\s,]*(?::\s*|\s+)(?:{NOT_WANTED}|{PASSIVE_REMOVE})(?P<rest>\b.*)?$"
)
# predicate first: "Not relevant: X", "Irrelevant are X", "Excluded: X"
PREDICATE_FIRST = _compile(
    r"^(?:not relevant|irrelevant|off[- ]topic|off[- ]limits|out of scope|excluded|exclusions?|exclude|not wanted|unwanted|"
    r"not needed|not interested|no thanks|negative aspects?|negatives?|don't want|do not want|not this|excluded topics?|"
    r"must not (?:include|contain|mention)|should not (?:include|contain|mention)|"
    r"not of interest|do not include|don't include|avoid|skip|ignore|no)\s*[:\-–—]\s*(?P<aspect>.+)$"
)
NOT_RELEVANT_ARE = _compile(
    r"^(?:not relevant|irrelevant|off[- ]topic|excluded) (?:are|is|would be|will be) (?P<aspect>.+)$"
)
# imperative: "ignore X", "please leave out X", "you can disregard X", "do not return X"
IMPERATIVE = _compile(rf"^(?:{REMOVE_VERB}|{DONT_RETURN})\s+(?P<aspect>.+)$")
FIRST_PERSON = _compile(rf"^(?:{NOT_INTERESTED})\s+(?P<aspect>.+)$")
# short forms: "no X", "nothing on X", "not X", "none about X", "without X", "excluding X"
SHORT = _compile(
    r"^(?:no|nothing|none|not|nor|neither|never|without|excluding|except|except for|minus|sans|but not|and not|"
    r"not any|zero)\b(?![-‐])\s*(?:on|about|regarding|concerning|related to|relating to|to do with|of|from|that (?:is|are) about|"
    r"dealing with|involving)?\b\s*(?P<aspect>.+)$"
)
# an exclusion inside a longer clause: "..., but not X", "..., excluding X", "... except X"
# Found with finditer (the first cue after a word), not one anchored regex: ".*?" before and after an alternation
# backtracks quadratically on long clauses ("a, a, a, ..." of 15,000 characters took 21 s).
TAIL_CUE = _compile(
    r"(?:,\s*|\s+|\s*[(\-–—]\s*)(?P<cue>but not|and not|not including|excluding|except for|except|"
    r"with the exception of|apart from|aside from|other than|save for|leaving out|leaving aside|setting aside|"
    r"putting aside|disregarding|omitting|barring|not counting|excepting|ignoring|skipping|avoiding|minus|"
    r"and (?:please )?(?:keep away from|stay away from|steer clear of|avoid|skip|ignore|exclude|leave out|omit|drop)|"
    r"without any|(?<!with or )(?<!and/or )without(?! (?:regard|doubt|necessarily|exception|loss))|but nothing (?:on|about)|"
    r"(?:that|which) (?:aren't|are not|isn't|is not) (?:based on|about|focused on|related to)|"
    r"anything but|everything but|anything except|everything except|(?<=,)\s*hold the|minus the|"
    r"but nothing (?:on|about|from|by|involving|with|related to|regarding|concerning|that involves)|"
    r"(?:and|but)\s+(?:must|should|shall|may|do|does|will)(?:\s+not|n't)\s+(?:be(?:\s+(?:about|on|related to))?|mention|"
    r"discuss|describe|cover|address|focus on|talk about|deal with|concern|involve|include|contain|refer to)|"
    r"(?:pls|plz|please) no|(?:pls |plz |please )?(?:dont|don't|do not) (?:show(?: me)?|include|return|want|give me)|but no|though not|rather than|instead of|as opposed to|but please (?:skip|ignore|"
    r"exclude|avoid|leave out|omit|drop)|but (?:skip|ignore|exclude|avoid|leave out|omit|drop|don't include|do not include|"
    r"not interested in|i(?:'m| am) not interested in|i don't want|i do not want|please don't return|"
    r"don't return|do not return|don't show|do not show))\s+"
)


# the item must not have the aspect: "Documents should not mention X", "A relevant passage must not be about X",
# "Find papers that do not discuss X" (keep: "Find papers")
NOT_HAVE_VERB = (
    r"(?:mention|discuss|describe|cover|address|focus|talk|concern|deal|treat|include|contain|involve|refer|relate|"
    r"feature|report|present|explain|examine|analy[sz]e|study|cent(?:er|re)|revolve|rely|use|recommend|promote|"
    r"be (?:about|on|related to|concerned with|focused on|centered on|centred on|based on|limited to)|have to do with|"
    r"be(?=\s+(?:a|an|any|just|merely|only|simply|primarily|mainly|purely)\b))"
)
MUST_NOT = _compile(
    r"^(?P<subject>(?:[\w'’-]+\s+){0,7}?[\w'’-]+)(?:,?\s+(?:that|which|who))?\s+"
    r"(?:(?:should|must|shall|may|need to|needs to|is to|are to|will|do|does|did|can)(?:\s+not|n't|\s+never)"
    r"|ought(?:\s+not|n't)(?:\s+to)?|ought never to|cannot|can not|won't)\s+"
    r"(?:ever\s+|even\s+|also\s+|at all\s+|in any way\s+)?"
    rf"{NOT_HAVE_VERB}(?:\s+{LEAD_PREP})?\s+(?P<aspect>.+)$"
)
# a subject that is itself an absence ("Articles that do not discuss trade are not relevant", "Documents without
# figures are irrelevant"): a requirement in disguise, not an exclusion of "trade"
ABSENT_SUBJECT = _compile(
    rf"^(?:(?:a|an|the|any|all|those|these|such|relevant)\s+)*(?:{ITEM}|ones)(?:\s*,)?\s+(?:(?:that|which|who)\s+"
    r"(?:(?:do|does|did|are|is|were|was)(?:\s+not|n't)|lacks?|have no|has no|never)|not|without|lacking|missing|with no)\b"
)
# "A passage is relevant only if it (does not mention X)": nothing to keep before the condition
RELEVANT_IF = _compile(
    rf"^(?:(?:a|an|the|any|all|every|each|relevant)\s+)*(?:{ITEM}|it|they)\s+(?:is|are)\s+(?:only\s+)?"
    r"(?:relevant|useful|wanted|acceptable)\s*,?\s*(?:only\s+)?(?:if|when|as long as|provided(?: that)?|so long as)"
    r"\s+(?:it|they)$"
)
# the item is told to leave something out: "Results should avoid X", "The answer must exclude X"
MUST_AVOID = _compile(
    r"^(?P<subject>(?:[\w'’-]+\s+){0,5}?[\w'’-]+)\s+(?:should|must|shall|ought to|need to|needs to|are to|is to|will|"
    r"have to|has to)\s+(?:avoid|exclude|omit|skip|leave out|steer clear of|stay away from|keep away from|ignore|"
    r"disregard|stay clear of)\s+(?P<aspect>.+)$"
)
# "If a patent is mainly about X, reject it" / "Where a protocol relies on X, treat it as not relevant"
CONDITION_THEN_DROP = _compile(
    r"^(?:if|when|whenever|where|in case|should)\s+(?P<condition>.+?),\s*(?:then\s+)?(?:please\s+)?"
    r"(?:(?:reject|drop|discard|ignore|skip|exclude|remove|omit|disregard|penali[sz]e|downrank|demote|filter out|"
    r"leave out|throw out|rule out|dismiss)\s+(?:it|them|that one|those|this one|such (?:documents|passages|results|pages|"
    r"ones))(?:\s+out)?|(?:treat|consider|mark|count|rate|judge|label|regard)\s+(?:it|them)\s+(?:as\s+)?"
    r"(?:not relevant|irrelevant|non[- ]?relevant|off[- ]topic|out of scope|unsuitable)|"
    r"(?:it|they)\s+(?:should|must|will|can)\s+be\s+(?:rejected|dropped|discarded|ignored|skipped|excluded|removed|"
    r"omitted|disregarded|penali[sz]ed|ranked low|filtered out|dismissed))$"
)
# the aspect inside a condition: "a patent is mainly about X", "the page talks about X", "a protocol relies on X"
CONDITION_CONTENT = _compile(
    rf"^(?:(?:a|an|the|any|this|that|such a|some)\s+)?(?:[\w-]+\s+){{0,2}}?(?:(?:is|are)\s+(?:\w+ly\s+)?"
    rf"(?:about|on|concerned with|focused on|devoted to|centered on|centred on|related to|based on)|(?:\w+ly\s+)?"
    rf"(?:{VERB_LEAD}|concentrates?|dwells?|touch(?:es)?|depends?|draws?)(?:\s+{LEAD_PREP})?)\s+(?P<aspect>.+)$"
)
# an aside after the aspect: "matplotlib, I already know it", "crypto, since we covered it"
ASIDE_TAIL = re.compile(
    r"\s*[,(]\s*(?:i|we|i'm|i've|i already|we already|since|because|as i|as we|as the user|even if|even when|even though|"
    r"(?:which|that|who) (?:i|we|the user|users|they|you|he|she))\b.*$",
    re.IGNORECASE,
)
# a verdict on the previous short sentence: "crypto? not interested." / "Reviews: skip."
VERDICT_ALONE = _compile(
    r"^(?:not interested|no thanks|no thank you|not relevant|irrelevant|not needed|not wanted|skip(?: it| that| those)?|"
    r"pass|nope|no|not for me|don't care|do not care|don't need (?:it|that|those)|not useful)$"
)
# "I find X unhelpful", "We consider X irrelevant", "The user regards X as off-topic"
FIND_VERDICT = _compile(
    r"^(?:personally,?\s+)?(?:i|we|the user|users|they)\s+(?:find|consider|deem|regard|judge|think of|see)\s+(?P<aspect>.+?)\s+"
    r"(?:as\s+)?(?:unhelpful|useless|irrelevant|not relevant|non[- ]?relevant|not useful|not helpful|uninteresting|off[- ]topic|"
    r"pointless|unreliable|a waste of time|out of scope)(?P<rest>\b.*)?$"
)
# a parenthetical that excludes: "(kinetic impactors aside)", "(but not cases involving oil pollution)"
PAREN_ASIDE = _compile(
    r"^(?P<aspect>.+?)\s+(?:aside|excluded|not included|set aside|left out|omitted|not wanted|not needed|not relevant)$"
)
# after a verdict, where it holds: "excluded from this topic, as are ..."
VERDICT_SCOPE = _compile(
    r"^(?:from|for|to|in|of)\s+(?:this|the|my|our|these|the user's)\s+(?:topic|search|query|results?|request|review|"
    r"question|purpose|task|study|list|assessment|information need)\b[\s,]*"
)
# "leave the X stuff out of it", "keep X out of the results" (the keep is what comes before)
KEEP_OUT = _compile(
    r"^(?P<keep>.*?)(?:^|,\s*|;\s*|\s+and\s+|\s+but\s+)(?:please\s+)?(?:leave|keep|take|cut|filter|rule)\s+(?P<aspect>[^,;]+?)"
    r"\s+out\b(?:\s+of\s+(?:it|this|that|there|the results?|the search|my results|the list|the picture|consideration))?$"
)
# "with X filtered out / left out / excluded" inside a clause
WITH_REMOVED = _compile(
    r"^(?P<before>.*?),?\s+with\s+(?P<aspect>[^,;]+?)\s+(?:filtered out|left out|excluded|removed|omitted|stripped out|"
    r"taken out)(?P<after>\b.*)$"
)
# the exclusion first: "Excluding anything on X, find studies on Y"
LEADING_CUE = _compile(
    r"^(?:excluding|except for|except|with the exception of|apart from|aside from|other than|leaving aside|setting aside|"
    r"putting aside|ignoring|barring|not counting|disregarding|skipping|leaving out)\s+(?P<aspect>[^,;]+),\s*(?P<keep>.+)$"
)
# "neither X nor Y should be included / is relevant"
NEITHER_NOR = _compile(
    r"^neither\s+(?P<first>.+?)\s+nor\s+(?P<second>.+?)\s+(?:should|must|shall|will|is|are|can|may)\s+(?:be\s+)?"
    r"(?:included|retrieved|returned|considered|relevant|shown|listed|wanted|used|needed|of interest|counted)$"
)
# an imperative's aspect that runs on into the request: "Steer clear of X and find Y"
THEN_REQUEST = _compile(
    r"\s*(?:,\s*|\s+)(?:and|then|but)\s+(?:please\s+)?(?=(?:find|retrieve|show|give|search|look|get|list|return|provide|"
    r"focus|recommend|suggest|locate|bring|fetch|pull|collect|gather)\b)"
)
# "This topic does not cover X (, and it does not cover Y)"
TOPIC_EXCLUDES = _compile(
    r"^(?:this|the|our|my) (?:topic|search|query|request|question|task|review|information need)\s+(?:does not|doesn't|do not|"
    r"will not|won't|should not|shouldn't)\s+(?:cover|include|concern|extend to|encompass|address|deal with|involve)\s+"
    r"(?P<aspect>.+)$"
)
TOPIC_EXCLUDES_MORE = _compile(
    r",?\s+(?:and|nor)\s+(?:it|this topic|the topic|the search|this search)\s+(?:does not|doesn't|do not|will not)\s+"
    r"(?:cover|include|concern|extend to|encompass|address|deal with|involve)\s+"
)
# "surface codes yes, topological codes no"
YES_NO = _compile(r"^(?P<keep>.+?\byes)\s*[,;]\s*(?P<aspect>.+?)\s*[:\-–—]?\s*\bno$")
# The last resort, composed rather than listed: "<subject> <verb ...> <a negation> ... <a relevance word>", for the
# many ways assessors deny relevance ("X contribute nothing to this topic", "X earns no relevance", "X fall outside
# the information need", "X would be judged as not meeting the criteria", "X is not the focus of this request").
GENERIC_VERDICT = _compile(
    r"^(?P<aspect>.+?)\s+(?P<verdict>(?:is|are|was|were|would|will|should|must|do|does|did|falls?|lies?|earns?|gets?|"
    r"receives?|provides?|contributes?|miss(?:es)?|fails?|deserves?|carr(?:y|ies)|ha(?:ve|s)|holds?|brings?|offers?|"
    r"counts?|meets?|makes?|adds?|lacks?|sits?|belongs?)\b.{0,80}?\b(?:relevan\w*|criteria|criterion|focus|scope|"
    r"topic|information need|request|coverage|credit|bounds|mark|meaning|eligib\w*|inclusion|"
    r"intended (?:sense|meaning|subject))\b.*)$"
)
GENERIC_NEGATION = re.compile(
    r"\b(?:not|no|n't|never|nothing|none|fails?|failing|miss(?:es)?|outside|beyond|out of|ineligible|insufficient|"
    r"zero|non-?relevant|irrelevant|lacks?|without)\b|n't\b",
    re.IGNORECASE,
)
# a verdict about how relevance is judged, not an exclusion ("has no bearing on relevance", "does not affect")
GENERIC_LOOSENING = re.compile(
    r"\b(?:bearing|affect|affects|impact|influence|matter|matters|irrespective|regardless|either way|still|also|"
    r"equally|as well|too|required|necessary|needed to|have to|has to|need to|needs to|must be|only if|unless|if|"
    r"can be|may be|could be|might be|can still|may still)\b",
    re.IGNORECASE,
)
# "Examples of non-relevant documents include X", "Non-relevant documents are those that focus on X"
NONRELEVANT_INCLUDE = _compile(
    r"^(?:examples of )?(?:non[- ]?relevant|irrelevant|unwanted|excluded|ineligible)\s+(?:documents?|passages?|results?|"
    r"articles?|sources?|items?|papers?|studies|materials?|content|texts?|pages?)\s+(?:include|includes|are|would be|"
    r"will be|comprise|cover|would include)\s+(?:those\s+(?:that|which|who)\s+(?:\w+\s+)?(?:{LEAD_PREP}\s+)?|"
    r"(?:ones|those)\s+(?:about|on|with|concerning|regarding|dealing with)\s+)?(?P<aspect>.+)$".replace("{LEAD_PREP}", LEAD_PREP)
)
# "Constraint: exclude X", "Restriction: no X", "Filter: not X"
LABEL_THEN_RULE = _compile(
    r"^(?:constraints?|restrictions?|filters?|conditions?|requirements?|rules?|notes?|exclusion criteri(?:a|on)|criteria)"
    r"\s*[:\-–—]\s*(?P<rule>.+)$"
)
# the subject alone names the item ("A relevant document", "Documents", "They"): nothing to keep
ITEM_ONLY = _compile(
    rf"^(?:(?:a|an|the|any|all|every|each|relevant|retrieved|returned|such|these|those|good|useful)\s+)*(?:{ITEM}|it|they)$"
)
# elliptical, after a sentence that says what is relevant: "Documents on lab tests are relevant. Documents on
# field trials are not." (only taken where the instruction already said "are relevant/wanted/of interest")
ELLIPTIC = _compile(r"^(?P<aspect>.+?)\s+(?:are|is|were|was)(?:\s+not|n't)(?:\s+(?:relevant|either))?$")
RELEVANT_SAID = _compile(
    r"\b(?:are|is|were|was|be)\s+(?:also\s+|highly\s+|very\s+)?(?:relevant|wanted|of interest|useful|in scope|on[- ]topic)\b"
)
# "If a document talks about X, it is not relevant": the condition is the aspect
CONDITION_SUBJECT = _compile(
    r"^(?:if|when|whenever|where|once|in case)\s+(?P<condition>.+?),?\s+(?:then\s+)?(?:it|they|this|that)$"
)
# "Documents are not relevant if they mention X": the condition after a bare subject
CONDITION_REST = _compile(
    rf"^(?:if|when|whenever|where|once|in case|because|as)\s+(?:they|it)\s+(?:only\s+|mainly\s+|mostly\s+)?"
    rf"(?:{VERB_LEAD}|are|is)(?:\s+{LEAD_PREP})?\s+(?P<aspect>.+)$"
)
# a gerund left at the head of an aspect ("without mentioning batteries")
GERUND_HEAD = _compile(
    r"^(?:mentioning|discussing|describing|covering|addressing|focusing on|talking about|dealing with|involving|"
    r"referring to|including|featuring|concerning|relating to|touching on|relying(?: only| solely| mainly)? on|"
    r"based(?: only| solely| mainly)? on|using)\s+"
)


# "Not X but Y (is what I want)": X excluded, Y kept ("not only X but also Y" is guarded as no exclusion)
NOT_BUT = _compile(r"^not\s+(?P<aspect>[^,;]+?),?\s+but(?: rather)?\s+(?P<keep>.+)$")
# a list continued in the same clause: "X is not relevant, as is Y / and so are Y / nor are Y"
SAME_CLAUSE_MORE = _compile(
    r"^,?\s*(?:as (?:is|are|do|does|should|must|would|will)|and so (?:is|are|do|does|should|must|would|will)|"
    r"nor (?:is|are|do|does|should|must)|and neither (?:is|are|should|must)|as should|"
    r"as are|and the same (?:goes )?for|and likewise|and also|and)\s+(?P<aspect>.+?)(?:,?\s+(?:either|too|as well))?$"
)
# list continued: "Also X." after an exclusion sentence
CONTINUATION = _compile(
    r"^(?:(?:neither|nor|and neither|and nor) (?:are|is|do|does|should|would|will|can)|also|and also|and|or|nor|"
    r"same (?:goes )?for|likewise|similarly|ditto|as well as|plus|or any|and any|"
    r"and no|or no|also no|nor any|neither)\b[\s,:]*(?P<aspect>.+)$"
)
SHORT_STOP = re.compile(
    r"^(?:no|not|none|nothing|never|nor|neither|without|except|excluding|minus|zero)\s+"
    r"(?:more|less|later|earlier|longer|shorter|matter|need|doubt|one|other|further|exception|problem|worries|"
    r"difference|preference|particular|specific|strict|hard|restriction|limit|limitation|requirement|constraint|"
    r"date|time|language|format|region|length|age|year|more than|less than|only|just|merely|necessarily|always|"
    r"all|everything|surprise|wonder|way|relevant|irrelevant|applicable|important|needed|required|sure|exactly|"
    r"really|quite|bad|good|much|many|too|very|yet|now|here|there)\b",
    re.IGNORECASE,
)
VERB_IN_ASPECT = re.compile(
    r"\b(?:is|are|was|were|be|been|being|has|have|had|must|should|may|might|can|could|will|would|shall|do|does|did)\b",
    re.IGNORECASE,
)
