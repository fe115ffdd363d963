"""torcia-train: runs end to end, writes its outputs, and resumes exactly."""

import numpy as np
import pytest
from PIL import Image

import torcia
from torcia.vision import train as train_mod
from torcia.vision.train import main

QUICK = ["--limit", "64", "--batch-size", "16", "--no-progress"]


def flat(state, prefix=""):
    """A nested checkpoint as {dotted key: numpy array or plain value}."""
    if isinstance(state, dict):
        out = {}
        for k, v in state.items():
            out.update(flat(v, f"{prefix}{k}."))
        return out
    if isinstance(state, (list, tuple)):
        out = {}
        for i, v in enumerate(state):
            out.update(flat(v, f"{prefix}{i}."))
        return out
    return {prefix: state.numpy() if isinstance(state, torcia.Tensor) else state}


def assert_same(a, b):
    fa, fb = flat(a), flat(b)
    assert fa.keys() == fb.keys()
    for k in fa:
        if isinstance(fa[k], np.ndarray):
            np.testing.assert_array_equal(fa[k], fb[k], err_msg=k)
        else:
            assert fa[k] == fb[k], k


def test_resume_continues_exactly(tmp_path, capsys):
    straight, split = tmp_path / "straight", tmp_path / "split"
    assert main([*QUICK, "--epochs", "2", "--out", str(straight)]) == 0
    main([*QUICK, "--epochs", "2", "--stop-after", "1", "--out", str(split)])
    first = torcia.load(split / "checkpoint.pt")
    assert first["epoch"] == 1 and len(first["history"]["train_loss"]) == 1
    main([*QUICK, "--epochs", "2", "--out", str(split), "--resume",
          str(split / "checkpoint.pt")])
    assert "resumed from" in capsys.readouterr().out
    a = torcia.load(straight / "checkpoint.pt")
    b = torcia.load(split / "checkpoint.pt")
    assert a["epoch"] == b["epoch"] == 2
    assert_same(a, b)
    # and the run really moved: the weights differ from after the first epoch
    assert not np.array_equal(a["model"]["classifier.1.weight"].numpy(),
                              first["model"]["classifier.1.weight"].numpy())


def test_checkpoint_contents(tmp_path):
    main([*QUICK, "--epochs", "3", "--stop-after", "1", "--out", str(tmp_path)])
    ckpt = torcia.load(tmp_path / "checkpoint.pt")
    assert set(ckpt) == {"model", "optimizer", "scheduler", "epoch", "rng", "history", "args"}
    assert "features.0.weight" in ckpt["model"]
    assert ckpt["optimizer"]["state"] and ckpt["scheduler"]["last_epoch"] == 4
    assert set(ckpt["rng"]) == {"torcia", "loader"}


def test_resume_refuses_other_settings(tmp_path):
    main([*QUICK, "--epochs", "1", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="--lr 0.003"):
        main([*QUICK, "--epochs", "2", "--lr", "0.1", "--out", str(tmp_path), "--resume",
              str(tmp_path / "checkpoint.pt")])


def test_help(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for option in ("--epochs", "--batch-size", "--lr", "--seed", "--workers", "--device",
                   "--out", "--resume", "--dataset", "--root"):
        assert option in out


def test_bad_arguments():
    with pytest.raises(SystemExit):
        main(["--epochs", "0"])


def test_missing_files_and_unknown_names_are_clean_errors(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["--dataset", "mnist", "--root", str(tmp_path), "--out", str(tmp_path)])
    assert info.value.code == 2
    assert "train-images-idx3-ubyte" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--model", "resnet1000", "--out", str(tmp_path)])
    assert "no model named 'resnet1000'" in capsys.readouterr().err


@pytest.mark.slow
def test_default_run_reaches_97_percent(tmp_path, capsys):
    args = train_mod.build_parser().parse_args(["--out", str(tmp_path), "--no-progress"])
    result = train_mod.train(args)
    assert result["history"]["test_acc"][-1] >= 0.97
    assert "final test accuracy" in capsys.readouterr().out
    report = Image.open(tmp_path / "report.png")
    assert report.format == "PNG" and report.size[0] > 800
    assert torcia.load(tmp_path / "checkpoint.pt")["epoch"] == args.epochs


def test_two_epochs_write_the_report(tmp_path):
    main(["--epochs", "2", "--out", str(tmp_path), "--no-progress", "--limit", "256"])
    image = Image.open(tmp_path / "report.png")
    assert image.format == "PNG"
    pixels = np.asarray(image.convert("RGB"))
    # the curves' colours and the green/red labels are drawn
    assert (np.abs(pixels - [31, 119, 180]).sum(axis=2) == 0).any()
    assert (pixels[:, :, 1] > 100).any()


@pytest.mark.slow
def test_workers_do_not_change_the_result(tmp_path):
    runs = []
    for workers in (0, 2):
        out = tmp_path / str(workers)
        main([*QUICK, "--epochs", "2", "--workers", str(workers), "--out", str(out)])
        runs.append(torcia.load(out / "checkpoint.pt"))
    assert_same(runs[0]["model"], runs[1]["model"])
    assert runs[0]["history"] == runs[1]["history"]


def test_a_last_batch_of_one_is_dropped(tmp_path):
    # 17 images in batches of 16 would leave one image, which batch norm cannot train on
    main(["--limit", "17", "--batch-size", "16", "--epochs", "1", "--no-progress",
          "--out", str(tmp_path)])
    history = torcia.load(tmp_path / "checkpoint.pt")["history"]
    assert len(history["train_loss"]) == 1
