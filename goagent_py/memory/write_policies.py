"""Long-term write policies that keep what the user said, not what the model made of it.

The agent's ``store_always`` keeps both sides of every turn. With a small or careless model
that poisons the memory: an invented answer ("You live in Paris.") is stored, recalled later as
if it were a fact, and repeated. :func:`user_statements` stores only the user's own statements
(questions and short remarks carry no fact worth recalling)::

    agent = Agent(provider=..., long_term_memory=memory, write_policy=user_statements())

By default each statement of a message is stored as its own memory (:func:`statement_clauses`):
"Hello! My name is Priya and I live in Lisbon." leaves "My name is Priya." and "I live in
Lisbon.". One vector for the whole message is a blend of its facts and scores lower against a
question about any one of them: with a dozen facts stored, "What is my name?" recalled "My
sister is called Meera." (0.46) above the whole message (0.37); "My name is Priya." alone
scores 0.61 (local MiniLM embedder).
"""

from __future__ import annotations

import re

from goagent_py.errors import ConfigurationError
from goagent_py.memory._corrections import is_correction
from goagent_py.memory._fact_slots import is_about_someone, is_retraction
from goagent_py.memory._questions import QUESTION_END, is_question
from goagent_py.memory.base import WritePolicy
from goagent_py.messages import Message, Role, TextBlock

__all__ = ["is_question", "is_statement", "statement_clauses", "user_statements"]

_FIRST_PERSON = frozenset(
    {"i", "i'm", "i've", "i'd", "i'll", "me", "my", "mine", "myself", "we", "our", "us",
     "we're", "we've", "we'd", "we'll", "ours", "ourselves"}
)  # fmt: skip
# A first-person subject and its verb written as one word: "I'm vegetarian." is three words
# ("I am vegetarian") typed as two, and a fact, not a remark like "Me too.".
_CONTRACTED = frozenset({"i'm", "i've", "i'd", "i'll", "we're", "we've", "we'd", "we'll"})
# Languages that drop the subject pronoun say the first person with the verb alone ("Vivo en
# Madrid.", "Moro em Lisboa.", "Abito a Roma.", "Mieszkam w Krakowie.", "Живу в Москве."): the
# forms of the verbs that state facts about oneself (be, have, live, work, study, speak, be
# called, be born).
_VERBS = frozenset(
    {
        # Spanish
        "soy", "estoy", "tengo", "vivo", "trabajo", "estudio", "hablo", "nací", "resido",
        # Portuguese
        "sou", "estou", "tenho", "moro", "trabalho", "estudo", "falo", "nasci",
        # Italian
        "sono", "ho", "abito", "lavoro", "studio", "parlo", "nato", "nata",
        # Polish
        "jestem", "mam", "mieszkam", "pracuję", "studiuję", "mówię", "nazywam", "urodziłem",
        "urodziłam",
        # Russian, Ukrainian
        "живу", "работаю", "учусь", "говорю", "родился", "родилась", "працюю",
    }
)  # fmt: skip
# The first person of other languages written in words, so a fact said in French, Spanish,
# German, Russian, Korean... is kept as an English one is ("J'habite à Lyon.", "Ich heiße
# Anna."); an elided form ("j'", "m'") counts by its head.
_FIRST_PERSON_OTHER = frozenset(
    {
        # French
        "je", "j'", "moi", "mon", "ma", "mes", "nous", "notre", "nos", "m'",
        # Spanish, Portuguese, Italian
        "yo", "mi", "mis", "nosotros", "nosotras", "nuestro", "nuestra", "nuestros",
        "eu", "meu", "minha", "meus", "minhas", "nós", "nosso", "nossa",
        "io", "mio", "mia", "miei", "mie", "noi", "nostro", "nostra",
        # German, Dutch
        "ich", "mein", "meine", "meinen", "meinem", "meiner", "mich", "mir", "wir", "unser",
        "unsere", "ik", "mijn", "mij", "wij", "ons", "onze",
        # Russian, Ukrainian, Polish
        "я", "мой", "моя", "моё", "мое", "мои", "меня", "мне", "мы", "наш", "наша", "наши",
        "мене", "мені", "ja", "mój", "moja", "moje", "mnie", "nasz", "nasza",
        # Turkish, Indonesian
        "ben", "benim", "biz", "bizim", "saya", "aku", "kami", "kita",
        # Korean (written in words)
        "나", "나는", "내", "내가", "나의", "저", "저는", "제", "제가", "저의", "우리", "우리는",
        "우리의", "우리가",
    }
)  # fmt: skip
# Scripts written without spaces between words: each character counts as a word, and the
# first person is a character of the text (Chinese 我, Japanese 私/僕/俺).
_UNSPACED = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_FIRST_PERSON_UNSPACED = ("我", "咱", "私", "僕", "俺", "わたし", "ぼく")
# A sentence ends at . ! ? (or an ellipsis) followed by a space and a capital letter, a digit
# or a quote; not after a title or a common abbreviation ("Dr. Rao", "e.g. Lisbon").
_SENTENCE_END = re.compile(
    r"(?<!\bMr\.)(?<!\bMs\.)(?<!\bDr\.)(?<!\bSt\.)(?<!\bMrs\.)(?<!\be\.g\.)(?<!\bi\.e\.)"
    r"(?<=[.!?…])[\"')\]]?\s+(?=[\"'(\[]?[A-Z0-9])"
    # Chinese and Japanese sentences end at a full-width mark, with no space after it.
    r"|(?<=[\u3002\uff01\uff1f])[\u300d\u300f\u201d\uff09]?\s*(?=\S)"
)
# "..., and I ...", "... but my ...": a conjunction joining two first-person clauses. Only
# before a first-person subject (I, I'm, my, we...), so "I like salt and pepper" stays whole.
# "I no longer like blue, my favourite colour is green": a comma or semicolon between two
# first-person clauses (a splice) cuts too, when the left one opens on its own subject (not
# "When I moved, I ...").
_CLAUSE_JOIN = re.compile(
    r"\s*(?:[,;]\s*|\s)(?:and|but)\s+(?=(?:I|[Mm]y|[Ww]e|[Oo]ur)\b)"
    r"|(?P<splice>\s*[,;]\s+)(?=(?:I|[Mm]y|[Ww]e|[Oo]ur)\b)"
)
_OWN_SUBJECT = re.compile(r"^(?:I|I'm|I've|I'd|[Mm]y|[Ww]e|[Ww]e're|[Oo]ur)\b")


