"""Run under ``torcia-run --nproc-per-node N parallel_worker.py SCENARIO...``: each scenario
checks, on every rank, a data-parallel algorithm against one process training on every
rank's data (or values worked out by hand), and prints ``PASS <scenario> rank <r>``."""

import functools
import sys

import numpy as np
from c10d_worker import sync_bn

import torcia
import torcia.distributed as dist
from torcia.distributed.fsdp import (
    FullyShardedDataParallel as FSDP,
)
from torcia.distributed.fsdp import (
    MixedPrecision,
    MixedPrecisionPolicy,
    ShardingStrategy,
    StateDictType,
    fully_shard,
)
from torcia.distributed.fsdp.wrap import ModuleWrapPolicy, size_based_auto_wrap_policy
from torcia.distributed.tensor import DTensor


class Block(torcia.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = torcia.nn.Linear(width, width)
        self.act = torcia.nn.Tanh()

    def forward(self, x):
        return x + self.act(self.fc(x))


def make_model(seed=0):
    # odd sizes: shards of different lengths, and a rank with an empty shard at 4 ranks
    torcia.manual_seed(seed)
    return torcia.nn.Sequential(torcia.nn.Linear(5, 7), Block(7), Block(7),
                                torcia.nn.Linear(7, 3))


def batch(step, rank):
    g = torcia.Generator().manual_seed(100 * step + rank)
    return torcia.randn(4, 5, generator=g), torcia.randn(4, 3, generator=g)


def reference_run(size, steps, make_opt, param_dtype=None):
    """Losses and final parameters of one process training on all ranks' batches."""
    model = make_model()
    opt = make_opt(model.parameters())
    losses = []
    for step in range(steps):
        xs, ys = zip(*(batch(step, r) for r in range(size)))
        x, y = torcia.cat(xs), torcia.cat(ys)
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.detach().clone() for k, v in model.state_dict().items()}


def global_loss(loss):
    t = loss.detach().clone().reshape(1).to(torcia.float64)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    return t.item()


def train(model, rank, steps, make_opt):
    opt = make_opt(model.parameters())
    losses = []
    for step in range(steps):
        x, y = batch(step, rank)
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(global_loss(loss))
    return losses, opt


def adam(params):
    return torcia.optim.Adam(params, lr=0.01)


def full_params(model):
    with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT):
        return model.state_dict()


def check_close(got, want, what, rtol=1e-5, atol=1e-6):
    for key in want:
        np.testing.assert_allclose(got[key].float().numpy(), want[key].float().numpy(),
                                   rtol=rtol, atol=atol, err_msg=f"{what}: {key}")


# ----- FullyShardedDataParallel -------------------------------------------------------------

def fsdp_strategies(rank, size):
    steps = 4
    want_losses, want = reference_run(size, steps, adam)
    for strategy in (ShardingStrategy.FULL_SHARD, ShardingStrategy.SHARD_GRAD_OP,
                     ShardingStrategy.NO_SHARD):
        for policy in (None, ModuleWrapPolicy({Block, torcia.nn.Linear})):
            model = FSDP(make_model(), sharding_strategy=strategy, auto_wrap_policy=policy)
            losses, _ = train(model, rank, steps, adam)
            np.testing.assert_allclose(losses, want_losses, rtol=1e-5, err_msg=strategy.name)
            check_close(full_params(model), want, strategy.name)
            if strategy is not ShardingStrategy.NO_SHARD and size > 1:
                # per-rank memory: each rank holds about 1/size of every parameter
                local = sum(torcia.library.array(p).size for p in model.parameters())
                total = sum(v.numel() for v in want.values())
                assert local <= total / size + 3 * 7 * 2, (local, total)


def fsdp_mixed_precision(rank, size):
    steps = 3
    want_losses, want = reference_run(size, steps, adam)
    mp = MixedPrecision(param_dtype=torcia.bfloat16, reduce_dtype=torcia.float32)
    model = FSDP(make_model(), mixed_precision=mp,
                 auto_wrap_policy=functools.partial(size_based_auto_wrap_policy,
                                                    min_num_params=40))
    losses, _ = train(model, rank, steps, adam)
    # bfloat16 keeps 8 bits: the losses of a few steps agree to about 1%
    np.testing.assert_allclose(losses, want_losses, rtol=3e-2)
    got = full_params(model)
    assert all(v.dtype == torcia.float32 for v in got.values())
    check_close(got, want, "bf16", rtol=0, atol=3e-2)


