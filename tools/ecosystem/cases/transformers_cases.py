"""transformers: BERT, GPT-2 and Llama built from small configs with seeded weights
(nothing is downloaded): forward, greedy generation, a training step, save/load."""

import os
import tempfile

from common import case, grads, numpy, params, randint, seed_weights

# dropout draws differ between frameworks: the training cases compare with it off
_NO_DROPOUT = {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}


def _bert():
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=37,
                        max_position_embeddings=16, num_labels=3,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                        attn_implementation="eager")
    return seed_weights(BertForSequenceClassification(config)).eval()


def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=50, n_embd=32, n_layer=2, n_head=4, n_positions=32,
                        bos_token_id=0, eos_token_id=0, attn_implementation="eager",
                        **_NO_DROPOUT)
    return seed_weights(GPT2LMHeadModel(config)).eval()


def _llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=48,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=32, attn_implementation="eager")
    return seed_weights(LlamaForCausalLM(config)).eval()


def _ids(n=7, seed=1):
    return randint(50, 2, n, seed=seed)


@case()
def case_bert_forward():
    import torch

    ids = _ids()
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    out = _bert()(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    return {"logits": numpy(out.logits), "hidden": numpy(out.hidden_states[-1])}


@case()
def case_gpt2_forward():
    out = _gpt2()(input_ids=_ids())
    return {"logits": numpy(out.logits)}


@case()
def case_llama_forward():
    out = _llama()(input_ids=_ids())
    return {"logits": numpy(out.logits)}


@case()
def case_generate():
    out = {}
    for name, model in (("gpt2", _gpt2()), ("llama", _llama())):
        ids = _ids(4, seed=2)
        gen = model.generate(ids, max_new_tokens=6, do_sample=False, pad_token_id=0)
        out[name] = numpy(gen)
    return out


@case()
def case_training_step():
    import torch

    model = _gpt2().train()
    # the attention's key bias gets a gradient that is zero but for rounding (softmax
    # ignores a shift of every key alike); Adam's default eps would scale that noise up to
    # steps of the learning rate's size, differently on each framework
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, eps=1e-4)
    ids = _ids(8, seed=3)
    losses = []
    for _ in range(2):
        opt.zero_grad()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        losses.append(loss.item())
        opt.step()
    return {"losses": losses, **grads(model), **params(model)}


@case()
def case_bert_backward():
    import torch

    model = _bert().train()
    loss = model(input_ids=_ids(), labels=torch.tensor([0, 2])).loss
    loss.backward()
    return {"loss": loss.item(), **grads(model)}


@case()
def case_save_load():
    from transformers import AutoModelForCausalLM

    model = _llama()
    ids = _ids(5, seed=4)
    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d)
        files = sorted(os.listdir(d))
        back = AutoModelForCausalLM.from_pretrained(d).eval()
    return {"before": numpy(model(input_ids=ids).logits),
            "after": numpy(back(input_ids=ids).logits),
            "files": "safetensors" in " ".join(files)}
