"""Who a sentence is about, and whether it asserts anything: the fact parser's subject rules.

:mod:`goagent_py.memory._fact_slots` reads first-person facts; these rules tell it when words
that look like one are not the user's assertion: a pattern without its own subject applied to
someone else ("My wife got a job at Acme"), someone else's words about the user ("My boss
said I'm lazy"), a hypothetical ("If I moved to Rome..."); and they split a fact about someone
else ("My wife works at Google") into its subject and what is said of them in the first person
("I work at Google"), so it is read as the user's facts are, in a slot of that person's.
"""

from __future__ import annotations

import re

__all__ = ["MANY", "WHO", "about_someone_else", "asserted", "person_named", "someone_else"]

# Slots whose value says who it is: a name. What else is said of them ("my wife is a
# doctor", "my dog is old") is another fact, not a new value of the slot.
WHO = frozenset(
    [
        "partner",
        "wife",
        "husband",
        "girlfriend",
        "boyfriend",
        "spouse",
        "fiancé",
        "fiancée",
        "fiance",
        "fiancee",
        "sister",
        "brother",
        "mother",
        "father",
        "mom",
        "mum",
        "dad",
        "son",
        "daughter",
        "child",
        "kid",
        "baby",
        "twin",
        "cousin",
        "aunt",
        "uncle",
        "niece",
        "nephew",
        "grandmother",
        "grandfather",
        "grandma",
        "grandpa",
        "friend",
        "boss",
        "manager",
        "colleague",
        "neighbour",
        "neighbor",
        "roommate",
        "flatmate",
        "dog",
        "cat",
        "pet",
        "puppy",
        "kitten",
        "horse",
        "parrot",
    ]
)

# The relations a user often has more than one of: a name said with one is who that person is
# ("My sister is Ana." and "My sister is Eva." are two sisters), so the name is part of the
# person's key ("sister ana"), as it is in their other facts ("sister ana:home"). A partner, a
# parent, a boss or a pet is one at a time: a new name replaces the old one ("My dog is called
# Luna now.").
MANY = frozenset(
    ["sister", "brother", "son", "daughter", "child", "kid", "cousin", "aunt", "uncle", "niece",
     "nephew", "grandmother", "grandfather", "grandma", "grandpa", "friend", "colleague",
     "neighbour", "neighbor", "roommate", "flatmate"]
)  # fmt: skip
# Words before a relation that tell one person of it from another when no name is given ("my
# other sister", "my younger brother", "my ex wife"): part of that person's key. Other words
# ("my new boss", "my dear friend") say nothing of which one.
_WHICH = frozenset(
    ["other", "another", "second", "third", "older", "younger", "elder", "eldest", "oldest",
     "youngest", "middle", "step", "half", "best", "ex", "former", "late"]
)  # fmt: skip


def person_named(relation: str, name: str) -> str:
    """The key of the person of ``relation`` (a slot: "sister", "other sister", "wife")
    called ``name``: the relation and the name's first word for the relations of
    :data:`MANY` ("sister ana"), the relation alone for the others ("wife")."""
    who = relation.split()[-1] if relation.strip() else ""
    first = name.split()[0].casefold() if name.split() else ""
    return f"{who} {first}" if who in MANY and first else relation


# Who a clause is about, when a pattern does not say it itself ("hired by Acme", "got a job
# at", "after moving to"): the clause's own subject, or the one of the clause it continues.
_SELF = frozenset(["i", "i'm", "i've", "i'd", "i'll", "we", "we're", "we've", "we'd", "we'll"])
_OTHERS = frozenset(
    [
        "he",
        "she",
        "they",
        "he's",
        "she's",
        "they're",
        "they've",
        "he'd",
        "she'd",
        "they'd",
        "you",
        "you're",
        "you've",
        "his",
        "her",
        "their",
        "it",
        "it's",
        "its",
    ]
)
_OPENERS = frozenset(
    [
        "and",
        "but",
        "so",
        "then",
        "also",
        "just",
        "finally",
        "recently",
        "now",
        "today",
        "yesterday",
        "eventually",
        "luckily",
        "well",
        "oh",
        "ok",
        "okay",
        "actually",
        "anyway",
        "guess",
        "what",
        "after",
        "that",
        "later",
        "soon",
        "last",
        "this",
        "year",
        "month",
        "week",
        "news",
        "update",
        "btw",
        "good",
        "great",
        "yay",
        "wow",
        "hey",
        "hi",
        "hello",
        "yes",
        "woohoo",
        "hooray",
        "phew",
        "whew",
        "big",
        "quick",
        "fyi",
    ]
)
_CLAUSE_SPLIT = re.compile(r"[,;:.!?()]|\s(?:and|but|so|because|while|when|then)\s", re.I)
_WORD = re.compile(r"[A-Za-z][\w'\u2019-]*")