def fsdp_state_dicts(rank, size):
    model = FSDP(make_model(), auto_wrap_policy=ModuleWrapPolicy({Block}))
    _, opt = train(model, rank, 2, adam)
    full = full_params(model)
    assert list(full) == list(make_model().state_dict())  # the wrapped model's own names
    with FSDP.state_dict_type(model, StateDictType.SHARDED_STATE_DICT):
        sharded = model.state_dict()
    for key, value in sharded.items():
        assert isinstance(value, DTensor), key
        np.testing.assert_allclose(value.full_tensor().numpy(), full[key].numpy())
    with FSDP.state_dict_type(model, StateDictType.LOCAL_STATE_DICT):
        local = model.state_dict()
    assert not any(isinstance(v, DTensor) for v in local.values())
    # a fresh model loads each form and computes what the trained one does
    x, _ = batch(9, rank)
    want = model(x).detach()
    for kind, state in ((StateDictType.FULL_STATE_DICT, full),
                        (StateDictType.SHARDED_STATE_DICT, sharded),
                        (StateDictType.LOCAL_STATE_DICT, local)):
        fresh = FSDP(make_model(seed=1), auto_wrap_policy=ModuleWrapPolicy({Block}))
        with FSDP.state_dict_type(fresh, kind):
            fresh.load_state_dict(state)
        np.testing.assert_allclose(fresh(x).detach().numpy(), want.numpy(), rtol=1e-6,
                                   err_msg=kind.name)
    # rank0_only: the others get nothing
    from torcia.distributed.fsdp import FullStateDictConfig

    with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT,
                              FullStateDictConfig(offload_to_cpu=True, rank0_only=True)):
        only = model.state_dict()
    assert (len(only) > 0) == (rank == 0)
    # the optimizer's state, whole, and back into a fresh optimizer
    osd = FSDP.optim_state_dict(model, opt)
    assert set(osd["state"]) == set(full)
    for key, state in osd["state"].items():
        assert tuple(state["exp_avg"].shape) == tuple(full[key].shape), key
    fresh = FSDP(make_model(), auto_wrap_policy=ModuleWrapPolicy({Block}))
    fresh_opt = adam(fresh.parameters())
    fresh_opt.load_state_dict(FSDP.optim_state_dict_to_load(fresh, fresh_opt, osd))
    for p, q in zip(opt.param_groups[0]["params"], fresh_opt.param_groups[0]["params"]):
        np.testing.assert_array_equal(opt.state[p]["exp_avg"].numpy(),
                                      fresh_opt.state[q]["exp_avg"].numpy())


def fsdp_no_sync_and_clip(rank, size):
    # two micro-batches under no_sync, then one synced: the gradient of their sum
    model = FSDP(make_model(), auto_wrap_policy=ModuleWrapPolicy({Block}))
    ref = FSDP(make_model(), auto_wrap_policy=ModuleWrapPolicy({Block}))
    x0, y0 = batch(0, rank)
    x1, y1 = batch(1, rank)
    with model.no_sync():
        ((model(x0) - y0) ** 2).sum().backward()
    ((model(x1) - y1) ** 2).sum().backward()
    (((ref(x0) - y0) ** 2).sum() + ((ref(x1) - y1) ** 2).sum()).backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)
    # clip_grad_norm_ measures the norm over every rank's shards
    norm = model.clip_grad_norm_(0.5)
    whole = float(np.sqrt(sum((v.numpy().astype(np.float64) ** 2).sum() for v in
                              _full_grads(ref))))
    np.testing.assert_allclose(norm.item(), whole, rtol=1e-5)
    clipped = float(np.sqrt(sum((v.numpy().astype(np.float64) ** 2).sum() for v in
                                _full_grads(model))))
    np.testing.assert_allclose(clipped, 0.5, rtol=1e-4)


