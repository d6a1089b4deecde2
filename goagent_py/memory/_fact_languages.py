"""Spanish, French and German first-person facts, read as the English ones are.

:mod:`goagent_py.memory._fact_slots` reads English; these patterns give the model-free decider
the slots that change most in the languages most users of the chat write besides English:
where the user lives (and moves to), where and as what they work, their name, age and origin,
and the words that take one back ("ya no", "ne ... plus", "nicht mehr", and the plain
negation). The slots are the English ones, so "I live in Lisbon." is replaced by "Ich bin nach
München gezogen." A sentence about someone else ("Mi hermano vive en Roma", "Mon frère habite
à Rome") or someone else's words about the user ("Mi madre dice que vivo en Roma") is not
read. Any other language, or another kind of fact, is left to the caller: added as said.

Pure and small, like the English patterns: a list, not a grammar. Returns plain tuples (the
caller builds its ``Fact``), so this module imports nothing of the parser's.
"""

from __future__ import annotations

import re

__all__ = ["Parsed", "parse_other"]

Parsed = tuple[str, str, str, str, str]
"""(slot, value, kind, canonical, words): kind "set" or "retract"; canonical "" keeps the
user's words; words is what a retraction takes back, said positively."""

# A noun, not the verb: "mi trabajo en Google", "el vivo", "un trabajo para".
_NOT_VERB = r"(?<!\bmi )(?<!\bmis )(?<!\bel )(?<!\bun )(?<!\bsu )(?<!\btu )(?<!\bese )"
_PLACE = r"(?P<p>à|a|en|au|aux|dans)"

_SET: list[tuple[str, str, str | None]] = [
    # Spanish
    ("home", rf"{_NOT_VERB}\b(?:vivo|resido) (?:ahora |actualmente )?en (?P<v>.+)", None),
    (
        "home",
        r"\b(?:me|nos) (?:he |hemos |acabo de |acabamos de |)(?:mud[ée]|mudamos|mudado|mudar|"
        r"traslad[ée]|trasladamos|trasladado|trasladar) (?:a|para) (?P<v>.+)",
        "Vivo en {v}.",
    ),
    ("employer", rf"{_NOT_VERB}\btrabajo (?:ahora |actualmente )?(?:en|para) (?P<v>.+)", None),
    ("job", rf"{_NOT_VERB}\btrabajo (?:ahora |actualmente )?(?:como|de) (?P<v>.+)", None),
    ("name", r"\bme llamo (?P<v>.+)", None),
    ("name", r"\bmi nombre es (?P<v>.+)", None),
    ("age", r"\btengo (?P<v>\d{1,3}) años", None),
    ("origin", r"\bsoy (?:originari[oa] )?de (?P<v>.+)", None),
    # French
    ("home", rf"\bj'habite (?:maintenant |désormais |actuellement )?{_PLACE} (?P<v>.+)", None),
    (
        "home",
        rf"\b(?:je|nous) (?:vis|vivons|réside|résidons) (?:maintenant |désormais )?{_PLACE} "
        r"(?P<v>.+)",
        None,
    ),
    (
        "home",
        rf"\b(?:j'ai|nous avons) (?:déménagé|emménagé) {_PLACE} (?P<v>.+)",
        "J'habite {p} {v}.",
    ),
    (
        "home",
        rf"\b(?:je me suis|nous nous sommes) installée?s? {_PLACE} (?P<v>.+)",
        "J'habite {p} {v}.",
    ),
    ("employer", r"\bje travaille (?:maintenant |désormais )?(?:chez|pour) (?P<v>.+)", None),
    ("job", r"\bje travaille (?:maintenant |désormais )?comme (?P<v>.+)", None),
    ("name", r"\bje m'appelle (?P<v>.+)", None),
    ("name", r"\bmon (?:pré)?nom est (?P<v>.+)", None),
    ("age", r"\bj'ai (?P<v>\d{1,3}) ans", None),
    # German
    (
        "home",
        r"\b(?:ich|wir) (?:wohne|wohnen|lebe|leben) (?:jetzt |nun |inzwischen |mittlerweile )?"
        r"in (?P<v>.+)",
        None,
    ),
    (
        "home",
        r"\b(?:ich bin|wir sind) (?:jetzt |gerade |kürzlich |vor kurzem )?nach (?P<v>.+?) "
        r"(?:gezogen|umgezogen)",
        "Ich wohne in {v}.",
    ),
    ("employer", r"\bich arbeite (?:jetzt |nun |inzwischen )?(?:bei|für) (?P<v>.+)", None),
    ("job", r"\bich arbeite (?:jetzt |nun )?als (?P<v>.+)", None),
    ("name", r"\bich heiße (?P<v>.+)", None),
    ("name", r"\bmein name ist (?P<v>.+)", None),
    ("age", r"\bich bin (?P<v>\d{1,3})(?: jahre alt)?$", None),
]
_SET_RE = [(slot, re.compile(p, re.IGNORECASE), t) for slot, p, t in _SET]

