# Mirrors: pranz24/pytorch-soft-actor-critic, main.py (the training loop and the periodic test episodes) with sac.py
# (SAC.__init__, select_action, update_parameters), model.py (weights_init_, QNetwork, GaussianPolicy),
# replay_memory.py (ReplayMemory) and utils.py (soft_update, hard_update), snapshot at commit c1805660b396
# (2025-07-17, the archive note); main.py last changed in 1bd1158116ed (2020-07-11), sac.py in 308b10902356
# (2021-09-07).
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# The README's command for SAC: `python main.py --env-name Humanoid-v2 --alpha 0.05` (Gaussian policy, fixed
# temperature, soft target updates every update).
# Kept: a twin-Q critic (two 3-layer MLPs in one module) with its own Adam, a critic_target copied from it by
# hard_update and never given to an optimizer; a tanh-squashed Gaussian policy (log-std clamped to [-20, 2],
# reparameterized rsample, the tanh correction with epsilon 1e-6, actions rescaled to the action space) with its own
# Adam; Xavier weights and zero biases; ReplayMemory (a ring buffer, random.sample of a batch, np.stack per field);
# per episode (itertools.count from 1) reset, then per environment step: a random action while total steps are
# below start_steps, else select_action (policy.sample without torch.no_grad(), the action .detach()ed to numpy);
# once the memory holds more than batch_size transitions, updates_per_step calls of update_parameters: the batch as
# FloatTensors, the soft Bellman target under torch.no_grad() (the policy's next action and log-prob, the target
# critic's min of both heads minus alpha * log-prob, reward + mask * gamma * that), both Q losses (mse_loss), summed,
# critic zero_grad / backward / step; then the policy loss (alpha * log_pi - min Q of the current critic at the
# policy's action, mean: its backward also leaves gradients in the critic, cleared by the critic's next zero_grad),
# policy zero_grad / backward / step; no alpha update (automatic_entropy_tuning off); soft_update of the target
# every target_update_interval updates through .data; the five values returned with .item() and given to the
# SummaryWriter; the environment step, mask = 1 at the time limit else float(not done), the transition pushed; the
# run stopping after the episode that passes num_steps; the episode's reward logged; every few episodes, test
# episodes with select_action(evaluate=True) (the squashed mean; no torch.no_grad() either) and their average
# reward logged. The modules are never switched between train() and eval() (no dropout, no BatchNorm).
# Real bug, as published: the test episodes' forwards (select_action(state, evaluate=True)) run without
# torch.no_grad(), building a graph for every step that .detach() then drops.
# Not kept: gym, mujoco and Humanoid-v2 (a Pendulum-like stand-in with gym's old API: reset() -> obs, step() -> 4
# values, env.seed, a Box action space with seed/sample, _max_episode_steps from the TimeLimit); the tensorboard
# SummaryWriter (a stand-in that keeps floats); the DeterministicPolicy branch (so no policy_type test) and
# save_checkpoint (main.py never calls it); CUDA and GaussianPolicy's .to(device) override; the test interval and
# count are options here (eval_every, eval_episodes) where main.py writes 10 and 10.
# Shrunk: the pendulum (3 observations, 1 action in [-2, 2], episodes of 20 steps) instead of Humanoid; hidden_size
# 16 (not 256), batch_size 16 (not 256), start_steps 40 (not 10,000), num_steps 80 (not 1,000,001: 5 episodes, the
# run stopping at the end of the 5th, 83 updates), replay_size 1,000, test episodes every 2 episodes (not 10), 2 of
# them (not 10); lr 3e-4, gamma 0.99, tau 0.005 and alpha 0.05 as published. Too short to learn the swing-up:
# episode rewards stay between about -110 and -145.
# Added: `with watch([agent.policy, agent.critic, agent.critic_target]):` around the episodes (the three modules
# the loop calls).
import itertools
import math
import random
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn
from torch.distributions import Normal
from torch.nn import functional as F
from torch.optim import Adam


def parse_args():
    return SimpleNamespace(env_name="Pendulum-v0", policy="Gaussian", eval=True, gamma=0.99, tau=0.005, lr=0.0003,
                           alpha=0.05, automatic_entropy_tuning=False, seed=123456, batch_size=16, num_steps=80,
                           hidden_size=16, updates_per_step=1, start_steps=40, target_update_interval=1,
                           replay_size=1000, cuda=False, eval_every=2, eval_episodes=2)


# --- environment and tensorboard stand-ins ------------------------------------------------------------------------