def _full_grads(model):
    out = []
    for p in model.parameters():
        g = torcia.distributed.tensor.DTensor.from_local(
            p.grad, p.device_mesh, p.placements, shape=p.global_shape)
        out.append(g.full_tensor())
    return out


# ----- fully_shard ------------------------------------------------------------------------

def fully_shard_training(rank, size):
    steps = 4
    want_losses, want = reference_run(size, steps, adam)
    for reshard in (True, False):
        model = make_model()
        for block in (model[1], model[2]):
            fully_shard(block, reshard_after_forward=reshard)
        fully_shard(model, reshard_after_forward=reshard)
        assert type(model).__name__ == "FSDPSequential"
        assert all(isinstance(p, DTensor) for p in model.parameters())
        losses, _ = train(model, rank, steps, adam)
        np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
        from torcia.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_model_state_dict,
        )

        got = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
        check_close(got, want, f"fully_shard reshard={reshard}")
    # gradient accumulation without communication, then one synced backward
    model = fully_shard(make_model())
    ref = fully_shard(make_model())
    x0, y0 = batch(0, rank)
    x1, y1 = batch(1, rank)
    model.set_requires_gradient_sync(False)
    ((model(x0) - y0) ** 2).sum().backward()
    model.set_requires_gradient_sync(True)
    ((model(x1) - y1) ** 2).sum().backward()
    (((ref(x0) - y0) ** 2).sum() + ((ref(x1) - y1) ** 2).sum()).backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)
    # mixed precision: bfloat16 compute, float32 shards
    model = make_model()
    fully_shard(model, mp_policy=MixedPrecisionPolicy(param_dtype=torcia.bfloat16,
                                                      reduce_dtype=torcia.float32))
    losses, _ = train(model, rank, 3, adam)
    np.testing.assert_allclose(losses, want_losses[:3], rtol=3e-2)
    assert all(p.dtype == torcia.float32 for p in model.parameters())


# ----- ZeRO -------------------------------------------------------------------------------

def zero(rank, size):
    from torcia.distributed.optim import ZeroRedundancyOptimizer

    steps = 4
    want_losses, want = reference_run(size, steps, adam)
    model = dist.DistributedDataParallel(make_model())
    losses, opt = train(model, rank, steps, lambda params: ZeroRedundancyOptimizer(
        params, optimizer_class=torcia.optim.Adam, lr=0.01))
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    check_close(model.module.state_dict(), want, "zero")
    # each rank keeps the Adam state of its own parameters only
    mine = sum(s["exp_avg"].numel() for s in opt.optim.state.values())
    total = sum(v.numel() for v in want.values())
    assert mine < total or size == 1, (mine, total)
    opt.consolidate_state_dict(to=0)
    if rank == 0:
        whole = opt.state_dict()
        assert len(whole["state"]) == len(want)
        fresh = ZeroRedundancyOptimizer(make_model().parameters(),
                                        optimizer_class=torcia.optim.Adam, lr=0.01)
        fresh.load_state_dict(whole)


# ----- DDP communication hooks and Join ----------------------------------------------------

def comm_hooks(rank, size):
    from torcia.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torcia.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD

    g = torcia.Generator().manual_seed(rank)
    # a batch large enough that the gradient matrices are well conditioned
    x, y = torcia.randn(64, 5, generator=g), torcia.randn(64, 3, generator=g)

    def grads(hook=None, state=None):
        model = dist.DistributedDataParallel(make_model(), bucket_cap_mb=0.0002)
        if hook is not None:
            model.register_comm_hook(state, hook)
        ((model(x) - y) ** 2).mean().backward()
        return [p.grad.clone() for p in model.module.parameters()]

    plain = grads()
    for got, want in zip(grads(default_hooks.allreduce_hook), plain):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)
    for hook, tol in ((default_hooks.fp16_compress_hook, 2e-3),
                      (default_hooks.bf16_compress_hook, 2e-2),
                      (default_hooks.fp16_compress_wrapper(default_hooks.allreduce_hook), 2e-3)):
        for got, want in zip(grads(hook), plain):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tol, atol=tol)
    # PowerSGD of a rank at least the matrices' smaller side reproduces them exactly
    state = powerSGD.PowerSGDState(None, matrix_approximation_rank=7, start_powerSGD_iter=0,
                                   min_compression_rate=0, use_error_feedback=False)
    for got, want in zip(grads(powerSGD.powerSGD_hook, state), plain):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)
    # rank 1 compresses: the approximation differs, error feedback keeps what it missed
    state = powerSGD.PowerSGDState(None, matrix_approximation_rank=1, start_powerSGD_iter=0,
                                   min_compression_rate=0)
    approx = grads(powerSGD.powerSGD_hook, state)
    assert state.compression_stats()[0] > 1
    for got, want in zip(approx, plain):
        assert got.shape == want.shape


