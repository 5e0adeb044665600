# Mirrors: pytorch/examples, reinforcement_learning/reinforce.py, snapshot at commit 77f55b912142 (2025-08-25); the
# file last changed in 89c7d75 (2025-08-22).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: REINFORCE on CartPole, no DataLoader: one forward of a small policy (linear, dropout, ReLU, linear,
# softmax) per environment step, the action sampled from a Categorical and its log-probability kept on the policy
# for the whole episode; after the episode the discounted returns (gamma 0.99) are standardised, the loss is the
# sum of -log-probability x return, and Adam(1e-2) is zeroed, backwarded and stepped once; a running reward
# decides when to stop. Shrunk: a stand-in CartPole (the same dynamics, no gymnasium), at most 6 episodes (the stop
# test also ends at episode 6), hidden width 32 (not 128). Added: `with watch(agent):` around the episodes.
# Added to the corpus after the doctor's design was frozen, as a held-out check (see the report of issue 23).
import itertools

import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical
from torch.nn import functional as F

from tests.doctor_published.standins import gym

DISCOUNT, SEED, REPORT_EVERY = 0.99, 543, 10


class PushPolicy(nn.Module):
    """Cart-pole state (4 numbers) -> probabilities of pushing left or right; remembers the episode so far."""

    def __init__(self, width: int = 32):
        super().__init__()
        self.hidden = nn.Linear(4, width)
        self.noise = nn.Dropout(p=0.6)
        self.choice = nn.Linear(width, 2)
        self.episode_log_probs: list[torch.Tensor] = []
        self.episode_rewards: list[float] = []

    def forward(self, state):
        return F.softmax(self.choice(F.relu(self.noise(self.hidden(state)))), dim=1)


def main(watch):
    env = gym.make("CartPole-v1", render_mode=None)
    env.reset(seed=SEED)
    torch.manual_seed(SEED)
    agent = PushPolicy()
    adam = torch.optim.Adam(agent.parameters(), lr=1e-2)
    tiny = float(np.finfo(np.float32).eps)

    def act(observation):
        dist = Categorical(agent(torch.from_numpy(observation).float().unsqueeze(0)))
        move = dist.sample()
        agent.episode_log_probs.append(dist.log_prob(move))
        return move.item()

    def learn_from_episode():
        future, backwards = 0.0, []
        for reward in reversed(agent.episode_rewards):
            future = reward + DISCOUNT * future
            backwards.append(future)
        gains = torch.tensor(backwards[::-1])
        gains = (gains - gains.mean()) / (gains.std() + tiny)
        terms = [-lp * g for lp, g in zip(agent.episode_log_probs, gains)]
        adam.zero_grad()
        objective = torch.cat(terms).sum()
        objective.backward()
        adam.step()
        agent.episode_rewards.clear()
        agent.episode_log_probs.clear()

    smoothed = 10.0
    with watch(agent):
        for episode in itertools.count(1):
            observation, _ = env.reset()
            total = 0.0
            for _ in range(1, 10_000):
                observation, reward, ended, cut_short, _ = env.step(act(observation))
                agent.episode_rewards.append(reward)
                total += reward
                if ended or cut_short:
                    break
            smoothed = 0.05 * total + 0.95 * smoothed
            learn_from_episode()
            if episode % REPORT_EVERY == 0:
                print(f"episode {episode}: reward {total:.1f}, smoothed {smoothed:.1f}")
            if smoothed > env.spec.reward_threshold or episode == 6:
                break
    return [agent, adam]


from tests.doctor_published import variant  # noqa: E402

VARIANTS = [
    variant("no_zero_grad", "missing_zero_grad", ("        adam.zero_grad()\n", "")),
    variant("episode_losses_kept", "graph_attached_logging",
            ("    smoothed = 10.0\n", "    smoothed = 10.0\n    objectives = []\n"),
            ("        objective.backward()\n", "        objective.backward()\n        objectives.append(objective)\n")),
    variant("greedy_check_in_train_mode", "eval_in_train_mode",
            ("            learn_from_episode()\n",
             "            learn_from_episode()\n            with torch.no_grad():\n"
             "                state = torch.from_numpy(observation).float().unsqueeze(0)\n"
             "                best_move = agent(state).argmax().item()\n")),
]
