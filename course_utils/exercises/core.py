"""Checked exercises (chapters 0-8): the learner writes the real function; a checker runs it on hidden cases.

An ``Exercise`` names the function(s) the learner writes and holds a *checker*: a function of an
``Attempt`` that calls the learner's code on cases (edge cases first, then generated ones), compares
what comes back with an oracle (a real DataLoader, torch's optimizers and schedulers, the memory
meter, the loop doctor, a killed and resumed run) and raises ``Fail`` at the first case that
differs, or returns one sentence saying what was checked. ``Exercise.check`` turns that into a
``Verdict`` (never an exception: a stub, a crash, a wrong type or an endless loop all become a
sentence in the learner's words), saves it in the learner's progress beside the quizzes, and shows
it in a notebook as a coloured box (text for nbval and GitHub).

Rules every check follows (issue 32), and the helpers that implement them, for a new exercise:

- **Inputs as real code passes them.** An iterable a loop would pass as a generator goes in as
  ``guards.OneShot(items)`` (walkable once, like ``model.parameters()``; ``.late_passes`` says the
  learner walked it twice); tensors in their real dtypes (int64 targets and labels, float32 weights);
  optimizers with two parameter groups where the statement lets the learner touch ``param_groups``;
  degenerate sizes (zero examples, p = 1, one batch) among the edge cases.
- **Boundaries that separate the variants.** Targets and thresholds are exact in binary (hits / 128,
  multiples of 1/8), so ``>`` vs ``>=``, off-by-one and float-rounding variants give different answers.
- **The state around the call.** ``Attempt.run`` fails a function that leaves autograd switched
  off; ``guards.Watch(model, mark=val_inputs)`` records every forward (mode, autograd on, marked
  input) so a check can name "trained in eval mode" or "measured with a graph"; ``guards.modes`` /
  ``mode_changes`` compare the train/eval flag of every submodule before and after; a hook that must
  stop the learner's code at once (an update past the budget) raises ``words.Stop(Fail(...))``, which
  ``except Exception`` cannot swallow and ``Attempt.run`` turns into that Fail.
- **Messages that find the bug.** Each names the case, what was expected and what came back, in the
  statement's words; numbers via ``words.differ`` / ``words.values_pair`` (printed to the digits
  that differ, 1.11626 vs 1.11630); a hint only where the evidence singles out its cause, else a
  neutral one: compare the answer with each known misreading, and where one answer fits several,
  probe the learner's function on a few more cases (``ch00_01._singled_out``).
- **Corpus.** tests/exercise_attempts/ holds learner attempts written from the statements alone;
  tests/exercise_attempt_verdicts.py says what each wrong one's verdict must name. A new exercise adds
  its module there and its phrases; tests/test_exercise_holes.py holds one test per hole class.
- **Statements a learner can follow exactly**: argument and return types, edge values, phases; the
  chapter's own function is imported under another name, so the learner's is never shadowed.
"""
from __future__ import annotations

import dis
import html
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from course_utils.exercises.limits import TimeUp, time_limit
from course_utils.exercises.words import Fail, Stop, explain
from course_utils.infra.quiz import ProgressStore

RECORD_PREFIX = "exercise-"   # progress ids: "exercise-<name>", in the chapter's records beside its quiz


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check: passed or not, and one short message in the learner's words."""

    passed: bool
    message: str
    exercise: str = ""
    counted: bool = True        # False when nothing was really tried (the untouched stub, a missing function)

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return self.message

    def _repr_html_(self) -> str:
        colours = ("#e8f5e9", "#1b5e20") if self.passed else ("#fdecea", "#8a1c1c") if self.counted \
            else ("#f5f5f5", "#333")
        lines = "".join(f"<div>{_label(_code(line.strip()))}</div>" for line in self.message.splitlines())
        return (f'<div style="background:{colours[0]};color:{colours[1]};padding:6px 10px;border-radius:4px;'
                f'font-family:var(--jp-content-font-family,sans-serif)">{lines}</div>')


def _code(text: str) -> str:
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def _label(line: str) -> str:
    """'Case: ...' and 'Hint: ...' with their label in bold (the HTML form of a verdict)."""
    return re.sub(r"^(Case|Hint):", r"<b>\1:</b>", line)


def _capital(text: str) -> str:
    """Capitalise a sentence, unless it starts with code (`len(dataset)`, `input_ids`)."""
    return text if re.match(r"^[a-z_]+[\w]*[(\[._]", text) else text[:1].upper() + text[1:]


