"""The checkers' words (every chapter's exercises): values, exceptions and wrong types, said the way a learner reads them.

Nothing here may raise on a strange value: a learner's function can return anything (None, a
generator, an object whose repr fails, a tensor full of NaN), and the verdict must still be a sentence.
"""
from __future__ import annotations

import linecache
import math
import numbers
import traceback
import types

import torch


class Fail(Exception):
    """One case the learner's code gets wrong: what went wrong (their words) and a hint that is not the answer."""

    def __init__(self, problem: str, hint: str = "", case: str = "", counted: bool = True):
        super().__init__(problem)
        self.problem, self.hint, self.case, self.counted = problem, hint, case, counted


class Stop(BaseException):
    """Raised from a check's hook inside the learner's code (an update past the budget): ends the call with `fail`.

    A BaseException, so the learner's `except Exception` cannot swallow it; `Attempt.run` turns it into its Fail.
    """

    def __init__(self, fail: Fail):
        super().__init__(fail.problem)
        self.fail = fail


def number(x: float) -> str:
    """A float in 4 significant digits (what every message prints), never raising."""
    try:
        x = float(x)
    except Exception:  # noqa: BLE001
        return "?"
    if math.isnan(x) or math.isinf(x):
        return str(x)
    return f"{x:.4g}"


def pair(a: float, b: float) -> tuple[str, str]:
    """Two floats printed to the digits that differ, both alike (1.11626 and 1.11634, never 1.116 and 1.116)."""
    try:
        a, b = float(a), float(b)
    except Exception:  # noqa: BLE001
        return number(a), number(b)
    digits = _telling(a, b)
    if digits is None:
        return repr(a), repr(b)
    return _aligned(f"{a:.{digits}g}", f"{b:.{digits}g}")


def _telling(a: float, b: float) -> int | None:
    """The fewest significant digits (4 or more) at which a and b print differently; None if none do."""
    return next((d for d in range(4, 18) if f"{a:.{d}g}" != f"{b:.{d}g}"), None)


def _aligned(x: str, y: str) -> tuple[str, str]:
    """Pad the shorter decimal part with zeros, so 1.11626 and 1.1163 read 1.11626 and 1.11630."""
    if "e" in x + y or "." not in x or "." not in y or "n" in x + y:
        return x, y
    width = max(len(x.split(".")[1]), len(y.split(".")[1]))
    return x.ljust(len(x.split(".")[0]) + 1 + width, "0"), y.ljust(len(y.split(".")[0]) + 1 + width, "0")


differ = pair      # the name core.py's list uses


def values_pair(a: object, b: torch.Tensor, limit: int = 12) -> tuple[str, str]:
    """Two tensors' values printed alike, with enough digits that the first differing element reads differently."""
    if not isinstance(a, torch.Tensor) or a.shape != b.shape:
        return values(a, limit), values(b, limit)
    try:
        x, y = a.detach().double().flatten(), b.detach().double().flatten()
        index = next((i for i in range(len(x)) if x[i] != y[i]), None)
        if index is None:
            return values(a, limit), values(b, limit)
        digits = _telling(x[index].item(), y[index].item()) or 17
        return _listed(x, digits, limit), _listed(y, digits, limit)
    except Exception:  # noqa: BLE001
        return values(a, limit), values(b, limit)


def _listed(flat: torch.Tensor, digits: int, limit: int) -> str:
    shown = ", ".join(f"{v:.{digits}g}" for v in flat[:limit].tolist())
    return f"[{shown}{', ...' if len(flat) > limit else ''}]"


def values(t: object, limit: int = 12) -> str:
    """A tensor's values as a plain list ([0.511, -0.278]); a long one by its shape and first values."""
    if not isinstance(t, torch.Tensor):
        return show(t)
    try:
        if t.dim() == 0:
            return show(t.item())
        if t.dim() == 2 and t.numel() <= limit:
            return "[" + ", ".join(values(row) for row in t) + "]"
        flat = t.detach().flatten().tolist()
        listed = ", ".join(show(v) for v in flat[:limit])
        if len(flat) > limit or t.dim() > 1:
            return f"[{listed}{', ...' if len(flat) > limit else ''}] (shape {tuple(t.shape)}, flattened)"
        return f"[{listed}]"
    except Exception:  # noqa: BLE001
        return show(t)


