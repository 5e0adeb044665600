# Mirrors: vwxyzjn/cleanrl, cleanrl/ppo.py (the __main__ rollout and update loop), snapshot at commit fe8d8a03
# (2026-04-20); cleanrl/ppo.py last changed in e421c2e5 (2023-11-27).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: separate actor and critic MLPs (tanh, orthogonal init, std 0.01 on the policy head and 1 on the value
# head) in one agent module; Adam(eps 1e-5) whose lr is annealed linearly by hand at the start of each iteration;
# a synchronous vector of environments that resets itself; rollout buffers filled under no_grad; GAE under
# no_grad; update_epochs passes over shuffled minibatches of the flattened rollout: clipped policy loss on
# normalized advantages, clipped value loss, entropy bonus, then zero_grad, backward, clip_grad_norm_(0.5), step;
# the approximate KL and clip fractions under no_grad; the last minibatch's losses logged with .item(). Shrunk: a
# stand-in CartPole (the same dynamics, no gymnasium), 2 environments x 16 steps, 4 minibatches, 2 update epochs,
# 3 iterations, hidden width 16; no tensorboard or wandb.
# Added: `with watch(agent):` around the iterations.
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

from tests.doctor_published.standins import gym


class SyncVector:
    """A vector of environments that resets each one as its episode ends."""

    def __init__(self, n, seed):
        self.envs = [gym.make("CartPole-v1") for _ in range(n)]
        self.seed = seed

    def reset(self):
        return np.stack([env.reset(seed=self.seed + i)[0] for i, env in enumerate(self.envs)]), {}

    def step(self, actions):
        obs, rewards, terms = [], [], []
        for env, a in zip(self.envs, actions):
            o, r, term, trunc, _ = env.step(int(a))
            if term or trunc:
                o, _ = env.reset()
            obs.append(o), rewards.append(r), terms.append(term)
        return np.stack(obs), np.array(rewards), np.array(terms), np.zeros(len(terms), dtype=bool), {}


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, obs_dim=4, n_actions=2, width=16):
        super().__init__()
        self.critic = nn.Sequential(layer_init(nn.Linear(obs_dim, width)), nn.Tanh(),
                                    layer_init(nn.Linear(width, width)), nn.Tanh(),
                                    layer_init(nn.Linear(width, 1), std=1.0))
        self.actor = nn.Sequential(layer_init(nn.Linear(obs_dim, width)), nn.Tanh(),
                                   layer_init(nn.Linear(width, width)), nn.Tanh(),
                                   layer_init(nn.Linear(width, n_actions), std=0.01))

    def get_value(self, x):
        return self.critic(x)

    def forward(self, x, action=None):
        probs = Categorical(logits=self.actor(x))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


