"""The statement -> check table of every exercise (issue 40 item 1); chapters 5 to 8 in rules_ch05_08.py.

Each exercise's statement (the markdown cell above its stub in notebooks/src/NN_*.py) is split into sentences by
``sentences`` (at a '.' or ';' outside parentheses and backticks). ``RULES[name]`` holds, for every sentence that
constrains the answer (values, dtypes, shapes, state left behind, how it is computed, randomness, corners), one
``(label, sentence, check, phrase)`` per thing it asks: ``check`` is the function of the exercise's module that fails
when the sentence is broken (``outer.inner`` for a function defined inside another) and ``phrase`` a piece of the
message it fails with. A sentence may carry several rules (one per thing it asks). ``ASIDES[name]`` lists the
sentences that do not constrain the answer, each with a one-word reason (input: describes what the check passes in;
permission: widens what is accepted; motivation, aside, instruction: context). Sentences are the statement's own
words, verbatim: tests/test_exercise_rules.py fails when the statement changes and the table does not, when a
sentence is in neither table, when a check does not exist, and when a rule's counter-example
(tests/exercise_rule_counterexamples.py) is not rejected by its check with its phrase.
"""
from __future__ import annotations

Rule = tuple[str, str, str, str]      # (label, sentence, check, phrase)


def sentences(text: str) -> list[str]:
    """A statement's sentences: split after '.' or ';' (not '...') outside parentheses and backticks, and after a
    parenthesised sentence ending '.)'."""
    out: list[str] = []
    depth, code, current = 0, False, ""
    for i, c in enumerate(text):
        current += c
        after = text[i + 1:i + 2]
        if c == "`":
            code = not code
        elif code:
            continue
        elif c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
            if depth == 0 and text[i - 1] == "." and after == " ":
                out.append(current.strip())
                current = ""
        elif depth == 0 and c in ".;" and text[i - 1] != "." and after in ("", " "):
            out.append(current.strip())
            current = ""
    if current.strip():
        out.append(current.strip())
    return out