def about_someone_else(text: str, start: int) -> bool:
    """Whether the words before ``start`` make someone other than the user the subject of
    what follows ("My wife got a job at Acme", "Anna was hired by Acme", "My brother found a
    job after moving to Berlin"); no subject at all ("Got hired by Acme!") is the user."""
    before = text[:start]
    clauses = _CLAUSE_SPLIT.split(before)
    for clause in reversed(clauses):
        words = _WORD.findall(clause)
        if any(w.casefold() in _SELF for w in words):
            return False  # "My wife and I moved...", "I found a job after moving to ..."
        while words and words[0].casefold() in _OPENERS:
            words = words[1:]
        if not words:
            continue  # a clause without a subject continues the one before it
        first = words[0]
        if first.casefold() in _OTHERS or first.casefold() in ("my", "our"):
            return True
        if first[:1].isupper():
            return True  # a name: "Anna got a job at Acme"
        if first.casefold() in ("me", "myself"):
            return False
        # A clause that opens on a verb ("got hired by", "packed up and left") continues the
        # one before it.
    return False


# -- whether a sentence asserts anything --------------------------------------------------------

# A hypothetical: "if", "suppose", "what if", "wish"... right before the user ("If I moved to
# Rome I'd be happier.", "I'd be happier if only I lived in Rome", "I wish I lived in Rome");
# not one about someone else ("If you must know, I live in Rome." asserts the home).
_IF = (
    r"(?:if|unless|suppose|supposing|imagine|imagining|what if|in case|as if|as though|"
    r"pretend|pretending|hypothetically|wish|wished|whether)"
)
_HYPOTHETICAL = re.compile(
    rf"\b{_IF},?\s+(?:(?:only|ever|that|then)\s+)?(?:i|we|i'm|we're|i'd|we'd|i've|we've|my|our)\b",
    re.IGNORECASE,
)
# Someone else's words or opinion of the user ("My boss said I'm lazy", "She thinks I work
# too much"): reported, not asserted by the user.
_REPORTING = re.compile(
    r"\b(?:said|says|say|thinks|think|thought|told me|tells me|claims|claim|claimed|believes|"
    r"believe|believed|reckons|reckon|insists|insist|insisted|assumes|assume|assumed|joked|"
    r"jokes|keeps saying|kept saying|accused me of|accuses me of|swears|swore)\b",
    re.IGNORECASE,
)


def asserted(text: str) -> bool:
    """Whether ``text`` states what it says: not a hypothetical, not someone else's words
    about the user (the user's own "I think I'm right" is theirs)."""
    if _HYPOTHETICAL.search(text):
        return False
    return not any(about_someone_else(text, m.start()) for m in _REPORTING.finditer(text))


# -- facts about someone else ---------------------------------------------------------------------

# "My wife works at Google", "My older brother Tom moved to Munich", "My dog is 5": "my" and
# one of the people or pets of :data:`WHO` (a word or two before it), maybe their name, then
# a verb.
_SOMEONE = re.compile(
    r"^(?P<subject>(?:my|our) (?P<which>(?:[a-z-]+ ){0,2}?)"
    rf"(?P<who>{'|'.join(sorted(WHO, key=len, reverse=True))})"
    r"(?:,? (?P<name>(?-i:[A-Z])[\w-]+),?)?) (?P<rest>.+)$",
    re.IGNORECASE,
)
_ADVERBS = frozenset(
    ["now", "currently", "still", "just", "recently", "also", "finally", "actually", "already",
     "no", "longer", "never", "really", "officially"]
)  # fmt: skip
# What a verb is in the first person, said of someone else; a verb in the past is the same.
_FIRST = {
    "is": "am",
    "isn't": "am not",
    "was": "was",
    "wasn't": "wasn't",
    "has": "have",
    "hasn't": "haven't",
    "does": "do",
    "doesn't": "don't",
    "got": "got",
    "became": "became",
    "quit": "quit",
    "left": "left",
    "sold": "sold",
    "bought": "bought",
    "took": "took",
    "found": "found",
    "began": "began",
    "went": "went",
    "lost": "lost",
    "married": "married",
}


def _first_person_verb(word: str) -> str | None:
    """``word`` (a verb said of someone else) as the user would say it, or None when it is
    no verb these rules know ("My wife and I...", "My brother Tom's car...")."""
    lower = word.casefold()
    if lower in _FIRST:
        return _FIRST[lower]
    if not word.isalpha() or not word.islower() or len(lower) < 4:
        return None
    if lower.endswith("ed"):
        return lower  # moved, joined, relocated, started
    if lower.endswith("ies"):
        return lower[:-3] + "y"  # studies
    if lower.endswith(("ches", "shes", "sses", "xes", "oes")):
        return lower[:-2]  # teaches, goes
    if lower.endswith("s") and not lower.endswith(("ss", "us")):
        return lower[:-1]  # works, lives, drives, likes
    return None


