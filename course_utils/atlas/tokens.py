"""A pasted message as the atlas compares it (issue 39): word and punctuation tokens, with what varies between a
learner's run and the atlas's replaced by placeholders (numbers, shapes, dtypes kept by kind, tensor types by how two
of them differ, devices, quoted names except those that tell the cause, paths, older torch's wordings of the same
error), and a launcher's or logger's line prefix dropped. ``lookup`` compares these token sequences.
"""
from __future__ import annotations

import re

from course_utils.atlas.optimizer_keys import recorded_state_names

# What a launcher or a C++ logger writes before a line: torchrun's "[rank1]:", glog's "[E1218 20:27:21.4 File.cpp:629]"
# (and torch's Python logging in glog's form: "E1129 20:15:46.554000 25342 torch/.../api.py:836]")
_RANK = r"(?:\[(?:rank|Rank)\s*\d+\]:?\s*)?"
_GLOG_CPP = r"\[[EWIF]\d*[^\]]*?\.(?:cpp|cc|cu|h|hpp):\d+\]"
_GLOG_PY = r"[EWIF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+\s+\S+\.py:\d+\]"
# ... and Python logging's own formats, as older torch wrote its launcher's records: the default
# "ERROR:torch.distributed.elastic.multiprocessing.api:" and "[2023-12-08 01:40:46,962] torch.distributed...: [ERROR]"
_LEVEL = r"(?:CRITICAL|ERROR|WARNING|INFO|DEBUG)"
_PYLOG = rf"(?:{_LEVEL}:[\w.]+:|\[\d{{4}}-\d\d-\d\d [\d:,.]+\]\s+[\w.]+:\s+\[{_LEVEL}\])"
LINE_PREFIX = re.compile(rf"^\s*{_RANK}(?:{_GLOG_CPP}\s*)?(?:{_GLOG_PY}\s*)?(?:{_PYLOG}\s*)?")
# ... of which a logger's record is a line of its own, never the rest of the message above it: torchrun logs
# "failed (exitcode: 1) ..." right below the rank's own error
LOG_RECORD = re.compile(rf"^\s*{_RANK}(?:{_GLOG_CPP}|{_GLOG_PY}|{_PYLOG})")

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


# torch's scalar type names, quoted as "not implemented for 'Half'" quotes them: the kind tells the cause (a float16
# model on the CPU, or integer data in an operation that computes in floats). Capitalised only: Python's 'float'
# and 'int' are types of objects ("'float' object has no attribute 'backward'"), not of tensors.
SCALAR_TYPE_KINDS = {**dict.fromkeys(("Half", "BFloat16", "Float", "Double", "ComplexFloat", "ComplexDouble"), "float"),
                     **dict.fromkeys(("Long", "Int", "Short", "Byte", "Char"), "int"), "Bool": "bool"}
_QUOTED_SCALAR_TYPE = re.compile(r"'(?:torch\.(?:cuda\.)?)?(" + "|".join(SCALAR_TYPE_KINDS) + r")(?:Tensor)?'")


def _scalar_type(match: re.Match) -> str:       # (torch 1.0 quoted the tensor type: 'torch.LongTensor')
    return f" NAME_{SCALAR_TYPE_KINDS[match.group(1)]}_dtype "


def _name(match: re.Match) -> str:
    text = next(group for group in match.groups() if group is not None)
    first = text.split(".")[0]
    if text.endswith(".num_batches_tracked"):   # a BatchNorm counter the loading model has no place for
        return " NAME_num_batches_tracked "
    if first in ARRAY_ATTRIBUTES:
        return f" NAME NAME_{first} "
    if text in recorded_state_names():     # KeyError: 'betas', 'momentum', ...: another optimizer class's state
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


def tokens(message: str) -> tuple[str, ...]:
    """The message with what varies replaced by placeholders, as word and punctuation tokens."""
    message = _ANSI.sub("", message)              # a terminal's bold and colours: a paste has the text only
    message = "\n".join(LINE_PREFIX.sub("", line) for line in message.splitlines())   # "[Rank 1] ..." as pasted
    message = _QUOTED_SCALAR_TYPE.sub(_scalar_type, message)   # "not implemented for 'Half'": the kind tells
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
