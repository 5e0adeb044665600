# Mirrors: huggingface/transformers, examples/pytorch/text-classification/run_glue_no_trainer.py, at commit 0310c247aafa:
# the loop that issue #15801 (2022-02-23) quotes (`step % args.gradient_accumulation_steps == 0 or step ==
# len(train_dataloader) - 1`); later versions moved to accelerator.accumulate.
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: padded sentence-pair batches (dict batches, `model(**batch)` returning an output with .loss and .logits), a
# shuffled training loader and an evaluation loader; AdamW over two parameter groups (no weight decay on biases
# and LayerNorm weights); everything passed through accelerator.prepare; a linear warmup schedule counted in
# updates (ceil(len(loader) / K) per epoch); per batch: loss / K, accelerator.backward, and an update (step,
# scheduler step, zero_grad) when step % K == 0 or at the epoch's last batch; then model.eval() and a metric over
# the evaluation batches' argmax predictions, computed without torch.no_grad (the published loop's real bug).
# Shrunk: 160 training and 40 validation sentence pairs, batch 8, an embedding classifier, 2 epochs, K = 1 (the
# script's default). Added: `with watch(...)` around the epochs.
import math
from types import SimpleNamespace

import torch
from torch.utils.data import DataLoader

from tests.doctor_published.standins import (Accelerator, TinySequenceClassifier, evaluate,
                                             get_linear_schedule_with_warmup, pad_collate, sentence_pairs, set_seed)


def main(watch):
    args = SimpleNamespace(per_device_train_batch_size=8, per_device_eval_batch_size=16, learning_rate=2e-3,
                           weight_decay=0.01, num_train_epochs=2, gradient_accumulation_steps=1, num_warmup_steps=0,
                           max_train_steps=None, seed=7)
    accelerator = Accelerator()
    set_seed(args.seed)
    train_dataset, eval_dataset = sentence_pairs(160, seed=1), sentence_pairs(40, seed=2)
    model = TinySequenceClassifier.from_pretrained("bert-base-cased")
    train_dataloader = DataLoader(train_dataset, shuffle=True, collate_fn=pad_collate,
                                  batch_size=args.per_device_train_batch_size)
    eval_dataloader = DataLoader(eval_dataset, collate_fn=pad_collate, batch_size=args.per_device_eval_batch_size)
    no_decay = ["bias", "LayerNorm.weight"]
    grouped = [{"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
                "weight_decay": args.weight_decay},
               {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
                "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(grouped, lr=args.learning_rate)
    model, optimizer, train_dataloader, eval_dataloader = accelerator.prepare(
        model, optimizer, train_dataloader, eval_dataloader)
    num_update_steps_per_epoch = math.ceil(len(train_dataloader) / args.gradient_accumulation_steps)
    args.max_train_steps = args.num_train_epochs * num_update_steps_per_epoch
    lr_scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=args.num_warmup_steps,
                                                   num_training_steps=args.max_train_steps)
    metric = evaluate.load("glue", "mrpc")
    completed_steps = 0
    with watch(model):
        for epoch in range(args.num_train_epochs):
            model.train()
            for step, batch in enumerate(train_dataloader):
                outputs = model(**batch)
                loss = outputs.loss
                loss = loss / args.gradient_accumulation_steps
                accelerator.backward(loss)
                if step % args.gradient_accumulation_steps == 0 or step == len(train_dataloader) - 1:
                    optimizer.step()
                    lr_scheduler.step()
                    optimizer.zero_grad()
                    completed_steps += 1
                if completed_steps >= args.max_train_steps:
                    break

            model.eval()
            for step, batch in enumerate(eval_dataloader):
                outputs = model(**batch)
                predictions = outputs.logits.argmax(dim=-1)
                metric.add_batch(predictions=accelerator.gather_for_metrics(predictions),
                                 references=accelerator.gather_for_metrics(batch["labels"]))
            print(f"epoch {epoch}: {metric.compute()}")
    return [model, optimizer]


from tests.doctor_published import variant  # noqa: E402

REAL = {"missing_no_grad": "run_glue_no_trainer.py, the evaluation loop after each epoch: model(**batch) runs "
                           "without torch.no_grad(), so every evaluation batch records a graph nobody backwards"}
NO_GRAD = ("                outputs = model(**batch)\n                predictions",
           "                with torch.no_grad():\n                    outputs = model(**batch)\n                predictions")
VARIANTS = [
    variant("evaluation_under_no_grad", set(), NO_GRAD, fixes={"missing_no_grad"}),
    # K = 4 as published: `step % K == 0` steps at step 0 on one micro-batch divided by 4 (a quarter of an update),
    # and the epoch's flushed last window is short too; both are 4x or 4/r too small by the course's rule
    variant("accumulation_4_as_published", "unscaled_accumulation", ("gradient_accumulation_steps=1,",
                                                                     "gradient_accumulation_steps=4,")),
    variant("accumulation_4_with_the_off_by_one_fixed", set(), NO_GRAD,
            ("gradient_accumulation_steps=1,", "gradient_accumulation_steps=4,"),
            ("if step % args.gradient_accumulation_steps == 0 or", "if (step + 1) % args.gradient_accumulation_steps == 0 or"),
            fixes={"missing_no_grad"}),
    variant("evaluation_in_train_mode", "eval_in_train_mode", ("            model.eval()\n", "")),
]
