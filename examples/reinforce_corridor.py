"""REINFORCE (Williams, 1992) on a tiny corridor: a policy gradient with
``Categorical(logits=...).log_prob(action)``, as a PyTorch script writes it.

The agent starts at the left end of a corridor of ``--length`` cells and steps left or
right; reaching the right end pays 1, discounted by ``--gamma`` per step, and an episode
ends there or after ``--horizon`` steps. A batch of episodes runs at once as tensors; the
policy (a linear layer on the one-hot position) is trained with the return minus a running
baseline. The printed cost is minus the mean discounted return, which falls as the policy
learns to walk right.

    python examples/reinforce_corridor.py --iterations 60

Needs torcia-nn and torcia-optim besides torcia-distributions.
"""

from __future__ import annotations

import argparse

import torcia as torch
from torcia import nn, optim
from torcia.distributions import Categorical


def run_episodes(policy, length, horizon, gamma, batch):
    """Play ``batch`` episodes; returns the summed log-probabilities of the actions taken
    and each episode's discounted return."""
    pos = torch.zeros(batch, dtype=torch.int64)
    done = torch.zeros(batch, dtype=torch.bool)
    log_probs = torch.zeros(batch)
    returns = torch.zeros(batch)
    eye = torch.eye(length)
    for t in range(horizon):
        dist = Categorical(logits=policy(eye[pos]))
        action = dist.sample()
        alive = (~done).float()
        log_probs = log_probs + dist.log_prob(action) * alive
        pos = torch.where(done, pos, (pos + 2 * action - 1).clamp(0, length - 1))
        arrived = (pos == length - 1) & ~done
        returns = returns + arrived.float() * gamma ** (t + 1)
        done = done | arrived
    return log_probs, returns


def main(argv=None) -> list[float]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--length", type=int, default=6)
    parser.add_argument("--horizon", type=int, default=15)
    parser.add_argument("--gamma", type=float, default=0.9)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    policy = nn.Linear(args.length, 2)
    opt = optim.Adam(policy.parameters(), lr=args.lr)
    baseline = 0.0
    costs = []
    for it in range(args.iterations):
        log_probs, returns = run_episodes(policy, args.length, args.horizon, args.gamma,
                                          args.batch)
        advantage = returns - baseline
        loss = -(log_probs * advantage).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        baseline = 0.9 * baseline + 0.1 * returns.mean().item()
        costs.append(-returns.mean().item())
        if it % 10 == 0 or it == args.iterations - 1:
            print(f"iteration {it:3d}  cost {costs[-1]:.3f}")
    return costs


if __name__ == "__main__":
    main()
