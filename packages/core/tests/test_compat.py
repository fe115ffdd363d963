"""torcia.compat: ``import torch`` served by torcia, unmodified scripts run through it."""

import subprocess
import sys
import textwrap

import pytest

import torcia
from torcia import compat


@pytest.fixture
def hook():
    compat.install()
    yield
    compat.uninstall()


def run_script(tmp_path, source, *args):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(source))
    return subprocess.run(
        [sys.executable, "-m", "torcia.compat", str(script), *args],
        capture_output=True, text=True, timeout=120,
    )


def test_torcia_name_maps_prefixes():
    assert compat.torcia_name("torch") == "torcia"
    assert compat.torcia_name("torch.cuda") == "torcia.cuda"
    assert compat.torcia_name("torch.utils.data.sampler") == "torcia.data.sampler"
    assert compat.torcia_name("torchvision.datasets") == "torcia.vision.datasets"
    assert compat.torcia_name("torch._dynamo") == "torcia.compiler.dynamo"
    assert compat.torcia_name("torch.utils.data.datapipes.iter") is None


def test_import_torch_is_torcia(hook):
    import torch

    assert torch.Tensor is torcia.Tensor
    assert torch.ones(3).sum().item() == 3.0
    assert isinstance(torch.randn(2), torcia.Tensor)


def test_missing_name_names_the_pytorch_api(hook):
    import torch

    with pytest.raises(AttributeError, match=r"PyTorch's torch\.no_such_function"):
        torch.no_such_function  # noqa: B018


def test_missing_module_names_the_pytorch_api(hook):
    with pytest.raises(ModuleNotFoundError, match=r"PyTorch's torch\._inductor"):
        import torch._inductor  # noqa: F401
    with pytest.raises(ModuleNotFoundError, match=r"torch\.no_such_module"):
        import torch.no_such_module  # noqa: F401


def test_attribute_writes_reach_torcia(hook):
    import torch

    torch._compat_probe = 1
    try:
        assert torcia._compat_probe == 1
    finally:
        del torch._compat_probe
    assert not hasattr(torcia, "_compat_probe")


def test_uninstall_forgets_torch():
    compat.install()
    assert compat.installed()
    import torch  # noqa: F401

    compat.uninstall()
    assert not isinstance(sys.modules.get("torch"), compat.TorchModule)
    assert not compat.installed()


def test_runs_a_script_with_its_arguments(tmp_path):
    result = run_script(tmp_path, """
        import sys
        import torch
        print("ARGS", sys.argv[1:], __name__)
        print("SUM", torch.arange(4).sum().item())
    """, "--epochs", "2")
    assert result.returncode == 0, result.stderr
    assert "ARGS ['--epochs', '2'] __main__" in result.stdout
    assert "SUM 6" in result.stdout


def test_script_error_names_missing_api(tmp_path):
    result = run_script(tmp_path, """
        import torch
        torch.compile_everything_now()
    """)
    assert result.returncode != 0
    assert "torch.compile_everything_now" in result.stderr


def test_usage_without_script():
    result = subprocess.run([sys.executable, "-m", "torcia.compat"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2 and "usage" in result.stdout


def test_a_real_torch_comes_back_after_uninstall():
    torch = pytest.importorskip("torch")
    compat.install()
    import torch as aliased

    assert aliased is not torch and aliased.Tensor is torcia.Tensor
    compat.uninstall()
    import torch as again

    assert again is torch
