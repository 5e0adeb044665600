"""course_utils: the helper package of the Training Loop Mechanics course."""
from course_utils.notebook import seed_everything, setup_notebook, sig
from course_utils.arithmetic import TrainingArithmetic, training_arithmetic

__all__ = ["setup_notebook", "seed_everything", "sig", "training_arithmetic", "TrainingArithmetic"]
