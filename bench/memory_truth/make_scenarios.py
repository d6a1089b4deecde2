"""Write the labelled multi-session set of issue 31 to scenarios.jsonl (run once; committed).

    python bench/memory_truth/make_scenarios.py

Each scenario is a few sessions of user statements (one session per list, each statement one
turn, possibly of two users) and the checks that must hold after them:

- ``ask`` + ``current``: recalled for the question, the best memory names ``current``;
- ``ask`` + ``stale``: none of the memories recalled for the question (top 3) names a stale
  value (an old value, a retracted one, or another user's);
- ``retained``: a current memory of the user names the value (compatible facts are kept);
- ``ask`` + ``past``: asked about the past, a recalled memory marked superseded names the
  value.

The statements are written by hand per category below, in several phrasings each; values are
rotated through fixed lists so the set is deterministic. Nothing here reads the decider.
"""

from __future__ import annotations

import json
from itertools import cycle
from pathlib import Path
from typing import Any

CITIES = [
    "Lisbon", "Porto", "Berlin", "Madrid", "Oslo", "Nairobi", "Toronto", "Kyoto", "Lima",
    "Dublin", "Prague", "Seoul", "Austin", "Milan", "Accra", "Hanoi", "Quito", "Tallinn",
]  # fmt: skip
NAMES = ["Priya", "Sam", "Lena", "Tomas", "Aiko", "Omar", "Ines", "Ravi", "Marta", "Kofi"]
COMPANIES = ["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Stark Industries", "Wayne Foods"]
JOBS = ["nurse", "teacher", "pilot", "chef", "architect", "plumber", "lawyer", "designer"]
PHONES = ["555-0101", "555-0144", "555-0199", "555-0123", "555-0188", "555-0177"]
CARS = ["Tesla", "Fiat Panda", "Volvo", "Toyota Corolla", "Renault Clio", "Honda Civic"]
PARTNERS = ["Ana", "Ben", "Chloe", "Diego", "Elif", "Farah"]
COLOURS = ["blue", "green", "red", "purple", "yellow", "orange"]
FOODS = ["tea", "coffee", "sushi", "pizza", "mangoes", "dark chocolate", "olives", "ramen"]
PETS = ["Biscuit", "Rex", "Miso", "Pepper", "Luna", "Tofu"]

# (slot, first statement, change statements, question, past question)
UPDATES: list[tuple[str, str, list[str], str, str, list[str]]] = [
    ("home", "I live in {a}.", ["I moved to {b} last month.", "I live in {b} now.",
     "I've relocated to {b}.", "We just moved to {b}."], "Where do I live?",
     "Where did I live before?", CITIES),
    ("name", "My name is {a}.", ["Please call me {b} from now on.", "My name is now {b}.",
     "I changed my name to {b}."], "What is my name?", "What was my name before?", NAMES),
    ("employer", "I work at {a}.", ["I started working at {b} this week.", "I now work at {b}.",
     "I just joined {b}."], "Where do I work?", "Where did I work before?", COMPANIES),
    ("job", "I work as a {a}.", ["I work as a {b} now.", "My job is {b} these days."],
     "What is my job?", "What was my job before?", JOBS),
    ("phone", "My phone number is {a}.", ["My new number is {b}.",
     "My phone number is now {b}."], "What is my phone number?",
     "What was my old phone number?", PHONES),
    ("car", "I drive a {a}.", ["I drive a {b} now.", "My new car is a {b}."],
     "What car do I drive?", "What car did I drive before?", CARS),
    ("partner", "My partner is {a}.", ["My partner is {b} now.", "I'm married to {b}."],
     "Who is my partner?", "Who was my partner before?", PARTNERS),
    ("colour", "My favourite colour is {a}.", ["My favorite color is {b} now.",
     "My favourite colour is now {b}."], "What is my favourite colour?",
     "What was my favourite colour before?", COLOURS),
    ("pet", "My dog is called {a}.", ["My dog is called {b} now."],
     "What is my dog called?", "What was my dog called before?", PETS),
]  # fmt: skip

INDIRECT: list[tuple[str, str, str, str, list[str]]] = [
    ("I live in {a}.", "Since the move to {b}, I take the tram to work.", "Where do I live?",
     "Where did I live before?", CITIES),
    ("I live in {a}.", "Now that I live in {b}, I cycle everywhere.", "Where do I live?",
     "Where did I live before?", CITIES),
    ("I work at {a}.", "Since joining {b}, I commute by train.", "Where do I work?",
     "Where did I work before?", COMPANIES),
    ("I'm 34 years old.", "I just turned 35.", "How old am I?", "How old was I before?", []),
]  # fmt: skip

COMPATIBLE: list[tuple[str, str, str, str]] = [
    ("I like {a}.", "I also like {b}.", "What do I like?", "food"),
    ("My sister is {a}.", "My brother is {b}.", "Who are my siblings?", "name"),
    ("I live in {a}.", "My sister lives in {b}.", "Where do I live?", "city"),
    ("My dog is called {a}.", "My cat is called {b}.", "What are my pets called?", "pet"),
    ("I speak Portuguese.", "I also speak Japanese.", "Which languages do I speak?", ""),
    ("My name is {a}.", "My best friend is {b}.", "What is my name?", "name"),
]  # fmt: skip

