"""The production flowchart (chapter 7): components on or off -> the loop's code, assembled (its boxes:
``ch07_flowchart_boxes``).

One template holds the whole loop. Each line that belongs to a component ends with a condition,
``#@ expr``: component names joined by ``&`` (and), ``|`` (or, lowest priority) and ``!`` (not).
`assemble` keeps the lines whose condition holds for the chosen components and strips the
conditions, so the code a learner reads for a combination is the very code the tests execute.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from course_utils.infra.gloo_groups import keep_until_exit


@dataclass(frozen=True)
class Component:
    """One production component: what it is called on screen, the problem it solves, what it prevents."""

    key: str
    label: str
    problem: str
    prevents: str
    colour: str


COMPONENTS: tuple[Component, ...] = (
    Component("seed", "seeding", "two runs of the same code give different numbers",
              "unreproducible runs and results nobody can check", "#8e44ad"),
    Component("checkpoint", "checkpoints + resume", "a crash or a time limit throws away hours of training",
              "lost work; a resumed run that differs from the uninterrupted one", "#2471a3"),
    Component("early_stop", "early stopping", "training goes on after validation stopped improving",
              "wasted epochs and an over-fitted final model", "#17a589"),
    Component("accumulation", "gradient accumulation", "the batch you want does not fit in memory",
              "being forced into a smaller effective batch", "#d68910"),
    Component("amp", "mixed precision", "float32 everywhere is slower and takes more memory than needed",
              "paying full precision where bf16/fp16 suffices", "#ba4a00"),
    Component("clip", "gradient clipping", "one huge gradient throws the weights far away",
              "a single bad batch wrecking the run (loss spikes)", "#c0392b"),
    Component("nan_guard", "NaN/Inf guard", "one NaN gradient turns every weight into NaN for good",
              "silently poisoned weights; it skips the update and stops after too many", "#7b241c"),
    Component("schedule", "LR schedule", "one learning rate is too high late or too low early",
              "an unstable start and a noisy end (warmup, then cosine decay)", "#1e8449"),
    Component("logging", "logging (TensorBoard)", "you cannot see what the run is doing",
              "flying blind: curves of loss, accuracy, LR and gradient norm", "#5d6d7e"),
    Component("compile", "torch.compile", "Python overhead and many small kernels slow each step",
              "slow steps (after a one-off compilation cost)", "#af601a"),
    Component("scale_out", "scale-out (DDP)", "one process is too slow for the data",
              "being limited to one device; ranks that drift apart", "#1a5276"),
)
KEYS = tuple(c.key for c in COMPONENTS)
BY_KEY = {c.key: c for c in COMPONENTS}

TEMPLATE = '''\
"""The training loop assembled by chapter 7's flowchart."""
import contextlib                                                          #@ accumulation&scale_out
import math
import os                                                                  #@ checkpoint|logging|scale_out
import random                                                              #@ checkpoint

import numpy as np                                                         #@ checkpoint
import torch
import torch.distributed as dist                                           #@ scale_out
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP               #@ scale_out
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler                #@ scale_out
from torch.utils.tensorboard import SummaryWriter                          #@ logging

from course_utils.engine.arithmetic import batch_sizes, is_update_step, loss_weight  #@ accumulation
from course_utils.infra.notebook import seed_everything                          #@ seed
from course_utils.engine.schedules import make_scheduler                          #@ schedule
from course_utils.infra.storage import atomic_write_bytes                        #@ checkpoint


def evaluate(model, loader, device):
    """Mean loss and accuracy over `loader`: eval mode, no graph."""
    model.eval()
    total, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            logits = model(x)
            total += F.cross_entropy(logits, y, reduction="sum")  # kept on the device
            correct += (logits.argmax(dim=1) == y).sum()
            count += len(y)
    model.train()
    return float(total) / count, int(correct) / count  # read once, at the end


def rng_states():                                                          #@ checkpoint
    """Every random stream, as tensors and plain Python values (so weights_only loading accepts them)."""  #@ checkpoint
    kind, keys, pos, has_gauss, cached = np.random.get_state()            #@ checkpoint
    return {"torch": torch.get_rng_state(), "numpy": [kind, keys.tolist(), pos, has_gauss, cached],  #@ checkpoint
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],  #@ checkpoint
            "random": random.getstate()}                                   #@ checkpoint
                                                                           #@ checkpoint
                                                                           #@ checkpoint