def join(rank, size):
    # rank r has 2 + r batches: the others keep answering until the last one is done
    model = dist.DistributedDataParallel(make_model())
    opt = torcia.optim.SGD(model.parameters(), lr=0.1)
    with model.join():
        for step in range(2 + rank):
            x, y = batch(step, rank)
            opt.zero_grad()
            ((model(x) - y) ** 2).mean().backward()
            opt.step()
    # the same run in one process: at step s, the ranks with a batch s contribute, the
    # sum divided by every rank (divide_by_initial_world_size)
    ref = make_model()
    ref_opt = torcia.optim.SGD(ref.parameters(), lr=0.1)
    for step in range(1 + size):
        ref_opt.zero_grad()
        total = sum(((ref(batch(step, r)[0]) - batch(step, r)[1]) ** 2).mean()
                    for r in range(size) if step < 2 + r)
        (total / size).backward()
        ref_opt.step()
    check_close(model.module.state_dict(), ref.state_dict(), "join")


# ----- functional collectives and DTensor --------------------------------------------------

def functional(rank, size):
    import torcia.distributed.nn.functional as dnn

    x = torcia.tensor([float(rank + 1)] * 2, requires_grad=True)
    gathered = dnn.all_gather(x * 2)
    # d/dx of sum_r (r + 1) * gathered[r]: every rank's coefficient for its own part
    sum((r + 1) * g for r, g in enumerate(gathered)).sum().backward()
    assert x.grad.tolist() == [2.0 * size * (rank + 1)] * 2, x.grad
    y = torcia.tensor([float(rank)], requires_grad=True)
    dnn.all_reduce(y * 3).sum().backward()
    assert y.grad.item() == 3.0 * size
    z = torcia.tensor([float(rank)], requires_grad=True)
    out = dnn.broadcast(z, src=0)
    assert out.item() == 0.0
    out.sum().backward()
    assert z.grad.item() == (size if rank == 0 else 0.0)
    # all_to_all_single with uneven rows: rank r sends r + 1 rows to each rank
    rows_out = [r + 1 for r in range(size)]
    send = torcia.full(((rank + 1) * size, 2), float(rank), requires_grad=True)
    recv = dnn.all_to_all_single(torcia.zeros(sum(rows_out), 2), send, rows_out,
                                 [rank + 1] * size)
    assert recv[:, 0].tolist() == [float(r) for r in range(size) for _ in range(r + 1)]
    (recv * torcia.arange(float(sum(rows_out))).reshape(-1, 1)).sum().backward()
    assert send.grad.shape == send.shape


