"""Lightning: a LightningModule, ModelCheckpoint(every_n_train_steps) and fit(ckpt_path="last"). Run by drive.py."""
import glob
import sys

import torch
from shared import *
torch.set_num_threads(1)
# --- user code ---
import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint
from torch.nn import functional as F
from torch.utils.data import DataLoader

class Lit(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = make_model()

    def training_step(self, batch, index):
        x, y = batch
        return F.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=LR)

L.seed_everything(0, workers=True)
train, val = data()
model = Lit()
loader = DataLoader(train, batch_size=BATCH, shuffle=True, num_workers=WORKERS)
saver = ModelCheckpoint(dirpath=sys.argv[1], every_n_train_steps=EVERY, save_last=True, save_top_k=-1)
trainer = L.Trainer(max_epochs=EPOCHS, callbacks=[saver], accelerator="cpu", deterministic=True,
                    logger=False, enable_progress_bar=False, enable_model_summary=False)
trainer.fit(model, loader, ckpt_path="last" if glob.glob(sys.argv[1] + "/last.ckpt") else None)
# --- end ---
torch.save(model.net.state_dict(), sys.argv[1] + "/final.pt")
