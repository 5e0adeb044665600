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
difflib's ratio over the placeholder-token sequences (standard library: the atlas is a few dozen entries, a
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
from course_utils.atlas.optimizer_keys import optimizer_state_names

MATCH = 0.62          # the least score that names an entry
REPORTS_ANOTHER = ("torchrun-child-failed",)   # entries whose message says another error happened first
TELLING_MISSING = 0.6   # the score kept where the paste lacks a name the template's opening is about

# What a launcher or a C++ logger writes before a line: torchrun's "[rank1]:", glog's "[E1218 20:27:21.4 File.cpp:629]"
# (and torch's Python logging in glog's form: "E1129 20:15:46.554000 25342 torch/.../api.py:836]")
_RANK = r"(?:\[(?:rank|Rank)\s*\d+\]:?\s*)?"
_GLOG_CPP = r"\[[EWIF]\d*[^\]]*?\.(?:cpp|cc|cu|h|hpp):\d+\]"
_GLOG_PY = r"[EWIF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+\s+\S+\.py:\d+\]"
# ... and Python logging's own formats, as older torch wrote its launcher's records: the default
# "ERROR:torch.distributed.elastic.multiprocessing.api:" and "[2023-12-08 01:40:46,962] torch.distributed...: [ERROR]"
_LEVEL = r"(?:CRITICAL|ERROR|WARNING|INFO|DEBUG)"
_PYLOG = rf"(?:{_LEVEL}:[\w.]+:|\[\d{{4}}-\d\d-\d\d [\d:,.]+\]\s+[\w.]+:\s+\[{_LEVEL}\])"
_LINE_PREFIX = re.compile(rf"^\s*{_RANK}(?:{_GLOG_CPP}\s*)?(?:{_GLOG_PY}\s*)?(?:{_PYLOG}\s*)?")
# ... of which a logger's record is a line of its own, never the rest of the message above it: torchrun logs
# "failed (exitcode: 1) ..." right below the rank's own error
_LOG_RECORD = re.compile(rf"^\s*{_RANK}(?:{_GLOG_CPP}|{_GLOG_PY}|{_PYLOG})")
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
# Quoted names are placeholders, except the first part of a key that tells the cause: a wrapper's prefix
# ("module.", "_orig_mod.") or a whole checkpoint's keys ("model", "optimizer", ...)
TELLING = ("module", "_orig_mod", "target",          # torch 1.x's "for argument #2 'target'": the labels
           "param_groups",                            # KeyError: 'param_groups': not an optimizer's state
           "NoneType", "DistributedDataParallel", "DataParallel",   # "'X' object has no attribute": X tells
           "numpy")                                   # "module 'numpy' has no attribute": a NumPy version's
# ... and "module 'torch.utils.data.dataloader' has no attribute" (or "cannot import name ... from 'torch...'"): a
# name an older torch had, whichever of its modules
_TORCH_MODULE = re.compile(r"\b(module|from) 'torch(?:\.[\w.]+)?'")
# ... and so, after it, does an array's attribute read on None (an image that was not read): the name stays a name
# as well, so the object tells more than the attribute
ARRAY_ATTRIBUTES = ("shape",)
WRAPPERS = ("DistributedDataParallel", "DataParallel")     # one cause: your model is inside as .module
# ... and a whole checkpoint's keys, all one kind of name: where a checkpoint keeps its parts, whichever it chose
CHECKPOINT_KEYS = ("model", "state_dict", "model_state_dict", "optimizer", "optimizer_state_dict", "epoch", "net",
                   "scheduler")
# (a name has no spaces: a quoted sentence, such as the whole message a KeyError prints in quotes, stays words)
_QUOTED = re.compile(r"'([^'\s]{1,80})'|\"([^\"\s]{1,80})\"|`([^`\s]{1,80})`")


def _name(match: re.Match) -> str:
    text = next(group for group in match.groups() if group is not None)
    first = text.split(".")[0]
    if first in ARRAY_ATTRIBUTES:
        return f" NAME NAME_{first} "
    if text in optimizer_state_names():     # KeyError: 'betas', 'momentum', ...: another optimizer class's state
        return " NAME_optimizer_state "
    if text.split(".")[-1] in ("OrderedDict", "dict"):   # "'collections.OrderedDict' object has no attribute":
        return " NAME_state_dict_object "                  # a state_dict (or a checkpoint dict), not a model
    if first in CHECKPOINT_KEYS:
        return " NAME_checkpoint_part "
    return f" NAME_{'wrapper' if first in WRAPPERS else first} " if first in TELLING else " NAME "