RULES: dict[str, tuple[Rule, ...]] = {
    'updates_per_epoch': (
        ('flush',
         'Write `updates_per_epoch(N, B, K, drop_last=False)`: how many times `optimizer.step()` runs in one epoch over N examples in batches of B, with K micro-batches accumulated per update, in a loop that also steps at the end of the epoch when a short window is left (the flush).',
         'check_updates_per_epoch.one', 'short last window'),
        ('drop_last',
         'Write `updates_per_epoch(N, B, K, drop_last=False)`: how many times `optimizer.step()` runs in one epoch over N examples in batches of B, with K micro-batches accumulated per update, in a loop that also steps at the end of the epoch when a short window is left (the flush).',
         'check_updates_per_epoch.one', 'drop_last drops'),
        ('default',
         'Write `updates_per_epoch(N, B, K, drop_last=False)`: how many times `optimizer.step()` runs in one epoch over N examples in batches of B, with K micro-batches accumulated per update, in a loop that also steps at the end of the epoch when a short window is left (the flush).',
         'check_updates_per_epoch', 'drop_last defaults to False'),
        ('millions',
         'N, B and K are positive ints (N up to a few million, so `N / B` is exact in floating point);',
         'check_updates_per_epoch.one', 'update'),
        ('int',
         'return an `int`.',
         'check_updates_per_epoch.one', 'not a whole number'),
    ),
    'loss_weights': (
        ('short_window',
         "Windows of K consecutive micro-batches make one update, and the epoch's last window may be short.",
         'check_loss_weights.one', 'in a window of batch sizes'),
        ('mean',
         "Write `loss_weights(sizes, K)`: for every micro-batch, the number its *mean* loss is multiplied by before `backward()` so that each window's accumulated gradient equals the gradient of one big batch of the window's examples.",
         'check_loss_weights.one', 'in a window of batch sizes'),
        ('one_per',
         'Return a list of floats, one per micro-batch (a 1-D tensor or array of them is accepted too).',
         'check_loss_weights.one', 'one weight per micro-batch'),
    ),
    'SlidingWindows': (
        ('inputs',
         'Write the class `SlidingWindows(series, window)`: example `i` is the pair (`series[i : i + window]`, `series[i + window]`), a window of values and the value that comes next, returned as a tuple.',
         'check_sliding_windows', 'the inputs of dataset'),
        ('target',
         'Write the class `SlidingWindows(series, window)`: example `i` is the pair (`series[i : i + window]`, `series[i + window]`), a window of values and the value that comes next, returned as a tuple.',
         'check_sliding_windows', 'the value right after the window'),
        ('tuple',
         'Write the class `SlidingWindows(series, window)`: example `i` is the pair (`series[i : i + window]`, `series[i + window]`), a window of values and the value that comes next, returned as a tuple.',
         'check_sliding_windows', 'not a pair'),
        ('dtype',
         'The inputs are cut from `series`, so they keep its dtype (float32 or float64: a model refuses inputs of another dtype);',
         'check_sliding_windows', "dtype float32; the data's are float64"),
        ('len',
         '`len(dataset)` is the number of such examples (0 for a series exactly `window` long), and an index past the end raises `IndexError` (that is how `for example in dataset` knows where to stop).',
         'check_sliding_windows', 'len(dataset) is'),
        ('index_error',
         '`len(dataset)` is the number of such examples (0 for a series exactly `window` long), and an index past the end raises `IndexError` (that is how `for example in dataset` knows where to stop).',
         'check_sliding_windows', 'must raise IndexError'),
    ),
    'FolderDataset': (
        ('len',
         'Write `FolderDataset(folder)`: `len(dataset)` is the number of examples, and `dataset[i]` returns the pair `(x, y)` from the file `i.pt` (a tuple, as `TensorDataset` returns; a list `[x, y]` collates the same way and is accepted too), read when it is asked for, in `__getitem__`, so that data larger than memory works.',
         'check_folder_dataset', 'example files'),
        ('pair',
         'Write `FolderDataset(folder)`: `len(dataset)` is the number of examples, and `dataset[i]` returns the pair `(x, y)` from the file `i.pt` (a tuple, as `TensorDataset` returns; a list `[x, y]` collates the same way and is accepted too), read when it is asked for, in `__getitem__`, so that data larger than memory works.',
         'check_folder_dataset', 'not a pair'),
        ('file_i',
         'Write `FolderDataset(folder)`: `len(dataset)` is the number of examples, and `dataset[i]` returns the pair `(x, y)` from the file `i.pt` (a tuple, as `TensorDataset` returns; a list `[x, y]` collates the same way and is accepted too), read when it is asked for, in `__getitem__`, so that data larger than memory works.',
         'check_folder_dataset', 'holds the example of'),
        ('lazy',
         'Write `FolderDataset(folder)`: `len(dataset)` is the number of examples, and `dataset[i]` returns the pair `(x, y)` from the file `i.pt` (a tuple, as `TensorDataset` returns; a list `[x, y]` collates the same way and is accepted too), read when it is asked for, in `__getitem__`, so that data larger than memory works.',
         'check_folder_dataset', 'read every file up front'),
        ('x_float32',
         'Keep the stored dtypes: `x` float32, `y` an int64 class label (`int(y)` is fine too; a float label is not: the cell above shows what `CrossEntropyLoss` does with one).',
         '_compare_loaders', "inputs have dtype float64; the data's are float32"),
        ('y_int64',
         'Keep the stored dtypes: `x` float32, `y` an int64 class label (`int(y)` is fine too; a float label is not: the cell above shows what `CrossEntropyLoss` does with one).',
         '_compare_loaders', "targets have dtype float32; the data's are int64"),
    ),
    'pad_collate': (
        ('tuple',
         "Write `pad_collate(batch)` returning the tuple `(input_ids, mask, labels)` of three tensors: `input_ids`, a LongTensor [B, T] with T the longest sequence's length, each row padded with 0 on the right;",
         '_pad_case', 'asks for the tuple'),
        ('longest',
         "Write `pad_collate(batch)` returning the tuple `(input_ids, mask, labels)` of three tensors: `input_ids`, a LongTensor [B, T] with T the longest sequence's length, each row padded with 0 on the right;",
         '_pad_case', 'longest sequence'),
        ('right',
         "Write `pad_collate(batch)` returning the tuple `(input_ids, mask, labels)` of three tensors: `input_ids`, a LongTensor [B, T] with T the longest sequence's length, each row padded with 0 on the right;",
         '_pad_case', 'of input_ids is'),
        ('int64',
         "Write `pad_collate(batch)` returning the tuple `(input_ids, mask, labels)` of three tensors: `input_ids`, a LongTensor [B, T] with T the longest sequence's length, each row padded with 0 on the right;",
         '_pad_case', 'input_ids has dtype int32; it should be int64'),
        ('mask_bool',
         '`mask`, a BoolTensor [B, T], True on real tokens;',
         '_pad_case', 'it should be bool'),
        ('mask_true',
         '`mask`, a BoolTensor [B, T], True on real tokens;',
         '_pad_case', 'of the mask is'),
        ('labels',
         '`labels`, a LongTensor [B].',
         '_pad_case', "in the batch's order"),
    ),
    'class_balanced_weights': (
        ('one_per_example',
         'Write `class_balanced_weights(labels)`, for a 1-D LongTensor (int64) of class labels 0, 1, 2, ... (some may be absent): one weight per example, finite and > 0 (a 1-D tensor or a list) such that `WeightedRandomSampler(weights, ...)` draws every class present equally often.',
         '_weights_case', 'one weight per example'),
        ('finite',
         'Write `class_balanced_weights(labels)`, for a 1-D LongTensor (int64) of class labels 0, 1, 2, ... (some may be absent): one weight per example, finite and > 0 (a 1-D tensor or a list) such that `WeightedRandomSampler(weights, ...)` draws every class present equally often.',
         '_weights_case', 'NaN or infinite'),
        ('positive',
         'Write `class_balanced_weights(labels)`, for a 1-D LongTensor (int64) of class labels 0, 1, 2, ... (some may be absent): one weight per example, finite and > 0 (a 1-D tensor or a list) such that `WeightedRandomSampler(weights, ...)` draws every class present equally often.',
         '_weights_case', 'weights are 0'),
        ('balanced',
         'Write `class_balanced_weights(labels)`, for a 1-D LongTensor (int64) of class labels 0, 1, 2, ... (some may be absent): one weight per example, finite and > 0 (a 1-D tensor or a list) such that `WeightedRandomSampler(weights, ...)` draws every class present equally often.',
         '_weights_case', 'balanced is'),
    ),
    'shard_indices': (
        ('sampler',
         'Write `shard_indices(n, world_size, rank)`: the list of indices that rank `rank` of `world_size` ranks gets from `DistributedSampler` over n examples with `shuffle=False` (and `drop_last=False`), as a list of ints (a 1-D integer tensor is accepted too).',
         '_shard_case', 'DistributedSampler gives it'),
        ('ints',
         'Write `shard_indices(n, world_size, rank)`: the list of indices that rank `rank` of `world_size` ranks gets from `DistributedSampler` over n examples with `shuffle=False` (and `drop_last=False`), as a list of ints (a 1-D integer tensor is accepted too).',
         '_shard_case', 'not a list of indices'),
        ('count',
         'Every rank gets ceil(n / world_size) indices;',
         '_shard_case', 'every rank should get'),
        ('padding',
         'the padding repeats the list from its start, as many times as needed (section 5: n = 1, world_size = 3 gives [0] to every rank).',
         '_shard_case', 'DistributedSampler gives it'),
    ),
    'weighted_shard': (
        ('ints',
         'Write `weighted_shard(weights, num_samples, world_size, rank, epoch, seed=0)`: the list of indices (ints) that rank `rank` of `world_size` ranks draws in epoch `epoch` (a 1-D int64 tensor of them is accepted too).',
         '_case', 'not a list of indices'),
        ('epoch',
         'Write `weighted_shard(weights, num_samples, world_size, rank, epoch, seed=0)`: the list of indices (ints) that rank `rank` of `world_size` ranks draws in epoch `epoch` (a 1-D int64 tensor of them is accepted too).',
         '_case', 'the shared draw gives it'),
        ('default_seed',
         'Write `weighted_shard(weights, num_samples, world_size, rank, epoch, seed=0)`: the list of indices (ints) that rank `rank` of `world_size` ranks draws in epoch `epoch` (a 1-D int64 tensor of them is accepted too).',
         'check_weighted_shard', 'seed defaults to 0'),
        ('total',
         'Every rank makes the same draw: `total = world_size * ceil(num_samples / world_size)` indices, with replacement, in proportion to the weights, by `torch.multinomial(weights, total, replacement=True, generator=g)` with `g = torch.Generator().manual_seed(seed + epoch)`.',
         '_case', 'the shared draw gives it'),
        ('replacement',
         'Every rank makes the same draw: `total = world_size * ceil(num_samples / world_size)` indices, with replacement, in proportion to the weights, by `torch.multinomial(weights, total, replacement=True, generator=g)` with `g = torch.Generator().manual_seed(seed + epoch)`.',
         '_case', 'the shared draw gives it'),
        ('deal',
         'Rank r keeps draws r, r + world_size, r + 2·world_size, ..., as `DistributedSampler` deals indices out.',
         '_case', 'the shared draw gives it'),
        ('weights',
         "Leave `weights` and torch's global random state untouched.",
         '_case', 'changed the `weights` tensor'),
        ('global_rng',
         "Leave `weights` and torch's global random state untouched.",
         '_case', "changed torch's global random state"),
    ),
    'train_step': (
        ('float',
         'Write `train_step(model, inputs, targets, loss_fn, optimizer)`: one complete step on one batch, returning the loss as a Python float (the loss of this batch, before the update).',
         '_step_case', 'not a number'),
        ('before',
         'Write `train_step(model, inputs, targets, loss_fn, optimizer)`: one complete step on one batch, returning the loss as a Python float (the loss of this batch, before the update).',
         '_step_case', 'one step runs it once'),
        ('mode',
         'The check calls it three times in a row, with SGD + momentum and with Adam (one of them with two parameter groups), on a model with Dropout and BatchNorm that comes in train mode and must stay in it;',
         '_step_case', 'it came in train mode'),
        ('step',
         "It compares every weight with torch's own step after each call.",
         '_step_case', 'gradients leaked'),
        ('stale_grads',
         "The model may come with gradients left in `.grad` by an earlier backward: the step uses this batch's alone.",
         '_step_case', "your step added this batch's gradient to them"),
    ),
    'adam_step': (
        ('bias',
         'Write `adam_step(param, grad, m, v, t, lr, betas, eps)` without `torch.optim`: the update Adam makes at step `t` (1 for the first), given the gradient and the moments `m` and `v` left by step t − 1;',
         '_adam_case', "torch's Adam gives"),
        ('tuple',
         'Return the tuple `(new_param, new_m, new_v)` of tensors of that shape (new tensors, or the ones passed in, updated in place: either is fine).',
         '_adam_case', 'it should return 3 things'),
        ('shape',
         'Return the tuple `(new_param, new_m, new_v)` of tensors of that shape (new tensors, or the ones passed in, updated in place: either is fine).',
         '_adam_case', 'has shape'),
    ),
    'sgd_step_by_hand': (
        ('value',
         'The layer is y = W x + b (W of shape [outputs, inputs]), the loss the mean over the outputs of (y − t)², the optimizer plain SGD.',
         '_sgd_case', 'autograd and torch.optim.SGD give'),
        ('tuple',
         'Write `sgd_step_by_hand(W, b, x, t, lr)` returning the tuple `(W_new, b_new)` of tensors shaped like W and b and of their dtype (as `torch.optim.SGD` keeps them), with the gradient worked out by hand, without autograd.',
         '_sgd_case', 'it should return 2 things'),
        ('no_autograd',
         'Write `sgd_step_by_hand(W, b, x, t, lr)` returning the tuple `(W_new, b_new)` of tensors shaped like W and b and of their dtype (as `torch.optim.SGD` keeps them), with the gradient worked out by hand, without autograd.',
         '_sgd_case', 'without autograd'),
        ('no_autograd_engine',
         'Write `sgd_step_by_hand(W, b, x, t, lr)` returning the tuple `(W_new, b_new)` of tensors shaped like W and b and of their dtype (as `torch.optim.SGD` keeps them), with the gradient worked out by hand, without autograd.',
         '_sgd_case', 'ran autograd'),
        ('dtype',
         'Write `sgd_step_by_hand(W, b, x, t, lr)` returning the tuple `(W_new, b_new)` of tensors shaped like W and b and of their dtype (as `torch.optim.SGD` keeps them), with the gradient worked out by hand, without autograd.',
         '_sgd_case', 'updates them in their own dtype'),
    ),
    'evaluate': (
        ('floats',
         'Write `evaluate(model, loader, loss_fn)` returning `(mean_loss, accuracy)` as Python floats: the loss averaged per example (not per batch) and the fraction of examples classified right (the arg-max of the logits equals the target), over the examples `loader` yields: every batch of it.',
         '_eval_case', 'not a number'),
        ('per_example',
         'Write `evaluate(model, loader, loss_fn)` returning `(mean_loss, accuracy)` as Python floats: the loss averaged per example (not per batch) and the fraction of examples classified right (the arg-max of the logits equals the target), over the examples `loader` yields: every batch of it.',
         '_eval_case', 'the mean over the'),
        ('yielded',
         "It may draw only part of its dataset (a sampler, or one rank's shard), so count what it yields, not `len(loader.dataset)`.",
         '_eval_case', 'len(loader.dataset)'),
        ('eval_mode',
         'It switches the layers to their evaluation behaviour, builds no graph, takes no step, and leaves the model, and every layer in it, in the mode it found it in (`model.training` may be True or False).',
         '_eval_case', 'ran in train mode'),
        ('no_graph',
         'It switches the layers to their evaluation behaviour, builds no graph, takes no step, and leaves the model, and every layer in it, in the mode it found it in (`model.training` may be True or False).',
         '_eval_case', 'built an autograd graph'),
        ('restore',
         'It switches the layers to their evaluation behaviour, builds no graph, takes no step, and leaves the model, and every layer in it, in the mode it found it in (`model.training` may be True or False).',
         '_eval_case', 'left it in eval mode'),
        ('restore_each_layer',
         'It switches the layers to their evaluation behaviour, builds no graph, takes no step, and leaves the model, and every layer in it, in the mode it found it in (`model.training` may be True or False).',
         '_eval_case', 'switched the frozen BatchNorm back to train'),
        ('accuracy_rule',
         'Accuracy, as in every exercise: count the right predictions as an integer and divide once by the number of examples, in Python floats;',
         '_eval_case', 'rounded to float32'),
        ('accuracy_tolerance',
         'the check compares it to within 1e-9 (a float32 mean is off by up to 6e-8: 232 of 300 is 0.77333331 in float32, below 232/300).',
         '_eval_case', 'are classified right'),
    ),
    'dropout': (
        ('scale',
         'Write `dropout(x, p, training)` without `nn.Dropout` (or `F.dropout`): in training, zero each value with probability p, independently, and scale the survivors so that the expected output equals x;',
         '_dropout_case', 'multiplies them by 1/(1-p)'),
        ('independent',
         'Write `dropout(x, p, training)` without `nn.Dropout` (or `F.dropout`): in training, zero each value with probability p, independently, and scale the survivors so that the expected output equals x;',
         '_drop_counts_vary', 'independent drops'),
        ('eval',
         'otherwise return x unchanged.',
         '_dropout_case', 'must return x unchanged'),
        ('p1',
         '`p` is a float from 0 to 1: with p = 0 nothing is dropped, with p = 1 everything (all zeros, never NaN).',
         '_dropout_case', 'NaN or infinite'),
        ('dtype',
         "Return a tensor of x's shape and dtype, and leave x itself untouched.",
         '_dropout_case', 'it should be float32'),
        ('untouched',
         "Return a tensor of x's shape and dtype, and leave x itself untouched.",
         '_dropout_case', 'changed x in place'),
        ('gradient',
         'Gradients flow through it to x, as through `nn.Dropout`.',
         '_dropout_case', 'no gradient reaches x'),
        ('no_torch_dropout',
         'Write `dropout(x, p, training)` without `nn.Dropout` (or `F.dropout`): in training, zero each value with probability p, independently, and scale the survivors so that the expected output equals x;',
         '_dropout_case', "torch's own dropout"),
        ('p_as_given',
         '`p` is a float from 0 to 1: with p = 0 nothing is dropped, with p = 1 everything (all zeros, never NaN).',
         '_dropout_case', 'should be dropped'),
    ),
    'rank_metrics': (
        ('floats',
         "Write `rank_metrics(losses, correct, n)` returning the tuple `(mean_loss, accuracy)` as Python floats over the n distinct examples, each counted once: rank r's entry j sits at slot r + j·world_size of the sampler's layout, and the slots from n on are padding copies.",
         '_case', 'not a number'),
        ('padding',
         "Write `rank_metrics(losses, correct, n)` returning the tuple `(mean_loss, accuracy)` as Python floats over the n distinct examples, each counted once: rank r's entry j sits at slot r + j·world_size of the sampler's layout, and the slots from n on are padding copies.",
         '_case', 'padding copies too'),
        ('layout',
         "Write `rank_metrics(losses, correct, n)` returning the tuple `(mean_loss, accuracy)` as Python floats over the n distinct examples, each counted once: rank r's entry j sits at slot r + j·world_size of the sampler's layout, and the slots from n on are padding copies.",
         '_case', 'the first n entries rank after rank'),
        ('fewer',
         'n ≥ 1 and may be smaller than world_size (then whole ranks hold only copies).',
         '_case', 'padding copies too'),
        ('loss_tolerance',
         'The loss is compared to within 1e-5 relative (a float32 sum is fine).',
         '_case', 'over the 12 examples it is'),
        ('accuracy_rule',
         'Accuracy, as in every exercise: count the right predictions as an integer and divide once by the number of examples, in Python floats;',
         '_case', 'rounded to float32'),
        ('accuracy_tolerance',
         'the check compares it to within 1e-9 (a float32 mean is off by up to 6e-8: 232 of 300 is 0.77333331 in float32, below 232/300).',
         '_case', 'over the 12 examples it is'),
        ('untouched',
         'Leave the tensors as they are.',
         '_case', 'changed the tensors'),
    ),
}

