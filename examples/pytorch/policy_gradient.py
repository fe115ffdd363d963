"""REINFORCE (as PyTorch's reinforcement_learning example) with torch.distributions
.Categorical, on a small corridor world written here: the agent starts near the left end and
is rewarded for reaching the far end quickly.

The printed ``loss`` is the negative mean return of each batch of episodes; it falls as
the policy learns to walk right."""

import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical


class Corridor:
    def __init__(self, length=8, max_steps=30, seed=0):
        self.length, self.max_steps = length, max_steps
        self.rng = np.random.default_rng(seed)

    def reset(self):
        self.pos, self.t = 1, 0
        return self.observe()

    def observe(self):
        obs = np.zeros(self.length, dtype=np.float32)
        obs[self.pos] = 1.0
        return obs

    def step(self, action):
        self.pos = max(0, self.pos + (1 if action == 1 else -1))
        self.t += 1
        done = self.pos == self.length - 1 or self.t >= self.max_steps
        reward = 1.0 if self.pos == self.length - 1 else -0.05
        return self.observe(), reward, done


class Policy(nn.Module):
    def __init__(self, n_obs):
        super().__init__()
        self.affine1 = nn.Linear(n_obs, 32)
        self.affine2 = nn.Linear(32, 2)

    def forward(self, x):
        return F.softmax(self.affine2(F.relu(self.affine1(x))), dim=1)


def main():
    parser = argparse.ArgumentParser(description="REINFORCE")
    parser.add_argument("--gamma", type=float, default=0.95)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=80)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    env = Corridor(seed=args.seed)
    policy = Policy(env.length)
    optimizer = optim.Adam(policy.parameters(), lr=5e-2)
    eps = np.finfo(np.float32).eps.item()
    for epoch in range(1, args.epochs + 1):
        for batch in range(args.episodes // 10):
            batch_returns, losses = [], []
            for _ in range(10):
                state, log_probs, rewards, done = env.reset(), [], [], False
                while not done:
                    probs = policy(torch.from_numpy(state).float().unsqueeze(0))
                    m = Categorical(probs)
                    action = m.sample()
                    log_probs.append(m.log_prob(action))
                    state, reward, done = env.step(action.item())
                    rewards.append(reward)
                R, returns = 0.0, []
                for r in rewards[::-1]:
                    R = r + args.gamma * R
                    returns.insert(0, R)
                returns = torch.tensor(returns)
                returns = (returns - returns.mean()) / (returns.std() + eps) if len(
                    returns) > 1 else returns * 0
                losses.append(torch.cat([-lp * g for lp, g in zip(log_probs, returns)]).sum())
                batch_returns.append(sum(rewards))
            optimizer.zero_grad(set_to_none=True)
            torch.stack(losses).mean().backward()
            optimizer.step()
            print(f"epoch {epoch} batch {batch} loss {-np.mean(batch_returns):.4f}")


if __name__ == "__main__":
    main()