_SUBS = (
    # a rule drawn with a character repeated ("=====", "-----", as torchrun frames its summary): one token, its width
    # being the width of what it frames
    (re.compile(r"([=\-_*~#])\1{2,}"), " RULE "),
    (re.compile(r"^\s*\S+ FAILED\s*$", re.MULTILINE), " SCRIPT FAILED "),   # torchrun's summary: whose script failed
    # torch 1.x ended many messages with the C++ source that raised them ("at /pytorch/aten/src/THC/...cu:18",
    # "at c:\\...\\THTensorMath.c:1434"): where torch was built, not what went wrong
    (re.compile(r"\s+at\s+(?:[A-Za-z]:)?[^\s]*\.(?:cpp|cuh|hpp|cc|cu|c|h)(?::\d+)?(?![\w.])"), " "),
    # ... and worded CUDA's errors in its own way: "cuda runtime error (59) : X", "THCudaCheck FAIL file=... line=40
    # error=48 : X", where torch now says "CUDA error: X"
    (re.compile(r"\bcuda runtime error \(\d+\)\s*:|\bTHCudaCheck FAIL file\s*=.*?\berror\s*=\s*\d+\s*:"),
     "CUDA error:"),
    (re.compile(r"<[\w.]+ object at 0x(?:[0-9a-fA-F]+|<address>)>"), " OBJECT "),
    # an OS error's number says which error it is ("[Errno 2] No such file", "[Errno 13] Permission denied"): kept
    # as one token, so that two OS errors alike only in their "[Errno N] ...: 'path'" frame do not read as one
    (re.compile(r"\[Errno (\d+)\]"), r" ERRNO_\1 "),
    (re.compile(r"(state_dict for )\w+"), r"\1 MODEL "),       # the learner's own model class
    (re.compile(r"(?:[A-Za-z]:)?(?:/|\\\\)[\w.<>~/\\\\-]+\.(?:py|pt|pth|ckpt|bin|safetensors|tar)\b"), " PATH "),
    (re.compile(r"(?<![\w.])(?:/[\w.<>~-]+)+/?"), " PATH "),
    # a relative one, folders and all ("checkpoints/run1", "<tmp>/exp1" as the atlas records a temporary folder)
    (re.compile(r"(?<![\w./<>])(?:<tmp>|[\w.-]+)(?:/[\w.-]+)+/?"), " PATH "),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), " ADDR "),
    (re.compile(r"torch\.Size\(\[[^\]]*\]\)"), " SHAPE "),
    (re.compile(r"\[\s*-?\d+(?:\s*,\s*-?\d+)*\s*,?\s*\]"), " SHAPE "),
    (re.compile(r"\(\s*-?\d+(?:\s*[,x]\s*-?\d+)+\s*\)"), " SHAPE "),
    (re.compile(r"\b\d+x\d+(?:x\d+)*\b"), " SHAPE "),
    (re.compile(r"\b(?:cuda|cpu|meta|mps|xpu|hip)(?::\d+)?\b"), " DEVICE "),
    # a dtype's kind stays, its width does not: "expected Long but found Int" (class labels) is another error than
    # "expected Float but found Double" (inputs against weights), though both name two dtypes
    (re.compile(r"\b(?:torch\.)?(?:c10::)?(?:Long|Int|Short|Byte|Char|int(?:8|16|32|64)?|uint8|long)\b"), " INTDTYPE "),
    (re.compile(r"\b(?:torch\.)?(?:c10::)?(?:float(?:16|32|64)?|double|half|bfloat16|BFloat16|Half|Float|Double|"
                r"ComplexFloat)\b"), " FLOATDTYPE "),
    (re.compile(r"\b(?:torch\.)?(?:c10::)?(?:Bool|bool)\b"), " BOOLDTYPE "),
    (re.compile(r"-?\b\d+(?:\.\d+)?(?:e[-+]?\d+)?\b"), " NUM "),
)
# A tensor type's name ("torch.cuda.HalfTensor", torch 0.4's "CUDAFloatTensor", "CPUBFloat16Type"): its device and
# dtype. Where a message names two, what tells the cause is how they differ ("Input type (A) and weight type (B)":
# the same dtype on two devices is a batch left on the CPU, two dtypes on one device a cast model), so the pair
# becomes TENSORTYPE twice, the second followed by SAMEDEVICE or OTHERDEVICE and SAMEDTYPE or OTHERDTYPE
# (and in "Input type (double) and bias type (float)", a CPU tensor named by its dtype alone)
_TENSOR_TYPE = re.compile(r"\b(?:torch\.)?(?:(cuda)\.|(CUDA))?(?:CPU)?(Float|Double|Half|BFloat16|Long|Int|Short|Byte|"
                          r"Char|Bool)(?:Tensor|Type)\b|(?<=type \()(?:c10::)?(float|double|Half|BFloat16|"
                          r"long|int|bool)(?=\))")


