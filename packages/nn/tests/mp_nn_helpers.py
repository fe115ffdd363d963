"""What the processes of test_share_memory.py run: a module of its own, so that children
started with "spawn" import it by name."""

import torcia


def hogwild(i, model, steps):
    # each process updates the shared weights in place: all of them see each other's
    with torcia.no_grad():
        for _ in range(steps):
            for p in model.parameters():
                p.add_(1.0)
