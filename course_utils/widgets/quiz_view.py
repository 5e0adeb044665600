"""The quiz view (every chapter) and the course-level progress view."""
from __future__ import annotations

import html
import re

import ipywidgets as w

from course_utils.exercises import exercise_progress
from course_utils.infra.quiz import (Bank, ProgressStore, Question, all_banks, check, correct_answer_text, kind_words,
                               load_bank, option_order, parse_number, progress_text, text_form)
from course_utils.widgets.base import View, error_html, guarded, table_html

_COLOURS = {True: ("#e8f5e9", "#1b5e20"), False: ("#fdecea", "#8a1c1c"), None: ("#f5f5f5", "#333")}


def _box(message: str, ok: bool | None, extra: str = "") -> str:
    bg, fg = _COLOURS[ok]
    return (f'<div style="background:{bg};color:{fg};padding:6px 10px;border-radius:4px">{_md(message)}'
            f"{extra}</div>")


def _md(text: str) -> str:
    """Escape text, then show `code` spans as code (banks use markdown backticks)."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def _plain(text: str) -> str:
    """Option labels are plain text (radio buttons cannot render HTML): drop the backticks."""
    return text.replace("`", "")


class QuestionCard:
    """One question: its input, Check and Show-answer buttons, and the feedback area."""

    def __init__(self, chapter: str, number: int, question: Question, store: ProgressStore):
        self.chapter, self.question, self.store = chapter, question, store
        q = question
        kind = kind_words(q)
        title = w.HTML(f"<b>Q{number}.</b> {_md(q.prompt)}" + (f" <i style='color:#666'>({kind})</i>" if kind else ""))
        self.order = option_order(chapter, q)          # shown position -> option index in the bank
        self._last_checked = None                      # the answer last graded (Check twice is one attempt)
        self._earned = False                           # answered correctly once: right answers count no more
        if q.kind == "single":
            self.input = w.RadioButtons(options=[(_plain(q.options[i].text), i) for i in self.order], value=None,
                                        layout=w.Layout(width="auto"))
        elif q.kind == "multi":
            self.input = w.VBox([w.Checkbox(value=False, description=_plain(q.options[i].text), indent=False,
                                            layout=w.Layout(width="auto")) for i in self.order])
        else:
            self.input = w.Text(placeholder="your answer" + (f" ({q.unit})" if q.unit else ""),
                                layout=w.Layout(width="220px"))
        self.check_button = w.Button(description="Check", button_style="primary", icon="check")
        self.reveal_button = w.Button(description="Show answer", icon="eye")
        self.check_button.on_click(guarded(self, lambda _: self.submit()))
        self.reveal_button.on_click(guarded(self, lambda _: self.reveal()))
        self.feedback = w.HTML()
        self.on_saved = lambda: None                   # the quiz view says what happened to the progress file
        saved = store.chapter(chapter).get(q.id)
        if saved:
            self._restore(saved)
        self.widget = w.VBox([title, self.input, w.HBox([self.check_button, self.reveal_button]), self.feedback],
                             layout=w.Layout(border="1px solid #ddd", padding="6px", margin="4px 0"))

    def answer(self):
        """The learner's current answer in the form ``quiz.check`` takes."""
        if self.question.kind == "single":
            return self.input.value
        if self.question.kind == "multi":
            return {self.order[k] for k, box in enumerate(self.input.children) if box.value}
        return self.input.value

    def set_answer(self, answer) -> None:
        """Fill the input (used by tests and by restored progress)."""
        if self.question.kind == "single":
            self.input.value = answer
        elif self.question.kind == "multi":
            chosen = set(answer)
            for k, box in enumerate(self.input.children):
                box.value = self.order[k] in chosen
        else:
            self.input.value = str(answer)

    def submit(self):
        """Check the answer, show feedback (and the explanation when right) and save the attempt."""
        answer = self.answer()
        result = check(self.question, answer)
        if not result.counted:
            self.feedback.value = _box(result.message, None)  # not an attempt: nothing saved
            return result
        stored = sorted(answer) if isinstance(answer, set) else answer
        same = self._same(stored, self._last_checked) or (result.correct and self._earned)
        if same:   # the same answer again ("50.0" after "50"), or a right one after the credit: not a new attempt
            entry = self.store.chapter(self.chapter).get(self.question.id, {"attempts": 1})
            again = " (the same answer as before: not counted again)"
        else:
            entry = self.store.record(self.chapter, self.question.id, stored, result.correct)
            again = ""
        self._last_checked = stored
        self._earned = self._earned or result.correct
        self.on_saved()
        notes = "".join(f"<div>{_md(n)}</div>" for n in result.feedback)
        explanation = (f"<div style='margin-top:4px'><b>Why:</b> {_md(self.question.explanation)}</div>"
                       if result.correct else "<div style='margin-top:4px'>Try again, or press Show answer.</div>")
        self.feedback.value = _box(f"{result.message} (attempt {entry.get('attempts', 1)}){again}", result.correct,
                                   notes + explanation)
        return result

    def reveal(self) -> None:
        """Show the right answer, every option's feedback and the explanation."""
        q = self.question
        shown = [q.options[i] for i in self.order] if q.options else []
        notes = "".join(f"<div>{'✓' if o.correct else '✗'} {_md(o.text)}: {_md(o.feedback)}</div>" for o in shown)
        self.feedback.value = _box(f"Answer: {correct_answer_text(q)}", None,
                                   notes + f"<div style='margin-top:4px'><b>Why:</b> {_md(q.explanation)}</div>")

    def _same(self, a, b) -> bool:
        """Two answers the same? Numbers by value ("50", "50.0", "5e1", " 50 "), choices by the set chosen."""
        if a is None or b is None:
            return False
        if self.question.kind == "numeric":
            x, y = parse_number(self.question, a), parse_number(self.question, b)
            return isinstance(x, float) and x == y
        return a == b

    def _grade(self, answer) -> bool:
        """Is a saved answer right for the bank as it is now? (A bank may have changed since.)"""
        try:
            return answer is not None and check(self.question, set(answer) if isinstance(answer, list) and
                                                self.question.kind == "multi" else answer).correct
        except Exception:  # noqa: BLE001 - a saved answer of an older shape is simply not right
            return False

    def _restore(self, saved: dict) -> None:
        """Show the saved state truthfully: a green card shows the answer that earned it, never a later wrong one."""
        last, attempts = saved.get("answer"), saved.get("attempts", 0)
        if saved.get("correct"):
            shown = next((a for a in (saved.get("right_answer"), last) if self._grade(a)), None)
            note = f"Earlier: answered correctly after {attempts} attempt(s)."
            if shown is not None and not self._same(shown, last) and last is not None:
                note += " Your last answer was not right; the box shows the one that was."
            elif shown is None:
                note += " Type the answer again to see it checked."
            self._earned = True
        else:
            shown, note = last, f"Earlier: not yet answered correctly ({attempts} attempt(s))."
        try:
            if shown is not None:
                self.set_answer(shown)
        except Exception:  # noqa: BLE001 - a saved answer from an older bank: keep the record, not the input
            shown = None
        self._last_checked = (sorted(shown) if isinstance(shown, list) else shown) if shown is not None else None
        self.feedback.value = _box(note, True if saved.get("correct") else None)

    def show_error(self, message: str) -> None:
        """A problem inside a button's handler: say so in the card (never a hidden traceback)."""
        self.feedback.value = _box(message, False)


