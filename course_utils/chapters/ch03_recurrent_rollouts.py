"""Chapter 3: a recurrent policy's state through a stream of episodes cut into rollouts (recurrent PPO), counted.

One LSTM cell reads 12 steps of one environment; episodes end after steps 3 and 9, and the state is zeroed there
(multiplied by 1 - done, as cleanrl's ppo_atari_lstm does). Rollouts are 6 steps. What carrying the state into the
next rollout gives, against zeroing it at each rollout's start; then the update on rollout 2: every step evaluated
from its own stored state (no gradient in it) against the sequence replayed from the state stored at its first
step (sb3-contrib's RecurrentPPO and cleanrl both replay), and which steps' inputs each output's gradient reaches.
"""
from __future__ import annotations

import torch
from torch import nn

STEPS, ROLLOUT, ENDS = 12, 6, (3, 9)          # episodes: steps 0-3, 4-9 (across the rollout boundary), 10-11


def _stream(cell: nn.LSTMCell, xs: torch.Tensor, first: int, state) -> tuple[torch.Tensor, list]:
    """Outputs of steps first .. first + len(xs) - 1 from `state`; the state after each step, kept as it entered
    the next one (zeroed after an episode's last step)."""
    h, c = state
    outputs, states = [], []
    for t, x in enumerate(xs, start=first):
        states.append((h, c))
        h, c = cell(x[None], (h, c))
        outputs.append(h[0])
        if t in ENDS:
            h, c = h * 0.0, c * 0.0                  # done: the next step starts a new episode from zeros
    return torch.stack(outputs), states + [(h, c)]


def _reached(output: torch.Tensor, xs: torch.Tensor, first: int) -> list[int]:
    """The steps whose input the gradient of `output` reaches (a non-zero gradient)."""
    (g,) = torch.autograd.grad(output.sum(), xs, retain_graph=True)
    return [first + i for i in range(len(xs)) if bool(g[i].abs().sum() > 0)]


def rollout_lines(seed: int = 0) -> list[str]:
    torch.manual_seed(seed)
    cell = nn.LSTMCell(3, 4)
    xs = torch.randn(STEPS, 3)
    zeros = (torch.zeros(1, 4), torch.zeros(1, 4))
    with torch.no_grad():                                               # acting: no graph
        whole, _ = _stream(cell, xs, 0, zeros)
        first, stored = _stream(cell, xs[:ROLLOUT], 0, zeros)
        carried, stored_2 = _stream(cell, xs[ROLLOUT:], ROLLOUT, stored[-1])
        zeroed, _ = _stream(cell, xs[ROLLOUT:], ROLLOUT, zeros)
    same = [bool(torch.equal(a, b)) for a, b in zip(torch.cat([first, carried]), whole)]
    differ = [ROLLOUT + i for i in range(ROLLOUT) if not torch.equal(zeroed[i], whole[ROLLOUT + i])]
    lines = [f"state carried into the next rollout: outputs equal the uninterrupted stream's at {sum(same)} of "
             f"{STEPS} steps",
             f"state zeroed at each rollout's start: outputs differ at steps {differ} (the episode that began at "
             f"step 4 runs on), equal again after its end: {differ == list(range(ROLLOUT, ENDS[1] + 1))}"]
    rollout = xs[ROLLOUT:].clone().requires_grad_()                     # the update on rollout 2
    replayed, _ = _stream(cell, rollout, ROLLOUT, stored[-1])
    own = torch.stack([cell(x[None], state)[0][0] for x, state in zip(rollout, stored_2[:-1])])
    nine, eleven = ENDS[1] - ROLLOUT, STEPS - 1 - ROLLOUT
    lines += [f"update replaying the sequence from the state stored at its first step: outputs equal the rollout's "
              f"at {sum(bool(torch.equal(a, b)) for a, b in zip(replayed, carried))} of {ROLLOUT} steps; step 9's "
              f"gradient reaches the inputs of steps {_reached(replayed[nine], rollout, ROLLOUT)}",
              f"update evaluating each step from its own stored state: outputs equal at "
              f"{sum(bool(torch.equal(a, b)) for a, b in zip(own, carried))} of {ROLLOUT} steps; step 9's gradient "
              f"reaches the inputs of steps {_reached(own[nine], rollout, ROLLOUT)}",
              f"replayed, step 11's gradient reaches steps {_reached(replayed[eleven], rollout, ROLLOUT)}: the reset "
              f"after step 9 multiplies the state by 0, and its gradient with it"]
    return lines
