"""The quiz engine (every chapter): question banks (JSON data), answer checking, saved progress.

A bank is ``course_utils/infra/quizzes/chNN.json``. A numeric answer is either a literal number or a
*computed key*: ``{"call": "course_utils.module:function", "args": [...], "kwargs": {...},
"attr": "field"}``, resolved by calling the course's own code, so the key cannot drift from what
the notebooks compute. Progress lives in one JSON file (``$COURSE_PROGRESS`` or
``~/.training_loop_course/progress.json``), written atomically and merged on every write.
"""
from __future__ import annotations

import hashlib
import importlib
import json
import math
import os
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from course_utils.infra.numbers import read_number
from course_utils.infra.storage import JsonStore

BANK_DIR = Path(__file__).with_name("quizzes")
KINDS = ("single", "multi", "numeric")


# ----------------------------------------------------------------------------- questions
@dataclass(frozen=True)
class Option:
    text: str
    correct: bool
    feedback: str


@dataclass(frozen=True)
class Question:
    id: str
    kind: str                      # "single", "multi" or "numeric"
    prompt: str
    explanation: str
    options: tuple[Option, ...] = ()
    answer: float | None = None    # numeric questions: the resolved key
    tolerance: float = 0.0         # absolute tolerance for numeric answers
    unit: str = ""


@dataclass(frozen=True)
class Result:
    correct: bool
    message: str                   # one line: right / wrong and why
    feedback: tuple[str, ...] = () # per chosen (or mis-chosen) option
    counted: bool = True           # False when the input was not an answer at all (nothing to save)


@dataclass(frozen=True)
class Bank:
    chapter: str
    title: str
    questions: tuple[Question, ...]

    def question(self, qid: str) -> Question:
        for q in self.questions:
            if q.id == qid:
                return q
        raise KeyError(f"chapter {self.chapter} has no question {qid!r}")


def resolve_key(spec: Any) -> float:
    """Turn a numeric answer spec (a number or a call into course_utils) into a number."""
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        return float(spec)
    if not isinstance(spec, dict) or "call" not in spec:
        raise ValueError(f"numeric answer must be a number or a {{'call': ...}} spec, got {spec!r}")
    target = spec["call"]
    module_name, _, func_name = target.partition(":")
    if not module_name.startswith("course_utils") or not func_name:
        raise ValueError(f"answer call must look like 'course_utils.module:function', got {target!r}")
    value = getattr(importlib.import_module(module_name), func_name)(*spec.get("args", []), **spec.get("kwargs", {}))
    for part in filter(None, spec.get("attr", "").split(".")):
        value = value[part] if isinstance(value, dict) else getattr(value, part)
    return float(value)


def _parse_question(raw: dict, where: str) -> Question:
    for key in ("id", "type", "prompt", "explanation"):
        if key not in raw:
            raise ValueError(f"{where}: missing {key!r}")
    kind = raw["type"]
    if kind not in KINDS:
        raise ValueError(f"{where}: type must be one of {KINDS}, got {kind!r}")
    if kind == "numeric":
        return Question(raw["id"], kind, raw["prompt"], raw["explanation"], answer=resolve_key(raw["answer"]),
                        tolerance=float(raw.get("tolerance", 0.0)), unit=raw.get("unit", ""))
    options = tuple(Option(o["text"], bool(o.get("correct", False)), o["feedback"]) for o in raw.get("options", []))
    n_correct = sum(o.correct for o in options)
    if len(options) < 2:
        raise ValueError(f"{where}: a choice question needs at least two options")
    if kind == "single" and n_correct != 1:
        raise ValueError(f"{where}: a single-choice question needs exactly one correct option, has {n_correct}")
    if kind == "multi" and n_correct < 1:
        raise ValueError(f"{where}: a multi-select question needs at least one correct option")
    return Question(raw["id"], kind, raw["prompt"], raw["explanation"], options=options)


def load_bank(chapter: str | int, directory: Path | None = None) -> Bank:
    """Load and validate one chapter's question bank (e.g. ``load_bank("00")``)."""
    chapter = f"{int(chapter):02d}" if str(chapter).isdigit() else str(chapter)
    path = (directory or BANK_DIR) / f"ch{chapter}.json"
    if not path.exists():
        raise ValueError(f"no question bank for chapter {chapter!r} (looked for {path.name})")
    raw = json.loads(path.read_text(encoding="utf-8"))
    questions = tuple(_parse_question(q, f"{path.name} question {i + 1}") for i, q in enumerate(raw["questions"]))
    ids = [q.id for q in questions]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path.name}: question ids must be unique, got {ids}")
    return Bank(chapter, raw["title"], questions)