class QuizView(View):
    """A chapter's quiz: one card per question."""

    def __init__(self, bank: Bank, store: ProgressStore | None = None):
        self.bank, self.store = bank, store or ProgressStore(quiet=True)
        self.store.quiet = True            # a damaged progress file is said here, in one line, not as a warning
        self.cards = [QuestionCard(bank.chapter, i, q, self.store) for i, q in enumerate(bank.questions, 1)]
        for card in self.cards:
            card.on_saved = self._show_store_warnings
        header = w.HTML(f"<h3 style='margin:4px 0'>Quiz — chapter {bank.chapter}: {html.escape(bank.title)}</h3>")
        self.notice = w.HTML()
        self._said = 0
        self._show_store_warnings()
        self.widget = w.VBox([header, self.notice] + [c.widget for c in self.cards])

    def _show_store_warnings(self) -> None:
        seen = self.store.warnings_seen
        if len(seen) > self._said:
            self._said = len(seen)
            self.notice.value = error_html(seen[-1][0].upper() + seen[-1][1:])

    def text(self) -> str:
        return text_form(self.bank)


def quiz(chapter: str | int, store: ProgressStore | None = None) -> QuizView:
    """Show a chapter's quiz: ``quiz(0)`` at the end of chapter 0."""
    return QuizView(load_bank(chapter), store)


class ProgressView(View):
    """Progress per chapter (quiz questions answered correctly, exercises solved), with a Refresh button."""

    def __init__(self, store: ProgressStore | None = None):
        self.store = store or ProgressStore(quiet=True)
        self.store.quiet = True
        self.banks = all_banks()
        self.table = w.HTML()
        refresh = w.Button(description="Refresh", icon="refresh")
        refresh.on_click(guarded(self, lambda _: self.refresh()))
        self.widget = w.VBox([self.table, refresh])
        self.refresh()

    def rows(self):
        return self.store.summary(self.banks)

    def show_error(self, message: str) -> None:
        self.table.value = _box(message, False)

    def exercise_rows(self) -> list[tuple[str, int, int, int]]:
        return exercise_progress(self.store)

    def refresh(self) -> None:
        solved = {ch: (n, total) for ch, n, _, total in self.exercise_rows()}
        cells = []
        for ch, title, answered, correct, total in self.rows():
            bar = "█" * min(correct, 40) + "░" * min(max(total - correct, 0), 40)
            done, of = solved.get(ch, (0, 0))
            cells.append((ch, title, f"{correct}/{total}", bar, f"{answered} answered",
                          f"{done}/{of} solved" if of else ""))
        for ch, played, correct in self.store.games():
            cells.append((ch, "bug mystery game", f"{correct}/{played}", "", f"{played} rounds played", ""))
        said = self.store.warnings_seen[-1] if self.store.warnings_seen else ""
        self.table.value = ((error_html(said[0].upper() + said[1:]) if said else "")
                            + table_html(cells, ("chapter", "title", "quiz: correct", "", "", "exercises")))

    def text(self) -> str:
        return progress_text(self.rows(), self.store.games(), self.exercise_rows())


def course_progress(store: ProgressStore | None = None) -> ProgressView:
    """The course-level view: questions answered correctly and exercises solved, chapter by chapter."""
    return ProgressView(store)
