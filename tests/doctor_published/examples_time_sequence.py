# Mirrors: pytorch/examples, time_sequence_prediction/train.py (and generate_sine_wave.py for the data), snapshot
# at commit 77f55b912142 (2025-08-25); train.py last changed in 2c57b00 (2020-10-03).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: shifted sine waves in float64, the first 3 held out; two stacked LSTM cells and a linear read-out run
# step by step, then fed their own output to predict the future; LBFGS(lr 0.8) stepped with a closure that
# zeroes, runs forward, MSE, prints the loss and backwards (several forward/backward passes per step); after each
# step a prediction under no_grad, its loss printed. Shrunk: 13 waves of 16 points (not 100 of 1000), width 8
# (not 51), 4 steps (not 15), max_iter=3 (not 20), 6 future points (not 1000); nothing is plotted.
# Added: `with watch(...)`, given the two tensors (there is no DataLoader).
import numpy as np
import torch
from torch import nn

WIDTH = 8


def sine_waves(period=20, points=16, count=13, seed=2):
    """`count` sine waves of `points` samples, each starting at a random integer phase."""
    starts = np.random.RandomState(seed).randint(-4 * period, 4 * period, count)
    ticks = (starts[:, None] + np.arange(points)[None, :]).astype(np.int64)
    return np.sin(ticks / period).astype(np.float64)


class TwoCellForecaster(nn.Module):
    """LSTMCell(1->W) -> LSTMCell(W->W) -> Linear(W->1), one time step at a time; `ahead` extra steps on its own."""

    def __init__(self):
        super().__init__()
        self.low, self.high = nn.LSTMCell(1, WIDTH), nn.LSTMCell(WIDTH, WIDTH)
        self.readout = nn.Linear(WIDTH, 1)

    def _tick(self, x, state):
        (h1, c1), (h2, c2) = state
        h1, c1 = self.low(x, (h1, c1))
        h2, c2 = self.high(h1, (h2, c2))
        return self.readout(h2), ((h1, c1), (h2, c2))

    def forward(self, waves, ahead=0):
        blank = torch.zeros(waves.size(0), WIDTH, dtype=torch.double)
        state = ((blank, blank), (blank, blank))
        predicted = []
        for column in waves.split(1, dim=1):
            y, state = self._tick(column, state)
            predicted.append(y)
        for _ in range(ahead):
            y, state = self._tick(y, state)
            predicted.append(y)
        return torch.cat(predicted, dim=1)


def main(watch):
    rounds = 4
    np.random.seed(0)
    torch.manual_seed(0)
    waves = sine_waves()
    fit_x, fit_y = torch.from_numpy(waves[3:, :-1]), torch.from_numpy(waves[3:, 1:])
    probe_x = torch.from_numpy(waves[:3, :-1])
    probe_y = torch.from_numpy(waves[:3, 1:])
    forecaster = TwoCellForecaster().double()
    mse = nn.MSELoss()
    lbfgs = torch.optim.LBFGS(forecaster.parameters(), lr=0.8, max_iter=3)
    with watch(forecaster, lbfgs, train_data=fit_x, val_data=probe_x):
        for r in range(rounds):
            print("round", r)

            def reevaluate():
                lbfgs.zero_grad()
                err = mse(forecaster(fit_x), fit_y)
                print("  fit mse", err.item())
                err.backward()
                return err

            lbfgs.step(reevaluate)
            with torch.no_grad():
                ahead = 6
                guess = forecaster(probe_x, ahead=ahead)
                probe_err = mse(guess[:, :-ahead], probe_y)
                print("  probe mse", probe_err.item())
                curves = guess.detach().numpy()
    return [forecaster, lbfgs]


from tests.doctor_published import dedent, variant  # noqa: E402

PROBE = """\
                ahead = 6
                guess = forecaster(probe_x, ahead=ahead)
                probe_err = mse(guess[:, :-ahead], probe_y)
                print("  probe mse", probe_err.item())
                curves = guess.detach().numpy()
"""
VARIANTS = [
    variant("closure_without_zero_grad", "missing_zero_grad", ("                lbfgs.zero_grad()\n", "")),
    variant("prediction_without_no_grad", "missing_no_grad",
            ("            with torch.no_grad():\n" + PROBE, dedent(PROBE))),
    variant("closure_losses_kept", "graph_attached_logging",
            ("    rounds = 4\n", "    rounds = 4\n    fit_history = []\n"),
            ("                err.backward()\n",
             "                err.backward()\n                fit_history.append(err)\n")),
    variant("clip_before_backward_in_closure", "clip_before_backward",
            ("                err = mse(forecaster(fit_x), fit_y)\n",
             "                err = mse(forecaster(fit_x), fit_y)\n"
             "                nn.utils.clip_grad_norm_(forecaster.parameters(), 1.0)\n")),
    variant("test_waves_from_training_waves", "data_leakage",
            ("    probe_x = torch.from_numpy(waves[:3, :-1])", "    probe_x = torch.from_numpy(waves[3:6, :-1])"),
            ("    probe_y = torch.from_numpy(waves[:3, 1:])", "    probe_y = torch.from_numpy(waves[3:6, 1:])")),
]
