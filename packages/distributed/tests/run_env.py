"""Writes the variables torchrun sets, as this worker sees them, to DIR/rank<RANK>.json,
after an all-reduce over the group they describe."""

import json
import os
import sys

import torcia
import torcia.distributed as dist

NAMES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
         "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR",
         "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
         "TORCHELASTIC_RUN_ID")
dist.init_process_group("gloo")
t = torcia.tensor([1.0])
dist.all_reduce(t)
seen = {name: os.environ.get(name) for name in NAMES}
seen.update(sum=t.item(), rank=dist.get_rank(), size=dist.get_world_size(),
            launched=dist.is_torchelastic_launched())
with open(os.path.join(sys.argv[1], f"rank{seen['RANK']}.json"), "w") as f:
    json.dump(seen, f)
dist.destroy_process_group()
