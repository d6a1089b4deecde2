"""English first-person facts read as (slot, value): the model-free decider's parser.

"I moved to Porto last month." is ``Fact("home", "Porto", "set", canonical="I live in
Porto.")``; "I also like coffee" is a ``multi`` fact (likes never replace each other);
"Forget that I live in Lisbon" and "I don't work at Acme anymore" are ``retract`` facts;
"That's no longer true." retracts the latest memory (``slot=""``). Anything else is None: the
decider adds it as today. Pure and small on purpose: a pattern list, not a grammar.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal

from goagent_py.memory._fact_languages import parse_other
from goagent_py.memory._questions import is_question
from goagent_py.memory._subjects import (
    WHO,
    about_someone_else,
    asserted,
    person_named,
    someone_else,
    third_person,
)

__all__ = [
    "PARTNERS",
    "Fact",
    "is_about_someone",
    "is_retraction",
    "named_as",
    "parse_fact",
    "same_slot",
    "same_value",
]

FactKind = Literal["set", "multi", "retract"]


@dataclass(slots=True, frozen=True)
class Fact:
    """One parsed statement: ``slot`` holds one value at a time for a ``set`` fact.

    ``event`` marks a retraction said as something that happened ("I quit Acme", "I sold my
    car"): when it retracts nothing known, it is kept as a fact instead of dropped.

    ``words`` is what a retraction takes back, said positively ("I eat meat" for "I no longer
    eat meat"): when no memory of ``slot`` matches, a memory the rules cannot read as a slot
    holding all its content words is retracted. ``more``: the sentence says more than the
    retraction ("I no longer like blue, my favourite colour is green"), so it is kept as said
    too, whatever it retracts. ``past``: said in the past ("I used to live in Paris"): it
    retires the present fact it names and is kept as said; the present fact said later does
    not retire it (it stays true of the past). ``family``: a partner named without the
    relation ("I'm married to Grace", "I broke up with Leo"): it is about whichever partner
    the user has, a wife's or a boyfriend's slot as much as "partner".
    """

    slot: str
    value: str
    kind: FactKind
    canonical: str = ""
    event: bool = False
    words: str = ""
    more: bool = False
    past: bool = False
    family: bool = False


# (slot, pattern, template): a template rewrites an indirect statement ("I moved to X") as
# the fact it implies ("I live in X."); None keeps the user's words.
_SET: list[tuple[str, str, str | None]] = [
    (
        "home",
        r"\b(?:i|we)(?:'ve| have)? (?:just |recently |finally )?(?:moved|relocated) "
        r"(?:back |over |house |home )?to (?P<v>.+)",
        "I live in {v}.",
    ),
    (
        "home",
        r"\b(?:i|we)(?:'ve| have)? (?:just |recently |finally )?(?:moved|relocated) "
        r"(?:away )?from (?:(?-i:[A-Z])[\w-]*)(?: (?-i:[A-Z])[\w-]*)* to (?P<v>.+)",
        "I live in {v}.",
    ),
    (
        "home",
        r"\b(?:since|after) (?:the|my|our) (?:move|relocation) to (?P<v>.+)",
        "I live in {v}.",
    ),
    (
        "home",
        r"\b(?:since|after) (?:i |we )?(?:moved|moving|relocated|relocating) "
        r"(?:back |over )?to (?P<v>.+)",
        "I live in {v}.",
    ),
    (
        "home",
        r"\b(?:i|we)(?:'ve| have) been (?:living|based) in (?P<v>.+)",
        "I live in {v}.",
    ),
    (
        "home",
        r"\b(?:packed up|packed our bags|packed my bags) and (?:left|moved|headed|went) "
        r"(?:for|to) (?P<v>.+)",
        "I live in {v}.",
    ),
    ("home", r"^(?:my |our )?home is (?:now )?(?:in )?(?P<v>(?-i:[A-Z]).+)", "I live in {v}."),
    (
        "home",
        r"^(?P<v>(?-i:[A-Z])[\w-]*(?: (?-i:[A-Z])[\w-]*)?) is (?:my |our )?(?:new )?home(?: now)?$",
        "I live in {v}.",
    ),
    (
        "home",
        r"\b(?:i'm|i am|we're|we are) (?:now )?(?:a |an )?(?P<v>(?-i:[A-Z])[\w-]*) residents?\b",
        "I live in {v}.",
    ),
    (
        "home",
        r"\b(?:i'm|i am|we're|we are) (?:now )?in (?P<v>(?-i:[A-Z])[\w-]*(?: (?-i:[A-Z])[\w-]*)?) "
        r"(?:now|these days|nowadays)\b",
        "I live in {v}.",
    ),
    (
        "home",
        r"\b(?:my|our) (?:new )?(?:place|flat|apartment|house|home|address) "
        r"(?:is )?in (?P<v>(?-i:[A-Z]).+)",
        "I live in {v}.",
    ),
    (
        "home",
        r"\bnow that (?:i|we) (?:live|am living|'m living|'m|am) in (?P<v>.+)",
        "I live in {v}.",
    ),
    ("home", r"\b(?:i|we) (?:now |currently |still |actually )?live in (?P<v>.+)", None),
    (
        "home",
        r"\b(?:i'm|i am|we're|we are) (?:now |currently )?(?:living|based) in (?P<v>.+)",
        "I live in {v}.",
    ),
    (
        "home",
        r"\bmy (?:new |current )?(?:home|house|flat|apartment) is in (?P<v>.+)",
        "I live in {v}.",
    ),
    ("home", r"\b(?:i|we) (?:now )?call (?P<v>.+?) home\b", "I live in {v}."),
    ("name", r"\bmy (?:first |full )?name is (?:now )?(?P<v>.+)", None),
    ("name", r"\b(?:please )?call me (?P<v>.+)", "My name is {v}."),
    (
        "name",
        r"\b(?:everyone|everybody|people|my friends|friends|most people) calls? me (?P<v>.+)",
        "My name is {v}.",
    ),
    ("name", r"\bi(?:'m| am) called (?P<v>.+)", "My name is {v}."),
    ("name", r"\bi go by (?P<v>.+)", "My name is {v}."),
    ("name", r"\bi changed my name to (?P<v>.+)", "My name is {v}."),
    ("employer", r"\bi (?:now |currently |still )?work (?:at|for) (?P<v>.+)", None),
    ("employer", r"\bi(?:'m| am) (?:now )?working (?:at|for) (?P<v>.+)", "I work at {v}."),
    (
        "employer",
        r"\b(?:i (?:just |recently )?|and (?:then |now |just )?)"
        r"(?:joined|started (?:a new job |working )?at) "
        r"(?P<v>.+)",
        "I work at {v}.",
    ),
    ("employer", r"\bi (?:just )?got a (?:new )?job (?:at|with) (?P<v>.+)", "I work at {v}."),
    (
        "employer",
        r"\bi (?:really |absolutely )?(?:love|like|enjoy|hate|have|am enjoying|'m enjoying) "
        r"my (?:new )?(?:job|work|position|role) (?:at|with) (?P<v>(?-i:[A-Z]).+)",
        "I work at {v}.",
    ),
    ("employer", r"\bmy (?:new |current )?employer is (?P<v>.+)", None),
    (
        "employer",
        r"\b(?:got |was |been |just )?(?:hired|recruited|taken on) (?:by|at) (?P<v>.+)",
        "I work at {v}.",
    ),
    (
        "employer",
        r"\b(?:i'm|i am) (?:now |currently )?(?:employed|working) (?:by|at|for) (?P<v>.+)",
        "I work at {v}.",
    ),
    (
        "employer",
        r"\b(?:started|took|accepted|landed|got|have|began) (?:a |my |the )?(?:new )?"
        r"(?:job|position|role|post) (?:at|with) (?P<v>.+)",
        "I work at {v}.",
    ),
    ("employer", r"\bsince (?:i )?(?:joined|joining|started at) (?P<v>.+)", "I work at {v}."),
    ("job", r"\bi (?:now )?work as (?:a |an )?(?P<v>.+)", None),
    (
        "job",
        r"\bmy (?:new |current )?(?:job|job title|profession|occupation|role) is "
        r"(?:now )?(?:a |an )?(?P<v>.+)",
        None,
    ),
    ("job", r"\bi (?:just )?became (?:a |an )(?P<v>.+)", "I work as a {v}."),
    ("job", r"\bi(?:'m| am) (?:now )?(?:a|an) (?P<v>[a-z-]+(?: [a-z-]+)?)$", None),
    (
        "phone",
        r"\bmy (?:new |current )?(?:mobile |cell |phone |telephone )?(?:phone )?number "
        r"is (?:now )?(?P<v>.+)",
        "My phone number is {v}.",
    ),
    ("phone", r"\bmy (?:new )?(?:mobile|cell|phone) is (?P<v>.+)", "My phone number is {v}."),
    ("phone", r"\byou can (?:reach|call|text) me (?:at|on) (?P<v>.+)", "My phone number is {v}."),
    (
        "email",
        r"\bmy (?:new )?e-?mail(?: address)? is (?:now )?(?P<v>.+)",
        "My email address is {v}.",
    ),
    ("age", r"\bi(?:'m| am) (?:now )?(?P<v>\d{1,3})(?: years old| years of age)?(?: now)?$", None),
    ("age", r"\bi (?:just )?turned (?P<v>\d{1,3})", "I am {v} years old."),
    ("age", r"\bmy age is (?P<v>\d{1,3})", None),
    (
        "age",
        r"\b(?:i )?(?:just )?(?:had|celebrated|turned) my (?P<v>\d{1,3})(?:st|nd|rd|th) "
        r"birthday",
        "I am {v} years old.",
    ),
    (
        "partner",
        r"\bmy (?:new |current )?(?P<rel>wife|husband|partner|girlfriend|boyfriend|spouse|"
        r"fianc[ée]e?)(?:'s name)? is (?:now )?(?:called |named )?(?P<v>.+)",
        None,
    ),
    (
        "partner",
        r"\bi(?:'m| am) (?:now )?(?:married to|dating|engaged to) (?P<v>(?-i:[A-Z]).+)",
        "My partner is {v}.",
    ),
    # "I'm seeing Sam." is a partner; "I'm seeing Dr. Patel on Monday", "I'm seeing Sam
    # tomorrow" and "I'm with Vodafone" are an appointment and a provider: only a name that
    # ends the sentence, no title.
    (
        "partner",
        r"\bi(?:'m| am) (?:now )?seeing (?!(?:Dr|Mr|Mrs|Ms|Prof)\b)"
        r"(?P<v>(?-i:[A-Z])[\w'-]*)(?: now| these days)?$",
        "My partner is {v}.",
    ),
    ("partner", r"\bi (?:just )?married (?P<v>.+)", "My partner is {v}."),
    (
        "partner",
        r"\bi (?:have|got|'ve got) a new (?P<rel>wife|husband|partner|girlfriend|boyfriend|"
        r"spouse),? (?:called |named )?(?P<v>(?-i:[A-Z]).+)",
        "My {rel} is {v}.",
    ),
    ("car", r"\bi (?:now )?drive (?:a |an )?(?P<v>.+)", None),
    (
        "car",
        r"\bmy (?:new |current )?car is (?:now )?(?:a |an |(?=(?-i:[A-Z])))(?P<v>.+)",
        "I drive a {v}.",
    ),
    ("car", r"\bi (?:just )?bought a (?:new )?car,? (?:a |an )?(?P<v>.+)", "I drive a {v}."),
    (
        "car",
        r"\b(?:traded in|sold|swapped|replaced|got rid of) (?:my |the |our )?(?:old )?"
        r"[\w-]+ (?:for|and bought|and got|with) (?:a |an )?(?:new )?(?P<v>(?-i:[A-Z]).+)",
        "I drive a {v}.",
    ),
    ("origin", r"\bi(?:'m| am) (?:originally )?from (?P<v>.+)", None),
]
_SET_RE = [(slot, re.compile(p, re.IGNORECASE), t) for slot, p, t in _SET]

# "my favourite colour is blue", "my sister is Meera", "my dog is called Rex": the words
# between "my" and "is" are the slot (one value at a time); "my brother" is another slot.
_GENERIC = re.compile(
    r"\bmy (?P<slot>(?:[a-z'-]+ ){0,2}[a-z'-]+?)(?:'s name)? (?:is|are) "
    r"(?:now |called |named |actually )?(?P<v>.+)",
    re.IGNORECASE,
)
_MULTI = re.compile(
    r"\bi (?:also |really |still |do )?(?P<slot>like|love|enjoy|prefer|speak|play|collect|"
    r"have|own|know|grow|study|read|watch|listen to|support) (?:to )?(?P<v>.+)",
    re.IGNORECASE,
)
_RETRACT_LAST = re.compile(
    r"^(?:(?:no|nope|wait|sorry|actually),? )*(?:that'?s|that is|this is|it'?s|it is) "
    r"(?:no longer|not) (?:true|the case|right|correct|accurate)(?: any ?more)?\W*$"
    r"|^(?:scratch|ignore|disregard) (?:that|what i (?:just )?said)\W*$",
    re.IGNORECASE,
)
_FORGET = re.compile(
    r"^(?:(?:please|can you|could you|kindly),? )*(?:forget|delete|remove|erase) "
    r"(?:(?:the fact|everything you know about)? ?(?:that|about) )?(?P<rest>.+)",
    re.IGNORECASE,
)
_NO_LONGER = re.compile(
    r"\b(?P<who>i|we)(?: (?:no longer|don't|do not|never))+ (?P<rest>.+?)(?: any ?more)?\W*$"
    r"|\b(?P<who2>i'm|i am|we're|we are) no longer (?P<rest2>.+?)\W*$",
    re.IGNORECASE,
)
_MY_NO_LONGER = re.compile(
    r"\bmy (?P<slot>(?:[a-z'-]+ ){0,2}[a-z'-]+?) is (?:no longer|not) (?P<v>.+?)(?: any ?more)?"
    r"\W*$",
    re.IGNORECASE,
)
_HAVE_NO_MORE = re.compile(
    r"\bi (?:don't|do not|no longer) (?:have|own) (?:a|an|my) (?P<slot>[a-z-]+)(?: any ?more)?"
    r"\W*$",
    re.IGNORECASE,
)
# Where a value ends: a clause, a reason or a time phrase after it.
_VALUE_END = re.compile(
    r"\s*(?:[,;:()\uff0c\uff1b\uff1a\uff08\uff09\u3001\u3002\uff01\uff1f\u060c\u061f]"
    r"|\.(?:\s|$)|!|\?| - | and | but | because | since | so | as | when | where "
    r"| which | who | with | from now\b| for (?:a|the|about|over|two|three|\d)| last | this "
    r"| next "
    r"| a (?:few|couple|month|week|year) | (?:two|three|four|several) | ago\b"
    r"| (?:years|months|weeks|days|ages) ago\b| now\b"
    r"| these days| nowadays| recently| anymore| any more| at the moment| currently| again\b"
    r"| full[- ]time| part[- ]time| too\b| as well\b| instead\b| in (?:january|february|march"
    r"|april|may|june|july|august|september|october|november|december|spring|summer|autumn"
    r"|fall|winter|\d{4})\b| on (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday"
    r"|weekdays|weekends)\b| as (?:a|an)\b)",
    re.IGNORECASE,
)
_ADJECTIVES = frozenset({"new", "current", "old", "latest", "present", "real", "actual"})
_SPELLING = {"favorite": "favourite", "color": "colour", "colors": "colours"}
_SLOT_ALIASES = {
    "number": "phone",
    "phone number": "phone",
    "mobile number": "phone",
    "cell number": "phone",
    "phone": "phone",
    "mobile": "phone",
    "name": "name",
    "first name": "name",
    "full name": "name",
    "email": "email",
    "email address": "email",
    "e-mail": "email",
    "car": "car",
    "fiance": "fiancé",
    "fiancee": "fiancée",
    "job": "job",
    "job title": "job",
    "profession": "job",
    "occupation": "job",
    "employer": "employer",
    "age": "age",
    "home": "home",
    "address": "address",
    "home address": "address",
}
_NOT_JOBS = frozenset(
    {
        "vegetarian",
        "vegan",
        "fan",
        "morning person",
        "night owl",
        "bit",
        "lot",
        "little",
        "big fan",
        "huge fan",
        "new parent",
        "parent",
        "dad",
        "mum",
        "mom",
        "father",
        "mother",
    }
)
_PREFIX = re.compile(
    r"^(?:(?:ok|okay|so|well|oh|hey|hi|hello|actually|by the way|btw|fyi|also|anyway|update|"
    r"news|quick update|just so you know|good news|guess what)\W+)+",
    re.IGNORECASE,
)


def _clean_value(raw: str) -> str:
    value = _VALUE_END.split(raw, maxsplit=1)[0]
    value = value.strip().strip("\"'\u201c\u201d").rstrip(".!?\u2026\u3002\uff01\uff1f").strip()
    if value.lower().startswith("the ") and len(value.split()) > 1:
        return value  # "the Netherlands": the article is part of the name
    return value


def _norm_slot(raw: str) -> str:
    words = [_SPELLING.get(w, w) for w in raw.lower().split() if w not in _ADJECTIVES]
    slot = re.sub(r"'s name$", "", " ".join(words))  # "my dog's name" is who "my dog" is
    return _SLOT_ALIASES.get(slot, slot)


# The relations a break-up ends ("I broke up with Leo" takes back "My boyfriend is Leo."):
# each is a slot of its own (a wife's employer is not a husband's), and a partner named
# without one ("I'm dating Leo") is "partner".
PARTNERS = frozenset(
    ["partner", "wife", "husband", "girlfriend", "boyfriend", "spouse", "fiancé", "fiancée"]
)


def same_slot(known: str, said: Fact) -> bool:
    """Whether a memory of slot ``known`` is what ``said`` is about: its slot; for a partner
    named without the relation (``family``: "I broke up with Leo", "I'm now married to
    Grace"), any partner's ("My wife is Ana." and "My partner is Sam." are two people); or
    the same fact of one person named with and without the relation ("brother tom:home" and
    "tom:home": "My brother Tom lives in Oslo." and "Tom moved to Bergen.")."""
    if known == said.slot:
        return True
    if said.family:  # the user's partner; someone else's ("tom:partner") is their slot alone
        return said.slot == "partner" and known in PARTNERS
    known_who, known_colon, known_what = known.rpartition(":")
    said_who, said_colon, said_what = said.slot.rpartition(":")
    if not (known_colon and said_colon) or known_what != said_what:
        return False
    return bool(named_as(known_who, said_who))


def named_as(a: str, b: str) -> str:
    """The name when ``a`` and ``b`` are one person said two ways, a name alone and the
    relation with it ("tom", "brother tom"); "" otherwise ("sister" and "other sister" are
    two people: "other" is no name)."""
    short, long = sorted((a.split(), b.split()), key=len)
    if len(short) != 1 or len(long) != 2 or long[1] != short[0]:
        return ""
    return short[0] if long[0] in WHO and short[0] not in WHO else ""


def _person_slot(slot: str, value: str) -> str:
    """The slot of "my ``slot`` is ``value``": for a relation one can have several of, the
    person ``value`` names ("sister ana": "My sister is Eva." is another sister, not a new
    name of Ana's); any other slot as it is ("wife", "favourite colour")."""
    if ":" in slot or not slot or slot.split()[-1] not in WHO:
        return slot
    return person_named(slot, value)


def _names_it(slot: str, value: str, said: str) -> bool:
    """Whether ``value`` names the one ``slot`` is about (always, for other slots)."""
    if not slot or slot.split()[-1] not in WHO:
        return True
    if re.search(r"\b(?:called|named|name is)\b", said, re.IGNORECASE):
        return True
    first = value.split()[0]
    return first[:1].isupper() and first not in ("A", "An", "The")


# "I changed my number to 555-0177", "New email: a@b.example": a slot and its new value.
_CHANGED = re.compile(
    r"\b(?:i|we) (?:have |'ve )?(?:just )?(?:changed|updated|switched) (?:my|our) "
    r"(?P<slot>(?:[a-z'-]+ ){0,2}[a-z'-]+?) to (?P<v>.+)",
    re.IGNORECASE,
)
_LABEL = re.compile(
    r"^(?:my )?(?:new|updated|current) (?P<slot>(?:[a-z'-]+ ){0,2}[a-z'-]+?)\s*(?::|is now) "
    r"(?P<v>.+)",
    re.IGNORECASE,
)
# Time adverbs say nothing about the fact: "my favourite band these days is Muse".
_TIME_WORDS = re.compile(
    r",?\s\b(?:these days|nowadays|at the moment|at present|right now|currently)\b,?",
    re.IGNORECASE,
)
_TEMPLATES = {
    "home": "I live in {v}.",
    "phone": "My phone number is {v}.",
    "email": "My email address is {v}.",
    "employer": "I work at {v}.",
    "name": "My name is {v}.",
}


def _slot_change(text: str) -> Fact | None:
    for pattern in (_CHANGED, _LABEL):
        match = pattern.search(text)
        if match is None:
            continue
        slot = _norm_slot(match.group("slot"))
        value = _clean_value(match.group("v"))
        if slot and value:
            template = _TEMPLATES.get(slot)
            return Fact(slot, value, "set", template.format(v=value) if template else "")
    return None


_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|we|we're|we've|my|our|me)\b", re.IGNORECASE)


def _set_fact(text: str) -> Fact | None:
    for slot, pattern, template in _SET_RE:
        match = pattern.search(text)
        if match is None:
            continue
        if not _FIRST_PERSON.search(match.group(0)) and about_someone_else(text, match.start()):
            continue  # what a pattern without a subject says is about someone else here
        value = _clean_value(match.group("v"))
        if not value:
            continue
        if slot == "job" and (value.lower() in _NOT_JOBS or " of " in value.lower()):
            continue
        if not _names_it(slot, value, match.group(0)):
            continue
        rel = match.groupdict().get("rel")
        if rel:  # "my wife is Ana", "my husband is Bob": each relation is a slot of its own
            slot = _norm_slot(rel)
        canonical = template.format(v=value, rel=(rel or "").lower()) if template else ""
        return Fact(slot, value, "set", canonical, family=slot == "partner" and not rel)
    changed = _slot_change(text)
    if changed is not None:
        return changed
    match = _GENERIC.search(text)
    if match is not None:
        value = _clean_value(match.group("v"))
        slot = _norm_slot(match.group("slot"))
        if value and slot and not value.lower().startswith(("not ", "no longer")):
            # "My car is red" says what the car is like, not which car (the car patterns
            # above read "my car is a Tesla").
            if slot == "car" or not _names_it(slot, value, match.group(0)):
                return None
            return Fact(_person_slot(slot, value), value, "set")
    return None


def _multi_fact(text: str) -> Fact | None:
    match = _MULTI.search(text)
    if match is None:
        return None
    value = _clean_value(match.group("v"))
    if not value:
        return None
    return Fact(match.group("slot").lower(), value, "multi")


_LEFT_JOB = re.compile(
    r"\bi (?:just )?(?:quit|left|resigned from|was let go from|got fired from|was fired from|"
    r"was laid off from|got laid off from) (?:my (?:job|position|role) (?:at|with) |the job at )?"
    r"(?P<v>(?-i:[A-Z])[\w&.-]*(?: (?-i:[A-Z])[\w&.-]*)*)",
    re.IGNORECASE,
)
_LEFT_ANY_JOB = re.compile(
    r"\bi (?:just )?(?:quit|left|lost) my job\b|\bi(?:'m| am) (?:now )?(?:unemployed|"
    r"between jobs|out of work)\b",
    re.IGNORECASE,
)
_BROKE_UP = re.compile(
    r"\b(?:i|we) (?:just )?(?:broke up|split up|separated|divorced|got divorced)"
    r"(?: (?:with|from) (?P<v>(?-i:[A-Z])\w+))?"
    r"|^(?P<v2>(?-i:[A-Z])\w+) and i (?:have |just )?(?:broke up|split up|separated|"
    r"divorced|got divorced)",
    re.IGNORECASE,
)
_NOT_WITH = re.compile(
    r"\bi(?:'m| am) not (?:with|dating|seeing|married to) (?P<v>(?-i:[A-Z])\w+) any ?more",
    re.IGNORECASE,
)
_SOLD_CAR = re.compile(
    r"\bi (?:just )?(?:sold|got rid of|scrapped|gave away|crashed and lost) (?:my|our|the) car\b",
    re.IGNORECASE,
)
_GAVE_UP = re.compile(
    r"\bi (?:have |'ve )?(?:just )?(?:stopped|quit|gave up|give up|have given up|dropped) "
    r"(?P<rest>.+)",
    re.IGNORECASE,
)
_MEMORY_WORDS = re.compile(
    r"\s+(?:from|in) (?:your|the) (?:memory|memories|records|notes|files)\b.*$", re.IGNORECASE
)


def _left(text: str) -> Fact | None:
    """Retractions said as an event: a job left, a break-up, a car sold, an activity given
    up (tried only when the sentence states no new value)."""
    job = _LEFT_JOB.search(text)
    if job is not None:
        return Fact("employer", _clean_value(job.group("v")), "retract", event=True)
    if _LEFT_ANY_JOB.search(text):
        return Fact("employer", "", "retract", event=True)
    split = _BROKE_UP.search(text) or _NOT_WITH.search(text)
    if split is not None:
        names = [split.groupdict().get(k) for k in ("v", "v2")]
        partner = next((n for n in names if n), "")
        return Fact("partner", partner, "retract", event=True, family=True)
    if _SOLD_CAR.search(text):
        return Fact("car", "", "retract", event=True)
    gave_up = _GAVE_UP.search(text)
    if gave_up is not None:
        rest = _clean_value(gave_up.group("rest"))
        rest = re.sub(r"^(?:playing|doing|going to|practising|practicing|learning) ", "", rest)
        rest = re.sub(r"^(?:the|my|a|an) ", "", rest)
        if rest:
            return Fact("?", rest, "retract", event=True)
    return None


def is_about_someone(text: str) -> bool:
    """Whether the rules read ``text`` as a fact of someone else's ("Anna works at Globex.",
    "Tom moved to Oslo.", "My wife works at Google."): one of their slots."""
    fact = parse_fact(text)
    return fact is not None and ":" in fact.slot


def is_retraction(text: str) -> bool:
    """Whether ``text`` takes back what was said last ("That's no longer true.")."""
    return bool(_RETRACT_LAST.search(text.strip()))


_NOT_BUT = re.compile(
    r"\b(?P<be>is|are|was)(?:n't| not) (?P<w>[^,;]+?),? (?:it's|it is|they're|they are|but) "
    r"(?:it's |it is |actually )?(?P<v>[^,;]+)$",
    re.IGNORECASE,
)


def parse_fact(text: str) -> Fact | None:
    """``text`` as a fact the model-free decider can reason about, or None."""
    text = _PREFIX.sub("", text.strip().replace("\u2019", "'"))  # a phone's apostrophe (U+2019)
    if not text or is_question(text):
        return None
    text = _TIME_WORDS.sub("", text.rstrip(".!…\u3002\uff01 ")).strip()
    if not asserted(text):
        return None  # "If I moved to Rome...", "My boss said I'm lazy": nothing the user says is so
    other = someone_else(text)
    if other is not None:
        fact = _of_someone(*other)
        if fact is not None:
            return fact
    # "My name isn't Priya, it's Riya" says what the name is, and is stored so.
    said = _NOT_BUT.sub(r"\g<be> \g<v>", text)
    if said != text:
        fact = _parse(said)
        if fact is not None and fact.kind == "set" and not fact.canonical:
            return replace(fact, canonical=said[:1].upper() + said[1:] + ".")
        return fact
    return _parse(text) or _other_language(text)


def _other_language(text: str) -> Fact | None:
    """``text`` read as a Spanish, French or German fact (see
    :mod:`goagent_py.memory._fact_languages`)."""
    parsed = parse_other(text)
    if parsed is None:
        return None
    slot, value, kind, canonical, words = parsed
    if kind == "retract":  # a negation of nothing known is news, kept as said
        return Fact(slot, value, "retract", event=True, words=words)
    return Fact(slot, value, "set", canonical)


def _of_someone(subject: str, who: str, said: str) -> Fact | None:
    """``said`` (what is said of ``subject``, in the first person) read as a fact of theirs:
    in a slot of their own ("brother:home"; who they are is their name slot, "brother"), and
    stored in the third person ("My brother lives in Munich.")."""
    fact = _parse(said)
    if fact is None or fact.slot == "":
        return None
    person = _norm_slot(who)
    if fact.slot == "name":  # "My dog is called Rex": who the dog is, said as the user said it
        return replace(fact, slot=_person_slot(person, fact.value), canonical="")
    slot = fact.slot if fact.slot == "?" else f"{person}:{fact.slot}"
    canonical = third_person(fact.canonical, subject) if fact.canonical else ""
    words = ""
    if fact.words:  # what a retraction takes back, said of them: never a fact of the user's
        words = third_person(fact.words[:1].upper() + fact.words[1:], subject)
    value = words if fact.slot == "?" else fact.value
    return replace(fact, slot=slot, value=value, canonical=canonical, words=words)


def _parse(text: str) -> Fact | None:
    if _RETRACT_LAST.search(text):
        return Fact("", "", "retract")
    forget = _FORGET.match(text)
    if forget is not None:
        rest = _MEMORY_WORDS.sub("", forget.group("rest").strip().rstrip(".!"))
        other = someone_else(rest[:1].upper() + rest[1:])
        parsed = _of_someone(*other) if other is not None else None
        if parsed is None or parsed.kind == "retract":
            parsed = _set_fact(rest) or _multi_fact(rest)
        if parsed is not None:
            return Fact(parsed.slot, parsed.value, "retract")
        my = re.match(r"(?:my|about my) (?P<slot>.+)", rest, re.IGNORECASE)
        if my is not None:
            # "Forget my number" is a slot; "forget that my sister lives in Paris" is a fact
            # the rules do not read as one: its words find it.
            return Fact(_norm_slot(my.group("slot")), "", "retract", words=rest)
        return Fact("?", rest, "retract")
    used = _USED_TO.search(text)
    if used is not None and not about_someone_else(text, used.start()):
        # "I used to live in Paris": the present fact it names is over; the past is kept.
        positive = f"{used.group('who')} {used.group('rest')}"
        parsed = _set_fact(positive) or _multi_fact(positive)
        slot, value = (parsed.slot, parsed.value) if parsed is not None else ("?", positive)
        return Fact(slot, value, "retract", event=True, words=positive, more=True, past=True)
    retraction = _retraction(text)
    if retraction is not None:
        return retraction
    return _set_fact(text) or _left(text) or _multi_fact(text)


_USED_TO = re.compile(r"\b(?P<who>i|we) used to (?P<rest>.+)", re.IGNORECASE)


# "I'm not a vegetarian anymore": a negated state, a retraction only with "anymore" (so
# "I'm not sure" is none).
_NOT_ANY_MORE = re.compile(
    r"\b(?P<who>i'm|i am|we're|we are) not (?P<rest>.+?) any ?more\W*$", re.IGNORECASE
)
# Where the retracted clause ends: what follows is another statement.
_CLAUSE_END = re.compile(r"\s*[,;:]\s*|\s+(?:but|and|so|because)\s+", re.IGNORECASE)
_CHANGE_WORDS = re.compile(r"\bno longer\b|\bany ?more\b", re.IGNORECASE)


# "I didn't move to Rome after all": the move said before did not happen.
_DID_NOT_MOVE = re.compile(
    r"\b(?:i|we) (?:didn't|did not|never|won't|will not) (?:actually |end up |get to )?"
    r"(?:move|moving|relocate|relocating) (?:back |over )?to (?P<v>.+)",
    re.IGNORECASE,
)


def _retraction(text: str) -> Fact | None:
    moved = _DID_NOT_MOVE.search(text)
    if moved is not None:
        value = _clean_value(re.sub(r" after all\b.*$", "", moved.group("v"), flags=re.I))
        if value:
            return Fact("home", value, "retract", event=True, words=f"I live in {value}")
    have = _HAVE_NO_MORE.search(text)
    if have is not None:
        slot = have.group("slot")
        return Fact(_norm_slot(slot), "", "retract", event=True, words=f"I have a {slot}")
    mine = _MY_NO_LONGER.search(text)
    if mine is not None:
        # "My favourite colour is no longer blue": when nothing known says blue, the
        # statement is kept as said (it is news), as every negation below.
        slot, value = _norm_slot(mine.group("slot")), _clean_value(mine.group("v"))
        return Fact(slot, value, "retract", event=True)
    if _NOT_WITH.search(text):
        return None  # a break-up, read by _left as an event
    match = _NO_LONGER.search(text) or _NOT_ANY_MORE.search(text)
    if match is None:
        return None
    groups = match.groupdict()
    who, rest = (
        (groups["who"], groups["rest"])
        if groups.get("rest")
        else (
            groups["who2"],
            groups["rest2"],
        )
    )
    clause, *after = _CLAUSE_END.split(rest, maxsplit=1)
    clause = re.sub(r" any ?more$", "", clause.strip(), flags=re.IGNORECASE)
    more = bool(after and after[0].strip())
    positive = f"{who} {clause}"
    parsed = _set_fact(positive) or _multi_fact(positive)
    if parsed is not None:
        # "I don't like coffee" said of nothing known is a fact of its own: kept as said.
        return Fact(parsed.slot, parsed.value, "retract", event=True, words=positive, more=more)
    if not _CHANGE_WORDS.search(text):
        return None  # "I don't know": a negation, not a change
    # A change of something the rules do not read as a slot ("I no longer eat meat"): its
    # words find the memory; when none holds them, the statement is kept as said.
    return Fact("?", positive, "retract", event=True, words=positive, more=more)


def same_value(a: str, b: str) -> bool:
    """Whether two values name the same thing (case, articles and containment aside)."""
    x, y = (re.sub(r"^(?:the|a|an) ", "", v.casefold()).strip() for v in (a, b))
    return bool(x) and bool(y) and (x == y or x in y.split() or y in x.split())