def dtensor(rank, size):
    from torcia.distributed.tensor import Partial, Replicate, Shard, distribute_tensor

    mesh = dist.init_device_mesh("cpu", (2, size // 2) if size % 2 == 0 and size > 2
                                 else (size,))
    full = torcia.arange(7.0 * 5).reshape(7, 5)  # 7 rows: uneven chunks
    for placements in ([Shard(0)] * mesh.ndim, [Shard(1)] * mesh.ndim,
                       [Replicate()] * mesh.ndim, [Shard(0), Shard(1)][:mesh.ndim]):
        d = distribute_tensor(full, mesh, placements)
        assert tuple(d.global_shape) == (7, 5)
        np.testing.assert_array_equal(d.full_tensor().numpy(), full.numpy())
        r = d.redistribute(mesh, [Replicate()] * mesh.ndim)
        np.testing.assert_array_equal(r.to_local().numpy(), full.numpy())
    local = torcia.full((2, 3), float(rank))
    partial = torcia.distributed.tensor.DTensor.from_local(local, mesh,
                                                          [Partial()] * mesh.ndim)
    assert partial.full_tensor()[0, 0].item() == sum(range(size))


# ----- distributed checkpoints ------------------------------------------------------------

def _sharded_training(seed):
    model = make_model(seed)
    for block in (model[1], model[2]):
        fully_shard(block)
    fully_shard(model)
    opt = adam(model.parameters())
    return model, opt


def _full_state(model, opt):
    from torcia.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    model_sd, optim_sd = get_state_dict(model, opt,
                                        options=StateDictOptions(full_state_dict=True))
    flat = {f"model.{k}": v for k, v in model_sd.items()}
    for name, state in optim_sd["state"].items():
        flat.update({f"optim.{name}.{k}": torcia.as_tensor(v).clone()  # not the live one
                     for k, v in state.items()})
    return flat


def checkpoint_save(rank, size):
    # trains on this many ranks, saves the sharded state (and, from rank 0, the whole
    # state as a reference), plus an asynchronous save of the same state
    import os

    import torcia.distributed.checkpoint as dcp
    from torcia.distributed.checkpoint.state_dict import get_state_dict

    folder = os.environ["CKPT_DIR"]
    model, opt = _sharded_training(0)
    train(model, rank, 2, lambda params: opt)
    model_sd, optim_sd = get_state_dict(model, opt)
    assert all(isinstance(v, DTensor) for v in model_sd.values())
    dcp.save({"model": model_sd, "optim": optim_sd, "epoch": 7},
             checkpoint_id=os.path.join(folder, "sync"))
    future = dcp.async_save({"model": model_sd, "optim": optim_sd, "epoch": 7},
                            checkpoint_id=os.path.join(folder, "async"))
    reference = _full_state(model, opt)
    # training goes on while the background thread writes
    train(model, rank, 1, lambda params: opt)
    future.result()
    dist.barrier()
    if rank == 0:
        torcia.save(reference, os.path.join(folder, "reference.pt"))


def checkpoint_load(rank, size):
    # a fresh model and optimizer on another number of ranks load the checkpoint: the
    # whole state is the saved one, bit for bit, from either save
    import os

    import torcia.distributed.checkpoint as dcp
    from torcia.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    folder = os.environ["CKPT_DIR"]
    reference = torcia.load(os.path.join(folder, "reference.pt"))
    for kind in ("sync", "async"):
        model, opt = _sharded_training(5)
        model_sd, optim_sd = get_state_dict(model, opt)
        state = {"model": model_sd, "optim": optim_sd, "epoch": 0}
        dcp.load(state, checkpoint_id=os.path.join(folder, kind))
        set_state_dict(model, opt, model_state_dict=state["model"],
                       optim_state_dict=state["optim"])
        assert state["epoch"] == 7
        got = _full_state(model, opt)
        assert set(got) == set(reference), set(got) ^ set(reference)
        for key, want in reference.items():
            np.testing.assert_array_equal(got[key].numpy(), want.numpy(), err_msg=key)
    if size == 1:
        # and into a model that is not sharded at all
        plain = make_model(3)
        state = {"model": plain.state_dict()}
        dcp.load(state, checkpoint_id=os.path.join(folder, "sync"))
        plain.load_state_dict(state["model"])
        for key, value in plain.state_dict().items():
            np.testing.assert_array_equal(value.numpy(), reference[f"model.{key}"].numpy())


SCENARIOS = {f.__name__: f for f in (fsdp_strategies, fsdp_mixed_precision, fsdp_state_dicts,
                                     fsdp_no_sync_and_clip, fully_shard_training, zero,
                                     comm_hooks, join, functional, dtensor, checkpoint_save,
                                     checkpoint_load, sync_bn)}

if __name__ == "__main__":
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    for name in sys.argv[1:]:
        SCENARIOS[name](rank, size)
        print(f"PASS {name} rank {rank}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