@dataclass(frozen=True)
class Exercise:
    """One exercise: the function(s) the learner writes, how they are called, and the checker."""

    name: str                                  # the registry key (and the function's name, for one function)
    chapter: str                               # "00" .. "08"
    title: str                                 # what the learner writes, in a few words
    signature: str                             # how the course calls it ("f(N, B, K, drop_last=False) -> int")
    checker: Callable[["Attempt"], str]        # raises Fail at the first wrong case; returns what was checked
    functions: tuple[str, ...] = ()            # the learner's names, if not just (name,)
    arity: tuple[int, ...] = ()                # positional arguments the course passes to each
    time_limit: float = 10.0                   # seconds for the whole check
    oracle: str = ""                           # what the answers are compared with (for the instructor's table)
    forbids: tuple[str, ...] = ()              # names the statement rules out ("clip_grad_norm_"): refused if used

    @property
    def names(self) -> tuple[str, ...]:
        return self.functions or (self.name,)

    def check(self, *functions: Callable, store: ProgressStore | None = None, record: bool = True) -> Verdict:
        """Run the checker on the learner's function(s); save the result in their progress; never raise."""
        verdict = self._judge(functions)
        if record and verdict.counted:
            try:
                (store or ProgressStore()).record(self.chapter, RECORD_PREFIX + self.name, None, verdict.passed)
            except Exception:  # noqa: BLE001 - saving is best effort (the store already warns on file trouble)
                pass
        return verdict

    def _judge(self, functions: tuple) -> Verdict:
        problem = self._shape_problem(functions)
        if problem:
            return Verdict(False, f"✗ {self.name}: {problem}", self.name, counted=False)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)    # tiny tensors: one thread is fastest, and the same on every machine
        try:
            return self._run(functions)
        finally:
            torch.set_num_threads(threads)

    def _run(self, functions: tuple) -> Verdict:
        attempt = Attempt(self, functions)
        if all(_untouched_stub(fn) for fn in functions):   # said at once: warming torch would be wasted on it
            return self._failed(_stub_fail(self.names[0]), attempt)
        names = {name for fn in functions for code in _all_code_objects(fn) for name in code.co_names}
        used = sorted(set(self.forbids) & names)
        if used:
            tools = " and ".join(f"`{name}`" for name in used)
            return self._failed(Fail(f"your code calls {tools}, which the task asks you to do without: the exercise "
                                     "is to write what it does.", "Compute it with tensor operations; the check "
                                     "compares your result with that tool's."), attempt)
        _warm_torch()
        summary = ""
        try:
            with torch.random.fork_rng(devices=[]), time_limit(self.time_limit) as deadline:  # see limits.py
                attempt.deadline = deadline                  # (the learner's random state is left as it was)
                summary = self.checker(attempt)
        except Fail as failure:
            return self._timed_out(attempt) if deadline_expired(attempt) else self._failed(failure, attempt)
        except Exception as exc:  # noqa: BLE001 - the learner's objects broke a comparison: still a sentence
            if deadline_expired(attempt):
                return self._timed_out(attempt)
            detail = str(exc).splitlines()[0][:120] if str(exc).strip() else ""
            return Verdict(False, f"✗ {self.name}: not yet.\n  Case: {attempt.case or 'the first one'}\n"
                                  f"  What your code gave could not be checked ({type(exc).__name__}: {detail}).\n"
                                  "  Hint: Return exactly what the task asks for, of the type it names.", self.name)
        if deadline_expired(attempt):
            return self._timed_out(attempt)
        return Verdict(True, f"✓ {self.name}: passed. {_capital(summary)}", self.name)

    def _failed(self, failure: Fail, attempt: "Attempt") -> Verdict:
        case = failure.case or attempt.case
        lines = [f"✗ {self.name}: not yet."]
        if case and failure.counted:
            lines.append(f"  Case: {case}")
        lines.append(f"  {_capital(failure.problem)}")
        if failure.hint:
            lines.append(f"  Hint: {failure.hint}")
        return Verdict(False, "\n".join(lines), self.name, counted=failure.counted)

    def _timed_out(self, attempt: "Attempt") -> Verdict:
        seconds = f"{self.time_limit:g}"
        return Verdict(False, f"✗ {self.name}: not yet.\n  Case: {attempt.case or 'the first one'}\n"
                              f"  Your code did not finish within {seconds} s, so the check stopped it.\n"
                              "  Hint: A loop whose exit condition is never met? Or work that grows with the data, "
                              "such as a pass over every example where a count would do: the course's own solution "
                              "runs every case in well under a second.", self.name)

    def _shape_problem(self, functions: tuple) -> str:
        """Why these objects cannot be called the way the course calls them ('' when they can)."""
        names = self.names
        if len(functions) != len(names):
            listed = ", ".join(names)
            return (f"this check takes {len(names)} function{'s' if len(names) > 1 else ''} ({listed}); "
                    f"it got {len(functions)}.")
        for name, fn, arity in zip(names, functions, self.arity or (None,) * len(names)):
            if not callable(fn):
                return (f"`{name}` is {type(fn).__name__}, not a function: run the cell that defines it, "
                        "then this one.")
            if arity is None:
                continue
            try:
                inspect.signature(fn).bind(*([None] * arity))
            except TypeError:
                return (f"your `{name}` takes ({_parameters(fn)}); the course calls it as {self.signature_of(name)}.\n"
                        f"  Hint: keep the parameters of the stub.")
            except ValueError:   # no signature available (a builtin): let the call decide
                continue
        return ""

    def signature_of(self, name: str) -> str:
        """The line of `signature` that names `name` (a pair's signature names both functions)."""
        return next((part.strip() for part in self.signature.split(";") if part.strip().startswith(name)),
                    self.signature)