def all_banks(directory: Path | None = None) -> list[Bank]:
    """Every chapter's bank, in chapter order (the course-level progress view)."""
    paths = sorted((directory or BANK_DIR).glob("ch*.json"))
    return [load_bank(p.stem[2:], directory) for p in paths]


_NUMERIC = re.compile(r"^\s*([+-]?(?:\d[\d,_]*)?(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*(.*?)\s*$")


def option_order(chapter: str, question: Question) -> list[int]:
    """The order a question's options are shown in: shuffled, seeded by chapter and id (stable across sessions).

    Banks list the right option wherever the author likes; learners never score by position.
    """
    seed = int.from_bytes(hashlib.sha256(f"{chapter}:{question.id}".encode()).digest()[:8], "big")
    order = list(range(len(question.options)))
    random.Random(seed).shuffle(order)
    return order


def parse_number(question: Question, answer: Any) -> float | str:
    """The number in a typed answer ("1,600", "1600 MB", "1.33"), or a message saying why it is not one.

    The number is read by the course's one input rule (``course_utils.infra.numbers``): "2,30" is ambiguous,
    never 230; "1e400" is out of range; a unit, if the question has one, may follow the number.
    """
    text = str("" if answer is None else answer).strip()
    if not text:
        return "Type a number first."
    match = _NUMERIC.match(text)
    digits, rest = (match.group(1), match.group(2)) if match else ("", text)
    unit = question.unit.strip()
    if not any(ch.isdigit() for ch in digits) or (rest and rest.lower() != unit.lower()):
        where = f" in {unit}" if unit else ""
        return (f"{text[:40]!r} is not a number: type just the number{where}, with digits "
                "(a decimal point and thousands commas are fine).")
    try:
        value = float(read_number(digits, "your answer"))
    except ValueError as exc:
        message = str(exc).removeprefix("your answer: ")
        return message[0].upper() + message[1:] + "."
    if not math.isfinite(value):  # pragma: no cover - read_number bounds the exponent
        return "Enter a finite number."
    return value


def check(question: Question, answer: Any) -> Result:
    """Grade an answer: an option index (single), a set of indices (multi) or a number / text (numeric).

    Wrong answers get feedback on what was chosen, never the key; an empty answer is not an attempt.
    """
    if question.kind == "numeric":
        value = parse_number(question, answer)
        if isinstance(value, str):
            return Result(False, value, counted=False)
        ok = abs(value - question.answer) <= question.tolerance + 1e-12 * max(1.0, abs(question.answer))
        if ok:
            return Result(True, "Correct.")
        hint = "too high" if value > question.answer else "too low"
        return Result(False, f"Not quite: {value:g} is {hint}.")
    if question.kind == "single":
        chosen = set() if answer is None else {answer}
    else:
        try:
            chosen = set(answer or ())
        except TypeError:
            chosen = {answer}
    if not chosen:
        return Result(False, "Choose an option first." if question.kind == "single"
                      else "Choose at least one option first.", counted=False)
    if any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(question.options) for i in chosen):
        return Result(False, "That is not one of the options: choose one of those shown.", counted=False)
    right = {i for i, o in enumerate(question.options) if o.correct}
    if chosen == right:
        notes = tuple(f"✓ {question.options[i].text}: {question.options[i].feedback}" for i in sorted(chosen))
        return Result(True, "Correct.", notes)
    # Only the wrongly chosen options are explained: saying which options are right would hand over the key.
    notes = tuple(f"✗ {question.options[i].text}: {question.options[i].feedback}" for i in sorted(chosen - right))
    if question.kind == "multi" and chosen < right:
        return Result(False, "Partly right: every option you chose is right, but at least one more is right too.",
                      notes)
    if question.kind == "multi":
        return Result(False, f"Not quite: {len(chosen - right)} of your choices {'is' if len(chosen - right) == 1 else 'are'}"
                      " wrong (explained below).", notes)
    return Result(False, "Not quite.", notes)


