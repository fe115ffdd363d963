"""The profiler's schedule, trace handler and record_function: schedules against torch's
over generated parameters, the steps at which traces are ready against torch's, only the
recorded steps' ops in a trace, and TensorBoard-readable trace files."""

import gzip
import itertools
import json
import os
import warnings

import pytest

import torcia
from torcia import profiler as P

PLANS = [dict(wait=w, warmup=u, active=a, repeat=r, skip_first=s, skip_first_wait=sw)
         for w, u, a, r, s, sw in itertools.product((0, 1, 2), (0, 1), (1, 3), (0, 2),
                                                     (0, 3), (0, 1))]


def _silent_schedule(lib, **plan):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return lib.profiler.schedule(**plan)


def test_schedule_by_hand():
    plan = P.schedule(wait=1, warmup=1, active=2, repeat=2, skip_first=1)
    assert [plan(s).name for s in range(11)] == [
        "NONE", "NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE",
        "NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE", "NONE", "NONE"]
    with pytest.raises(AssertionError, match="Invalid profiler schedule"):
        P.schedule(wait=0, warmup=0, active=0)
    with pytest.raises(AssertionError, match="non-negative"):
        plan(-1)


def test_scheduled_profile_records_the_active_steps_only():
    ready = []
    plan = P.schedule(wait=1, warmup=1, active=2, repeat=1)

    def on_ready(prof):
        ready.append((prof.step_num, sorted({e.key for e in prof.key_averages()})))

    with P.profile(schedule=plan, on_trace_ready=on_ready) as prof:
        for step in range(6):
            with P.record_function(f"step{step}"):
                torcia.ones(2) + 1
            prof.step()
    # steps 2 and 3 were recorded; the trace was ready when step 3 ended
    assert [r[0] for r in ready] == [4]
    assert {"step2", "step3"} <= set(ready[0][1]) and "step1" not in ready[0][1]
    assert "step4" not in ready[0][1]


def test_unscheduled_profile_hands_the_whole_trace(tmp_path):
    with P.profile(on_trace_ready=P.tensorboard_trace_handler(str(tmp_path / "tb"), "w0",
                                                              use_gzip=True)):
        torcia.ones(3).sum()
    (name,) = os.listdir(tmp_path / "tb")
    assert name.startswith("w0.") and name.endswith(".pt.trace.json.gz")
    with gzip.open(tmp_path / "tb" / name, "rt") as f:
        trace = json.load(f)
    assert any(e["name"] == "sum" for e in trace["traceEvents"])


def test_record_function_as_decorator_and_names():
    @P.record_function("outer")
    def work():
        with P.record_function("inner"):
            return torcia.ones(2) * 3

    with P.profile() as prof:
        work()
        work()
    counts = {e.key: e.count for e in prof.key_averages()}
    assert counts["outer"] == 2 and counts["inner"] == 2
    assert P.supported_activities() == {P.ProfilerActivity.CPU}
    assert not P.kineto_available() and P.DeviceType.CPU.value == 0


@pytest.mark.torch
@pytest.mark.parametrize("plan", PLANS, ids=lambda p: "-".join(map(str, p.values())))
def test_schedule_matches_torch(plan):
    torch = pytest.importorskip("torch")
    ours, theirs = _silent_schedule(torcia, **plan), _silent_schedule(torch, **plan)
    assert [ours(s).name for s in range(30)] == [theirs(s).name for s in range(30)]


@pytest.mark.torch
@pytest.mark.parametrize("plan", [dict(wait=1, warmup=1, active=2, repeat=2),
                                  dict(wait=0, warmup=1, active=1, repeat=0),
                                  dict(wait=2, warmup=0, active=3, repeat=1, skip_first=1)])
def test_trace_ready_steps_match_torch(plan):
    torch = pytest.importorskip("torch")
    steps = {}
    for lib in (torcia, torch):
        seen = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with lib.profiler.profile(schedule=_silent_schedule(lib, **plan),
                                      on_trace_ready=lambda p, s=seen: s.append(p.step_num)
                                      ) as prof:
                for _ in range(9):
                    lib.ones(2) + 1
                    prof.step()
        steps[lib.__name__] = seen
    assert steps["torcia"] == steps["torch"]