class Box:
    def __init__(self, low, high, shape):
        self.low, self.high, self.shape = np.full(shape, low, np.float32), np.full(shape, high, np.float32), shape
        self.np_random = np.random.RandomState()

    def seed(self, seed):
        self.np_random = np.random.RandomState(seed)

    def sample(self):
        return self.np_random.uniform(self.low, self.high).astype(np.float32)


class Pendulum:
    """gym.make('Pendulum-v0') stand-in: swing a pole up and hold it; old gym API, TimeLimit of 20 steps."""

    _max_episode_steps = 20

    def __init__(self):
        self.observation_space = Box(-8.0, 8.0, (3,))
        self.action_space = Box(-2.0, 2.0, (1,))
        self.np_random = np.random.RandomState()

    def seed(self, seed):
        self.np_random = np.random.RandomState(seed)

    def _obs(self):
        return np.array([math.cos(self.th), math.sin(self.th), self.thdot], dtype=np.float32)

    def reset(self):
        self.th, self.thdot = self.np_random.uniform(-math.pi, math.pi), self.np_random.uniform(-1, 1)
        self._elapsed = 0
        return self._obs()

    def step(self, u):
        u = float(np.clip(u, -2.0, 2.0)[0])
        angle = ((self.th + math.pi) % (2 * math.pi)) - math.pi
        cost = angle ** 2 + 0.1 * self.thdot ** 2 + 0.001 * u ** 2
        self.thdot = float(np.clip(self.thdot + (3 * 10.0 / 2 * math.sin(self.th) + 3.0 * u) * 0.05, -8, 8))
        self.th = self.th + self.thdot * 0.05
        self._elapsed += 1
        return self._obs(), -cost, self._elapsed >= self._max_episode_steps, {}

    def close(self):
        pass


class SummaryWriter:
    """torch.utils.tensorboard.SummaryWriter stand-in: keeps the scalars (floats) in memory."""

    def __init__(self, log_dir=None):
        self.scalars = []

    def add_scalar(self, tag, value, step):
        self.scalars.append((tag, float(value), step))


# --- replay_memory.py and utils.py ----------------------------------------------------------------------------------

class ReplayMemory:
    def __init__(self, capacity, seed):
        random.seed(seed)
        self.capacity = capacity
        self.buffer = []
        self.position = 0

    def push(self, state, action, reward, next_state, done):
        if len(self.buffer) < self.capacity:
            self.buffer.append(None)
        self.buffer[self.position] = (state, action, reward, next_state, done)
        self.position = (self.position + 1) % self.capacity

    def sample(self, batch_size):
        batch = random.sample(self.buffer, batch_size)
        state, action, reward, next_state, done = map(np.stack, zip(*batch))
        return state, action, reward, next_state, done

    def __len__(self):
        return len(self.buffer)


def soft_update(target, source, tau):
    for target_param, param in zip(target.parameters(), source.parameters()):
        target_param.data.copy_(target_param.data * (1.0 - tau) + param.data * tau)


def hard_update(target, source):
    for target_param, param in zip(target.parameters(), source.parameters()):
        target_param.data.copy_(param.data)


# --- model.py ----------------------------------------------------------------------------------------------------

LOG_SIG_MAX = 2
LOG_SIG_MIN = -20
epsilon = 1e-6


def weights_init_(m):
    if isinstance(m, nn.Linear):
        torch.nn.init.xavier_uniform_(m.weight, gain=1)
        torch.nn.init.constant_(m.bias, 0)


class QNetwork(nn.Module):
    def __init__(self, num_inputs, num_actions, hidden_dim):
        super().__init__()
        self.linear1 = nn.Linear(num_inputs + num_actions, hidden_dim)
        self.linear2 = nn.Linear(hidden_dim, hidden_dim)
        self.linear3 = nn.Linear(hidden_dim, 1)
        self.linear4 = nn.Linear(num_inputs + num_actions, hidden_dim)
        self.linear5 = nn.Linear(hidden_dim, hidden_dim)
        self.linear6 = nn.Linear(hidden_dim, 1)
        self.apply(weights_init_)

    def forward(self, state, action):
        xu = torch.cat([state, action], 1)
        x1 = self.linear3(F.relu(self.linear2(F.relu(self.linear1(xu)))))
        x2 = self.linear6(F.relu(self.linear5(F.relu(self.linear4(xu)))))
        return x1, x2