DELETIONS: list[tuple[str, str, str, str]] = [
    ("My phone number is {a}.", "Please forget my phone number.", "What is my phone number?",
     "phone"),
    ("I live in {a}.", "Forget that I live in {a}.", "Where do I live?", "city"),
    ("I work at {a}.", "I don't work at {a} anymore.", "Where do I work?", "company"),
    ("I like {a}.", "I no longer like {a}.", "What do I like?", "food"),
    ("I drive a {a}.", "That's no longer true.", "What car do I drive?", "car"),
    ("My partner is {a}.", "Forget my partner.", "Who is my partner?", "partner"),
]  # fmt: skip

POOLS = {
    "food": FOODS,
    "name": NAMES,
    "city": CITIES,
    "pet": PETS,
    "phone": PHONES,
    "company": COMPANIES,
    "car": CARS,
    "partner": PARTNERS,
}


def _pairs(pool: list[str], n: int) -> list[tuple[str, str]]:
    out = []
    for i in range(n):
        a = pool[i % len(pool)]
        b = pool[(i * 3 + 1) % len(pool)]
        if a == b:
            b = pool[(i * 3 + 2) % len(pool)]
        out.append((a, b))
    return out


def updates() -> list[dict[str, Any]]:
    out = []
    for slot, first, changes, ask, _past, pool in UPDATES:
        for i, ((a, b), change) in enumerate(zip(_pairs(pool, 7), cycle(changes), strict=False)):
            out.append(
                {
                    "id": f"update-{slot}-{i + 1}",
                    "category": "single-value update",
                    "sessions": [
                        [["alice", first.format(a=a)]],
                        [["alice", change.format(b=b)]],
                    ],
                    "checks": [{"user": "alice", "ask": ask, "current": b, "stale": [a]}],
                }
            )
    return out


def indirect() -> list[dict[str, Any]]:
    out = []
    for n, (first, change, ask, _, pool) in enumerate(INDIRECT):
        pairs = _pairs(pool, 5) if pool else [("34", "35")]
        for i, (a, b) in enumerate(pairs):
            out.append(
                {
                    "id": f"indirect-{n + 1}-{i + 1}",
                    "category": "indirect change",
                    "sessions": [[["alice", first.format(a=a)]], [["alice", change.format(b=b)]]],
                    "checks": [{"user": "alice", "ask": ask, "current": b, "stale": [a]}],
                }
            )
    return out


def compatible() -> list[dict[str, Any]]:
    out = []
    for n, (first, second, _ask, kind) in enumerate(COMPATIBLE):
        pool = POOLS.get(kind, [])
        pairs = _pairs(pool, 5) if pool else [("Portuguese", "Japanese")]
        for i, (a, b) in enumerate(pairs):
            one, two = first.format(a=a), second.format(b=b)
            out.append(
                {
                    "id": f"compatible-{n + 1}-{i + 1}",
                    "category": "compatible addition",
                    "sessions": [[["alice", one]], [["alice", two]]],
                    "checks": [
                        {"user": "alice", "retained": one},
                        {"user": "alice", "retained": two},
                    ],
                }
            )
    return out


def deletions() -> list[dict[str, Any]]:
    out = []
    for n, (first, retract, ask, kind) in enumerate(DELETIONS):
        for i, (a, _) in enumerate(_pairs(POOLS[kind], 4)):
            out.append(
                {
                    "id": f"delete-{n + 1}-{i + 1}",
                    "category": "explicit deletion",
                    "sessions": [
                        [["alice", "My sister is Meera."], ["alice", first.format(a=a)]],
                        [["alice", retract.format(a=a)]],
                    ],
                    "checks": [
                        {"user": "alice", "ask": ask, "stale": [a]},
                        {"user": "alice", "retained": "My sister is Meera."},
                    ],
                }
            )
    return out


def two_users() -> list[dict[str, Any]]:
    out = []
    for i, ((a, b), (c, _)) in enumerate(
        zip(_pairs(CITIES, 15), _pairs(CITIES[5:], 15), strict=True)
    ):
        if c in (a, b):
            c = "Reykjavik"
        out.append(
            {
                "id": f"two-users-{i + 1}",
                "category": "two users",
                "sessions": [
                    [["alice", f"I live in {a}."], ["bob", f"I live in {c}."]],
                    [["alice", f"I moved to {b} last month."]],
                ],
                "checks": [
                    {"user": "alice", "ask": "Where do I live?", "current": b, "stale": [a, c]},
                    {"user": "bob", "ask": "Where do I live?", "current": c, "stale": [a, b]},
                ],
            }
        )
    return out


def past() -> list[dict[str, Any]]:
    out = []
    for slot, first, changes, ask, past_ask, pool in UPDATES[:8]:
        for i, (a, b) in enumerate(_pairs(pool, 2)):
            out.append(
                {
                    "id": f"past-{slot}-{i + 1}",
                    "category": "question about the past",
                    "sessions": [
                        [["alice", first.format(a=a)]],
                        [["alice", changes[i % len(changes)].format(b=b)]],
                    ],
                    "checks": [
                        {"user": "alice", "ask": ask, "current": b, "stale": [a]},
                        {"user": "alice", "ask": past_ask, "past": a},
                    ],
                }
            )
    return out


def main() -> None:
    scenarios = updates() + indirect() + compatible() + deletions() + two_users() + past()
    ids = [s["id"] for s in scenarios]
    assert len(ids) == len(set(ids)), "duplicate ids"
    path = Path(__file__).with_name("scenarios.jsonl")
    with path.open("w") as f:
        for s in scenarios:
            f.write(json.dumps(s) + "\n")
    counts: dict[str, int] = {}
    for s in scenarios:
        counts[s["category"]] = counts.get(s["category"], 0) + 1
    print(f"{len(scenarios)} scenarios -> {path}: {counts}")


if __name__ == "__main__":
    main()
