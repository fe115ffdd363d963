import math

import numpy as np
import pytest

import torcia
from torcia.text import (
    ByteLevelBPETokenizer,
    CharTokenizer,
    CSVClassificationDataset,
    LanguageModelDataset,
    TextLinesDataset,
    Vocab,
    WordTokenizer,
    build_vocab_from_iterator,
    pad_collate,
    tokenizers,
)
from torcia.text.models import GPT, LSTMClassifier, _filter, get_model, list_models
from torcia.text.train_lm import unigram_perplexity

UNICODE = "naïve café — 東京 🚀 l'été; ünïcödé\ttabs\n"


def test_char_tokenizer_ids_and_round_trip():
    tok = CharTokenizer.train(["abcab"], unk_token="<unk>", pad_token="<pad>")
    assert tok.encode("cab") == [2, 0, 1]
    assert tok.encode("cxz") == [2, 4, 4]  # unknown -> <unk>, after the 3 chars and <pad>
    assert tok.pad_token_id == 3 and tok.vocab_size == 5
    full = CharTokenizer.train([UNICODE])
    assert full.decode(full.encode(UNICODE)) == UNICODE
    with pytest.raises(KeyError, match="not in the vocabulary"):
        CharTokenizer.train(["ab"]).encode("abc")


def test_word_tokenizer_frequency_order_and_lowercasing():
    tok = WordTokenizer.train(["The cat, the dog.", "the END"], lowercase=True,
                              unk_token="<unk>")
    assert tok.symbols[:1] == ["the"] and tok.encode("THE cat!") == [
        tok.ids["the"], tok.ids["cat"], tok.unk_token_id]
    assert tok.decode(tok.encode("the dog.")) == "the dog ."


def test_bpe_merges_most_frequent_pairs_first():
    corpus = ["aaab"] * 3 + ["ab"] * 2
    tok = ByteLevelBPETokenizer.train(corpus, vocab_size=258, min_frequency=1)
    a, b = ord("a"), ord("b")
    # pairs: aa x6, ab x5 -> "aa" first; then "aaab" is [aa, a, b] and ab (x5) beats (aa, a)
    assert tok.merges == [(a, a), (a, b)]
    assert tok.encode("aaab") == [256, 257]
    assert tok.decode(tok.encode("aaab ab")) == "aaab ab"


def test_bpe_round_trips_unicode_and_special_tokens(tmp_path):
    tok = ByteLevelBPETokenizer.train([UNICODE * 3, "hello world " * 10], vocab_size=300,
                                      bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    ids = tok.encode(UNICODE, add_special_tokens=True)
    assert ids[0] == tok.token_to_id("<s>") and ids[-1] == tok.token_to_id("</s>")
    assert tok.decode(ids) == UNICODE
    assert tok.decode(ids, skip_special_tokens=False).startswith("<s>")
    assert len(tok.encode("hello world")) < len(b"hello world")
    tok.save(tmp_path / "t.json")
    again = tokenizers.load(tmp_path / "t.json")
    assert isinstance(again, ByteLevelBPETokenizer) and again.encode(UNICODE) == tok.encode(UNICODE)
    batch = tok(["hello", "hello world"], padding=True)
    assert batch["input_ids"].shape[0] == 2 and batch["lengths"].tolist()[0] < batch[
        "lengths"].tolist()[1]
    assert batch["attention_mask"][0].tolist().count(0) > 0
    cut = tok(["hello world hello"], truncation=True, max_length=2, padding="max_length")
    assert cut["input_ids"].shape == (1, 2)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="bad.json"):
        tokenizers.load(tmp_path / "bad.json")


def test_tokenizers_and_models_are_registered():
    assert tokenizers.get("char") is CharTokenizer
    assert {"gpt", "lstm_classifier"} <= set(list_models())
    assert isinstance(get_model("gpt", vocab_size=10, block_size=4, n_layer=1, n_head=1,
                                d_model=4), GPT)
    with pytest.raises(KeyError, match="no tokenizer named 'nope'"):
        tokenizers.get("nope")


def test_vocab_lookups_both_ways():
    v = build_vocab_from_iterator([["b", "a", "b", "c"], ["a", "b", "d"]], min_freq=2,
                                  specials=["<unk>", "<pad>"])
    assert v.get_itos() == ["<unk>", "<pad>", "b", "a"]
    with pytest.raises(RuntimeError, match="not found"):
        v["zzz"]
    v.set_default_index(v["<unk>"])
    assert v(["a", "zzz"]) == [3, 0] and v.lookup_tokens([2, 3]) == ["b", "a"]
    with pytest.raises(RuntimeError, match="already exists"):
        v.append_token("a")
    v.insert_token("x", 1)
    assert v["<pad>"] == 2 and len(Vocab(["q"])) == 1