def correct_answer_text(question: Question) -> str:
    """The right answer, as text (shown on reveal and in the text form's key)."""
    if question.kind == "numeric":
        tol = f" (± {question.tolerance:g})" if question.tolerance else ""
        return f"{question.answer:g}{tol}{(' ' + question.unit) if question.unit else ''}"
    return "; ".join(o.text for o in question.options if o.correct)


def kind_words(question: Question) -> str:
    """How a question is answered ("one answer", "select all that apply", "a number"); empty if its prompt says so."""
    words = {"single": "one answer", "multi": "select all that apply", "numeric": "a number"}[question.kind]
    return "" if words in question.prompt.lower() else words


def text_form(bank: Bank) -> str:
    """A readable plain-text quiz (what a headless run, GitHub and nbval see)."""
    lines = [f"Quiz — chapter {bank.chapter}: {bank.title} ({len(bank.questions)} questions)"]
    labels = "abcdefghij"
    for n, q in enumerate(bank.questions, 1):
        how = kind_words(q)
        lines.append(f"Q{n}. " + (f"[{how}] " if how else "") + q.prompt)
        lines += [f"    {labels[k]}) {q.options[i].text}" for k, i in enumerate(option_order(bank.chapter, q))]
    lines.append("Answer in JupyterLab: each question checks your answer and keeps your progress.")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- progress
def _valid_answer(answer: Any) -> bool:
    """What a card stores: nothing, a typed text, a number, an option index or a list of them."""
    if answer is None or isinstance(answer, bool):
        return answer is None
    if isinstance(answer, str):
        return len(answer) <= 1000
    if isinstance(answer, (int, float)):
        return math.isfinite(answer)
    return (isinstance(answer, list) and len(answer) <= 100
            and all(isinstance(i, int) and not isinstance(i, bool) for i in answer))


def _valid_record(record: Any) -> bool:
    return (isinstance(record, dict) and isinstance(record.get("correct"), bool)
            and isinstance(record.get("attempts"), int) and not isinstance(record.get("attempts"), bool)
            and record["attempts"] >= 1 and _valid_answer(record.get("answer"))
            and _valid_answer(record.get("right_answer")))


def _valid_progress(data: dict) -> bool:
    chapters = data.get("chapters", {})
    return (isinstance(chapters, dict) and isinstance(data.get("version", 1), int)
            and all(isinstance(records, dict) and all(_valid_record(r) for r in records.values())
                    for records in chapters.values()))


def _repair_progress(data: Any) -> dict:
    """The valid part of a damaged progress object: every record that still makes sense, the rest dropped."""
    chapters = data.get("chapters") if isinstance(data, dict) else None
    kept: dict[str, dict] = {}
    for chapter, records in (chapters.items() if isinstance(chapters, dict) else ()):
        if not isinstance(records, dict):
            continue
        for qid, record in records.items():
            if isinstance(record, dict) and isinstance(record.get("correct"), bool):
                attempts = record.get("attempts")
                if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
                    attempts = 1
                answer = record.get("answer") if _valid_answer(record.get("answer")) else None
                kept.setdefault(chapter, {})[qid] = {"attempts": attempts, "correct": record["correct"],
                                                     "answer": answer}
                if record.get("right_answer") is not None and _valid_answer(record.get("right_answer")):
                    kept[chapter][qid]["right_answer"] = record["right_answer"]
    return {"version": 1, "chapters": kept}


def _count_records(data: Any) -> int:
    """How many saved answers a (possibly damaged) progress object holds, valid or not."""
    chapters = data.get("chapters") if isinstance(data, dict) else None
    if not isinstance(chapters, dict):
        return 0
    return sum(len(records) for records in chapters.values() if isinstance(records, dict))


def default_progress_path() -> Path:
    """Where progress is kept: ``$COURSE_PROGRESS`` or ``~/.training_loop_course/progress.json``."""
    env = os.environ.get("COURSE_PROGRESS")
    return Path(env).expanduser() if env else Path.home() / ".training_loop_course" / "progress.json"


