"""Plugin discovery, the allow/block policy and ``python -m torcia plugins``, in process.

Fake plugin distributions are a ``*.dist-info`` folder (METADATA + entry_points.txt) and a
module in a temporary directory put on ``sys.path``: ``importlib.metadata`` finds them as it
finds installed ones. ``test_plugins_install.py`` does the same with real installs.
"""

import importlib
import json
import sys
import textwrap
import warnings

import pytest

import torcia
from torcia import __main__ as cli
from torcia import plugins

DEVICE_PLUGIN = """
import numpy as np
import torcia
from torcia.backend import Backend

@torcia.hookimpl
def torcia_register_backends(registry):
    registry.add(Backend("{device}", np))

@torcia.hookimpl
def torcia_register_kernels(registry):
    registry.add("neg", "{device}", np.negative)
"""


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A directory on sys.path to install fake distributions into; plugins are re-discovered
    before and after each test, with no policy from the environment or a config file."""
    for var in ("TORCIA_PLUGINS", "TORCIA_DISABLE_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("TORCIA_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))  # no config file there
    monkeypatch.syspath_prepend(str(tmp_path))
    specs, registries = list(plugins._state.spec_modules), dict(plugins._state.registries)
    plugins._reset()
    yield tmp_path
    monkeypatch.undo()
    # forget what the fake distributions added: their modules, hook specs and registries
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(tmp_path)):
            del sys.modules[name]
    # (the specs of torcia's parts imported meanwhile stay: they will not be added again)
    plugins._state.spec_modules[:] = specs + [
        m for m in plugins._state.spec_modules
        if m not in specs and not str(getattr(m, "__file__", "")).startswith(str(tmp_path))]
    plugins._state.registries.clear()
    plugins._state.registries.update(registries)
    plugins._reset()


def install(site, dist, entry_points: dict[str, str], modules: dict[str, str]):
    """Write distribution ``dist`` (version 1.0) with the given entry points and modules."""
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entry_points.items())
    (info / "entry_points.txt").write_text(f"[torcia]\n{lines}")
    for module, source in modules.items():
        path = site / f"{module}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text(textwrap.dedent(source))
    importlib.invalidate_caches()


def infos_by_name():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", plugins.PluginWarning)
        return {info.name: info for info in plugins.plugin_infos()}


@pytest.fixture
def fakedev(site):
    """An installed distribution ``fake-dist`` whose plugin ``fakedev`` adds device "fakedev"."""
    install(site, "fake-dist", {"fakedev": "fakedev_mod"},
            {"fakedev_mod": DEVICE_PLUGIN.format(device="fakedev")})
    return site


def test_an_installed_plugin_is_discovered_and_used(fakedev):
    info = infos_by_name()["fakedev"]
    assert (info.distribution, info.version, info.status) == ("fake-dist", "1.0", "loaded")
    assert info.hooks == ["torcia_register_backends", "torcia_register_kernels"]
    assert info.provides == ["device backend:fakedev", "kernel:neg@fakedev"]
    x = torcia.tensor([1.0, -2.0], device="fakedev")
    assert (-x).to("cpu").tolist() == [-1.0, 2.0]


def test_core_lists_itself_through_the_same_hooks(site):
    core = infos_by_name()["core"]
    assert core.status == "loaded"
    assert "device backend:cpu" in core.provides
    assert "kernel:add@cpu" in core.provides


@pytest.mark.parametrize("key", ["fakedev", "fake-dist"])
def test_blocklist_by_plugin_or_distribution_name(fakedev, monkeypatch, key):
    monkeypatch.setenv("TORCIA_DISABLE_PLUGINS", f" other ,{key}")
    info = infos_by_name()["fakedev"]
    assert info.status == "blocked"
    assert info.reason == "blocked by TORCIA_DISABLE_PLUGINS"
    with pytest.raises(RuntimeError) as err:
        torcia.tensor([1.0], device="fakedev")
    message = str(err.value)
    assert "'fakedev' (fake-dist)" in message
    assert "blocked by TORCIA_DISABLE_PLUGINS" in message


def test_blocklist_in_the_config_file(fakedev, monkeypatch):
    config = fakedev / "config.toml"
    config.write_text('[plugins]\nblock = ["fakedev"]\n')
    monkeypatch.setenv("TORCIA_CONFIG", str(config))
    assert infos_by_name()["fakedev"].reason == f"blocked by config file {config}"
    with pytest.raises(RuntimeError, match=f"blocked by config file {config}"):
        torcia.tensor([1.0], device="fakedev")


def test_allowlist_excludes_plugins_not_named(fakedev, monkeypatch):
    monkeypatch.setenv("TORCIA_PLUGINS", "something-else")
    infos = infos_by_name()
    assert infos["fakedev"].status == "blocked"
    assert infos["fakedev"].reason == "not in the allowlist (TORCIA_PLUGINS)"
    # torcia's own parts pass any allowlist
    assert infos["core"].status == "loaded"
    with pytest.raises(RuntimeError, match="not in the allowlist"):
        torcia.tensor([1.0], device="fakedev")


def test_allowlist_admits_by_distribution_name(fakedev, monkeypatch):
    monkeypatch.setenv("TORCIA_PLUGINS", "fake-dist")
    assert infos_by_name()["fakedev"].status == "loaded"


def test_blocklist_wins_over_allowlist(fakedev, monkeypatch):
    config = fakedev / "config.toml"
    config.write_text('[plugins]\nallow = ["fakedev"]\n')
    monkeypatch.setenv("TORCIA_CONFIG", str(config))
    monkeypatch.setenv("TORCIA_DISABLE_PLUGINS", "fakedev")
    assert infos_by_name()["fakedev"].reason == "blocked by TORCIA_DISABLE_PLUGINS"


def test_an_unreadable_config_file_is_an_error_naming_it(site, monkeypatch):
    config = site / "config.toml"
    config.write_text("[plugins\n")
    monkeypatch.setenv("TORCIA_CONFIG", str(config))
    with pytest.raises(RuntimeError, match="config.toml cannot be read"):
        plugins.plugin_infos()


def test_a_plugin_raising_on_load_is_reported_and_the_rest_works(fakedev):
    install(fakedev, "broken-dist", {"broken": "broken_mod"},
            {"broken_mod": "raise ImportError('needs libfoo')"})
    with pytest.warns(plugins.PluginWarning, match=r"'broken' \(broken-dist 1.0\).*libfoo"):
        infos = {info.name: info for info in plugins.plugin_infos()}
    assert infos["broken"].status == "failed"
    assert infos["broken"].reason == "ImportError: needs libfoo"
    assert infos["fakedev"].status == "loaded"
    assert (torcia.tensor([1, 2]) + 1).tolist() == [2, 3]


def test_a_plugin_raising_in_a_hook_is_reported_and_the_rest_works(fakedev):
    install(fakedev, "badhook-dist", {"badhook": "badhook_mod"}, {"badhook_mod": """
        import torcia

        @torcia.hookimpl
        def torcia_register_kernels(registry):
            raise ValueError("bad kernel table")
    """})
    with pytest.warns(plugins.PluginWarning, match="'badhook'.* raised in torcia_register_kernels"):
        infos = {info.name: info for info in plugins.plugin_infos()}
    assert infos["badhook"].status == "failed"
    assert "bad kernel table" in infos["badhook"].reason
    assert (-torcia.tensor([1.0], device="fakedev")).tolist() == [-1.0]


def test_a_higher_priority_kernel_overrides_the_reference(site):
    install(site, "fast-dist", {"fastneg": "fastneg_mod"}, {"fastneg_mod": """
        import numpy as np
        import torcia

        calls = []

        @torcia.hookimpl
        def torcia_register_kernels(registry):
            def neg(a):
                calls.append(a.shape)
                return np.negative(a)
            registry.add("neg", "cpu", neg, priority=10)
    """})
    assert (-torcia.tensor([1.0, 2.0])).tolist() == [-1.0, -2.0]
    assert sys.modules["fastneg_mod"].calls == [(2,)]
    assert torcia.device("cpu").backend.kernel_providers["neg"] == "fastneg"


# ---------------------------------------------------------------------------------------
# python -m torcia plugins
# ---------------------------------------------------------------------------------------


def test_listing_shows_each_plugin_its_status_and_what_it_provides(fakedev, monkeypatch,
                                                                   capsys):
    install(fakedev, "broken-dist", {"broken": "broken_mod"},
            {"broken_mod": "raise ImportError('needs libfoo')"})
    monkeypatch.setenv("TORCIA_DISABLE_PLUGINS", "nothing")
    assert cli.main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert "blocklist: nothing (TORCIA_DISABLE_PLUGINS)" in out
    assert "fakedev  [fake-dist 1.0]  loaded" in out
    assert "hooks: torcia_register_backends, torcia_register_kernels" in out
    assert "device backend (1): fakedev" in out
    assert "kernels on fakedev (1): neg" in out
    assert "broken  [broken-dist 1.0]  failed: ImportError: needs libfoo" in out
    assert f"core  [torcia-core {torcia.__version__}]  loaded" in out


def test_listing_imports_the_package_that_creates_a_registry(site, capsys):
    # the entry point loads widgetpkg._plugin; the registry lives in widgetpkg itself
    install(site, "widget-dist", {"widgets": "widgetpkg._plugin"}, {
        "widgetpkg/__init__": """
            from torcia import plugins
            from widgetpkg import hookspecs

            plugins.add_hookspecs(hookspecs)
            widgets = plugins.Registry("widget", "torcia_register_widgets")
        """,
        "widgetpkg/hookspecs": """
            import pluggy

            @pluggy.HookspecMarker("torcia")
            def torcia_register_widgets(registry):
                "Add widgets."
        """,
        "widgetpkg/_plugin": """
            import torcia

            @torcia.hookimpl
            def torcia_register_widgets(registry):
                registry.add("spinner", object())
        """,
    })
    cli.main(["plugins"])
    out = capsys.readouterr().out
    assert "widgets  [widget-dist 1.0]  loaded\n  hooks: torcia_register_widgets\n" \
           "  widget (1): spinner\n" in out


def test_listing_elides_long_groups_unless_verbose(site, capsys):
    cli.main(["plugins"])
    short = capsys.readouterr().out
    cli.main(["plugins", "-v"])
    full = capsys.readouterr().out
    assert "kernels on cpu" in short
    assert ", ..." in short
    assert ", ..." not in full
    assert len(full) > len(short)


def test_listing_as_json(fakedev, monkeypatch, capsys):
    monkeypatch.setenv("TORCIA_DISABLE_PLUGINS", "fakedev")
    assert cli.main(["plugins", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["torcia"] == torcia.__version__
    assert doc["policy"] == {"allow": {}, "block": {"fakedev": "TORCIA_DISABLE_PLUGINS"},
                             "lock": None, "strict": False, "locked_by": None}
    by_name = {p["name"]: p for p in doc["plugins"]}
    assert by_name["fakedev"]["status"] == "blocked"
    assert by_name["fakedev"]["reason"] == "blocked by TORCIA_DISABLE_PLUGINS"
    assert by_name["fakedev"]["distribution"] == "fake-dist"
    assert "cpu" in by_name["core"]["provides_by_kind"]["device backend"]
    assert "add" in by_name["core"]["provides_by_kind"]["kernels on cpu"]


def test_the_command_line_needs_a_command(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main([])
    assert exc.value.code == 2
    assert "plugins" in capsys.readouterr().err
