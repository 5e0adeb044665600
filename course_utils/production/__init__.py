"""The production trainer of chapter 7: one readable fit(config) and the components beside it.

    from course_utils.production import FitConfig, fit
    result = fit(FitConfig(out="runs/demo", epochs=5, checkpoint_every=10, resume=True))

The command line over it is ``python -m course_utils.train`` (also under ``torchrun``).
"""
from course_utils.production.checkpoint import CheckpointError, UnsafeCheckpointError, load_checkpoint
from course_utils.production.config import FitConfig
from course_utils.production.early_stopping import EarlyStopping
from course_utils.production.fit import FitResult, fit, weights_digest

__all__ = ["FitConfig", "FitResult", "fit", "load_checkpoint", "EarlyStopping", "CheckpointError",
           "UnsafeCheckpointError", "weights_digest"]
