# Mirrors: openai/spinningup, spinup/algos/pytorch/vpg/vpg.py (with core.py's MLPActorCritic), snapshot at
# commit 038665d6 (2020-02-07); vpg.py last changed in 2092113 (2020-01-30).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: an actor-critic with a categorical policy MLP and a value MLP (tanh), each with its own Adam; actions,
# values and log-probabilities drawn in step() under no_grad (the policy's distribution is built by a helper, not
# its forward); a buffer that finishes each path with GAE-lambda advantages and reward-to-go returns (bootstrapped
# with the value when cut off), and normalizes the advantages; per epoch one update: the policy and value losses
# BEFORE the update computed with gradients enabled and only read with .item() (a graph built and never used: the
# published loop's real missing_no_grad), one policy step (zero_grad, loss, backward, step), then train_v_iters
# value steps (zero_grad, loss, backward, step); a logger that keeps every value it is given for the epoch's
# averages. Shrunk: a stand-in CartPole (the same dynamics, no gymnasium), 3 epochs of 64 steps, episodes capped
# at 40 steps, hidden sizes (16, 16), 5 value iterations (not 80); no MPI (its gradient averaging is the identity
# on one process), no checkpoints.
# Added: `with watch([ac.pi, ac.v]):` around the epochs (the two modules the loop calls).
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

from tests.doctor_published.standins import gym


def mlp(sizes, activation=nn.Tanh):
    layers = []
    for j in range(len(sizes) - 1):
        layers += [nn.Linear(sizes[j], sizes[j + 1]), activation() if j < len(sizes) - 2 else nn.Identity()]
    return nn.Sequential(*layers)


def discount_cumsum(x, discount):
    out, running = np.zeros_like(x), 0.0
    for i in reversed(range(len(x))):
        running = x[i] + discount * running
        out[i] = running
    return out


class CategoricalPolicy(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden):
        super().__init__()
        self.logits_net = mlp([obs_dim, *hidden, act_dim])

    def distribution(self, obs):
        return Categorical(logits=self.logits_net(obs))

    def forward(self, obs, act=None):
        pi = self.distribution(obs)
        return pi, (pi.log_prob(act) if act is not None else None)


class ValueNet(nn.Module):
    def __init__(self, obs_dim, hidden):
        super().__init__()
        self.v_net = mlp([obs_dim, *hidden, 1])

    def forward(self, obs):
        return torch.squeeze(self.v_net(obs), -1)


class ActorCritic(nn.Module):
    def __init__(self, obs_dim=4, act_dim=2, hidden=(16, 16)):
        super().__init__()
        self.pi, self.v = CategoricalPolicy(obs_dim, act_dim, hidden), ValueNet(obs_dim, hidden)

    def step(self, obs):
        with torch.no_grad():
            pi = self.pi.distribution(obs)
            a = pi.sample()
            logp_a = pi.log_prob(a)
            v = self.v(obs)
        return a.numpy(), v.numpy(), logp_a.numpy()


class Buffer:
    def __init__(self, obs_dim, size, gamma=0.99, lam=0.97):
        self.obs = np.zeros((size, obs_dim), dtype=np.float32)
        self.act, self.adv, self.rew, self.ret, self.val, self.logp = (np.zeros(size, dtype=np.float32)
                                                                        for _ in range(6))
        self.gamma, self.lam, self.ptr, self.path_start, self.size = gamma, lam, 0, 0, size

    def store(self, obs, act, rew, val, logp):
        self.obs[self.ptr], self.act[self.ptr], self.rew[self.ptr] = obs, act, rew
        self.val[self.ptr], self.logp[self.ptr] = val, logp
        self.ptr += 1

    def finish_path(self, last_val=0):
        path = slice(self.path_start, self.ptr)
        rews, vals = np.append(self.rew[path], last_val), np.append(self.val[path], last_val)
        deltas = rews[:-1] + self.gamma * vals[1:] - vals[:-1]
        self.adv[path] = discount_cumsum(deltas, self.gamma * self.lam)
        self.ret[path] = discount_cumsum(rews, self.gamma)[:-1]
        self.path_start = self.ptr

    def get(self):
        self.ptr, self.path_start = 0, 0
        self.adv = (self.adv - self.adv.mean()) / self.adv.std()
        data = dict(obs=self.obs, act=self.act, ret=self.ret, adv=self.adv, logp=self.logp)
        return {k: torch.as_tensor(v, dtype=torch.float32) for k, v in data.items()}