def show(value: object, limit: int = 80) -> str:
    """A short description of any value: numbers as numbers, tensors by dtype, shape and first values."""
    try:
        if isinstance(value, torch.Tensor):
            return _tensor(value, limit)
        if isinstance(value, bool) or value is None:
            return repr(value)
        if isinstance(value, numbers.Integral):
            return str(int(value))
        if isinstance(value, float):
            return number(value)
        if isinstance(value, (list, tuple)) and len(value) <= 12 and not any(
                isinstance(v, (list, tuple, dict)) for v in value):
            inner = ", ".join(show(v, 30) for v in value)
            text = f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
        elif isinstance(value, (types.GeneratorType, map, filter, zip)):
            return f"a {type(value).__name__} object (not its values)"
        else:
            text = repr(value)
    except Exception:  # noqa: BLE001 - a broken __repr__ still gets described
        return f"a {type(value).__name__} object"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _tensor(t: torch.Tensor, limit: int) -> str:
    head = f"a {str(t.dtype).removeprefix('torch.')} tensor of shape {tuple(t.shape)}"
    if t.numel() == 0:
        return head
    if t.numel() == 1:
        return f"{head}: {show(t.item())}"
    flat = t.detach().flatten()[:6].tolist()
    values = ", ".join(show(v) for v in flat) + (", ..." if t.numel() > 6 else "")
    return f"{head}: [{values}]"[:limit + 40]


def kind(value: object) -> str:
    """'an int', 'a tensor', 'None': what a value is, for 'your function returned ...'."""
    if value is None:
        return "None"
    if isinstance(value, torch.Tensor):
        return "a tensor"
    if isinstance(value, bool):
        return "a bool"
    name = type(value).__name__
    return f"an {name}" if name[:1].lower() in "aeiou" else f"a {name}"


# --- the types a function must return ---------------------------------------------------------------

def as_numbers(value: object) -> list[float | int] | None:
    """The numbers in a list, tuple, NumPy array or 1-D tensor (ints stay ints); None if it is not such a thing."""
    if isinstance(value, torch.Tensor):
        value = value.tolist() if value.dim() == 1 else None
    elif type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        value = value.tolist() if getattr(value, "ndim", 0) == 1 else None
    if not isinstance(value, (list, tuple)):
        return None
    if not all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in value):
        return None
    return [int(v) if isinstance(v, numbers.Integral) else float(v) for v in value]


# The course's one rule for accuracies (issue 40 item 4), stated in every statement that asks for one: an accuracy
# is the integer count of right predictions divided once by the number of examples, in Python floats, and checks
# compare it to within ACCURACY_RTOL. Float64 rounding passes; a float32 mean is off by up to 6e-8 and does not
# (232 of 300 is 0.77333331 in float32, below the 0.77333333 a race's target may be). Counts are compared as ints.
ACCURACY_RTOL = 1e-9
ACCURACY_HINT = ("Count the right predictions as an integer (`.sum().item()`) and divide once by the number of "
                 "examples, in Python floats: a float32 mean is rounded to 7 digits.")


def accuracy_close(got: float, want: float) -> bool:
    """The accuracy rule: within ACCURACY_RTOL of the exact fraction (float64 rounding passes, float32 does not)."""
    return math.isclose(got, want, rel_tol=ACCURACY_RTOL, abs_tol=1e-12)


def float32_rounded(got: float, want: float) -> bool:
    """Whether `got` is `want` rounded to float32 (a float32 mean where the rule asks for an integer count)."""
    return got != want and got == float(torch.tensor(want, dtype=torch.float32))


def need_int(value: object, what: str = "your function returned") -> int:
    """An int (a NumPy integer is fine); otherwise Fail saying what came back."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        hint = "Return a whole number: int, not float (`/` always makes a float; `//` or math.ceil keep ints)."
    elif isinstance(value, torch.Tensor):
        hint = "Return a plain Python int, not a tensor (`.item()` turns a one-element tensor into a number)."
    else:
        hint = "Return a whole number (an int)."
    raise Fail(f"{what} {kind(value)} ({show(value)}), not a whole number.", hint)


def need_float(value: object, what: str = "your function returned") -> float:
    """A Python number (float or int, not a tensor or a bool); otherwise Fail."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, torch.Tensor):
        hint = ("Return a Python float, not a tensor: `.item()` gives the number and lets the graph behind the "
                "tensor be freed.")
    else:
        hint = "Return a Python float."
    raise Fail(f"{what} {kind(value)} ({show(value)}), not a number.", hint)


def need_tuple(value: object, length: int, what: str, names: str) -> tuple:
    """A tuple (or list) of `length` items; otherwise Fail naming what the items should be."""
    if isinstance(value, (tuple, list)) and len(value) == length:
        return tuple(value)
    got = f"{kind(value)} of {len(value)} items" if isinstance(value, (tuple, list)) else kind(value)
    raise Fail(f"{what} returned {got} ({show(value)}); it should return {length} things: {names}.",
               f"End with `return {names}`.")