def is_statement(text: str, *, min_words: int = 3, about_user: bool = False) -> bool:
    """Whether ``text`` reads as a statement: not a question, at least ``min_words`` words,
    and, with ``about_user``, in the first person ("I", "my", "we"...).

    Not English only: a question mark of any script (full-width, "؟") or a Chinese question
    particle ends a question; in Chinese and Japanese, written without spaces, each character
    counts as a word and 我/私/僕 is the first person; the first person of the main languages
    written in words counts too ("je", "ich", "yo", "я", "저는"...). Text in a script whose
    first person these rules do not know (no letter of Latin, Greek, Cyrillic, Han, kana or
    Hangul) is not judged by person: a statement there is kept rather than dropped unread.
    """
    stripped = text.strip()
    if not stripped or is_question(stripped):
        return False
    words = _words(stripped)
    # A subject said with its verb ("I'm", "soy") counts as the two words it stands for.
    contracted = sum(1 for w in words if _bare(w) in _CONTRACTED or _bare(w) in _VERBS)
    if len(words) + contracted < min_words:
        return False
    if not about_user:
        return True
    if any(_person(w) or _bare(w) in _VERBS for w in words):
        return True
    if any(marker in stripped for marker in _FIRST_PERSON_UNSPACED):
        return True
    return not _judged_script(stripped)


def _words(text: str) -> list[str]:
    """The words of ``text``: the space-separated ones, each character of a script written
    without spaces counted as one ("我住在北京" is five), punctuation alone not counted."""
    words: list[str] = []
    for chunk in text.split():
        rest = _UNSPACED.sub(" ", chunk)
        words.extend(_UNSPACED.findall(chunk))
        words.extend(w for w in rest.split() if any(c.isalnum() for c in w))
    return words


def _bare(word: str) -> str:
    """``word`` without the punctuation around it, in lower case, with a typographic
    apostrophe (U+2019, what phones type) as "'"."""
    return word.strip(".,;:!¡¿\"'()«»„“”").casefold().replace("\u2019", "'")


def _person(word: str) -> bool:
    """Whether ``word`` is a first-person word of a language written in words."""
    word = _bare(word)
    if word in _FIRST_PERSON or word in _FIRST_PERSON_OTHER:
        return True
    head, apostrophe, _ = word.partition("'")
    return bool(apostrophe) and head + "'" in _FIRST_PERSON_OTHER


def _judged_script(text: str) -> bool:
    """Whether the first-person rules read ``text``'s script: most of its letters are Latin,
    Greek, Cyrillic, Han, kana or Hangul."""
    letters = [c for c in text if c.isalpha()]
    known = sum(
        1
        for c in letters
        if c < "\u0530"
        or "\u1100" <= c <= "\u11ff"
        or "\u3040" <= c <= "\u9fff"
        or "\uac00" <= c <= "\ud7af"
        or "\uf900" <= c <= "\ufaff"
    )
    return known * 2 >= len(letters)


