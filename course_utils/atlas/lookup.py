"""Finding an atlas entry from a pasted message or traceback (issue 39's `explain`).

What varies between a learner's run and the atlas's is replaced by placeholders on both sides before the
two are compared: numbers, shapes and sizes, dtypes (keeping their kind: integer, floating or bool), tensor type
names (where a message names two, whether their devices and their dtypes agree: that tells the cause), device names,
quoted names (parameters, keys, classes), file paths and line numbers, a launcher's or logger's line prefix
("[rank1]:", glog's "[E... File.cpp:N]"); the surrounding traceback is dropped, keeping the exception lines (and,
for an error raised in a DataLoader worker, the worker's original error as well as the wrapper). A paste with no
exception line (frames, a "[...]" cut, the message alone) or one that starts inside a message (its detail lines
only) is compared as it is, its first line also against the templates' detail lines, at a discount; where nothing
printed was pasted, the quoted source line that raised is read (`raise T("...")`, `T("...")`, `assert ..., "..."`).
A paste cut short, wrapped over lines, joined into one or holding only a message's end is lined up with the
template's opening (`_aligned`). The comparison is
difflib's ratio over the placeholder-token sequences (``tokens.py`` makes them) (standard library: the atlas is a few dozen entries, a
lookup takes milliseconds, and a fuzzy-matching dependency would buy nothing measurable here), plus a small
bonus when the exception types agree. Below a threshold, no entry is claimed: the answer names the stage the
message's words point to instead.
"""
from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from course_utils.atlas.entry import Entry
from course_utils.atlas.tokens import LINE_PREFIX, LOG_RECORD, tokens

__all__ = ["Found", "MATCH", "MESSAGES", "error_lines", "lookup", "recorded", "residue", "score", "stage_of", "tokens"]

MATCH = 0.62          # the least score that names an entry
TELLING_MISSING = 0.6   # the score kept where the paste lacks a name the template's opening is about

# A traceback's frames and the lines between chained exceptions: what no entry is matched on
_FRAME = re.compile(r"^(?:Traceback \(most recent call last\)|\s*File \"|\s+\S|\s*\[\.\.\.\]|\s*\.\.\.\s*$|"
                    r"\s*[\^~]+\s*$|During handling of the above exception|The above exception was the direct cause)")
_HEAD = re.compile(r"^\s*(?:[\w.]+\.)?(\w*(?:Error|Exception|Warning|Interrupt|Exit))(?:\s?:\s?(.*))?$")
# Where a learner quotes the line of source that raised, not what it printed: `raise ValueError("...")`, the
# exception's repr `ValueError("...")` (an issue's title), or `assert cond, "..."`
_RAISED = re.compile(r"""^\s*(?:raise\s+)?(?:[\w.]+\.)?(\w*(?:Error|Exception|Warning))\(\s*[rbuf]?(["'])(.+?)\2""")
_ASSERTED = re.compile(r"""^\s*assert\b.*?,\s*[rbuf]?(["'])(.+?)\1\s*\)?\s*$""")
# ... or an exception whose line break was lost in the paste: "...(input, target) IndexError: Target 5 is out of bounds."
_INLINE = re.compile(r"\s(\w*(?:Error|Exception|Warning)):(?:\s(.*))?$")
_WARNING = re.compile(r"^.*?:\d+: (\w*Warning): (.*)$")
@dataclass(frozen=True)
class Found:
    """A lookup's answer: the entries best first with their scores, or none above the threshold and a stage."""

    matches: tuple[tuple[Entry, float], ...]     # above MATCH, best first
    closest: tuple[Entry, float] | None          # the best entry, even below MATCH
    stage: str                                   # the stage the message points to ("" if none)

    @property
    def best(self) -> Entry | None:
        return self.matches[0][0] if self.matches else None