# "Anna works at Globex", "Tom moved to Oslo", "Anna's email is ...": a person named without
# "my" (one or two capitalised words, then a verb or "'s"). Not the user ("I"), a pronoun, an
# opener ("Yesterday I moved..."), a weekday or a month, nor "Everyone calls me Bea".
_NAMED = re.compile(
    r"^(?P<name>(?-i:[A-Z])[\w-]*(?: (?-i:[A-Z])[\w-]*)?)(?P<own>'s)? (?P<rest>.+)$"
)
_NOT_NAMES = (
    _SELF
    | _OTHERS
    | _OPENERS
    | frozenset(
        ["the", "a", "an", "these", "those", "there", "here", "my", "our", "your", "please",
         "everyone", "everybody", "nobody", "somebody", "someone", "people", "most", "friends",
         "all", "both", "no", "not", "mr", "mrs", "ms", "dr", "monday", "tuesday",
         "wednesday", "thursday", "friday", "saturday", "sunday", "january", "february",
         "march", "april", "may", "june", "july", "august", "september", "october",
         "november", "december", "tonight", "tomorrow", "sorry", "thanks", "forget", "call"]
    )
)  # fmt: skip


def someone_else(text: str) -> tuple[str, str, str] | None:
    """A fact about someone other than the user, split: the subject as said ("My brother
    Tom", "Anna"), who it is (its slot's first part: "brother tom", "anna"; the raw relation
    word, for the caller to normalise) and what is said of them in the first person ("I
    moved to Munich", "My email is ..." for "Anna's email is ..."); None when ``text`` is no
    such fact."""
    match = _SOMEONE.match(text)
    if match is None:
        return _named(text)
    who, name = match.group("who"), match.group("name")
    if name is None:  # "my other sister", "my younger brother": which one, when unnamed
        which = [w for w in match.group("which").casefold().split() if w in _WHICH]
        who = " ".join([*which, who])
    return _split(match.group("subject"), who, name, match.group("rest"))


def _named(text: str) -> tuple[str, str, str] | None:
    """:func:`someone_else` for a person named without "my" ("Anna works at Globex")."""
    match = _NAMED.match(text)
    if match is None:
        return None
    name = match.group("name")
    if any(w.casefold() in _NOT_NAMES for w in name.split()):
        return None
    rest = match.group("rest")
    if match.group("own"):  # "Anna's email is ...": what she would say of her own email
        return name, name.casefold(), "My " + rest
    if _WHAT_IT_IS.match(rest):
        return None  # "Berlin is a city": a capitalised word names places and things too
    return _split(name, "", None, rest)


# What a thing is as much as what a person does: not read of a bare name ("Anna is a doctor"
# is said as "Anna works as a doctor", which is read).
_WHAT_IT_IS = re.compile(r"^(?:is|was)(?: \w+ly| now| still)? (?:a|an|the)\b", re.IGNORECASE)


def _split(subject: str, who: str, name: str | None, rest: str) -> tuple[str, str, str] | None:
    words = rest.split()
    index = 0
    while index < len(words) and words[index].casefold() in _ADVERBS:
        index += 1
    if index == len(words):
        return None
    verb = _first_person_verb(words[index])
    if verb is None:
        return None
    said = " ".join([*words[:index], verb, *words[index + 1 :]])
    who = " ".join(w for w in (who.casefold(), (name or "").casefold()) if w)
    return subject, who or subject.casefold(), f"I {said}"


_AS_ME = re.compile(r"^(?:I am|I'm)\b|^I (?P<verb>[a-z]+)\b|^My\b")


def third_person(canonical: str, subject: str) -> str:
    """``canonical`` (a fact as the user says it: "I live in Munich.", "My name is Rex.")
    said of ``subject`` ("My brother"): "My brother lives in Munich.", "My brother's name is
    Rex."."""
    match = _AS_ME.match(canonical)
    if match is None:
        return canonical
    subject = subject[:1].upper() + subject[1:]
    rest = canonical[match.end() :]
    if match.group(0) in ("I am", "I'm"):
        return f"{subject} is{rest}"
    if match.group(0) == "My":
        return f"{subject}'s{rest}"
    verb = match.group("verb")
    if verb.endswith(("ch", "sh", "s", "x", "o")):
        verb += "es"
    elif verb.endswith("y") and verb[-2:-1] not in "aeiou":
        verb = verb[:-1] + "ies"
    elif not verb.endswith("ed"):
        verb += "s"
    return f"{subject} {verb}{rest}"
