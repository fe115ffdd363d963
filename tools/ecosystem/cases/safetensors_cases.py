"""safetensors: save_file/load_file and save_model/load_model through safetensors.torch."""

import os
import tempfile

from common import case, numpy, randn, seed_weights


@case()
def case_roundtrip():
    import torch
    from safetensors.torch import load, load_file, load_model, save, save_file, save_model

    tensors = {"a": randn(3, 4, seed=1), "b": torch.arange(6).reshape(2, 3),
               "c": randn(5, seed=2).to(torch.float16)}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.safetensors")
        save_file(tensors, path, metadata={"k": "v"})
        back = load_file(path)
        model = seed_weights(torch.nn.Linear(4, 2))
        save_model(model, os.path.join(d, "m.safetensors"))
        other = torch.nn.Linear(4, 2)
        load_model(other, os.path.join(d, "m.safetensors"))
    from_bytes = load(save(tensors))
    return {**{k: numpy(v) for k, v in back.items()},
            "bytes_b": numpy(from_bytes["b"]),
            "model": numpy(other(randn(1, 4, seed=3)))}