# Negations, said positively for the patterns above: "ya no vivo en X" is "vivo en X" taken
# back; "je n'habite plus à X" is "j'habite à X"; "ich wohne nicht mehr in X" is "ich wohne
# in X". "Ya no", "ne ... plus", "nicht mehr" say a change; the plain negation denies.
_NEGATIONS = [
    re.compile(r"\b(?:ya no|no) (?P<rest>(?:vivo|resido|trabajo) .+)", re.IGNORECASE),
    re.compile(
        r"\b(?P<who>je|nous) n(?:e |')(?P<verb>\w+) (?:plus|pas) (?P<rest>.+)", re.IGNORECASE
    ),
    re.compile(
        r"\b(?P<who>ich|wir) (?P<verb>wohne|wohnen|lebe|leben|arbeite|arbeiten) "
        r"(?:nicht mehr|nicht) (?P<rest>.+)",
        re.IGNORECASE,
    ),
]
# Someone else's words about the user: "Mi madre dice que vivo en Roma", "Il dit que
# j'habite à Rome", "Sie sagt, dass ich in Rom wohne".
_REPORTED = re.compile(
    r"\b(?:dice|dijo|dicen|cree|piensa|afirma|dit|disait|a dit|croit|pense|prétend|sagt|"
    r"sagte|meint|glaubt|denkt|behauptet)\b",
    re.IGNORECASE,
)
# A hypothetical or a condition before it: "Si vivo en Roma, ...", "Si j'habite à Lyon, ...",
# "Falls ich in Hamburg wohne, ..." (the German verb comes last there, so the patterns above
# rarely match it anyway).
_IF = re.compile(r"\b(?:si|s'|wenn|falls|sofern|ojalá|imagina|imagine|supongamos)\b", re.I)
# Where a value ends: a clause, a reason or a time phrase after it, in any of the three.
_VALUE_END = re.compile(
    r"\s*(?:[,;:()]|\.(?:\s|$)|!|\?| - "
    r"| (?:y|e|pero|porque|desde|hace|ahora|ya|también|con|cuando|donde|que) "
    r"| (?:et|mais|parce|depuis|il y a|maintenant|aussi|avec|quand|où|qui|que) "
    r"| (?:und|aber|weil|seit|jetzt|nun|auch|mit|wenn|wo|die|der|das|dass) "
    r"| (?:ahora|maintenant|jetzt|nun|mehr|plus|désormais|actualmente)$)",
    re.IGNORECASE,
)


def _asserted(before: str) -> bool:
    """Whether what follows ``before`` is the user's assertion: not someone else's words, not
    a hypothetical."""
    return not (_REPORTED.search(before) or _IF.search(before))


def _value(raw: str) -> str:
    value = _VALUE_END.split(raw.strip(), maxsplit=1)[0]
    return value.strip().strip("\"'\u201c\u201d\u00ab\u00bb").rstrip(".!?\u2026").strip()


def _set(text: str) -> tuple[str, str, str] | None:
    for slot, pattern, template in _SET_RE:
        match = pattern.search(text)
        if match is None or not _asserted(text[: match.start()]):
            continue
        value = _value(match.group("v"))
        if not value:
            continue
        place = match.groupdict().get("p") or ""
        canonical = template.format(v=value, p=place.lower()) if template else ""
        return slot, value, canonical
    return None


def _positive(match: re.Match[str]) -> str:
    """The negated sentence said positively ("je n'habite plus à Paris": "j'habite à Paris")."""
    groups = match.groupdict()
    if "verb" not in groups:
        return match.group("rest")
    who, verb, rest = groups["who"], groups["verb"], groups["rest"]
    if who.casefold() == "je" and verb[:1].casefold() in "aeiouhéè":
        return f"j'{verb} {rest}"
    return f"{who} {verb} {rest}"


def parse_other(text: str) -> Parsed | None:
    """``text`` (a sentence, no question) as a Spanish, French or German fact of the user's,
    or None."""
    text = text.replace("\u2019", "'")
    for negation in _NEGATIONS:
        match = negation.search(text)
        if match is None or not _asserted(text[: match.start()]):
            continue
        positive = _positive(match)
        found = _set(positive)
        if found is not None:
            slot, value, _ = found
            return slot, value, "retract", "", positive
    found = _set(text)
    if found is None:
        return None
    slot, value, canonical = found
    return slot, value, "set", canonical, ""