def error_lines(text: str) -> list[tuple[str, str]]:
    """(type, message) for each exception or warning line in `text`, a message running on over the lines that
    follow it until a blank line, a traceback line or the next exception."""
    found: list[list[str]] = []
    current: list[str] | None = None
    indented, margin = False, 0
    for raw in text.splitlines():
        line = LINE_PREFIX.sub("", raw.rstrip()) if not raw.startswith((" ", "\t")) else raw.rstrip()
        warning = _WARNING.match(line)
        head = _HEAD.match(line) if not warning else None
        if not warning and not head and LOG_RECORD.match(raw) and line.strip():
            current, indented, margin = ["", line.strip()], False, 0      # a log record: a message of its own
            found.append(current)
        elif warning:
            current, indented, margin = [warning.group(1), warning.group(2)], False, 0
            found.append(current)
        elif head and (head.group(2) is not None or not found):
            current, indented = [head.group(1), head.group(2) or ""], False
            margin = len(raw) - len(raw.lstrip())      # a whole block pasted indented: its lines share the margin
            found.append(current)
        elif current is not None and line.strip() and not line.lstrip().startswith(("^", "File ")) and (
                not line.startswith(("Traceback", "  File ", "    ")) or not current[1].strip() or indented
                or (margin and len(raw) - len(raw.lstrip()) == margin)):
            # (an indented line continues only a message that has no text yet, and then the lines after it:
            # Python's own multi-line messages, "RuntimeError:" with its paragraph indented below it; otherwise it
            # is a frame's source line)
            indented = indented or (line.startswith(" ") and not current[1].strip())
            current[1] += "\n" + line.strip()
        elif not line.strip():
            current = None
    if not found:          # no line says what was printed: the source line that raised, if quoted, or an
        for i, raw in enumerate(text.splitlines()):     # exception pasted at the end of a frame's line
            raised, asserted, inline = _RAISED.match(raw), _ASSERTED.match(raw), _INLINE.search(raw)
            if raised:
                found.append([raised.group(1), raised.group(3)])
            elif asserted:
                found.append(["AssertionError", asserted.group(2)])
            elif inline:
                rest = (inline.group(2) or "").strip() or "\n".join(text.splitlines()[i + 1:i + 2])
                found.append([inline.group(1), rest])
    return [(kind, message.strip()) for kind, message in found]


def residue(text: str) -> str:
    """A pasted text with no exception line (the message alone, or the lines after a cut "[...]"): what is left
    once the traceback's frames and the loggers' prefixes are dropped."""
    kept = [LINE_PREFIX.sub("", line).strip() for line in text.splitlines()
            if line.strip() and (line.startswith("\t") or not _FRAME.match(line))]
    return "\n".join(line for line in kept if line)


MESSAGES = Path(__file__).with_name("messages.json")   # every entry's messages as run: tools/atlas.py sync


@lru_cache(maxsize=1)
def recorded() -> dict[str, dict]:
    """id -> {"type": ..., "messages": [one per params set]}, as the runs gave them (read, not re-run: a lookup is
    instant; a test re-runs the atlas and checks this file)."""
    return json.loads(MESSAGES.read_text(encoding="utf-8"))


def _templates(entries: tuple[Entry, ...], leave_out: tuple[str, int] | None = None
               ) -> list[tuple[Entry, str, str]]:
    """Each entry's messages (its run, its variants, then how older torch worded it: learners paste what their
    version printed); `leave_out` = (id, variant) drops one (the tests ask for a variant's message with that
    message itself left out, so the lookup is tested on a message it does not hold)."""
    saved = recorded()
    return [(entry, entry.expect, message) for entry in entries
            for i, message in enumerate(saved.get(entry.id, {}).get("messages", []) + list(entry.wordings))
            if (entry.id, i) != leave_out]


def _last_type(text: str) -> str | None:
    """The exception type the paste's last exception line names (the original error under a wrapper's)."""
    heads = [m.group(1) for m in map(_HEAD.match, text.strip().splitlines()) if m]
    return heads[-1] if heads else None


