"""What the processes of test_share_memory.py run: a module of its own, so that children
started with "spawn" import it by name."""

import torcia


def hogwild(i, model, steps):
    # each process updates its own column of the shared weight in place, and the parent
    # sees them all; one element written by two processes at once would lose updates
    # (Hogwild's races are real), which is not what the test is about
    with torcia.no_grad():
        for _ in range(steps):
            model.weight[:, i].add_(1.0)
