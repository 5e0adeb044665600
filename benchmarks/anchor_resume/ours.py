"""Our trainer: a Task and fit(), resumed with resume=True. Run by drive.py."""
import sys
from shared import *
# --- user code ---
from course_utils.production import FitConfig, Task, fit
train, val = data()
config = FitConfig(out=sys.argv[1], epochs=EPOCHS, batch_size=BATCH, lr=LR, optimizer="adamw", checkpoint_every=EVERY,
                   workers=WORKERS, resume=True, progress=False, tensorboard=False, threads=1)
fit(config, Task(make_model(), train, val))
# --- end ---
import shutil
shutil.copy(sys.argv[1] + "/model.pt", sys.argv[1] + "/final.pt")