@lru_cache(maxsize=512)
def _ends_in(entry_id: str) -> str | None:
    """The exception type the last line of the entry's recorded message names."""
    messages = recorded().get(entry_id, {}).get("messages", [])
    return _last_type(messages[0]) if messages else None


@lru_cache(maxsize=4096)
def _tokens_cached(message: str) -> tuple[str, ...]:
    return tokens(message)


def _ratio(a: tuple[str, ...], b: tuple[str, ...]) -> float:
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() if a and b else 0.0


def _inner(template: str) -> list[str]:
    """The messages of the errors a template carries below its opening line (a DataLoader worker's original error)."""
    return [head.group(2) for head in map(_HEAD.match, template.strip().splitlines()[1:]) if head and head.group(2)]


@lru_cache(maxsize=256)
def _own_inner(entry_id: str) -> bool:
    """Is the error an entry's wrapper carries the entry's own, the same in every run of it (a worker that cannot
    resize a shared storage), rather than an example that varies (whatever a dataset happened to raise)?"""
    runs = [tuple(_tokens_cached(m) for m in _inner(t)) for t in recorded().get(entry_id, {}).get("messages", [])]
    return bool(runs) and bool(runs[0]) and len(set(runs)) == 1


@lru_cache(maxsize=1024)
def _template_lines(template: str, with_inner: bool = False) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """A template's opening line and its own detail lines, as tokens, not frames; `with_inner`: also the message of
    the original error it carries (learners often paste only that last line)."""
    lines = template.strip().splitlines() or [""]
    details = [line for line in lines[1:] if line.strip() and not _HEAD.match(line)
               and (line.startswith("\t") or not _FRAME.match(line)) and not line.startswith("Original Traceback")]
    return _tokens_cached(lines[0]), tuple(_tokens_cached(line) for line in details + (_inner(template)
                                                                                          if with_inner else []))


@lru_cache(maxsize=256)
def _paste(message: str) -> tuple[tuple[str, ...], ...]:
    """A pasted message's first line and, for a message over several lines, those lines joined into one (one line
    of torch's that a terminal or an issue's editor wrapped), as tokens: computed once, compared with every template."""
    lines = message.strip().splitlines() or [""]
    joined = (_tokens_cached(" ".join(line.strip() for line in lines)),) if len(lines) > 1 else ()
    return (_tokens_cached(lines[0]),) + joined


def _aligned(paste: tuple[str, ...], opening: tuple[str, ...]) -> float:
    """How a paste lines up with a template's opening, whole tokens at its edges (0 when it does not): the paste cut
    short (a title, "...modified by an inplace operation" without what follows) or the opening plus what the learner
    joined to it (0.95), or only the opening's end, the last line of a wrapped warning (0.9); eight tokens at least,
    or four for the opening's whole first sentence, its full stop included."""
    cut = paste[:-1] if paste[-1:] in ((".",), (":",)) else paste
    if len(cut) >= 8 and opening[:len(cut)] == cut or len(opening) >= 8 and paste[:len(opening)] == opening:
        return 0.95
    if len(cut) >= 4 and paste[-1:] == (".",) and opening[:len(paste)] == paste:
        return 0.95          # the opening's whole first sentence ("Weights only load failed."), however short
    return 0.9 if len(cut) >= 8 and opening[-len(cut):] == cut else 0.0


CONTAINED = 0.85       # the score of a paste found word for word inside a template
_NOT_WORDS = {"NAME", "NUM", "PATH", "SHAPE", "ADDR", "DEVICE"}


def _contained(pasted: tuple[str, ...], full: tuple[str, ...], least: int = 6, words: int = 4) -> bool:
    """Is the paste (at least `least` tokens, `words` of them words) a run of the template's tokens?"""
    if len(pasted) < least or len(pasted) >= len(full):
        return False
    if sum(t.isalpha() and t not in _NOT_WORDS and not t.startswith("name_") for t in pasted) < words:
        return False
    n = len(pasted)
    return any(full[i:i + n] == pasted for i in range(len(full) - n + 1))


