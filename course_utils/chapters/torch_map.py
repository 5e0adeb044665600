"""The mechanism map (issue 43): every part of torch a training loop touches, read from torch itself.

``surface()`` lists the items by introspecting the installed torch (``__all__``, ``dir()``,
``inspect.signature``, ``issubclass``), so a new torch release adds or removes items on its own. The few
hand-picked names are those the issue names (``nn.Module``'s training-state methods, autograd's modes, the
collectives a metric needs, the reproducibility switches); their parameters still come from the signatures.

Which parameters become items: the optional, public ones (a default, no leading underscore). A required
parameter is passed by every call, so the call itself demonstrates it.

Each item's status lives in ``torch_map.json`` (chapter 9 and ``tools/torch_map.py`` read it):
``demonstrated`` (the compared notebook cells whose code calls it, found by ``torch_map_cells``),
``out_of_scope`` (a one-line reason) or ``not_yet``. ``python tools/torch_map.py sync`` rewrites the file from
torch and the notebooks, keeping the reasons; ``check`` fails when the file and torch disagree.
"""
from __future__ import annotations

import importlib
import inspect
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

DATA = Path(__file__).with_name("torch_map.json")
SHARED_BY = 4          # an optimizer flag is "common" when at least this many built-in optimizers take it
STATUSES = ("demonstrated", "out_of_scope", "not_yet")


@dataclass(frozen=True)
class Item:
    """One piece of torch's training surface and how code shows it.

    kind: ``name`` (a function or class: called, subclassed or used as a decorator), ``param`` (an optional
    parameter passed to ``targets``, by keyword or position), ``method`` (``method`` called on any object;
    ``param`` set when the item is one of its parameters), ``attr`` (the dotted path read or assigned), or
    ``groups`` (an optimizer built from a list of parameter-group dicts).
    """

    id: str
    group: str
    kind: str
    targets: tuple[Any, ...] = ()      # the torch objects (name, param, groups)
    path: str = ""                     # the dotted path (attr)
    method: str = ""                   # the method's name (method)
    param: str = ""                    # the parameter's name (param, method)
    owner: Any = None                  # the class whose method this is (method)


def lookup(path: str) -> Any:
    """The object at a dotted path under torch (modules imported on the way), or None."""
    parts = path.split(".")
    obj: Any = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], start=1):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            try:
                obj = importlib.import_module(".".join(parts[: i + 1]))
            except ImportError:
                return None
    return obj


def signature(obj: Any, drop_self: bool = False) -> inspect.Signature | None:
    """obj's signature (a class's is its constructor's), without self for an unbound method; None if unknown."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    if drop_self:
        sig = sig.replace(parameters=list(sig.parameters.values())[1:])
    return sig


def optional_params(obj: Any, drop_self: bool = False) -> list[str]:
    """The parameters of obj that have a default (keyword-only ones included), in signature order."""
    sig = signature(obj, drop_self)
    if sig is None:
        return []
    return [p.name for p in sig.parameters.values() if p.default is not inspect.Parameter.empty
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and not p.name.startswith("_")]


def public(module: Any) -> list[str]:
    """A module's public names: its ``__all__``, else what ``dir()`` shows without a leading underscore."""
    names = getattr(module, "__all__", None) or dir(module)
    return [n for n in names if not n.startswith("_")]


def public_methods(cls: type, own_only: bool = False) -> list[str]:
    """The public methods of cls (plain functions; with own_only, only those cls itself defines)."""
    names = vars(cls) if own_only else dir(cls)
    return sorted(n for n in names if not n.startswith("_") and inspect.isfunction(inspect.getattr_static(cls, n)))


class _Builder:
    """Collects items in order; ids are unique."""

    def __init__(self) -> None:
        self.items: dict[str, Item] = {}

    def add(self, item: Item) -> None:
        self.items.setdefault(item.id, item)

    def name(self, group: str, path: str, params: bool = False) -> None:
        """The callable at `path` (skipped when torch lacks it), with its optional parameters if asked."""
        obj = lookup(path)
        if obj is None:
            return
        if not callable(obj):
            self.add(Item(path, group, "attr", path=path))
            return
        self.add(Item(path, group, "name", targets=(obj,)))
        for p in optional_params(obj) if params else ():
            self.add(Item(f"{path}({p})", group, "param", targets=(obj,), param=p))

    def method(self, group: str, owner_path: str, name: str, params: bool = True) -> None:
        """`owner.name` as a method call on any object, with its optional parameters if asked."""
        owner = lookup(owner_path)
        function = inspect.getattr_static(owner, name, None) if owner is not None else None
        if function is None:
            return
        self.add(Item(f"{owner_path}.{name}", group, "method", method=name, owner=owner))
        for p in optional_params(getattr(owner, name), drop_self=inspect.isfunction(function)) if params else ():
            self.add(Item(f"{owner_path}.{name}({p})", group, "method", method=name, param=p, owner=owner))

    def attr(self, group: str, path: str) -> None:
        """A setting or an enum read or assigned by its dotted path (skipped when torch lacks it)."""
        parent, _, last = path.rpartition(".")
        if hasattr(lookup(parent), last):
            self.add(Item(path, group, "attr", path=path))


