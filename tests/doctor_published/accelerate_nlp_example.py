# Mirrors: huggingface/accelerate, examples/nlp_example.py, snapshot at commit 16cb6eb80dd9 (2026-07-24); the file
# last changed in a5cb37c1 (2026-06-10).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: tokenized examples padded per batch by a collate function into dict batches (training shuffled, last
# batch dropped); the model called as model(**batch) and returning an output with .loss; AdamW with a linear
# warmup/decay schedule sized in updates; gradient accumulation when the requested batch exceeds the largest batch
# that fits (the batch shrinks to that size and the loss is divided by the number of micro-batches); everything
# passed through accelerator.prepare(); per micro-batch the loss goes through accelerator.backward() and, when the
# step counter modulo K is 0, the optimizer steps, the schedule steps and the gradients are zeroed; evaluation in
# eval mode with the forward under no_grad, predictions gathered into a GLUE-style metric. Shrunk: synthetic
# tokenized sentence pairs (160 train, 40 validation) instead of GLUE/MRPC and bert-base-cased, an embedding +
# dropout + linear classifier for the transformer, largest batch 8 (not 16), 2 epochs (not 3).
# Added: `with watch(...)` around the epochs.
# Real bug when gradient accumulation is on (the variant `batch_size_24_accumulates`), line 167 of the published
# file, the accumulation test: the update is taken when the step counter modulo K is 0, so it fires at step 0 (a
# window of one micro-batch), each epoch's last micro-batches are carried into the next epoch, and the last
# epoch's are never applied.
import torch
from torch.utils.data import DataLoader

from tests.doctor_published.standins import (Accelerator, DistributedType, TinySequenceClassifier, evaluate,
                                             get_linear_schedule_with_warmup, pad_collate, sentence_pairs, set_seed)

LARGEST_BATCH = 8
EVAL_BATCH = 32


def make_loaders(acc: Accelerator, batch: int = 16):
    splits = {"train": sentence_pairs(160, seed=1), "validation": sentence_pairs(40, seed=2)}
    fit = DataLoader(splits["train"], batch_size=batch, shuffle=True, collate_fn=pad_collate, drop_last=True)
    check = DataLoader(splits["validation"], batch_size=EVAL_BATCH, shuffle=False, collate_fn=pad_collate,
                       drop_last=acc.mixed_precision == "fp8")
    return fit, check


def fine_tune(hp: dict, run_on_cpu: bool, precision, watch):
    acc = Accelerator(cpu=run_on_cpu, mixed_precision=precision)
    lr, epochs, batch = hp["lr"], int(hp["epochs"]), int(hp["batch"])
    glue = evaluate.load("glue", "mrpc")
    accumulate = 1
    if batch > LARGEST_BATCH and acc.distributed_type != DistributedType.XLA:
        accumulate, batch = batch // LARGEST_BATCH, LARGEST_BATCH
    set_seed(int(hp["seed"]))
    fit, check = make_loaders(acc, batch)
    classifier = TinySequenceClassifier.from_pretrained("bert-base-cased", return_dict=True).to(acc.device)
    adamw = torch.optim.AdamW(params=classifier.parameters(), lr=lr)
    warmup = get_linear_schedule_with_warmup(optimizer=adamw, num_warmup_steps=100,
                                             num_training_steps=len(fit) * epochs // accumulate)
    classifier, adamw, fit, check, warmup = acc.prepare(classifier, adamw, fit, check, warmup)

    with watch(classifier, adamw, warmup):
        for epoch in range(epochs):
            classifier.train()
            for step, batch_dict in enumerate(fit):
                batch_dict.to(acc.device)
                loss = classifier(**batch_dict).loss
                loss = loss / accumulate
                acc.backward(loss)
                if step % accumulate == 0:
                    adamw.step()
                    warmup.step()
                    adamw.zero_grad()

            classifier.eval()
            for batch_dict in check:
                batch_dict.to(acc.device)
                with torch.no_grad():
                    out = classifier(**batch_dict)
                guesses, truth = acc.gather_for_metrics((out.logits.argmax(dim=-1), batch_dict["labels"]))
                glue.add_batch(predictions=guesses, references=truth)
            acc.print(f"epoch {epoch}: {glue.compute()}")
    acc.end_training()
    return [classifier, adamw]


def main(watch):
    hp = {"lr": 2e-3, "epochs": 2, "seed": 42, "batch": 8}
    return fine_tune(hp, run_on_cpu=True, precision=None, watch=watch)


from tests.doctor_published import variant  # noqa: E402

ACCUMULATE = ('"seed": 42, "batch": 8}', '"seed": 42, "batch": 24}')
VARIANTS = [
    # `step % accumulate == 0` steps at step 0 on one micro-batch whose loss was divided by 3: by the course's
    # rule (each micro-batch weighted by its share of the window's examples) that update is 3x too small
    variant("batch_size_24_accumulates", {"accumulation_without_flush", "unscaled_accumulation"}, ACCUMULATE),
    variant("loss_not_divided_when_accumulating", {"unscaled_accumulation", "accumulation_without_flush"},
            ACCUMULATE, ("                loss = loss / accumulate\n", "")),
    variant("evaluation_in_train_mode", "eval_in_train_mode", ("            classifier.eval()\n", "")),
    variant("evaluation_with_gradients", "missing_no_grad",
            ("                with torch.no_grad():\n                    out = classifier(**batch_dict)\n",
             "                out = classifier(**batch_dict)\n")),
    variant("scheduler_before_the_step", "scheduler_before_optimizer",
            ("                    adamw.step()\n                    warmup.step()\n",
             "                    warmup.step()\n                    adamw.step()\n")),
    variant("linear_warmup_stepped_per_epoch", "update_schedule_per_epoch",
            ("                    warmup.step()\n", ""),
            ("            classifier.eval()\n", "            warmup.step()\n            classifier.eval()\n")),
    variant("validation_examples_from_training", "data_leakage",
            ('"validation": sentence_pairs(40, seed=2)}', '"validation": sentence_pairs(160, seed=1)[:40]}')),
]