def test_text_files_and_encoding_errors(tmp_path):
    good = tmp_path / "a.txt"
    good.write_text("first\n\nsecond\n", encoding="utf-8")
    assert list(TextLinesDataset(good)) == ["first", "second"]
    bad = tmp_path / "latin.txt"
    bad.write_bytes("ok line\ncaf\xe9\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin.txt: not valid utf-8 text at byte offset 11"):
        TextLinesDataset(bad)
    assert TextLinesDataset(bad, encoding="latin-1")[1] == "café"


def test_language_model_blocks_and_csv_and_collate(tmp_path):
    ds = LanguageModelDataset(list(range(11)), block_size=4, stride=2)
    assert len(ds) == 4
    x, y = ds[3]
    assert x.tolist() == [6, 7, 8, 9] and y.tolist() == [7, 8, 9, 10]
    with pytest.raises(IndexError):
        ds[4]
    path = tmp_path / "d.csv"
    path.write_text("label,text\npos,great\nneg,bad\nmeh,hmm\n")
    with pytest.raises(ValueError, match="line 4: label 'meh'"):
        CSVClassificationDataset(path, classes=["neg", "pos"])
    assert CSVClassificationDataset(path).classes == ["meh", "neg", "pos"]
    batch = pad_collate([([1, 2], 0), ([3], 1)], padding_value=9)
    assert batch["input_ids"].tolist() == [[1, 2], [3, 9]]
    assert batch["mask"].tolist() == [[True, True], [True, False]]


def test_generation_modes():
    torcia.manual_seed(0)
    lm = GPT(vocab_size=12, block_size=8, n_layer=1, n_head=2, d_model=8, dropout=0.0)
    prompt = torcia.tensor([[1, 2, 3]])
    greedy = lm.generate(prompt, 6, do_sample=False)
    assert greedy.tolist() == lm.generate(prompt, 6, top_k=1, seed=3).tolist()
    assert greedy.tolist() == lm.generate(prompt, 6, top_p=1e-6, seed=4).tolist()
    a = lm.generate(prompt, 6, temperature=1.5, seed=7).tolist()
    assert a == lm.generate(prompt, 6, temperature=1.5, seed=7).tolist()
    assert greedy.shape == (1, 9)  # longer than block_size: the context is cropped
    logits = torcia.tensor([[1.0, 3.0, 2.0, 0.0]])
    assert _filter(logits, 2, None).isinf().tolist() == [[True, False, False, True]]
    # probabilities 0.09, 0.67, 0.24, 0.03: 0.67 < 0.8, so the second-best joins
    assert _filter(logits, None, 0.8).isinf().tolist() == [[True, False, False, True]]


def test_unigram_baseline_formula():
    assert unigram_perplexity([0, 0, 1], [0], 2) == pytest.approx(5 / 3)
    uniform = unigram_perplexity([0, 1, 2, 3], [0, 1, 2, 3], 4)
    assert math.isclose(uniform, 4.0)


def test_lstm_classifier_learns_a_keyword_task():
    optim = pytest.importorskip("torcia.optim")
    rng = np.random.default_rng(0)
    torcia.manual_seed(0)
    words = ["the", "a", "film", "plot", "was", "very", "quite", "cast"]
    tok = WordTokenizer.train([" ".join(words + ["good", "bad"])], pad_token="<pad>")

    def sample(n):
        texts, labels = [], []
        for _ in range(n):
            label = int(rng.integers(0, 2))
            body = list(rng.choice(words, size=int(rng.integers(3, 8))))
            body.insert(int(rng.integers(0, len(body) + 1)), "good" if label else "bad")
            texts.append(" ".join(body))
            labels.append(label)
        batch = tok(texts, padding=True)
        return batch["input_ids"], batch["lengths"], torcia.tensor(labels)

    model = LSTMClassifier(tok.vocab_size, 2, embed_dim=16, hidden_size=16,
                           padding_idx=tok.pad_token_id)
    opt = optim.Adam(model.parameters(), lr=0.02)
    for _ in range(60):
        ids, lengths, y = sample(32)
        loss = torcia.nn.functional.cross_entropy(model(ids, lengths), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    ids, lengths, y = sample(200)
    accuracy = (model(ids, lengths).argmax(1) == y).float().mean().item()
    assert accuracy > 0.95, accuracy