def score(kind: str, message: str, expected: str, template: str, with_inner: bool = False) -> float:
    """How alike two messages are, about [0, 1]: their first lines (where torch says what went wrong) weigh 0.7, the
    whole messages 0.3 (the hints that follow are often shared: CUDA's, autograd's; a paste of one line against the
    template only as far as it goes), agreeing types add 0.05."""
    head, *joined = _paste(message)
    opening, details = _template_lines(template, with_inner)
    # A paste may start inside the message ("size mismatch for ..." without the line that opens it): its first
    # line is also matched against the template's own detail lines, at a discount, so that the opening line,
    # where it is pasted, counts for more.
    first = max([_ratio(head, opening)] + [0.9 * _ratio(head, line) for line in details]
                + [_ratio(line, opening) for line in joined] + [_aligned(line, opening) for line in [head, *joined]])
    # the whole messages; a paste of one line (the first line alone, what most reports quote) against the template
    # cut to its length, not marked down for the hint paragraph it left out
    pasted, full = _tokens_cached(message), _tokens_cached(template)
    whole = _ratio(pasted, full if joined else full[:max(len(pasted), len(opening))])
    value = 0.7 * first + 0.3 * whole + (0.05 if kind == expected else 0.0)
    # A paste without an exception's name that is a piece of the message, word for word (a warning's first sentence
    # quoted in an issue's title, "Detected call of `lr_scheduler.step()` before `optimizer.step()`"), is that
    # message, however short the piece
    if not kind and _contained(pasted, full):
        value = max(value, CONTAINED)
    # A name the template's opening keeps because it tells the cause ('NoneType' object has no attribute, a
    # wrapper's, a checkpoint's part, an optimizer's state) and the paste lacks: the rest of the words are the
    # common part of the message ("'OrderedDict' object has no attribute 'eval'" is not a gradient left None)
    if {token for token in opening if token.startswith("name_")} - set(pasted):
        value *= TELLING_MISSING
    return value


def _telling_fit(entry_id: str, pasted: frozenset[str]) -> int:
    """Of the names that tell a cause ("module.", "_orig_mod.", "num_batches_tracked", a checkpoint's part) in the
    entry's recorded messages, how many the paste holds less how many it lacks, for its best-fitting message."""
    fits = []
    for message in recorded().get(entry_id, {}).get("messages", []):
        telling = {token for token in _tokens_cached(message) if token.startswith("name_")}
        fits.append(len(telling & pasted) - len(telling - pasted))
    return max(fits, default=0)


STAGE_WORDS = {
    "data": ("dataloader", "collate", "worker", "dataset", "sampler", "batch", "numpy"),
    "step": ("backward", "grad", "optimizer", "loss", "target", "shape", "size", "scheduler", "lr_scheduler"),
    "precision": ("half", "bfloat16", "float16", "autocast", "scaler", "fp16", "overflow"),
    "evaluation": ("eval", "no_grad", "inference", "validation"),
    "checkpoint": ("state_dict", "load", "save", "checkpoint", "unpickl", "deserialize", "zip", "weights_only"),
    "distributed": ("process group", "rank", "distributed", "nccl", "gloo", "ddp", "all_reduce", "reduction"),
}


def stage_of(text: str) -> str:
    low = text.lower()
    counts = {stage: sum(low.count(w) for w in words) for stage, words in STAGE_WORDS.items()}
    stage, count = max(counts.items(), key=lambda item: item[1])
    return stage if count else ""


# what an issue's editor adds to a pasted line: a quote's "> " markers, bold's "**"
_MARKDOWN = re.compile(r"^[ \t]*(?:>[ \t]?)+|\*\*", re.MULTILINE)
# ... and an error quoted as inline code inside a sentence ("`RuntimeError: expected ...` would occur when"): its
# own line, as torch printed it
_QUOTED_ERROR = re.compile(r"`((?:[\w.]+\.)?\w*(?:Error|Exception|Warning):[^`\n]+)`")
_SAYS_ERROR = re.compile(r"(?i)\berror\b|\bfailed\b|\bassert")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
# names every fragment (and many a traceback) holds, which tell one fragment from another nothing
_EVERYWHERE = frozenset({"torch", "tensor", "dtype", "manual_seed", "randn", "shown", "float", "long", "size", "shape",
                         "print", "self", "return", "import", "from", "range", "None", "True", "False"})