def restore_rng_states(states):                                            #@ checkpoint
    """Put every random stream back where the checkpoint found it."""      #@ checkpoint
    torch.set_rng_state(states["torch"])                                   #@ checkpoint
    if states["cuda"]:                                                     #@ checkpoint
        torch.cuda.set_rng_state_all(states["cuda"])                       #@ checkpoint
    kind, keys, pos, has_gauss, cached = states["numpy"]                   #@ checkpoint
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))  #@ checkpoint
    random.setstate(states["random"])                                      #@ checkpoint
                                                                           #@ checkpoint
                                                                           #@ checkpoint
def save_checkpoint(state, path):                                          #@ checkpoint
    """Temporary file in the same folder, fsync, os.replace: a crash never leaves half a file."""  #@ checkpoint
    atomic_write_bytes(path, lambda f: torch.save(state, f))               #@ checkpoint
                                                                           #@ checkpoint
                                                                           #@ checkpoint
def log_scalars(writer, step, scalars):                                    #@ logging
    """One TensorBoard point per scalar (ranks other than 0 have no writer)."""  #@ logging
    for name, value in scalars.items():                                    #@ logging
        if writer is not None:                                             #@ logging
            writer.add_scalar(name, value, step)                           #@ logging
                                                                           #@ logging
                                                                           #@ logging
