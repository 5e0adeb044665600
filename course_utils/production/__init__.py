"""The production trainer of chapter 7: one readable fit(config, task) and the components beside it.

    from course_utils.production import FitConfig, Task, fit
    result = fit(FitConfig(out="runs/demo", epochs=5, checkpoint_every=10, resume=True))      # the spiral MLP
    result = fit(FitConfig(out="runs/mine", epochs=5), Task(model, train_data, val_data))     # your own

The command line over it is ``python -m course_utils.train`` (``cli.py``; also ``python -m
course_utils.production``, and under ``torchrun``); ``--task`` names a built-in task (spiral, chars, shapes,
in ``builtin.py``) or your own ``MODULE:FUNCTION``. Validation metrics that are no mean over examples (F1,
precision, recall, AUROC) accumulate and compute once: ``metrics.py`` (the protocol), ``classification_metrics.py``
(the metrics). It uses the engine (models, schedules, the loop's arithmetic) and infra (storage, checks), never a
chapter or a view.
"""
from course_utils.production.classification_metrics import (Accuracy, BinaryAUROC, BinaryF1, BinaryPrecision,
                                                            BinaryRecall, MulticlassF1, MulticlassPrecision,
                                                            MulticlassRecall)
from course_utils.production.checkpoint import (CheckpointError, NoUsableCheckpointError, UnsafeCheckpointError,
                                                load_checkpoint)
from course_utils.production.config import FitConfig
from course_utils.production.early_stopping import EarlyStopping
from course_utils.production.fit import FitResult, fit, weights_digest
from course_utils.production.metrics import Metric, MetricError, PerBatchMean
from course_utils.production.task import Task, TaskError

__all__ = ["FitConfig", "FitResult", "Task", "TaskError", "fit", "load_checkpoint", "EarlyStopping",
           "CheckpointError", "NoUsableCheckpointError", "UnsafeCheckpointError", "weights_digest",
           "Metric", "MetricError", "PerBatchMean", "Accuracy", "BinaryAUROC", "BinaryF1", "BinaryPrecision",
           "BinaryRecall", "MulticlassF1", "MulticlassPrecision", "MulticlassRecall"]