class GaussianPolicy(nn.Module):
    def __init__(self, num_inputs, num_actions, hidden_dim, action_space=None):
        super().__init__()
        self.linear1 = nn.Linear(num_inputs, hidden_dim)
        self.linear2 = nn.Linear(hidden_dim, hidden_dim)
        self.mean_linear = nn.Linear(hidden_dim, num_actions)
        self.log_std_linear = nn.Linear(hidden_dim, num_actions)
        self.apply(weights_init_)
        if action_space is None:
            self.action_scale, self.action_bias = torch.tensor(1.), torch.tensor(0.)
        else:
            self.action_scale = torch.FloatTensor((action_space.high - action_space.low) / 2.)
            self.action_bias = torch.FloatTensor((action_space.high + action_space.low) / 2.)

    def forward(self, state):
        x = F.relu(self.linear2(F.relu(self.linear1(state))))
        mean = self.mean_linear(x)
        log_std = torch.clamp(self.log_std_linear(x), min=LOG_SIG_MIN, max=LOG_SIG_MAX)
        return mean, log_std

    def sample(self, state):
        mean, log_std = self.forward(state)
        std = log_std.exp()
        normal = Normal(mean, std)
        x_t = normal.rsample()
        y_t = torch.tanh(x_t)
        action = y_t * self.action_scale + self.action_bias
        log_prob = normal.log_prob(x_t)
        log_prob -= torch.log(self.action_scale * (1 - y_t.pow(2)) + epsilon)
        log_prob = log_prob.sum(1, keepdim=True)
        mean = torch.tanh(mean) * self.action_scale + self.action_bias
        return action, log_prob, mean


# --- sac.py ------------------------------------------------------------------------------------------------------

class SAC:
    def __init__(self, num_inputs, action_space, args):
        self.gamma = args.gamma
        self.tau = args.tau
        self.alpha = args.alpha

        self.policy_type = args.policy
        self.target_update_interval = args.target_update_interval
        self.automatic_entropy_tuning = args.automatic_entropy_tuning

        self.device = torch.device("cuda" if args.cuda else "cpu")

        self.critic = QNetwork(num_inputs, action_space.shape[0], args.hidden_size).to(device=self.device)
        self.critic_optim = Adam(self.critic.parameters(), lr=args.lr)

        self.critic_target = QNetwork(num_inputs, action_space.shape[0], args.hidden_size).to(self.device)
        hard_update(self.critic_target, self.critic)

        if self.automatic_entropy_tuning is True:
            self.target_entropy = -torch.prod(torch.Tensor(action_space.shape).to(self.device)).item()
            self.log_alpha = torch.zeros(1, requires_grad=True, device=self.device)
            self.alpha_optim = Adam([self.log_alpha], lr=args.lr)

        self.policy = GaussianPolicy(num_inputs, action_space.shape[0], args.hidden_size, action_space)
        self.policy_optim = Adam(self.policy.parameters(), lr=args.lr)

    def select_action(self, state, evaluate=False):
        state = torch.FloatTensor(state).to(self.device).unsqueeze(0)
        if evaluate is False:
            action, _, _ = self.policy.sample(state)
        else:
            _, _, action = self.policy.sample(state)
        return action.detach().cpu().numpy()[0]

    def update_parameters(self, memory, batch_size, updates):
        # Sample a batch from memory
        state_batch, action_batch, reward_batch, next_state_batch, mask_batch = memory.sample(batch_size=batch_size)

        state_batch = torch.FloatTensor(state_batch).to(self.device)
        next_state_batch = torch.FloatTensor(next_state_batch).to(self.device)
        action_batch = torch.FloatTensor(action_batch).to(self.device)
        reward_batch = torch.FloatTensor(reward_batch).to(self.device).unsqueeze(1)
        mask_batch = torch.FloatTensor(mask_batch).to(self.device).unsqueeze(1)

        with torch.no_grad():
            next_state_action, next_state_log_pi, _ = self.policy.sample(next_state_batch)
            qf1_next_target, qf2_next_target = self.critic_target(next_state_batch, next_state_action)
            min_qf_next_target = torch.min(qf1_next_target, qf2_next_target) - self.alpha * next_state_log_pi
            next_q_value = reward_batch + mask_batch * self.gamma * (min_qf_next_target)
        qf1, qf2 = self.critic(state_batch, action_batch)  # two Q-functions against the policy step's positive bias
        qf1_loss = F.mse_loss(qf1, next_q_value)
        qf2_loss = F.mse_loss(qf2, next_q_value)
        qf_loss = qf1_loss + qf2_loss

        self.critic_optim.zero_grad()
        qf_loss.backward()
        self.critic_optim.step()

        pi, log_pi, _ = self.policy.sample(state_batch)

        qf1_pi, qf2_pi = self.critic(state_batch, pi)
        min_qf_pi = torch.min(qf1_pi, qf2_pi)

        policy_loss = ((self.alpha * log_pi) - min_qf_pi).mean()

        self.policy_optim.zero_grad()
        policy_loss.backward()
        self.policy_optim.step()

        if self.automatic_entropy_tuning:
            alpha_loss = -(self.log_alpha * (log_pi + self.target_entropy).detach()).mean()
            self.alpha_optim.zero_grad()
            alpha_loss.backward()
            self.alpha_optim.step()
            self.alpha = self.log_alpha.exp()
            alpha_tlogs = self.alpha.clone()
        else:
            alpha_loss = torch.tensor(0.).to(self.device)
            alpha_tlogs = torch.tensor(self.alpha)

        if updates % self.target_update_interval == 0:
            soft_update(self.critic_target, self.critic, self.tau)

        return qf1_loss.item(), qf2_loss.item(), policy_loss.item(), alpha_loss.item(), alpha_tlogs.item()


