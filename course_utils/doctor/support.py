"""What the loop doctor supports (chapters 5, 9): one table, shown in chapter 5 and copied into the README.

Each row names the tests that show it: cases of the published-loop corpus (``tests/doctor_published``, a loop
name stands for all its cases), cases of the learner-style corpus (``tests/doctor_corpus``, marked "learner"),
or tests in ``tests/test_doctor_support.py`` and ``tests/test_doctor_devices.py``. A test checks that every name
exists and that the README holds this very table.
"""
from __future__ import annotations

SUPPORT = (
    ("loop shapes",
     "for-loops over a DataLoader, while-loops over an iterator, step-counted loops on an infinite sampler, "
     "train/val phases with `set_grad_enabled`, gradient accumulation",
     ("nanogpt_train", "mingpt_trainer", "tutorials_transfer_learning", "learner while_mid_epoch_eval")),
    ("", "LBFGS `step(closure)`", ("examples_time_sequence",)),
    ("", "two models and two optimizers, several backward passes per update",
     ("examples_dcgan", "tutorials_seq2seq")),
    ("", "an optimizer built inside a library call (minGPT's `Trainer`, d2l's `fit`)",
     ("mingpt_trainer", "d2l_trainer")),
    ("", "a forward reached through another method of the model (`self.forward(x)` inside SAC's `policy.sample`, "
         "sentence-transformers' `encode`)",
     ("sac_pranz24", "sbert_fit", "test_a_forward_reached_through_another_method_is_seen")),
    ("", "a hand-written update with no optimizer",
     ("examples_word_language_model", "examples_regression",
      "test_a_hand_written_update_without_optimizer_is_watched")),
    ("data", "any Dataset behind a DataLoader; random augmentation, weights bitwise unchanged",
     ("kuangliu_cifar", "test_no_getitem_no_rng_draw_no_upfront_pass_with_random_augmentation")),
    ("", "file-based datasets, dict batches, `model(**batch)`",
     ("accelerate_cv_example", "accelerate_nlp_example", "test_dict_batches_model_kwargs_numpy_and_token_streams")),
    ("", "batches whose first tensor repeats within a batch (a user id in NCF's (user, item, label)): not "
         "examples, so no leakage verdict is drawn from them",
     ("ncf_guoyang9", "test_keys_that_repeat_within_a_batch_are_not_compared_as_examples")),
    ("", "NumPy arrays and 1-D token streams without a DataLoader (pass `train_data=`, `val_data=`)",
     ("nanogpt_train", "examples_word_language_model")),
    ("", "time-major batches (`[seq_len, batch]`, as an RNN's seq2seq collates them): the examples are read along "
         "the dimension the loader's batch size names",
     ("bentrevett_seq2seq",)),
    ("", "batches, inputs and outputs held as an object's attributes (DETR's `NestedTensor(tensors, mask)`, a "
         "dataclass output such as diffusers' `UNet2DOutput(sample=...)`)",
     ("detr_engine", "diffusers_unconditional")),
    ("evaluation", "validation losses read with `.item()` and averaged as a Python sum, or in one call: `np.mean`, "
                   "`statistics.mean`, `torch.tensor(list).mean()`; or summed in a tensor and divided by the count "
                   "(crnn.pytorch's averager divides by `float(k)`)",
     ("makemore_train", "examples_imagenet", "crnn_meijieru", "test_a_mean_of_readings_taken_in_one_call_is_checked",
      "test_a_tensor_sum_divided_by_float_k_is_a_mean_of_batch_means")),
    ("", "meters that weigh each batch by its size beside a plain window mean for the log line (DETR's "
         "`SmoothedValue`): the weighted one is taken as the result",
     ("detr_engine",)),
    ("", "batch means from a loss module (`reduction=\"mean\"`) summed and divided by the dataset's size: about 1/B "
         "of the mean; the same division after `reduction=\"sum\"` is right and is not named",
     ("cifar100_weiaicunzai", "examples_mnist",
      "test_batch_means_summed_and_divided_by_the_examples_are_named_only_for_a_mean_reduced_loss_module")),
    ("", "a watched model's direct child called on its own under no_grad (`model.encoder(images)`): an evaluation, "
         "unless a backward follows before the next batch (then it fed a trained head as a frozen stage)",
     ("supcon_hobbitlong",)),
    ("", "evaluating by `requires_grad = False` on every parameter, gradients left on (crnn.pytorch's `val`): "
         "an evaluation, unless a backward follows while the parameters are still frozen (a fixed encoder)",
     ("crnn_meijieru", "test_evaluating_by_freezing_every_parameter_is_an_evaluation",
      "test_a_frozen_model_whose_features_are_trained_on_is_not_an_evaluation")),
    ("", "a no-grad forward in train mode on inputs no loader gave (a preview sampled from noise): judged by its "
         "dropout, unless a backward follows before the next batch (a GAN's fakes, trained on); a generator's "
         "BatchNorm sampling in train mode is how GANs sample",
     ("dit_train", "diffusers_unconditional", "examples_dcgan")),
    ("optimizers", "any `torch.optim.Optimizer` (SGD, Adam, AdamW, Adadelta, LBFGS), several at once, or none",
     ("examples_mnist", "examples_dcgan", "examples_time_sequence", "examples_regression")),
    ("precision", "float32; bfloat16 or float16 autocast with a GradScaler (skipped steps included) on the CPU",
     ("learner amp_cpu_scaler_accumulation", "learner amp_fp16_skipped_steps",
      "test_grad_scaler_accumulation_judged_by_examples")),
    ("", "a half model trained through float32 master copies that the optimizer holds and writes back after "
         "each step (the recipe before autocast)",
     ("improved_diffusion_train",)),
    ("", "float16 or bfloat16 autocast with a GradScaler on CUDA; gradients and evaluations read on the GPU "
         "(the same tests, run only where a GPU is present)",
     ("test_grad_scaler_accumulation_judged_by_examples", "test_weights_bitwise_unchanged_under_autocast_and_a_scaler",
      "test_gradient_reads_and_evaluation_checks_on_the_device")),
    ("compile", "a `torch.compile`d module: give the doctor the module you call (tested with the aot_eager backend)",
     ("test_compiled_module_is_watched_and_unchanged",)),
)


def support_table(shown_by: bool = True) -> str:
    """The support matrix as a Markdown table: the README's copy names the tests (shown_by); chapter 5 shows the
    learner's two columns."""
    lines = ["| what | supported | shown by |", "|---|---|---|"] if shown_by else ["| what | supported |", "|---|---|"]
    for what, supported, tests in SUPPORT:
        shown = f" {', '.join(f'`{t}`' for t in tests)} |" if shown_by else ""
        lines.append(f"| {what} | {supported} |{shown}")
    return "\n".join(lines)