def _tensor_types(message: str) -> str:
    found = [(m.start(), m.end(), bool(m.group(1) or m.group(2)), m.group(3) or m.group(4))   # (a dtype alone: CPU)
             for m in _TENSOR_TYPE.finditer(message)]
    if len(found) == 2:
        (_, _, cuda_a, dtype_a), (_, _, cuda_b, dtype_b) = found
        said = [" TENSORTYPE ", " TENSORTYPE {} {} ".format(
            "SAMEDEVICE" if cuda_a == cuda_b else "OTHERDEVICE",
            "SAMEDTYPE" if dtype_a.lower() == dtype_b.lower() else "OTHERDTYPE")]
    else:                  # one (or many): where it lives and its dtype, whose kind the dtype rules below keep
        said = [f" {'DEVICE ' if cuda else ''}{dtype} TENSORTYPE " for _, _, cuda, dtype in found]
    pieces, end = [], 0
    for (start, stop, _, _), text in zip(found, said):
        pieces += [message[end:start], text]
        end = stop
    return "".join(pieces) + message[end:]


_TOKEN = re.compile(r"[A-Za-z_]+|[^\sA-Za-z_]")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


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
        line = _LINE_PREFIX.sub("", raw.rstrip()) if not raw.startswith((" ", "\t")) else raw.rstrip()
        warning = _WARNING.match(line)
        head = _HEAD.match(line) if not warning else None
        if not warning and not head and _LOG_RECORD.match(raw) and line.strip():
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
    kept = [_LINE_PREFIX.sub("", line).strip() for line in text.splitlines()
            if line.strip() and (line.startswith("\t") or not _FRAME.match(line))]
    return "\n".join(line for line in kept if line)


def tokens(message: str) -> tuple[str, ...]:
    """The message with what varies replaced by placeholders, as word and punctuation tokens."""
    message = _ANSI.sub("", message)              # a terminal's bold and colours: a paste has the text only
    message = "\n".join(_LINE_PREFIX.sub("", line) for line in message.splitlines())   # "[Rank 1] ..." as pasted
    message = _tensor_types(message)
    message = _TORCH_MODULE.sub(r" \1 NAME_torch ", message)   # (not every quoted 'torch...' name: only here)
    message = _QUOTED.sub(_name, message)          # then: a quoted path or number is a name
    for pattern, placeholder in _SUBS:
        message = pattern.sub(placeholder, message)
    out: list[str] = []
    for token in (t.lower() if not t.isupper() else t for t in _TOKEN.findall(message)):
        if len(out) >= 2 and out[-1] == "," and out[-2] == token:
            out.pop()                  # a list of like items ("a", "b", "c") counts once, however long
            continue
        out.append(token)
    return tuple(out)


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
    # A name the template's opening keeps because it tells the cause ('NoneType' object has no attribute, a
    # wrapper's, a checkpoint's part, an optimizer's state) and the paste lacks: the rest of the words are the
    # common part of the message ("'OrderedDict' object has no attribute 'eval'" is not a gradient left None)
    if {token for token in opening if token.startswith("name_")} - set(pasted):
        value *= TELLING_MISSING
    return value


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
    text = _MARKDOWN.sub("", text)
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
    # Entries whose messages read the same (one torch message, two causes) tie: the paste's own code, where it holds
    # frames, puts first the entry whose fragment shares more of its names ("BCEWithLogitsLoss", "logits")
    words = set(_IDENTIFIER.findall(text))
    ranked = sorted(best.values(), key=lambda pair: (-pair[1], -len(_code_words(pair[0].code) & words)))
    # An entry whose message only reports that another error came first (torchrun's "failed (exitcode: 2)") goes
    # after every other entry the paste matches: the error above it in the log is the cause
    ranked = ([pair for pair in ranked if not (pair[0].id in REPORTS_ANOTHER and pair[1] >= MATCH)]
              + [pair for pair in ranked if pair[0].id in REPORTS_ANOTHER and pair[1] >= MATCH])
    ranked = sorted(ranked, key=lambda pair: pair[1] < MATCH)      # (stable: those below the line stay last)
    matches = tuple(pair for pair in ranked if pair[1] >= MATCH)[:limit]
    return Found(matches, ranked[0] if ranked else None, stage_of(text))