# --- main.py -----------------------------------------------------------------------------------------------------

def main(watch):
    args = parse_args()

    # Environment
    env = Pendulum()
    env.seed(args.seed)
    env.action_space.seed(args.seed)

    torch.manual_seed(args.seed)
    np.random.seed(args.seed)

    # Agent
    agent = SAC(env.observation_space.shape[0], env.action_space, args)

    # Tensorboard
    writer = SummaryWriter(f"runs/SAC_{args.env_name}_{args.policy}")

    # Memory
    memory = ReplayMemory(args.replay_size, args.seed)

    # Training Loop
    total_numsteps = 0
    updates = 0

    with watch([agent.policy, agent.critic, agent.critic_target]):
        for i_episode in itertools.count(1):
            episode_reward = 0
            episode_steps = 0
            done = False
            state = env.reset()

            while not done:
                if args.start_steps > total_numsteps:
                    action = env.action_space.sample()  # Sample random action
                else:
                    action = agent.select_action(state)  # Sample action from policy

                if len(memory) > args.batch_size:
                    # Number of updates per step in environment
                    for i in range(args.updates_per_step):
                        # Update parameters of all the networks
                        critic_1_loss, critic_2_loss, policy_loss, ent_loss, alpha = agent.update_parameters(
                            memory, args.batch_size, updates)

                        writer.add_scalar("loss/critic_1", critic_1_loss, updates)
                        writer.add_scalar("loss/critic_2", critic_2_loss, updates)
                        writer.add_scalar("loss/policy", policy_loss, updates)
                        writer.add_scalar("loss/entropy_loss", ent_loss, updates)
                        writer.add_scalar("entropy_temprature/alpha", alpha, updates)
                        updates += 1

                next_state, reward, done, _ = env.step(action)  # Step
                episode_steps += 1
                total_numsteps += 1
                episode_reward += reward

                # Ignore the "done" signal if it comes from hitting the time horizon.
                mask = 1 if episode_steps == env._max_episode_steps else float(not done)

                memory.push(state, action, reward, next_state, mask)  # Append transition to memory

                state = next_state

            if total_numsteps > args.num_steps:
                break

            writer.add_scalar("reward/train", episode_reward, i_episode)
            print("Episode: {}, total numsteps: {}, episode steps: {}, reward: {}".format(
                i_episode, total_numsteps, episode_steps, round(episode_reward, 2)))

            if i_episode % args.eval_every == 0 and args.eval is True:
                avg_reward = 0.
                episodes = args.eval_episodes
                for _ in range(episodes):
                    state = env.reset()
                    episode_reward = 0
                    done = False
                    while not done:
                        action = agent.select_action(state, evaluate=True)

                        next_state, reward, done, _ = env.step(action)
                        episode_reward += reward

                        state = next_state
                    avg_reward += episode_reward
                avg_reward /= episodes

                writer.add_scalar("avg_reward/test", avg_reward, i_episode)

                print("----------------------------------------")
                print("Test Episodes: {}, Avg. Reward: {}".format(episodes, round(avg_reward, 2)))
                print("----------------------------------------")

    env.close()
    return [agent.policy, agent.critic, agent.critic_target, agent.policy_optim, agent.critic_optim]


from tests.doctor_published import variant  # noqa: E402