def need_tensor(value: object, what: str, dtype: torch.dtype | None = None, shape: tuple | None = None,
                meaning: str = "") -> torch.Tensor:
    """A tensor of the given dtype and shape; otherwise Fail saying which of them is off."""
    if not isinstance(value, torch.Tensor):
        raise Fail(f"{what}: {kind(value)} ({show(value)}), not a tensor.",
                   "Build it with torch (torch.tensor, torch.zeros, torch.stack, ...).")
    if shape is not None and tuple(value.shape) != tuple(shape):
        swapped = len(shape) == 2 and tuple(value.shape) == tuple(shape)[::-1] and shape[0] != shape[1]
        raise Fail(f"{what} has shape {tuple(value.shape)}; it should be {tuple(shape)}{meaning}.",
                   "Your two dimensions are swapped: the first one counts the batch's examples." if swapped else "")
    if dtype is not None and value.dtype != dtype:
        name = str(dtype).removeprefix("torch.")
        raise Fail(f"{what} has dtype {str(value.dtype).removeprefix('torch.')}; it should be {name}.",
                   f"Create it as {name} (dtype=torch.{name}) or convert it with .to(torch.{name}).")
    return value


# --- exceptions --------------------------------------------------------------------------------------

_HINTS = [  # (words in the message, hint): the common ones, in the learner's terms
    ("does not require grad and does not have a grad_fn",
     "backward() found no graph: was the forward run under torch.no_grad(), or the loss detached (.item())?"),
    ("Trying to backward through the graph a second time",
     "backward() ran twice through one graph: compute a fresh loss for every backward."),
    ("shapes cannot be multiplied", "The shapes of a product do not fit: print the shapes of both sides."),
    ("must match the size of tensor", "Two tensors of different lengths were combined: print their shapes."),
    ("stack expects each tensor to be equal size", "torch.stack needs equal lengths: pad first."),
    ("expected scalar type", "Two tensors of different dtypes met: convert one (.long(), .float())."),
    ("is not callable", "Something that is not a function was called: check the names in that line."),
    ("positional argument", "A function was called with the wrong number of arguments: check that line."),
    ("unexpected keyword argument", "A function was called with an argument it does not take."),
    ("by zero", "Something was divided by zero: which denominator can be 0 for this case?"),
    ("out of range", "An index went past the end: compare it with the length."),
    ("list index out of range", "An index went past the end of a list."),
    ("object is not subscriptable", "Indexing ([...]) was applied to something that is not a sequence."),
    ("has no attribute", "A name after a dot does not exist on that object: check its spelling and type."),
]


def where(exc: BaseException, files: set[str], first_lines: dict[str, int]) -> str:
    """' (line 3 of `evaluate`: `total += loss`)': the deepest line of the learner's code in the traceback."""
    try:
        every = traceback.extract_tb(exc.__traceback__)
        frames = [f for f in every if f.filename in files]
        if not frames:
            return ""
        frame = frames[-1]
        text = (frame.line or linecache.getline(frame.filename, frame.lineno)).strip()
        name, first = frame.name, first_lines.get(f"{frame.filename}:{frame.name}")
        if first is None:   # a comprehension's own frame (Python < 3.12): name the function it sits in
            around = [(start, key.rsplit(":", 1)[1]) for key, start in first_lines.items()
                      if key.rsplit(":", 1)[0] == frame.filename and start <= frame.lineno]
            first, name = max(around) if around else (None, name)
        line = f"line {frame.lineno - first + 1}" if first else f"line {frame.lineno}"
        inside = "" if frame is every[-1] else ", inside a call it made"
        code = f": `{text[:70]}`" if text else ""
        return f" (at {line} of `{name}`{code}{inside})"
    except Exception:  # noqa: BLE001 - the place is a courtesy; never let it hide the message
        return ""


def explain(exc: BaseException, files: set[str], first_lines: dict[str, int]) -> tuple[str, str]:
    """(problem, hint) for an exception the learner's code raised: its type, first line, and where."""
    try:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    except Exception:  # noqa: BLE001
        message = ""
    message = message if len(message) <= 160 else message[:157] + "..."
    name = type(exc).__name__
    problem = f"your code raised {name}" + (f": {message}" if message else "") + where(exc, files, first_lines)
    hint = next((h for words, h in _HINTS if words in message), "")
    if isinstance(exc, SystemExit):
        problem, hint = "your code called exit()", "Return a value instead of exiting."
    if isinstance(exc, RecursionError):
        hint = "A function calls itself without end: check its stopping case."
    return problem + ".", hint or "Read the line it names, and what the case gave it."