@lru_cache(maxsize=512)
def _code_words(code: str) -> frozenset[str]:
    return frozenset(_IDENTIFIER.findall(code)) - _EVERYWHERE


def lookup(text: str, entries: tuple[Entry, ...] | None = None, limit: int = 3,
           leave_out: tuple[str, int] | None = None) -> Found:
    """The atlas entries for a pasted message or traceback, best first (see the module)."""
    if entries is None:
        from course_utils.atlas import ENTRIES as entries
    text = _QUOTED_ERROR.sub(lambda m: "\n" + m.group(1) + "\n", _MARKDOWN.sub("", text))
    lines, rest = error_lines(text), residue(text)
    if not lines or (rest and not error_lines(rest.splitlines()[0])):
        # no exception line, or the paste starts inside a message ("Caught ... in DataLoader worker process 0."
        # with the worker's error below it, or "size mismatch for ..." without its opening line): the paste itself
        lines = lines + [("", rest or text.strip())]
    best: dict[str, tuple[Entry, float]] = {}

    def compare(candidates: list[tuple[str, str]]) -> None:
        for kind, message in candidates:
            for entry, expected, template in _templates(tuple(entries), leave_out):
                value = score(kind, message, expected, template, _own_inner(entry.id))
                if entry.id not in best or value > best[entry.id][1]:
                    best[entry.id] = (entry, value)
    compare(lines)
    logged = [line for line in rest.splitlines() if line.strip()]
    if max((value for _, value in best.values()), default=0.0) < MATCH and len(logged) > 1:
        # nothing matched the paste as a whole, and it is a log with lines of its own (programs' output, then the
        # line that says what failed, often the last): each line that says so, alone
        compare([("", line) for line in logged if _SAYS_ERROR.search(line) or line is logged[-1]])
    # Entries whose messages read the same (one torch message, two causes) tie: first the entry whose telling names
    # (a wrapper's prefix, a BatchNorm's counter) the paste holds; then the entry whose message ends in
    # the exception the paste ends in (a worker's "Caught KeyError ..." over a pandas ValueError is the generic
    # worker error, not an entry whose original error is a RuntimeError); then the paste's own code, where it holds
    # frames, puts first the entry whose fragment shares more of its names ("BCEWithLogitsLoss", "logits")
    words, last, pasted = set(_IDENTIFIER.findall(text)), _last_type(text), frozenset(_tokens_cached(text))
    # an entry whose every message names a telling key the paste lacks anywhere (a BatchNorm counter's key, against
    # a paste of "module." keys) is that message's cause only in part: marked down as a missing opening name is
    for entry_id, (entry, value) in list(best.items()):
        if _telling_fit(entry_id, pasted) < 0:
            best[entry_id] = (entry, value * TELLING_MISSING)
    ranked = sorted(best.values(), key=lambda pair: (-round(pair[1], 3), -_telling_fit(pair[0].id, pasted),
                                                     last is None or last != _ends_in(pair[0].id),
                                                     -len(_code_words(pair[0].code) & words)))
    # An entry whose message only reports that another error came first (torchrun's "failed (exitcode: 2)") goes
    # after every other entry the paste matches: the error above it in the log is the cause
    ranked = ([pair for pair in ranked if not (pair[0].reports_another and pair[1] >= MATCH)]
              + [pair for pair in ranked if pair[0].reports_another and pair[1] >= MATCH])
    ranked = sorted(ranked, key=lambda pair: pair[1] < MATCH)      # (stable: those below the line stay last)
    matches = tuple(pair for pair in ranked if pair[1] >= MATCH)[:limit]
    return Found(matches, ranked[0] if ranked else None, stage_of(text))
