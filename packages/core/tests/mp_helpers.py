"""Functions that processes started by test_multiprocessing.py run: a module of their own,
so that children started with "spawn" can import them by name."""

import os
import signal
import time

import torcia


def add_one_and_reply(inbox, outbox, done):
    t = inbox.get()
    t.add_(1)  # the parent sees it: the tensor came as shared memory
    outbox.put((t.is_shared(), torcia.full((2,), 7.0)))
    done.wait(60)  # the parent maps the reply's memory from this process: stay alive


def square(t):
    return t * t


def write_rank(i, shared):
    shared[i] = float(i + 1)


def fail_at(i, bad):
    if i == bad:
        raise ValueError(f"process {i} fails on purpose")
    time.sleep(60)  # ended by the parent once process `bad` fails


def kill_at(i, bad):
    if i == bad:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)


def exit_with(i, code):
    raise SystemExit(code)
