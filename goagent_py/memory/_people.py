"""One of the user's people said with and without a name: "my sister" and "my sister Ana".

The slots keep them apart (``sister:home``, ``sister ana:home``; docs/memory.md, "Facts about
other people"): a user may have two sisters, and merging the unnamed one with a named one would
replace the wrong sister's facts. They are one person where that is what the user means:

- the same value said of both ("My sister lives in Lisbon." and "My sister Ana lives in
  Lisbon."; "My sister no longer lives in Lisbon." after "My sister Ana lives in Lisbon."):
  the value says which one;
- a change said of one ("My sister Ana moved to Porto.", "My sister now works at Globex.")
  when the user has no other person of that relation among the memories compared: no other
  named sister, no "other" or "younger" sister. A plain new statement with a new name and a
  new value ("My sister Eva lives in Rome.") may be a second sister: nothing is replaced.

Only the relations one often has several of (:data:`~goagent_py.memory._subjects.MANY`) are
named in their keys; a wife, a boss or a dog is one slot whatever the name. Pure, like the
other rule modules.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from goagent_py.memory._subjects import MANY

__all__ = ["CHANGE", "one_person", "person_of", "with_name"]

CHANGE = re.compile(
    r"\b(?:moved|moving|relocated|now|new|no longer|anymore|any more|changed|switched|became|"
    r"joined|started|quit|retired)\b",
    re.IGNORECASE,
)
"""Words that say a fact changed (what the user says of the one person they mean)."""


def person_of(who: str) -> tuple[str, str, bool] | None:
    """A person key of a relation of :data:`MANY` as (relation, name, plain): "sister" is
    ("sister", "", True), "sister ana" ("sister", "ana", False), "other sister" ("sister",
    "", False): told apart by a word, so never the plain one. None for anyone else ("wife",
    "ana", "home")."""
    words = who.split()
    if not words:
        return None
    if words[-1] in MANY:
        return words[-1], "", len(words) == 1
    if len(words) == 2 and words[0] in MANY:
        return words[0], words[1], False
    return None


def one_person(known: str, said: str, *, same_value: bool, change: bool,
               people: Iterable[str]) -> bool:  # fmt: skip
    """Whether ``known`` and ``said`` (person keys: "sister", "sister ana") are one person:
    one the relation alone, the other the relation and a name; and the same value is said of
    both, or a change is said (``change``) and ``people`` (the person keys of every memory
    compared, and of the fact) hold no other person of that relation."""
    a, b = person_of(known), person_of(said)
    if a is None or b is None or a[0] != b[0] or a[2] == b[2]:
        return False
    if not (a[1] or b[1]):  # "sister" and "other sister": two people
        return False
    if same_value:
        return True
    of_relation = {p for p in people if (q := person_of(p)) is not None and q[0] == a[0]}
    return change and of_relation <= {known, said}


def with_name(text: str, relation: str, named: str) -> str:
    """``text`` ("My sister lives in Porto.") with the name ``named`` holds for ``relation``
    ("My sister Ana lives in Porto." from "My sister Ana lives in Lisbon.") put after the
    relation; ``text`` as it is when either is not found."""
    found = re.search(rf"\b{re.escape(relation)}\s+([\w'-]+)", named, re.IGNORECASE)
    if found is None or re.search(rf"\b{re.escape(relation)}\s+{re.escape(found.group(1))}\b",
                                  text, re.IGNORECASE):  # fmt: skip
        return text
    return re.sub(rf"\b(my\s+{re.escape(relation)})\b", rf"\1 {found.group(1)}", text, count=1,
                  flags=re.IGNORECASE)  # fmt: skip
