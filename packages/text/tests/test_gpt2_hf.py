"""GPT2LMHeadModel against Hugging Face: a random-initialised transformers GPT-2 saved with
save_pretrained loads with equal logits and greedy tokens, and torcia's save_pretrained
folder loads in transformers; without transformers, the folder layout and names."""

import json

import numpy as np
import pytest

import torcia

pytest.importorskip("safetensors")
from torcia.text.models import GPT2LMHeadModel  # noqa: E402

SMALL = dict(vocab_size=97, n_positions=32, n_embd=16, n_layer=2, n_head=4)


def test_save_pretrained_writes_hugging_faces_names_and_layout(tmp_path):
    from safetensors.numpy import load_file

    lm = GPT2LMHeadModel(**SMALL).eval()
    lm.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == "gpt2" and config["n_embd"] == 16
    arrays = load_file(tmp_path / "model.safetensors")
    assert "lm_head.weight" not in arrays  # tied to the embedding, as transformers saves it
    assert arrays["transformer.h.0.attn.c_attn.weight"].shape == (16, 48)  # Conv1D: (in, out)
    assert arrays["transformer.h.1.mlp.c_proj.weight"].shape == (64, 16)
    assert arrays["transformer.wpe.weight"].shape == (32, 16)
    ids = torcia.tensor([[3, 1, 4, 1, 5]])
    again = GPT2LMHeadModel.from_pretrained(tmp_path)
    assert torcia.equal(again(ids), lm(ids))
    assert again.lm_head.weight is again.transformer.wte.weight


def test_gpt2_is_registered_and_checks_its_configuration():
    from torcia.text.models import get_model

    assert isinstance(get_model("gpt2", **SMALL), GPT2LMHeadModel)
    with pytest.raises(TypeError, match=r"unknown configuration \['n_embed'\]"):
        GPT2LMHeadModel(n_embed=8)
    with pytest.raises(ValueError, match="n_embd 10 is not a multiple of n_head 4"):
        GPT2LMHeadModel(n_embd=10, n_head=4)
    with pytest.raises(ValueError, match="activation_function 'swish2'"):
        GPT2LMHeadModel(activation_function="swish2")


def test_a_folder_of_the_published_kind_loads(tmp_path):
    """openai-community/gpt2's file has no 'transformer.' prefix and, from older
    transformers, attention-mask buffers."""
    from torcia.utils import safetensors

    lm = GPT2LMHeadModel(**SMALL).eval()
    state = {k.removeprefix("transformer."): v for k, v in lm.state_dict().items()
             if k != "lm_head.weight"}
    state["h.0.attn.bias"] = torcia.ones(1, 1, 32, 32).tril()
    safetensors.save_file(state, tmp_path / "model.safetensors", metadata={"format": "pt"})
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", **SMALL,
                                                      "bos_token_id": 0}))
    ids = torcia.tensor([[7, 8, 9]])
    assert torcia.equal(GPT2LMHeadModel.from_pretrained(tmp_path)(ids), lm(ids))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(ValueError, match="holds a 'llama' model, not gpt2"):
        GPT2LMHeadModel.from_pretrained(tmp_path)


@pytest.mark.torch
def test_transformers_gpt2_gives_equal_logits_and_greedy_tokens(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(**SMALL, initializer_range=0.2)
    theirs = transformers.GPT2LMHeadModel(config).eval()
    theirs.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists()
    ours = GPT2LMHeadModel.from_pretrained(tmp_path)

    ids = np.random.default_rng(0).integers(0, 97, (2, 12))
    with torch.no_grad():
        expected = theirs(torch.from_numpy(ids)).logits.numpy()
    got = ours(torcia.from_numpy(ids)).detach().numpy()
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=0)
    assert np.abs(expected).max() > 0.1  # the comparison is not between near-zero logits

    prompt = ids[:1, :5]
    with torch.no_grad():
        their_tokens = theirs.generate(torch.from_numpy(prompt), max_new_tokens=20,
                                       do_sample=False, pad_token_id=0,
                                       attention_mask=torch.ones(1, 5, dtype=torch.long))
    our_tokens = ours.generate(torcia.from_numpy(prompt), max_new_tokens=20, do_sample=False)
    assert our_tokens.tolist() == their_tokens.tolist()

    ours.save_pretrained(tmp_path / "back")
    again = transformers.GPT2LMHeadModel.from_pretrained(tmp_path / "back").eval()
    with torch.no_grad():
        np.testing.assert_allclose(again(torch.from_numpy(ids)).logits.numpy(), expected,
                                   atol=1e-5, rtol=0)