def _is_datapipe(obj: Any) -> bool:
    return getattr(obj, "__module__", "").startswith("torch.utils.data.datapipes")


def surface() -> list[Item]:
    """Every item of the map, grouped, from the installed torch (see the module docstring)."""
    b = _Builder()
    import torch.utils.data as data

    b.name("torch.utils.data.DataLoader", "torch.utils.data.DataLoader", params=True)
    group = "torch.utils.data"       # samplers and dataset utilities; datapipes are torchdata's, not the loop's
    for n in public(data):
        obj = getattr(data, n)
        if n == "DataLoader" or _is_datapipe(obj) or not callable(obj):
            continue
        is_sampler = isinstance(obj, type) and issubclass(obj, data.Sampler) and obj is not data.Sampler
        b.name(group, f"torch.utils.data.{n}", params=is_sampler or inspect.isfunction(obj))
        for m in public_methods(obj, own_only=True) if is_sampler else ():
            b.method(group, f"torch.utils.data.{n}", m)
    import torch.nn.utils.rnn as rnn
    for n in public(rnn):
        b.name("torch.nn.utils.rnn", f"torch.nn.utils.rnn.{n}", params=True)

    from torch.nn.modules.loss import _Loss
    for n in sorted(dir(torch.nn)):
        obj = getattr(torch.nn, n)
        if isinstance(obj, type) and issubclass(obj, _Loss) and obj is not _Loss:
            b.name("torch.nn losses", f"torch.nn.{n}", params=True)

    group = "torch.optim"
    classes = [getattr(torch.optim, n) for n in public(torch.optim) if isinstance(getattr(torch.optim, n), type)]
    optimizers = [c for c in classes if issubclass(c, torch.optim.Optimizer) and c is not torch.optim.Optimizer]
    for cls in optimizers:
        b.name(group, f"torch.optim.{cls.__name__}")
    for m in public_methods(torch.optim.Optimizer):
        b.method(group, "torch.optim.Optimizer", m)
    shared = Counter(p for cls in optimizers for p in optional_params(cls))
    for p, count in shared.most_common():
        if count >= SHARED_BY:
            takers = tuple(cls for cls in optimizers if p in optional_params(cls))
            b.add(Item(f"torch.optim.*({p})", group, "param", targets=takers, param=p))
    b.add(Item("torch.optim.*(params=[{...}])", group, "groups", targets=tuple(optimizers)))

    for n in public(torch.optim.lr_scheduler):
        if isinstance(getattr(torch.optim.lr_scheduler, n), type):
            b.name("torch.optim.lr_scheduler", f"torch.optim.lr_scheduler.{n}")
    for n in public(torch.optim.swa_utils):
        b.name("torch.optim.swa_utils", f"torch.optim.swa_utils.{n}", params=True)

    for n in public(torch.amp):
        b.name("torch.amp", f"torch.amp.{n}", params=n in ("autocast", "GradScaler"))
    for m in public_methods(torch.amp.GradScaler):
        b.method("torch.amp", "torch.amp.GradScaler", m)

    for n in sorted(dir(torch.nn.utils)):
        if ("clip_grad" in n or "total_norm" in n) and inspect.isfunction(getattr(torch.nn.utils, n)):
            b.name("torch.nn.utils (clipping)", f"torch.nn.utils.{n}", params=True)

    for m in ("train", "eval", "requires_grad_", "zero_grad", "state_dict", "load_state_dict", "register_buffer",
              "named_parameters", "apply"):
        b.method("torch.nn.Module (training state)", "torch.nn.Module", m)

    group = "torch.autograd (modes)"
    for path in ("torch.no_grad", "torch.enable_grad", "torch.inference_mode", "torch.set_grad_enabled",
                 "torch.autograd.detect_anomaly", "torch.autograd.set_detect_anomaly"):
        b.name(group, path, params=True)
    b.method(group, "torch.Tensor", "backward")

    for path in ("torch.save", "torch.load"):
        b.name("torch.save / torch.load", path, params=True)

    group = "torch.nn.parallel.DistributedDataParallel"
    b.name(group, "torch.nn.parallel.DistributedDataParallel", params=True)
    b.method(group, "torch.nn.parallel.DistributedDataParallel", "no_sync")
    b.name("torch.nn.SyncBatchNorm", "torch.nn.SyncBatchNorm")
    b.name("torch.nn.SyncBatchNorm", "torch.nn.SyncBatchNorm.convert_sync_batchnorm", params=True)

    group = "torch.distributed"
    if torch.distributed.is_available():
        for n in ("init_process_group", "destroy_process_group", "get_rank", "get_world_size"):
            b.name(group, f"torch.distributed.{n}")
        for n in ("all_reduce", "all_gather", "all_gather_object", "broadcast", "reduce", "barrier"):
            b.name(group, f"torch.distributed.{n}", params=True)
        b.attr(group, "torch.distributed.ReduceOp")

    group = "reproducibility"
    for path in ("torch.manual_seed", "torch.seed", "torch.initial_seed", "torch.get_rng_state",
                 "torch.set_rng_state", "torch.cuda.manual_seed_all", "torch.Generator", "torch.set_num_threads"):
        b.name(group, path)
    b.name(group, "torch.use_deterministic_algorithms", params=True)
    b.name(group, "torch.are_deterministic_algorithms_enabled")
    for path in ("torch.backends.cudnn.deterministic", "torch.backends.cudnn.benchmark"):
        b.attr(group, path)
    return list(b.items.values())