def main(watch):
    num_envs, num_steps, num_minibatches, update_epochs, num_iterations = 2, 16, 4, 2, 3
    lr, gamma, gae_lambda, clip_coef, ent_coef, vf_coef, max_grad_norm = 2.5e-3, 0.99, 0.95, 0.2, 0.01, 0.5, 0.5
    batch_size = num_envs * num_steps
    minibatch_size = batch_size // num_minibatches
    np.random.seed(1)
    torch.manual_seed(1)
    envs = SyncVector(num_envs, seed=1)
    agent = Agent()
    optimizer = torch.optim.Adam(agent.parameters(), lr=lr, eps=1e-5)
    obs = torch.zeros((num_steps, num_envs, 4))
    actions = torch.zeros((num_steps, num_envs))
    logprobs, rewards, dones, values = (torch.zeros((num_steps, num_envs)) for _ in range(4))
    next_obs, _ = envs.reset()
    next_obs, next_done = torch.Tensor(next_obs), torch.zeros(num_envs)
    with watch(agent):
        for iteration in range(1, num_iterations + 1):
            frac = 1.0 - (iteration - 1.0) / num_iterations
            optimizer.param_groups[0]["lr"] = frac * lr
            for step in range(num_steps):
                obs[step], dones[step] = next_obs, next_done
                with torch.no_grad():
                    action, logprob, _, value = agent(next_obs)
                    values[step] = value.flatten()
                actions[step], logprobs[step] = action, logprob
                next_obs, reward, terms, truncs, _ = envs.step(action.numpy())
                rewards[step] = torch.tensor(reward).view(-1)
                next_obs, next_done = torch.Tensor(next_obs), torch.Tensor(np.logical_or(terms, truncs))
            with torch.no_grad():
                next_value = agent.get_value(next_obs).reshape(1, -1)
                advantages = torch.zeros_like(rewards)
                lastgaelam = 0
                for t in reversed(range(num_steps)):
                    if t == num_steps - 1:
                        nextnonterminal, nextvalues = 1.0 - next_done, next_value
                    else:
                        nextnonterminal, nextvalues = 1.0 - dones[t + 1], values[t + 1]
                    delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
                    advantages[t] = lastgaelam = delta + gamma * gae_lambda * nextnonterminal * lastgaelam
                returns = advantages + values
            b_obs, b_logprobs, b_actions = obs.reshape(-1, 4), logprobs.reshape(-1), actions.reshape(-1)
            b_advantages, b_returns, b_values = advantages.reshape(-1), returns.reshape(-1), values.reshape(-1)
            b_inds = np.arange(batch_size)
            clipfracs = []
            for epoch in range(update_epochs):
                np.random.shuffle(b_inds)
                for start in range(0, batch_size, minibatch_size):
                    mb_inds = b_inds[start:start + minibatch_size]
                    _, newlogprob, entropy, newvalue = agent(b_obs[mb_inds], b_actions.long()[mb_inds])
                    logratio = newlogprob - b_logprobs[mb_inds]
                    ratio = logratio.exp()
                    with torch.no_grad():
                        approx_kl = ((ratio - 1) - logratio).mean()
                        clipfracs += [((ratio - 1.0).abs() > clip_coef).float().mean().item()]
                    mb_adv = b_advantages[mb_inds]
                    mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                    pg_loss = torch.max(-mb_adv * ratio, -mb_adv * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)).mean()
                    newvalue = newvalue.view(-1)
                    v_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                    v_clipped = b_values[mb_inds] + torch.clamp(newvalue - b_values[mb_inds], -clip_coef, clip_coef)
                    v_loss = 0.5 * torch.max(v_unclipped, (v_clipped - b_returns[mb_inds]) ** 2).mean()
                    entropy_loss = entropy.mean()
                    loss = pg_loss - ent_coef * entropy_loss + v_loss * vf_coef
                    optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(agent.parameters(), max_grad_norm)
                    optimizer.step()
            print(f"iteration {iteration}: value loss {v_loss.item():.3f}, policy loss {pg_loss.item():.3f}, "
                  f"entropy {entropy_loss.item():.3f}, approx_kl {approx_kl.item():.4f}, "
                  f"clipfrac {np.mean(clipfracs):.3f}")
    return [agent, optimizer]


from tests.doctor_published import variant  # noqa: E402

VARIANTS = [
    variant("no_zero_grad", "missing_zero_grad", ("                    optimizer.zero_grad()\n", "")),
    variant("zero_grad_before_clip", "zero_grad_after_backward",
            ("                    optimizer.zero_grad()\n                    loss.backward()\n",
             "                    loss.backward()\n                    optimizer.zero_grad()\n")),
    variant("clip_after_step", "clip_after_step",
            ("                    nn.utils.clip_grad_norm_(agent.parameters(), max_grad_norm)\n"
             "                    optimizer.step()\n",
             "                    optimizer.step()\n"
             "                    nn.utils.clip_grad_norm_(agent.parameters(), max_grad_norm)\n")),
    variant("loss_history_of_tensors", "graph_attached_logging",
            ("    with watch(agent):\n", "    loss_history = []\n    with watch(agent):\n"),
            ("                    loss = pg_loss - ent_coef * entropy_loss + v_loss * vf_coef\n",
             "                    loss = pg_loss - ent_coef * entropy_loss + v_loss * vf_coef\n"
             "                    loss_history.append(loss)\n")),
    variant("anneal_as_scheduler_stepped_first", "scheduler_before_optimizer",
            ("    optimizer = torch.optim.Adam(agent.parameters(), lr=lr, eps=1e-5)\n",
             "    optimizer = torch.optim.Adam(agent.parameters(), lr=lr, eps=1e-5)\n"
             "    anneal = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: 1.0 - i / num_iterations)\n"),
            ("            frac = 1.0 - (iteration - 1.0) / num_iterations\n"
             '            optimizer.param_groups[0]["lr"] = frac * lr\n',
             "            anneal.step()\n")),
]