@dataclass
class ProgressStore:
    """Per-chapter, per-question answers kept between sessions. Never crashes, never loses answers."""

    path: Path = field(default_factory=default_progress_path)
    warnings_seen: list[str] = field(default_factory=list)
    quiet: bool = False          # a view shows warnings_seen itself: no RuntimeWarning in the learner's cell

    def __post_init__(self) -> None:
        self.path = Path(self.path)

    def _store(self) -> JsonStore:
        return JsonStore(self.path, valid=_valid_progress, what="quiz progress file", repair=_repair_progress,
                         count=_count_records, unit="saved answers", quiet=self.quiet)

    def _read(self) -> dict:
        store = self._store()
        data = store.read()
        self.warnings_seen += store.warnings_seen
        return data

    def chapter(self, chapter: str) -> dict[str, dict]:
        """Saved records of one chapter: {question id: {"correct", "attempts", "answer"}}."""
        return dict(self._read().get("chapters", {}).get(chapter, {}))

    def record(self, chapter: str, qid: str, answer: Any, correct: bool) -> dict:
        """Save one attempt. Re-reads the file under a lock first, so other chapters' answers survive."""
        def change(data: dict) -> dict:
            data.setdefault("version", 1)
            chapter_records = data.setdefault("chapters", {}).setdefault(chapter, {})
            old = chapter_records.get(qid, {"attempts": 0, "correct": False})
            entry = {"attempts": int(old.get("attempts", 0)) + 1,
                     "correct": bool(old.get("correct")) or bool(correct),
                     "answer": answer}
            right = old.get("right_answer") if old.get("correct") else (answer if correct else None)
            if right is not None:          # the answer that earned the credit: what a restored card shows
                entry["right_answer"] = right
            chapter_records[qid] = entry
            return entry

        store = self._store()
        entry = store.update(change)
        self.warnings_seen += store.warnings_seen
        return entry

    def summary(self, banks: Sequence[Bank]) -> list[tuple[str, str, int, int, int]]:
        """Rows (chapter, title, answered, correct, total) for the course-level progress view."""
        saved = self._read().get("chapters", {})
        rows = []
        for bank in banks:
            records = saved.get(bank.chapter, {})
            ids = {q.id for q in bank.questions}
            answered = sum(1 for k in records if k in ids)
            correct = sum(1 for k, v in records.items() if k in ids and v.get("correct"))
            rows.append((bank.chapter, bank.title, answered, correct, len(bank.questions)))
        return rows

    def records(self, prefix: str) -> dict[str, dict[str, dict]]:
        """Saved records whose id starts with `prefix` (game rounds, exercises), by chapter: {chapter: {id: record}}."""
        saved = self._read().get("chapters", {})
        found = {chapter: {k: v for k, v in records.items() if str(k).startswith(prefix)}
                 for chapter, records in saved.items()}
        return {chapter: records for chapter, records in found.items() if records}

    def games(self) -> list[tuple[str, int, int]]:
        """Rounds of a chapter's game saved beside its quiz (ids "mystery-..."): (chapter, played, correct)."""
        rounds = self.records("mystery-")
        return [(chapter, len(rounds[chapter]), sum(1 for v in rounds[chapter].values() if v.get("correct")))
                for chapter in sorted(rounds)]


def progress_text(rows: Sequence[tuple[str, str, int, int, int]],
                  games: Sequence[tuple[str, int, int]] = (),
                  exercises: Sequence[tuple[str, int, int, int]] = ()) -> str:
    """The course-level progress as a plain-text table: quiz questions, exercises solved, game rounds.

    `exercises` rows are (chapter, solved, attempted, total), from course_utils.exercises.exercise_progress.
    """
    solved = {chapter: f"{n}/{total}" for chapter, n, _, total in exercises}
    lines = [f"{'chapter':<8}{'title':<46}{'correct':>8}{'answered':>10}{'total':>7}"
             + (f"{'exercises':>11}" if exercises else "")]
    for ch, title, answered, correct, total in rows:
        lines.append(f"{ch:<8}{title[:44]:<46}{correct:>8}{answered:>10}{total:>7}"
                     + (f"{solved.get(ch, '-'):>11}" if exercises else ""))
    total = sum(r[4] for r in rows)
    all_solved = f"{sum(r[1] for r in exercises)}/{sum(r[3] for r in exercises)}"
    lines.append(f"{'all':<8}{'':<46}{sum(r[3] for r in rows):>8}{sum(r[2] for r in rows):>10}{total:>7}"
                 + (f"{all_solved:>11}" if exercises else ""))
    for chapter, played, correct in games:
        lines.append(f"{chapter:<8}{'bug mystery game: rounds diagnosed':<46}{correct:>8}{played:>10}{'':>7}")
    return "\n".join(lines)