# ---- the committed file ---------------------------------------------------------------------------------


def load(path: Path = DATA) -> dict:
    """The committed map: {"torch": version, "groups": {group: [entry, ...]}}."""
    return json.loads(path.read_text(encoding="utf-8"))


def entries(mapping: dict) -> dict[str, dict]:
    """id -> entry (with its group) over the whole map."""
    return {e["id"]: {**e, "group": g} for g, rows in mapping["groups"].items() for e in rows}


def build(items: list[Item], found: dict[str, list[dict]], previous: dict | None = None) -> dict:
    """The map for `items`: demonstrated where `found` (id -> places) says so, else the previous file's
    out-of-scope reason, else not_yet."""
    old = entries(previous) if previous else {}
    groups: dict[str, list[dict]] = {}
    for item in items:
        if found.get(item.id):
            entry = {"id": item.id, "status": "demonstrated", "where": found[item.id][:3]}
        elif old.get(item.id, {}).get("status") == "out_of_scope":
            entry = {"id": item.id, "status": "out_of_scope", "reason": old[item.id]["reason"]}
        else:
            entry = {"id": item.id, "status": "not_yet"}
        groups.setdefault(item.group, []).append(entry)
    return {"torch": torch.__version__.split("+")[0], "groups": groups}


def dump(mapping: dict, path: Path = DATA) -> None:
    """Write the map, one entry a line (a diff shows which items changed)."""
    groups = ",\n".join(f"  {json.dumps(g)}: [\n" + ",\n".join(f"   {json.dumps(e, ensure_ascii=False)}" for e in rows)
                        + "\n  ]" for g, rows in mapping["groups"].items())
    path.write_text(f'{{\n "torch": {json.dumps(mapping["torch"])},\n "groups": {{\n{groups}\n }}\n}}\n',
                    encoding="utf-8")


def surface_problems(mapping: dict, items: list[Item] | None = None) -> list[str]:
    """How the file's item list differs from torch's surface (ids missing, extra, or in another group)."""
    items = surface() if items is None else items
    have = entries(mapping)
    want = {i.id: i.group for i in items}
    out = [f"torch has {i} ({g}); the map does not" for i, g in want.items() if i not in have]
    out += [f"the map lists {i}; torch {torch.__version__} does not" for i in have if i not in want]
    out += [f"{i}: group {have[i]['group']!r} in the map, {g!r} from torch" for i, g in want.items()
            if i in have and have[i]["group"] != g]
    return out


def entry_problems(mapping: dict) -> list[str]:
    """Statuses that break the rules: unknown status, an out-of-scope item without a reason, a demonstrated one
    without a place."""
    out = []
    for i, e in entries(mapping).items():
        if e.get("status") not in STATUSES:
            out.append(f"{i}: unknown status {e.get('status')!r}")
        elif e["status"] == "out_of_scope" and not str(e.get("reason", "")).strip():
            out.append(f"{i}: out of scope without a reason")
        elif e["status"] == "demonstrated" and not e.get("where"):
            out.append(f"{i}: demonstrated, but where?")
    return out


def counts(mapping: dict) -> dict[str, Counter]:
    """group -> Counter of statuses (and "items")."""
    out = {}
    for group, rows in mapping["groups"].items():
        c = Counter(e["status"] for e in rows)
        c["items"] = len(rows)
        out[group] = c
    return out
