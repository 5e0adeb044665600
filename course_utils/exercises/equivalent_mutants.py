"""Mutants of the exercises' solutions that behave like the solution on the whole domain the statement allows.

Read by tools/mutate_exercises.py (`make mutants`, issue 40.2): a mutant of a solution that passes its exercise's
check is either a hole in the check or listed here, keyed by exercise and the mutant's stable id
(``<function>:<operator>:L<line from the def>:<original> -> <replacement>``), with why it is the same answer.
tests/test_mutants.py fails on an entry that no longer names a mutant the tool makes.
"""
from __future__ import annotations

EQUIVALENT: dict[str, dict[str, str]] = {
    "loss_weights": {
        "loss_weights:offbyone:L2:len(sizes) -> len(sizes) + 1":
            "the extra window start is len(sizes) (only when K divides it): sizes[len:len+K] is empty and adds no"
            " weight",
    },
    "FolderDataset": {
        "FolderDataset:drop:L9:if not 0 <= i < self.n: -> (removed)":
            "the statement defines dataset[i] for 0 <= i < len(dataset) only (unlike 1.1's, it asks for no "
            "IndexError past the end); there the bound test never fires",
        "FolderDataset:swap:L9:if not 0 <= i < self.n: -> example = torch.load(self.folder / f'...":
            "same domain as the dropped bound test: for 0 <= i < len(dataset) the file exists and the test "
            "passes, in either order",
        "FolderDataset:drop:L10:raise IndexError(i) -> (removed)":
            "only reached for an index outside 0..len-1, which the statement does not define",
        "FolderDataset:cmp:L9:0 <= i < self.n -> 0 <= i <= self.n":
            "differs only at i == len(dataset), outside the indices the statement defines",
        "FolderDataset:const:L9:0 -> -1":
            "differs only at i == -1, outside the indices the statement defines",
    },
    "pad_collate": {
        "pad_collate:swap:L2:input_ids = torch.zeros(len(batch), l... -> mask = torch.zeros(len(batch), longes...":
            "the two statements touch different variables and neither reads what the other writes: their order is"
            " no behaviour",
        "pad_collate:swap:L4:for row, (tokens, _) in enumerate(bat... -> labels = torch.tensor([label for _, l...":
            "the two statements touch different variables and neither reads what the other writes: their order is"
            " no behaviour",
        "pad_collate:swap:L5:input_ids[row, :len(tokens)] = tokens -> mask[row, :len(tokens)] = True":
            "the two statements touch different variables and neither reads what the other writes: their order is"
            " no behaviour",
        "pad_collate:dtype:L7:torch.tensor([label for _, label in batch], dtype=torch.long) -> torch.tensor([label for _, label in batch])":
            "labels are ints or 0-d int64 tensors (the statement): torch.tensor infers int64 from either, so "
            "dtype=torch.long changes nothing",
    },
    "class_balanced_weights": {
        "class_balanced_weights:const:L2:1.0 -> 2.0":
            "the statement asks for weights with which WeightedRandomSampler draws classes equally: it normalises"
            " them, so any common positive factor is the same answer",
        "class_balanced_weights:dtype:L2:counts[labels].double() -> counts[labels]":
            "1.0 / an int64 tensor is float32: every class still totals 1 to within float32 rounding, and the "
            "statement names no dtype for the weights",
        "class_balanced_weights:dtype:L2:counts[labels].double() -> counts[labels].float()":
            "float32 weights: every class still totals 1 to within float32 rounding, and the statement names no "
            "dtype",
    },
    "shard_indices": {
        "shard_indices:swap:L1:per_rank = math.ceil(n / world_size) -> indices = list(range(n))":
            "the two statements touch different variables and neither reads what the other writes: their order is"
            " no behaviour",
    },
    "weighted_shard": {
        "weighted_shard:swap:L1:total = world_size * math.ceil(num_sa... -> g = torch.Generator().manual_seed(see...":
            "the two statements touch different variables and neither reads what the other writes: their order is"
            " no behaviour",
    },
    "train_step": {
        "train_step:swap:L1:optimizer.zero_grad() -> loss = loss_fn(model(inputs), targets)":
            "the forward pass reads no .grad, so clearing the gradients before or after it leaves the same "
            "gradients for backward",
    },
    "adam_step": {
        "adam_step:swap:L2:m = beta1 * m + (1 - beta1) * grad -> v = beta2 * v + (1 - beta2) * grad ** 2":
            "the two statements touch different variables and neither reads what the other writes: their order is"
            " no behaviour",
        "adam_step:swap:L3:v = beta2 * v + (1 - beta2) * grad ** 2 -> m_hat = m / (1 - beta1 ** t)":
            "the two statements touch different variables and neither reads what the other writes: their order is"
            " no behaviour",
        "adam_step:swap:L4:m_hat = m / (1 - beta1 ** t) -> v_hat = v / (1 - beta2 ** t)":
            "the two statements touch different variables and neither reads what the other writes: their order is"
            " no behaviour",
    },
    "evaluate": {
        "evaluate:swap:L2:model.eval() -> total, hits, n = (0.0, 0, 0)":
            "the two statements touch different variables and neither reads what the other writes: their order is"
            " no behaviour",
        "evaluate:swap:L7:total += loss_fn(logits, targets).ite... -> hits += (logits.argmax(dim=1) == targ...":
            "the two statements touch different variables and neither reads what the other writes: their order is"
            " no behaviour",
        "evaluate:swap:L8:hits += (logits.argmax(dim=1) == targ... -> n += len(targets)":
            "the two statements touch different variables and neither reads what the other writes: their order is"
            " no behaviour",
    },
    "dropout": {
        "dropout:swap:L3:if p == 1: -> keep = torch.rand_like(x) >= p":
            "with p = 1 both return zeros; the mutant only draws a mask it throws away (the statement says "
            "nothing of the random numbers used)",
        "dropout:cmp:L5:torch.rand_like(x) >= p -> torch.rand_like(x) > p":
            "differs only when a uniform draw equals p exactly (probability at most 2**-24 per value): the same "
            "distribution of drops",
        "dropout:const:L1:0 -> -1":
            "with p = 0 the mutant keeps every value (rand >= 0) and multiplies by 1/(1-0): x's values and dtype "
            "exactly, as a new tensor",
    },
    "rank_metrics": {
        "rank_metrics:swap:L1:world_size = len(losses) -> loss_sum, hits, count = (0.0, 0, 0)":
            "the two statements touch different variables and neither reads what the other writes: their order is"
            " no behaviour",
        "rank_metrics:offbyone:L4:len(losses[rank]) -> len(losses[rank]) + 1":
            "the extra slot rank + ceil(n/W)*W is never below n, so the padding test skips it before any indexing",
        "rank_metrics:swap:L6:loss_sum += losses[rank][j].item() -> hits += int(correct[rank][j])":
            "the two statements touch different variables and neither reads what the other writes: their order is"
            " no behaviour",
        "rank_metrics:swap:L7:hits += int(correct[rank][j]) -> count += 1":
            "the two statements touch different variables and neither reads what the other writes: their order is"
            " no behaviour",
        "rank_metrics:offbyone:L4:rank -> rank - 1":
            "every rank holds ceil(n / world_size) entries (the statement), so len(losses[rank - 1]) == "
            "len(losses[rank])",
    },
    "fixed_loop": {
        "fixed_loop:drop:L14:return losses -> (removed)":
            "the statement: what the loop returns is not checked",
        "fixed_loop:drop:L9:losses.append(loss.item()) -> (removed)":
            "only builds the return value, which the statement does not check",
        "fixed_loop:swap:L8:optimizer.step() -> losses.append(loss.item())":
            "the loss was computed before the step; appending it before or after the step records the same value",
        "fixed_loop:swap:L10:scheduler.step() -> model.eval()":
            "the two statements touch different variables and neither reads what the other writes: their order is"
            " no behaviour",
        "fixed_loop:swap:L5:optimizer.zero_grad() -> loss = torch.nn.functional.cross_entr...":
            "the forward pass reads no .grad: clearing before or after it leaves the same gradients for backward",
        "fixed_loop:arith:L13:torch.nn.functional.cross_entropy(model(xb), yb).item() * len(yb) -> torch.nn.functional.cross_entropy(model(xb), yb).item() / len(yb)":
            "the validation loss's value is never used (validating is the eval-mode, no-grad forward the doctor "
            "watches); only its arithmetic changes",
        "fixed_loop:arith:L13:torch.nn.functional.cross_entropy(model(xb), yb).item() * len(yb) -> torch.nn.functional.cross_entropy(model(xb), yb).item() + len(yb)":
            "the validation loss's value is never used; only its arithmetic changes",
        "fixed_loop:arith:L13:torch.nn.functional.cross_entropy(model(xb), yb).item() * len(yb) -> torch.nn.functional.cross_entropy(model(xb), yb).item()":
            "the validation loss's value is never used; only its arithmetic changes",
        "fixed_loop:copy:L13:torch.nn.functional.cross_entropy(model(xb), yb).item() -> torch.nn.functional.cross_entropy(model(xb), yb)":
            "the validation loss's value is never used, and under no_grad the tensor it keeps holds no graph",
        "fixed_loop:offbyone:L13:len(yb) -> len(yb) + 1":
            "the validation loss's value is never used; only its arithmetic changes",
        "fixed_loop:offbyone:L13:len(yb) -> len(yb) - 1":
            "the validation loss's value is never used; only its arithmetic changes",
    },
    "accumulate_epoch": {
        "accumulate_epoch:swap:L1:sizes = [len(targets) for _, targets ... -> updates = 0":
            "the two statements touch different variables and neither reads what the other writes: their order is"
            " no behaviour",
        "accumulate_epoch:swap:L2:updates = 0 -> model.train()":
            "the two statements touch different variables and neither reads what the other writes: their order is"
            " no behaviour",
        "accumulate_epoch:swap:L3:model.train() -> optimizer.zero_grad()":
            "model.train() sets the layers' flags and zero_grad clears .grad: neither reads what the other writes, "
            "and no forward runs between them",
        "accumulate_epoch:drop:L4:optimizer.zero_grad() -> (removed)":
            "the model comes with no gradients, as the statement says (and a known right attempt, "
            "tests/exercise_rights.py ae_sum_then_divide, clears only after its updates)",
        "accumulate_epoch:swap:L4:optimizer.zero_grad() -> for i, (inputs, targets) in enumerate...":
            "the model comes with no gradients (the statement says so), and after the loop's last update they are "
            "already cleared: the moved zero_grad clears nothing either place",
        "accumulate_epoch:swap:L12:optimizer.zero_grad() -> updates += 1":
            "the two statements touch different variables and neither reads what the other writes: their order is"
            " no behaviour",
    },
    "lr_range_test": {
        "reference_range_test:swap:L2:n = len(loader) -> lrs, losses = ([], [])":
            "the two statements touch different variables and neither reads what the other writes: their order is"
            " no behaviour",
        "reference_range_test:swap:L6:for group in optimizer.param_groups: -> optimizer.zero_grad()":
            "setting the rate and clearing the gradients touch different state; both happen before the step",
        "reference_range_test:swap:L8:optimizer.zero_grad() -> loss = loss_fn(model(inputs), targets)":
            "the forward pass reads no .grad: clearing before or after it leaves the same gradients for backward",
        "reference_range_test:swap:L11:optimizer.step() -> lrs.append(lr)":
            "the two statements touch different variables and neither reads what the other writes: their order is"
            " no behaviour",
        "reference_range_test:swap:L12:lrs.append(lr) -> losses.append(loss.item())":
            "the two statements touch different variables and neither reads what the other writes: their order is"
            " no behaviour",
        "reference_range_test:cmp:L5:n > 1 -> n >= 1":
            "differs only for n = 1; the statement says n >= 2",
        "reference_range_test:const:L5:1 -> 0":
            "n > 0 differs from n > 1 only for n = 1; the statement says n >= 2",
    },
    "checkpoint_pair": {
        "load_checkpoint:swap:L2:model.load_state_dict(state['model']) -> optimizer.load_state_dict(state['opti...":
            "the model's and the optimizer's states load into different objects (the optimizer's keeps the same "
            "parameter tensors)",
        "load_checkpoint:swap:L3:optimizer.load_state_dict(state['opti... -> scheduler.load_state_dict(state['sche...":
            "the scheduler's state_dict holds its own counters only; loading it before or after the optimizer's "
            "sets the same values",
        "load_checkpoint:swap:L4:scheduler.load_state_dict(state['sche... -> torch.set_rng_state(state['rng'])":
            "loading a scheduler's state draws no random number, so the random state restored is the same",
    },
    "stop_check": {
        "stop_check:drop:L11:return None -> (removed)":
            "a function that falls off its end returns None",
        "stop_check:swap:L3:if not math.isfinite(loss): -> if loss < best - min_delta:":
            "for a value that is not finite both orders return this check's number in the same pass (an "
            "improvement or a wait, then the finite test; or the patience test first, which returns the same "
            "number)",
        "stop_check:const:L1:0 -> 1":
            "the first finite value always beats the best inf by more than a finite min_delta and resets the "
            "count",
        "stop_check:const:L1:0 -> -1":
            "the first finite value always beats the best inf by more than a finite min_delta and resets the "
            "count",
    },
    "warmup_cosine_lr": {
        "warmup_cosine_lr:swap:L1:if update < warmup: -> progress = (update - warmup) / (total...":
            "computing progress first fails only when total == warmup; the statement's cosine runs from update "
            "warmup down to 0 at update total, so it presumes warmup < total (the check's cases keep it)",
    },
    "clip_gradients": {
        "clip_gradients:cmp:L3:total > max_norm -> total >= max_norm":
            "at total == max_norm the factor max_norm / total is exactly 1.0, and multiplying by 1.0 leaves every"
            " gradient bit for bit",
    },
    "race_to_target": {
        "race_to_target:drop:L17:return None -> (removed)":
            "a function that falls off its end returns None",
        "race_to_target:cmp:L2:updates < max_updates -> updates <= max_updates":
            "differs only for max_updates = 0, which the statement excludes (`max_updates` >= 1)",
        "race_to_target:mode:L4:model.train() -> (removed)":
            "the model arrives in train mode, as the statement says, and is put back in train mode after every "
            "measurement",
        "race_to_target:swap:L4:model.train() -> optimizer.zero_grad()":
            "the two statements touch different variables and neither reads what the other writes: their order is"
            " no behaviour",
        "race_to_target:swap:L7:optimizer.step() -> updates += 1":
            "the two statements touch different variables and neither reads what the other writes: their order is"
            " no behaviour",
        "race_to_target:swap:L8:updates += 1 -> model.eval()":
            "the two statements touch different variables and neither reads what the other writes: their order is"
            " no behaviour",
    },
    "examples_processed": {
        "examples_processed:swap:L1:if drop_last: -> epochs, rest = divmod(updates, math.c...":
            "math.ceil(N / B) >= 1 for N >= 1, so computing the division first never fails and the drop_last "
            "branch returns the same",
    },
}