class Logger:
    def __init__(self):
        self.kept = {}

    def store(self, **values):
        for k, v in values.items():
            self.kept.setdefault(k, []).append(v)

    def dump(self, epoch):
        print(f"epoch {epoch}: " + ", ".join(f"{k} {float(v[-1]):.3f}" for k, v in self.kept.items()))


def main(watch):
    torch.manual_seed(0)
    np.random.seed(0)
    env = gym.make("CartPole-v1")
    ac = ActorCritic()
    steps_per_epoch, epochs, max_ep_len, train_v_iters = 64, 3, 40, 5
    buf, logger = Buffer(4, steps_per_epoch), Logger()

    def compute_loss_pi(data):
        pi, logp = ac.pi(data["obs"], data["act"])
        loss_pi = -(logp * data["adv"]).mean()
        return loss_pi, dict(kl=(data["logp"] - logp).mean().item(), ent=pi.entropy().mean().item())

    def compute_loss_v(data):
        return ((ac.v(data["obs"]) - data["ret"]) ** 2).mean()

    pi_optimizer = torch.optim.Adam(ac.pi.parameters(), lr=3e-3)
    vf_optimizer = torch.optim.Adam(ac.v.parameters(), lr=1e-2)

    def update():
        data = buf.get()
        pi_l_old, pi_info_old = compute_loss_pi(data)
        pi_l_old = pi_l_old.item()
        v_l_old = compute_loss_v(data).item()
        pi_optimizer.zero_grad()
        loss_pi, pi_info = compute_loss_pi(data)
        loss_pi.backward()
        pi_optimizer.step()
        for i in range(train_v_iters):
            vf_optimizer.zero_grad()
            loss_v = compute_loss_v(data)
            loss_v.backward()
            vf_optimizer.step()
        logger.store(LossPi=pi_l_old, LossV=v_l_old, KL=pi_info["kl"], Entropy=pi_info_old["ent"],
                     DeltaLossPi=loss_pi.item() - pi_l_old, DeltaLossV=loss_v.item() - v_l_old)

    o, _ = env.reset(seed=0)
    ep_ret, ep_len = 0, 0
    with watch([ac.pi, ac.v]):
        for epoch in range(epochs):
            for t in range(steps_per_epoch):
                a, v, logp = ac.step(torch.as_tensor(o, dtype=torch.float32))
                next_o, r, d, _, _ = env.step(a)
                ep_ret, ep_len = ep_ret + r, ep_len + 1
                buf.store(o, a, r, v, logp)
                o = next_o
                timeout, epoch_ended = ep_len == max_ep_len, t == steps_per_epoch - 1
                if d or timeout or epoch_ended:
                    if timeout or epoch_ended:
                        _, v, _ = ac.step(torch.as_tensor(o, dtype=torch.float32))
                    else:
                        v = 0
                    buf.finish_path(v)
                    if d or timeout:
                        logger.store(EpRet=ep_ret, EpLen=ep_len)
                    (o, _), ep_ret, ep_len = env.reset(), 0, 0
            update()
            logger.dump(epoch)
    return [ac, pi_optimizer, vf_optimizer]


from tests.doctor_published import variant  # noqa: E402

REAL = {"missing_no_grad": "update(): the losses before the update (pi_l_old, v_l_old) are computed with "
                           "gradients enabled; only their .item() is used"}

VARIANTS = [
    variant("losses_before_update_under_no_grad", set(),
            ("        pi_l_old, pi_info_old = compute_loss_pi(data)\n"
             "        pi_l_old = pi_l_old.item()\n"
             "        v_l_old = compute_loss_v(data).item()\n",
             "        with torch.no_grad():\n"
             "            pi_l_old, pi_info_old = compute_loss_pi(data)\n"
             "            pi_l_old = pi_l_old.item()\n"
             "            v_l_old = compute_loss_v(data).item()\n"),
            fixes={"missing_no_grad"}),
    variant("value_loop_without_zero_grad", "missing_zero_grad", ("            vf_optimizer.zero_grad()\n", "")),
    variant("policy_zero_grad_after_backward", "zero_grad_after_backward",
            ("        pi_optimizer.zero_grad()\n        loss_pi, pi_info = compute_loss_pi(data)\n"
             "        loss_pi.backward()\n",
             "        loss_pi, pi_info = compute_loss_pi(data)\n        loss_pi.backward()\n"
             "        pi_optimizer.zero_grad()\n")),
    variant("logged_loss_kept_as_tensor", "graph_attached_logging",
            ("        logger.store(LossPi=pi_l_old, LossV=v_l_old,", "        logger.store(LossPi=loss_pi, LossV=v_l_old,")),
]
