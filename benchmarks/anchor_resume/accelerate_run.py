"""Accelerate: your own loop, save_state / load_state and skip_first_batches (its documented resume); drive.py."""
import glob
import os
import sys

import torch
from shared import *
SEEDABLE = os.environ.get("SEEDABLE", "0") == "1"
torch.set_num_threads(1)
# --- user code ---
from accelerate import Accelerator
from accelerate.utils import set_seed, DataLoaderConfiguration
from torch.nn import functional as F
from torch.utils.data import DataLoader

accelerator = Accelerator(cpu=True, dataloader_config=DataLoaderConfiguration(use_seedable_sampler=SEEDABLE))
set_seed(0)
train, val = data()
model = make_model()
optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
loader = DataLoader(train, batch_size=BATCH, shuffle=True, num_workers=WORKERS)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
step, first_epoch, skip = 0, 0, 0
saved = sorted(glob.glob(sys.argv[1] + "/step_*"), key=lambda p: int(p.rsplit("_", 1)[1]))
if saved:
    accelerator.load_state(saved[-1])
    step = int(saved[-1].rsplit("_", 1)[1])
    first_epoch, skip = divmod(step, len(loader))
for epoch in range(first_epoch, EPOCHS):
    if SEEDABLE:
        loader.set_epoch(epoch)
    batches = accelerator.skip_first_batches(loader, skip) if epoch == first_epoch and skip else loader
    model.train()
    for x, y in batches:
        optimizer.zero_grad()
        accelerator.backward(F.cross_entropy(model(x), y))
        optimizer.step()
        step += 1
        if step % EVERY == 0:
            accelerator.save_state(f"{sys.argv[1]}/step_{step}")
# --- end ---
torch.save(accelerator.unwrap_model(model).state_dict(), sys.argv[1] + "/final.pt")