def statement_clauses(text: str) -> list[str]:
    """``text`` cut into its sentences, and each sentence into the first-person clauses that
    "and"/"but" join (English).

    ``"Hello! My name is Priya and I live in Lisbon."`` gives ``["Hello!", "My name is
    Priya.", "I live in Lisbon."]``: a clause cut off before "and" gets the sentence's final
    full stop, and a clause starting with "my"/"our" a capital. A conjunction is a cut only
    before a first-person subject (I, I'm, my, we, our) and after at least three words, so "I
    like salt and pepper" and "My brother and I play chess" stay whole (a longer compound
    subject, "My older brother and I ...", is cut). A comma or semicolon before a first-person
    subject cuts too when the clause before it opens on its own subject ("I no longer like
    blue, my favourite colour is green"; not "When I moved, I ..."). Nothing is dropped here
    (:func:`user_statements` filters).
    """
    clauses: list[str] = []
    for sentence in _SENTENCE_END.split(text.strip()):
        sentence = sentence.strip()
        if not sentence:
            continue
        parts = _clauses(sentence)
        # A clause cut off before "and" ends as its sentence does: "." after a question or
        # an ellipsis (the cut clause is a statement), nothing when the sentence has no end.
        stop = {".": ".", "!": "!", "?": ".", "…": "."}.get(sentence[-1], "")
        for index, part in enumerate(parts):
            if index < len(parts) - 1 and part[-1] not in ".!?…":
                part = part.rstrip(",;") + stop
            clauses.append(part[:1].upper() + part[1:])
    return clauses


def _clauses(sentence: str) -> list[str]:
    """``sentence`` cut at the conjunctions of :data:`_CLAUSE_JOIN` whose left side has at
    least three words: "My brother and I play chess" is one clause (a compound subject)."""
    parts: list[str] = []
    start = 0
    for join in _CLAUSE_JOIN.finditer(sentence):
        left = sentence[start : join.start()].strip()
        if join.group("splice") and not _OWN_SUBJECT.match(left):
            continue
        if len(left.split()) >= 3:
            parts.append(left)
            start = join.end()
    parts.append(sentence[start:].strip())
    return [p for p in parts if p]


def user_statements(
    *,
    min_words: int = 3,
    questions: bool = False,
    about_user: bool = False,
    split: bool = True,
) -> WritePolicy:
    """A write policy storing the user's message of a turn, never the model's answer.

    Args:
        min_words: a message (with ``split``, a clause) with fewer words is not stored
            ("thanks", "hi there").
        questions: store questions too (by default a message or clause ending in "?" is not
            stored).
        about_user: store only first-person statements ("My dog is called Biscuit."), and
            facts of a person the user names ("Anna works at Globex.", "Tom moved to Oslo.":
            those the model-free decider reads, see docs/memory.md), not requests
            ("Calculate 250 - 37"), which recalled later read as facts. A retraction
            ("That's no longer true.", "Scratch that.") and a correction ("Sorry, I meant
            John.", "*John") are kept too: a memory's decider applies them to what they
            take back or correct.
        split: store each sentence and each first-person clause of a text message as its own
            memory (:func:`statement_clauses`), keeping those that pass the filters above:
            "Hello! My name is Priya and I live in Lisbon." stores "My name is Priya." and "I
            live in Lisbon."; the greeting is dropped. A memory of one fact is recalled by a
            question about it; a message of several facts is a blend that a question about
            one scores lower. A message of one clause, or with content other than text, is
            stored whole (as when ``split=False``).

    Raises:
        ConfigurationError: ``min_words`` < 0.
    """
    if min_words < 0:
        raise ConfigurationError(f"user_statements(min_words={min_words}): must be >= 0")

    def keep(text: str) -> bool:
        if questions:
            return len(text.split()) >= min_words and (
                not about_user
                or is_statement(QUESTION_END.sub("", text), min_words=0, about_user=True)
            )
        if about_user and (is_retraction(text) or is_correction(text)):
            return True
        if is_statement(text, min_words=min_words, about_user=about_user):
            return True
        # A fact of someone in the user's life named without "my" ("Anna works at Globex.")
        # is theirs to recall, as "My wife works at Google." is.
        return about_user and is_statement(text, min_words=min_words) and is_about_someone(text)

    def policy(user: Message, assistant: Message) -> list[Message] | None:
        text = user.text.strip()
        if not text:
            return None
        whole = not split or any(not isinstance(b, TextBlock) for b in user.content)
        clauses = [text] if whole else statement_clauses(text)
        if len(clauses) <= 1:
            return [user] if keep(text) else None
        kept = [c for c in clauses if keep(c)]
        if not kept:
            return None
        return [Message(Role.USER, [TextBlock(c)], metadata=dict(user.metadata)) for c in kept]

    return policy