# main.py's test episodes: select_action(state, evaluate=True) runs the policy without torch.no_grad() (sac.py
# only .detach()es the action), a graph built and dropped for every test step
REAL = {"missing_no_grad"}
VARIANTS = [
    # the critic's gradients pile up across updates, and the policy loss's backward adds into them too
    variant("no_critic_zero_grad", "missing_zero_grad", ("        self.critic_optim.zero_grad()\n", "")),
    variant("policy_zero_grad_between_backward_and_step", "zero_grad_after_backward",
            ("        self.policy_optim.zero_grad()\n        policy_loss.backward()\n",
             "        policy_loss.backward()\n        self.policy_optim.zero_grad()\n")),
    # .item() dropped from the critic losses ("no sync every update"), and main keeps them to print an episode mean
    variant("critic_losses_kept_as_tensors", "graph_attached_logging",
            ("        return qf1_loss.item(), qf2_loss.item(),", "        return qf1_loss, qf2_loss,"),
            ("            episode_steps = 0\n", "            episode_steps = 0\n            critic_losses = []\n"),
            ("                        updates += 1\n",
             "                        updates += 1\n                        critic_losses.append(critic_1_loss)\n")),
    # critic gradient clipping added on the wrong side of backward
    variant("critic_clip_before_backward", "clip_before_backward",
            ("        self.critic_optim.zero_grad()\n        qf_loss.backward()\n",
             "        self.critic_optim.zero_grad()\n        nn.utils.clip_grad_norm_(self.critic.parameters(), 1.0)\n"
             "        qf_loss.backward()\n")),
    variant("policy_clip_after_step", "clip_after_step",
            ("        self.policy_optim.step()\n",
             "        self.policy_optim.step()\n        nn.utils.clip_grad_norm_(self.policy.parameters(), 1.0)\n")),
    # a decaying critic lr, its scheduler stepped just before the optimizer
    variant("critic_lr_decay_stepped_first", "scheduler_before_optimizer",
            ("        self.critic_optim = Adam(self.critic.parameters(), lr=args.lr)\n",
             "        self.critic_optim = Adam(self.critic.parameters(), lr=args.lr)\n"
             "        self.critic_sched = torch.optim.lr_scheduler.ExponentialLR(self.critic_optim, gamma=0.99)\n"),
            ("        self.critic_optim.zero_grad()\n        qf_loss.backward()\n        self.critic_optim.step()\n",
             "        self.critic_optim.zero_grad()\n        qf_loss.backward()\n        self.critic_sched.step()\n"
             "        self.critic_optim.step()\n")),
    # the policy's mean head replaced by a freshly initialized layer once its optimizer exists: it gets gradients
    # and never moves
    variant("mean_head_reinitialized_after_optimizer", "head_after_optimizer",
            ("        self.policy_optim = Adam(self.policy.parameters(), lr=args.lr)\n",
             "        self.policy_optim = Adam(self.policy.parameters(), lr=args.lr)\n"
             "        self.policy.mean_linear = nn.Linear(args.hidden_size, action_space.shape[0])\n")),
    # the fix of the real bug: select_action under torch.no_grad() (test and rollout actions alike)
    variant("select_action_under_no_grad", set(),
            ("        if evaluate is False:\n            action, _, _ = self.policy.sample(state)\n"
             "        else:\n            _, _, action = self.policy.sample(state)\n",
             "        with torch.no_grad():\n            if evaluate is False:\n"
             "                action, _, _ = self.policy.sample(state)\n"
             "            else:\n                _, _, action = self.policy.sample(state)\n"),
            fixes={"missing_no_grad"}),
    # not a bug: the critic's zero_grad moved before its forward (still before backward, the same updates)
    variant("critic_zero_grad_before_forward", set(),
            ("        self.critic_optim.zero_grad()\n", ""),
            ("        qf1, qf2 = self.critic(state_batch, action_batch)",
             "        self.critic_optim.zero_grad()\n        qf1, qf2 = self.critic(state_batch, action_batch)")),
    # not a bug: the Bellman target computed with gradients on; they reach only the policy (cleared by its
    # zero_grad before the policy's backward) and the target critic (in no optimizer): the same updates, a larger
    # graph
    variant("target_without_no_grad", set(),
            ("        with torch.no_grad():\n"
             "            next_state_action, next_state_log_pi, _ = self.policy.sample(next_state_batch)\n"
             "            qf1_next_target, qf2_next_target = self.critic_target(next_state_batch, next_state_action)\n"
             "            min_qf_next_target = torch.min(qf1_next_target, qf2_next_target) - self.alpha * "
             "next_state_log_pi\n"
             "            next_q_value = reward_batch + mask_batch * self.gamma * (min_qf_next_target)\n",
             "        next_state_action, next_state_log_pi, _ = self.policy.sample(next_state_batch)\n"
             "        qf1_next_target, qf2_next_target = self.critic_target(next_state_batch, next_state_action)\n"
             "        min_qf_next_target = torch.min(qf1_next_target, qf2_next_target) - self.alpha * "
             "next_state_log_pi\n"
             "        next_q_value = reward_batch + mask_batch * self.gamma * (min_qf_next_target)\n")),
]