ASIDES: dict[str, dict[str, str]] = {
    'updates_per_epoch': {
    },
    'loss_weights': {
        '`sizes` lists the batch sizes of one epoch in order (the last may be smaller).': 'input',
    },
    'SlidingWindows': {
        'A time series is a 1-D tensor `series`.': 'input',
        'the target may be the 0-d tensor or a Python float.': 'permission',
        '`1 ≤ window ≤ len(series)`;': 'input',
    },
    'FolderDataset': {
        "A folder holds one file per example, named `0.pt`, `1.pt`, `2.pt`, ... (and maybe other files, such as a README, the features' statistics in `stats.pt` or notes in `0.txt`).": 'input',
        'Each was written with `torch.save({"x": features, "y": label}, path)`.': 'input',
    },
    'pad_collate': {
        'A batch is a list of `(tokens, label)` pairs: `tokens` is a 1-D LongTensor of ids (1 and up: 0 is kept for padding), `label` an int or a 0-d int64 tensor.': 'input',
        "This differs from the chapter's `my_pad_collate` above on purpose: a tuple instead of a dict, and a bool mask (what `masked_fill` and indexing take) instead of the 0/1 `attention_mask` a transformer model reads.": 'motivation',
        "(The course's own is imported as `course_pad_collate`, so yours does not replace it.)": 'aside',
    },
    'class_balanced_weights': {
    },
    'shard_indices': {
    },
    'weighted_shard': {
        '`weights` is a 1-D float32 or float64 tensor, one weight per example;': 'input',
        '`num_samples ≥ 1`.': 'input',
        '(`WeightedRandomSampler` makes this call on `weights.double()`; on float32 weights the two can differ in a rare draw, and the check accepts either.)': 'permission',
    },
    'train_step': {
        '`targets` are int64 class indices.': 'input',
    },
    'adam_step': {
        '`betas` is the pair (beta1, beta2).': 'input',
        '`param`, `grad`, `m` and `v` are float64 tensors of one shape (1-D in the check; element-wise torch ops such as `.sqrt()` work for any shape, `math.sqrt` does not);': 'input',
        '`t` is an int ≥ 1, `lr` and `eps` floats.': 'input',
    },
    'sgd_step_by_hand': {
        '`W`, `b`, `x`, `t` are float32 tensors (`x` of shape [inputs], `b` and `t` of shape [outputs]), `lr` a float.': 'input',
        "This chapter's example is one of the cases;": 'input',
        'the others have other shapes (one output, too).': 'input',
    },
    'evaluate': {
        '`loader` yields `(inputs, targets)` batches, targets int64 class indices, and its last batch may be smaller;': 'input',
        "`loss_fn(logits, targets)` returns the batch's *mean* loss (`CrossEntropyLoss()`).": 'input',
        'All of it fits in about ten lines.': 'aside',
        "(The course's own `evaluate`, used above, is imported as `course_evaluate`, so yours does not replace it.)": 'aside',
    },
    'dropout': {
    },
    'rank_metrics': {
        'Each of `world_size` ranks evaluated its shard of `DistributedSampler(val_set, num_replicas=world_size, rank=r)` (with `drop_last=False`) over n examples.': 'input',
        "`losses[r]` is a 1-D float32 tensor of rank r's per-example losses and `correct[r]` a 1-D bool tensor (True where the prediction was right), both in the order of rank r's sampler;": 'input',
        'every rank has ⌈n / world_size⌉ entries, and `world_size = len(losses)`.': 'input',
    },
}


# Chapters 5 to 8 live in rules_ch05_08.py (one table shape, split for length).
from course_utils.exercises.rules_ch05_08 import ASIDES_CH05_08, RULES_CH05_08  # noqa: E402

RULES.update(RULES_CH05_08)
ASIDES.update(ASIDES_CH05_08)