def fit(
    make_model, train_set, val_set, *, epochs=10, batch_size=32, lr=0.01,
    seed=0,                                                                #@ seed
    out="run",                                                             #@ checkpoint|logging
    accum_steps=4,                                                         #@ accumulation
    amp_dtype=torch.bfloat16,                                              #@ amp
    max_norm=1.0,                                                          #@ clip
    max_bad_updates=3,                                                     #@ nan_guard
    patience=3, min_delta=0.0,                                             #@ early_stop
    compile_backend="inductor",                                            #@ compile
):
    """Train a fresh `make_model()` on `train_set`, validate on `val_set` each epoch; return it and the history."""
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")  # torchrun set the addresses  #@ scale_out
    rank = dist.get_rank()  # this process's number: 0 .. world size - 1  #@ scale_out
    rank = 0  # a single process is rank 0: it writes the files           #@ checkpoint&!scale_out|logging&!scale_out
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cuda":  # one GPU per process                      #@ scale_out
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))     #@ scale_out
        torch.cuda.set_device(device)                                      #@ scale_out
    seed_everything(seed)  # random, NumPy and torch: the same start every time  #@ seed
    # the same seed on every rank: same initial weights, same dropout masks (each rank sees other examples)  #@ seed&scale_out
    data_order = torch.Generator().manual_seed(seed)  # the shuffle's own random stream  #@ seed&!scale_out
    model = make_model().to(device)
    raw_model = model  # the plain module: checkpoints hold its state_dict  #@ checkpoint|scale_out|early_stop
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)

    train_loader = DataLoader(train_set, batch_size, shuffle=True)         #@ !seed&!scale_out
    train_loader = DataLoader(train_set, batch_size, shuffle=True, generator=data_order)  #@ seed&!scale_out
    sampler = DistributedSampler(train_set, seed=seed)  # each rank its own shard  #@ scale_out&seed
    sampler = DistributedSampler(train_set)  # each rank its own shard    #@ scale_out&!seed
    train_loader = DataLoader(train_set, batch_size, sampler=sampler)      #@ scale_out
    val_loader = DataLoader(val_set, batch_size=256)
    updates_per_epoch = len(train_loader)                                  #@ schedule&!accumulation
    updates_per_epoch = math.ceil(len(train_loader) / accum_steps)         #@ schedule&accumulation
    scheduler = make_scheduler("warmup_cosine", optimizer, epochs=epochs,  #@ schedule
                               steps_per_epoch=updates_per_epoch).scheduler  #@ schedule
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)  # fp16 needs it, bf16 not  #@ amp
    writer = SummaryWriter(os.path.join(out, "tb")) if rank == 0 else None  #@ logging
    history, start_epoch, updates = [], 0, 0
    best, bad_checks = math.inf, 0                                         #@ early_stop
    best_weights = None  # a copy of the best epoch's weights, delivered at the end  #@ early_stop&!checkpoint
    bad_updates = 0                                                        #@ nan_guard
    finite_loss = True  # fp16: an inf gradient with a finite loss is the scaler's overflow, not a bug  #@ nan_guard&amp

    path = os.path.join(out, "checkpoints", "last.pt")                     #@ checkpoint
    if os.path.exists(path):  # resume: put back every piece of state the run depends on  #@ checkpoint
        state = torch.load(path, map_location="cpu", weights_only=True)  # tensors and plain values only  #@ checkpoint
        raw_model.load_state_dict(state["model"])                          #@ checkpoint
        optimizer.load_state_dict(state["optimizer"])                      #@ checkpoint
        scheduler.load_state_dict(state["scheduler"])                      #@ checkpoint&schedule
        scaler.load_state_dict(state["scaler"])                            #@ checkpoint&amp
        best, bad_checks = state["best"], state["bad_checks"]              #@ checkpoint&early_stop
        bad_updates = state["bad_updates"]                                 #@ checkpoint&nan_guard
        data_order.set_state(state["data_order"])                          #@ checkpoint&seed&!scale_out
        start_epoch, updates, history = state["epoch"], state["updates"], state["history"]  #@ checkpoint
        restore_rng_states(state["rng"])                                   #@ checkpoint
    model.compile(backend=compile_backend)  # in place, traced on the first batch; keys stay plain  #@ compile
    model = DDP(model)  # averages gradients across ranks during backward #@ scale_out
    # from here one update averages batch_size x accum_steps x world size examples: size the LR for that  #@ scale_out&accumulation
    # from here one update averages batch_size x world size examples: size the LR for that  #@ scale_out&!accumulation

    for epoch in range(start_epoch, epochs):
        if bad_checks >= patience:  # early stopping: no progress for `patience` checks  #@ early_stop
            break                                                          #@ early_stop
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same one on every rank  #@ scale_out
        model.train()
        seen_loss, seen = 0.0, 0
        sizes = batch_sizes(len(train_loader.sampler), batch_size)  # this epoch's batch sizes  #@ accumulation
        for i, (x, y) in enumerate(train_loader):
            x, y = x.to(device), y.to(device)
            update = is_update_step(i, len(sizes), accum_steps)  # the window's last micro-batch?  #@ accumulation
            with contextlib.nullcontext() if update else model.no_sync():  # forward AND backward inside  #@ accumulation&scale_out
                with torch.autocast(device.type, dtype=amp_dtype):  # matmuls in low precision  #@ accumulation&scale_out&amp
                    loss = F.cross_entropy(model(x), y)                    #@ accumulation&scale_out&amp
                loss = F.cross_entropy(model(x), y)                        #@ accumulation&scale_out&!amp
                scaler.scale(loss * loss_weight(i, sizes, accum_steps)).backward()  # no all-reduce until update  #@ accumulation&scale_out&amp
                (loss * loss_weight(i, sizes, accum_steps)).backward()  # no all-reduce until update  #@ accumulation&scale_out&!amp
            with torch.autocast(device.type, dtype=amp_dtype):  # matmuls in low precision  #@ amp&!accumulation|amp&!scale_out
                loss = F.cross_entropy(model(x), y)                        #@ amp&!accumulation|amp&!scale_out
            loss = F.cross_entropy(model(x), y)                            #@ !amp&!accumulation|!amp&!scale_out
            scaler.scale(loss * loss_weight(i, sizes, accum_steps)).backward()  # its share of the window's examples  #@ accumulation&!scale_out&amp
            (loss * loss_weight(i, sizes, accum_steps)).backward()  # its share of the window's examples  #@ accumulation&!scale_out&!amp
            scaler.scale(loss).backward()  # scaled only in fp16           #@ amp&!accumulation
            loss.backward()                                                #@ !amp&!accumulation
            seen_loss, seen = seen_loss + loss.detach() * len(y), seen + len(y)  # on the device: no wait
            finite_loss = finite_loss and math.isfinite(loss.item())       #@ nan_guard&amp
            if not update:  # window not complete yet                      #@ accumulation
                continue                                                   #@ accumulation
            scaler.unscale_(optimizer)  # true gradients before measuring them  #@ amp&clip|amp&nan_guard
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # the norm before clipping  #@ clip
            grad_norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None])  #@ nan_guard&!clip
            if not torch.isfinite(grad_norm):  # a NaN/Inf gradient: skip this update  #@ nan_guard&!amp
            overflow = scaler.is_enabled() and finite_loss  # scaler.step skips it and lowers the scale  #@ nan_guard&amp
            finite_loss = True                                             #@ nan_guard&amp
            if not torch.isfinite(grad_norm) and not overflow:  # a NaN/Inf: skip this update  #@ nan_guard&amp
                optimizer.zero_grad(set_to_none=True)                      #@ nan_guard
                scaler.update()                                            #@ nan_guard&amp
                bad_updates += 1                                           #@ nan_guard
                if bad_updates >= max_bad_updates:                         #@ nan_guard
                    raise FloatingPointError(f"{bad_updates} non-finite updates in a row in epoch {epoch + 1}; "  #@ nan_guard
                                             "stopped before saving anything poisoned")  #@ nan_guard
                continue                                                   #@ nan_guard
            bad_updates = 0                                                #@ nan_guard
            optimizer.step()                                               #@ !amp
            scaler.step(optimizer)  # skips the step if fp16 gradients overflowed  #@ amp
            scaler.update()                                                #@ amp
            optimizer.zero_grad(set_to_none=True)
            scheduler.step()  # once per update: warmup + cosine counts updates  #@ schedule
            updates += 1
            log_scalars(writer, updates, {"train/lr": optimizer.param_groups[0]["lr"]})  #@ logging
            log_scalars(writer, updates, {"train/grad_norm": grad_norm.item()})  #@ logging&clip|logging&nan_guard

        # every rank evaluates the whole validation set: W times the work, but no all-reduce of metrics  #@ scale_out
        val_loss, val_acc = evaluate(model, val_loader, device)
        train_loss = float(seen_loss) / seen  # the epoch's one read of the loss
        history.append({"epoch": epoch + 1, "updates": updates, "train_loss": train_loss,
                        "val_loss": val_loss, "val_acc": val_acc})
        if val_loss < best - min_delta:  # strictly better, by more than min_delta  #@ early_stop
            best, bad_checks = val_loss, 0                                 #@ early_stop
            best_weights = {k: v.clone() for k, v in raw_model.state_dict().items()}  #@ early_stop&!checkpoint
        else:  # one more check without progress; a NaN/Inf metric stops at once  #@ early_stop
            bad_checks = bad_checks + 1 if math.isfinite(val_loss) else patience  #@ early_stop
        log_scalars(writer, epoch + 1, {"train/loss": train_loss, "val/loss": val_loss, "val/acc": val_acc})  #@ logging
        state = {"model": raw_model.state_dict(), "optimizer": optimizer.state_dict(),  #@ checkpoint
                 "scheduler": scheduler.state_dict(),                      #@ checkpoint&schedule
                 "scaler": scaler.state_dict(),                            #@ checkpoint&amp
                 "best": best, "bad_checks": bad_checks,                   #@ checkpoint&early_stop
                 "bad_updates": bad_updates,                               #@ checkpoint&nan_guard
                 "data_order": data_order.get_state(),                     #@ checkpoint&seed&!scale_out
                 "epoch": epoch + 1, "updates": updates, "history": history, "rng": rng_states()}  #@ checkpoint
        if rank == 0:  # one process writes (the weights are the same on every rank)  #@ checkpoint
            save_checkpoint(state, path)                                   #@ checkpoint
            if bad_checks == 0:  # the best so far is kept beside the last one  #@ checkpoint&early_stop
                save_checkpoint(state, os.path.join(out, "checkpoints", "best.pt"))  #@ checkpoint&early_stop
        dist.barrier()  # no rank moves on (or reads best.pt) before the file is complete  #@ checkpoint&scale_out

    if writer is not None:                                                 #@ logging
        writer.close()                                                     #@ logging
    best_path = os.path.join(out, "checkpoints", "best.pt")  # deliver the best weights, not the last  #@ early_stop&checkpoint
    if os.path.exists(best_path):                                          #@ early_stop&checkpoint
        raw_model.load_state_dict(torch.load(best_path, weights_only=True)["model"])  #@ early_stop&checkpoint
    if best_weights is not None:  # deliver the best weights, not the last  #@ early_stop&!checkpoint
        raw_model.load_state_dict(best_weights)                            #@ early_stop&!checkpoint
    dist.destroy_process_group()                                           #@ scale_out
    return model, history                                                  #@ !checkpoint&!scale_out&!early_stop
    return raw_model, history                                              #@ checkpoint|scale_out|early_stop