_warmed: list[bool] = []


def _warm_torch() -> None:
    """Run torch's lazily imported parts once, outside any time limit (a deadline inside an import would leave
    a half-initialised module behind, and every later check would fail on it)."""
    if _warmed:
        return
    _warmed.append(True)
    p = torch.zeros(1, requires_grad=True)
    for optimizer in (torch.optim.SGD([p], lr=0.1, momentum=0.9), torch.optim.Adam([p], lr=0.1)):
        schedule = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
        (p * 2).sum().backward()
        optimizer.step()
        schedule.step()
    torch.nn.utils.clip_grad_norm_([p], 1.0)
    import hypothesis.strategies  # noqa: F401 - the generated cases' library, imported here, not under a deadline


def _parameters(fn: Callable) -> str:
    try:
        return ", ".join(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return "?"


def deadline_expired(attempt: "Attempt") -> bool:
    return bool(attempt.deadline and attempt.deadline.expired)


@dataclass(eq=False)
class Attempt:
    """What a checker drives: the learner's functions, called under the time limit with their errors explained."""

    exercise: Exercise
    functions: tuple[Callable, ...]
    case: str = ""
    calls: int = 0
    deadline: object = None
    files: set[str] = field(default_factory=set)
    first_lines: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for fn in self.functions:
            for code in _code_objects(fn):
                self.files.add(code.co_filename)
                self.first_lines[f"{code.co_filename}:{code.co_name}"] = code.co_firstlineno

    @property
    def fn(self) -> Callable:
        return self.functions[0]

    def at(self, case: str) -> None:
        """Say which case runs now (named in a failure or a timeout)."""
        self.case = case

    def call(self, case: str, *args, which: int = 0):
        """Call the learner's function `which` with `args` for `case`; its exceptions become a Fail."""
        self.at(case)
        return self.run(lambda: self.functions[which](*args), self.exercise.names[which])

    def run(self, thunk: Callable, name: str = ""):
        """Run code that runs the learner's code (a DataLoader over their Dataset, say); explain what it raises."""
        if deadline_expired(self):
            raise TimeUp()     # the deadline passed in code that swallowed it: stop at once
        self.calls += 1
        grad_mode = torch.is_grad_enabled()
        try:
            result = thunk()
        except NotImplementedError:
            name = name or self.exercise.names[0]
            if self.calls == 1:     # nothing written yet: not an attempt
                raise _stub_fail(name) from None
            raise Fail(f"`{name}` raises NotImplementedError for this case: part of it is still the stub.",
                       "Replace every `raise NotImplementedError` with code.") from None
        except TimeUp:
            raise
        except Stop as stop:
            raise stop.fail from None
        except (Exception, SystemExit) as exc:
            problem, hint = explain(exc, self.files, self.first_lines)
            raise Fail(problem, hint) from None
        finally:
            left_off = torch.is_grad_enabled() != grad_mode
            torch.set_grad_enabled(grad_mode)
        if left_off:
            raise Fail("after your function returned, gradients were still switched "
                       f"{'off' if grad_mode else 'on'} for everything that runs next (torch.set_grad_enabled is "
                       "global).", "Use `with torch.no_grad():` around the loop, so it switches back by itself.")
        return result


def _stub_fail(name: str) -> Fail:
    return Fail(f"`{name}` still raises NotImplementedError: it is the stub. Write your code in its place, run "
                "that cell, then run this one again.", counted=False)


# What `raise NotImplementedError` (or `raise NotImplementedError("...")`, a docstring above it) compiles to, on
# every supported Python: loading the name, perhaps calling it, raising. Anything else is code the learner wrote.
_STUB_OPS = {"RESUME", "NOP", "CACHE", "EXTENDED_ARG", "PUSH_NULL", "LOAD_GLOBAL", "LOAD_NAME", "LOAD_CONST",
             "PRECALL", "CALL", "RAISE_VARARGS"}


def _untouched_stub(fn: object) -> bool:
    """Is `fn` (a function, or a class, method by method) nothing but `raise NotImplementedError`?"""
    codes = _code_objects(fn)
    return bool(codes) and all(
        code.co_names == ("NotImplementedError",)
        and {i.opname for i in dis.get_instructions(code)} <= _STUB_OPS for code in codes)


def _all_code_objects(fn: object) -> list:
    """The code objects of `fn` (or its methods) and of every function or comprehension defined inside them."""
    found, todo = [], list(_code_objects(fn))
    while todo:
        code = todo.pop()
        found.append(code)
        todo += [c for c in code.co_consts if inspect.iscode(c)]
    return found


def _code_objects(fn: object) -> list:
    """The code objects of a function, or of a class's methods (where the learner's lines are)."""
    if inspect.isclass(fn):
        found = []
        for value in vars(fn).values():
            value = getattr(value, "__func__", value)
            if inspect.isfunction(value):
                found.append(value.__code__)
        return found
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    return [code] if code is not None else []