'''


def components_of(enabled: Iterable[str]) -> frozenset[str]:
    """The chosen component names as a set; an unknown name raises ValueError naming the known ones."""
    chosen = frozenset(enabled)
    unknown = sorted(chosen - set(KEYS))
    if unknown:
        raise ValueError(f"unknown component(s) {unknown}; choose from {list(KEYS)}")
    return chosen


def holds(condition: str, enabled: frozenset[str]) -> bool:
    """Does a line condition such as ``checkpoint&!scale_out|logging`` hold for the enabled components?"""
    def literal(word: str) -> bool:
        word = word.strip()
        negated = word.startswith("!")
        name = word.lstrip("!")
        if name not in BY_KEY:
            raise ValueError(f"template condition names an unknown component: {name!r}")
        return (name in enabled) != negated
    return any(all(literal(word) for word in term.split("&")) for term in condition.split("|"))


def _parse_template() -> list[tuple[str, str | None]]:
    """(code, condition or None) per template line; the condition is the text after the last `#@`."""
    lines = []
    for raw in TEMPLATE.splitlines():
        code, marker, condition = raw.rpartition("#@")
        lines.append((code.rstrip(), condition.strip()) if marker else (raw.rstrip(), None))
    return lines


TEMPLATE_LINES = _parse_template()


def assembled_lines(enabled: Iterable[str]) -> list[tuple[str, frozenset[str]]]:
    """The loop's lines for these components, each with the components its condition names (for colouring)."""
    chosen = components_of(enabled)
    kept = []
    for code, condition in TEMPLATE_LINES:
        if condition is None:
            kept.append((code, frozenset()))
        elif holds(condition, chosen):
            names = {w.strip().lstrip("!") for w in condition.replace("|", "&").split("&")}
            kept.append((code, frozenset(n for n in names if n in chosen)))
    # blank lines left by removed blocks: at most two before a top-level line, at most one elsewhere
    tidy: list[tuple[str, frozenset[str]]] = []
    for index, (code, owners) in enumerate(kept):
        if not code and tidy and not tidy[-1][0]:
            following = next((c for c, _ in kept[index:] if c), "")
            top_level = following[:1] not in ("", " ")
            if not top_level or (len(tidy) >= 2 and not tidy[-2][0]):
                continue
        tidy.append((code, owners))
    return tidy


def assemble(enabled: Iterable[str]) -> str:
    """The complete, runnable training script for the enabled components (chapter 7's flowchart)."""
    return "\n".join(code for code, _ in assembled_lines(enabled)) + "\n"


def code_lines(enabled: Iterable[str]) -> int:
    """Non-blank lines of the assembled script."""
    return sum(1 for line in assemble(enabled).splitlines() if line.strip())


def lines_added(component: str) -> tuple[int, int]:
    """(lines it adds to the minimal loop, lines removed from the full loop when it is switched off)."""
    components_of([component])
    alone = code_lines({component}) - code_lines(())
    in_full = code_lines(KEYS) - code_lines(set(KEYS) - {component})
    return alone, in_full


def load_fit(enabled: Iterable[str]):
    """Execute the assembled script and return its `fit` function: what the tests and the notebook run."""
    namespace: dict = {"__name__": "course_flowchart_loop"}
    exec(compile(assemble(enabled), "<chapter-7 loop>", "exec"), namespace)  # noqa: S102 - our own template
    if "DDP" in namespace:      # scale_out: each DDP the loop builds, and its process group, lives until exit
        namespace["DDP"] = _kept_until_exit(namespace["DDP"])
    return namespace["fit"]


def _kept_until_exit(ddp_class):
    """DDP that keeps itself alive until the interpreter exits: freeing its one-process gloo group right after a
    backward can deadlock (course_utils/infra/gloo_groups.py)."""
    class KeptDDP(ddp_class):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            keep_until_exit(self)

    return KeptDDP
