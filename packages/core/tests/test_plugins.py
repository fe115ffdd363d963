"""Plugin discovery, the allow/block policy and ``python -m torcia plugins``, in process.

Fake plugin distributions are a ``*.dist-info`` folder (METADATA + entry_points.txt) and a
module in a temporary directory put on ``sys.path``: ``importlib.metadata`` finds them as it
finds installed ones. ``test_plugins_install.py`` does the same with real installs.
"""

import importlib
import importlib.metadata
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
    plugins.reset()
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
    # likewise the registries of torcia's parts imported meanwhile (torcia.nn's losses)
    hooks = {name for m in plugins._state.spec_modules for name in vars(m)}
    kept = {key: r for key, r in plugins._state.registries.items()
            if key not in registries and getattr(r, "hook_name", None) in hooks}
    plugins._state.registries.clear()
    plugins._state.registries.update(registries, **kept)
    plugins.reset()
    plugins._policy.remove_guard()  # a lock a test put in force
    plugins._state.discovery_guard = False


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
    # an op no plugin of this repository overrides (torcia-cpu replaces "add" with its own)
    assert "kernel:atan2@cpu" in core.provides


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
    assert infos_by_name()["fakedev"].reason == f"blocked by config file {config}:2"
    with pytest.raises(RuntimeError, match=f"blocked by config file {config}:2"):
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
                             "lock": None, "lock_source": None, "strict": False,
                             "strict_source": None, "locked_by": None}
    by_name = {p["name"]: p for p in doc["plugins"]}
    assert by_name["fakedev"]["status"] == "blocked"
    assert by_name["fakedev"]["reason"] == "blocked by TORCIA_DISABLE_PLUGINS"
    assert by_name["fakedev"]["distribution"] == "fake-dist"
    assert "cpu" in by_name["core"]["provides_by_kind"]["device backend"]
    assert "atan2" in by_name["core"]["provides_by_kind"]["kernels on cpu"]


def test_the_command_line_needs_a_command(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main([])
    assert exc.value.code == 2
    assert "plugins" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------
# The plugin contract: containment (one plugin cannot break or hijack the others)
# ---------------------------------------------------------------------------------------


def _quiet(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", plugins.PluginWarning)
        return fn(*args)


def test_a_wrong_parameter_name_fails_that_plugin_only(fakedev):
    install(fakedev, "reg-dist", {"wrongparam": "wrongparam_mod"}, {"wrongparam_mod": """
        import torcia

        @torcia.hookimpl
        def torcia_register_kernels(reg):
            reg.add("neg", "cpu", None, priority=10)
    """})
    with pytest.warns(plugins.PluginWarning, match="(?s)'wrongparam'.*torcia_register_kernels"
                                                   ".*reg"):
        assert torcia.ones(2).tolist() == [1.0, 1.0]
    assert infos_by_name()["wrongparam"].status == "failed"
    assert (-torcia.tensor([1.0], device="fakedev")).tolist() == [-1.0]
    assert cli.main(["plugins"]) == 0


def test_a_hook_validated_late_fails_that_plugin_only(site):
    # the specification arrives after discovery (a part imported later): pluggy would
    # raise PluginValidationError for everyone at that moment
    install(site, "late-dist", {"late": "late_mod"}, {"late_mod": """
        import torcia

        @torcia.hookimpl
        def torcia_register_gadgets(registr):
            registr.add("g", object())
    """, "gadget_specs": """
        import pluggy

        @pluggy.HookspecMarker("torcia")
        def torcia_register_gadgets(registry):
            "Add gadgets."
    """})
    plugins.manager()
    import gadget_specs

    with pytest.warns(plugins.PluginWarning, match="'late'.*takes registr"):
        plugins.add_hookspecs(gadget_specs)
    assert plugins._state.infos["late"].status == "failed"
    assert plugins.manager().get_plugin("late") is None
    assert (torcia.ones(2) + 1).tolist() == [2.0, 2.0]


def test_a_misspelled_hook_name_is_reported(site):
    install(site, "typo-dist", {"typo": "typo_mod"}, {"typo_mod": """
        import torcia

        @torcia.hookimpl
        def torcia_register_kernel(registry):
            pass
    """})
    with pytest.warns(plugins.PluginWarning, match="torcia_register_kernel, which no part "
                                                   "defines \\(did you mean "
                                                   "torcia_register_kernels\\?\\)"):
        plugins.manager()
    assert infos_by_name()["typo"].status == "failed"


def test_a_kernel_for_a_misspelled_device_fails_the_plugin_and_is_rolled_back(site):
    install(site, "caps-dist", {"caps": "caps_mod"}, {"caps_mod": """
        import numpy as np
        import torcia

        @torcia.hookimpl
        def torcia_register_kernels(registry):
            registry.add("floor", "cpu", lambda a: np.floor(a) * 0, priority=10)
            registry.add("floor", "CPU", np.floor)
    """})
    with pytest.warns(plugins.PluginWarning, match="device type 'CPU'.*lower case: 'cpu'"):
        assert torcia.tensor([1.5, 2.5]).floor().tolist() == [1.0, 2.0]
    info = infos_by_name()["caps"]
    assert info.status == "failed" and info.provides == []
    # (floor: an op no plugin of this repository overrides, so its provider is core)
    assert torcia.device("cpu").backend.kernel_providers["floor"] == "core"


def test_a_hook_raising_after_registering_is_rolled_back(site):
    install(site, "half-dist", {"half": "half_mod"}, {"half_mod": """
        import numpy as np
        import torcia

        @torcia.hookimpl
        def torcia_register_kernels(registry):
            registry.add("floor", "cpu", lambda a: np.zeros_like(a), priority=10)
            raise RuntimeError("second half missing")
    """})
    with pytest.warns(plugins.PluginWarning, match="'half'.*second half missing"):
        assert torcia.tensor([3.5]).floor().tolist() == [3.0]
    assert torcia.device("cpu").backend.kernel_providers["floor"] == "core"


def test_calling_torcia_from_a_registration_hook_fails_instead_of_hanging(site):
    import threading

    install(site, "reentry-dist", {"reentry": "reentry_mod"}, {"reentry_mod": """
        import torcia

        @torcia.hookimpl
        def torcia_register_kernels(registry):
            torcia.ones(2)
    """})
    result = []

    def use():
        result.append(_quiet(lambda: (torcia.ones(2) * 2).tolist()))

    worker = threading.Thread(target=use, daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "a registration hook calling torcia hung"
    assert result == [[2.0, 2.0]]
    info = infos_by_name()["reentry"]
    assert info.status == "failed" and "PluginReentryError" in info.reason


def test_a_kernel_returning_the_wrong_shape_is_an_error(site):
    install(site, "badadd-dist", {"badadd": "badadd_mod"}, {"badadd_mod": """
        import numpy as np
        import torcia

        @torcia.hookimpl
        def torcia_register_kernels(registry):
            registry.add("add", "cpu", lambda a, b, **kw: (a + b)[:1], priority=10)
    """})
    with pytest.raises(RuntimeError, match=r"'add' kernel of plugin 'badadd' on 'cpu' "
                                           r"returned shape \(1,\) of float32 where torcia "
                                           r"expects shape \(3,\) of float32"):
        torcia.ones(3) + torcia.ones(3)


def test_built_in_names_win_a_clash(site):
    install(site, "hijack-dist", {"hijack": "hijack_mod"}, {"hijack_mod": """
        import numpy as np
        import torcia
        from torcia.backend import Backend

        @torcia.hookimpl
        def torcia_register_backends(registry):
            registry.add(Backend("cpu", np))  # core's name
            registry.add(Backend("hijackdev", np))
    """})
    with pytest.warns(plugins.PluginWarning, match=r"device backend 'cpu' of plugin 'hijack' "
                                                   r"\(hijack-dist\) was refused: plugin "
                                                   r"'core' \(torcia-core\)"):
        assert torcia.device("cpu").backend.plugin == "core"
    # the rest of the plugin works, and its listing says what was refused
    assert torcia.device("hijackdev").backend.plugin == "hijack"
    info = infos_by_name()["hijack"]
    assert info.status == "loaded"
    assert info.notes == ["device backend 'cpu' refused: already registered by core "
                          "(torcia-core)"]


def test_two_distributions_with_one_plugin_name_are_reported(fakedev):
    install(fakedev, "other-dist", {"fakedev": "other_mod"}, {"other_mod": "X = 1"})
    with pytest.warns(plugins.PluginWarning, match="plugin name 'fakedev' is also used by "):
        plugins.manager()
    infos = infos_by_name()
    kept = infos["fakedev"].distribution
    other = ({"fake-dist", "other-dist"} - {kept}).pop()
    assert infos[f"{other}:fakedev"].status == "refused"
    assert infos[f"{other}:fakedev"].reason == (f"plugin name 'fakedev' is also used by "
                                                f"{kept}; the first one found is kept")


# ---------------------------------------------------------------------------------------
# Identity and policy
# ---------------------------------------------------------------------------------------


def test_the_allowlist_names_distributions_not_entry_points(site, monkeypatch):
    # a distribution cannot pass an allowlist by naming its entry point after a real plugin
    install(site, "spoof-dist", {"torcia-cpu": "spoof_mod", "lion": "spoof_mod"},
            {"spoof_mod": "raise SystemExit('spoof ran')"})
    monkeypatch.setenv("TORCIA_PLUGINS", "torcia-cpu,lion-dist")
    infos = infos_by_name()
    assert infos["torcia-cpu"].status == "blocked"
    assert infos["lion"].status == "blocked"
    assert "spoof_mod" not in sys.modules


def test_an_allowlist_naming_an_entry_point_says_which_distribution_to_name(fakedev,
                                                                          monkeypatch):
    monkeypatch.setenv("TORCIA_PLUGINS", "fakedev")
    with pytest.warns(plugins.PluginWarning, match="allowlist entry 'fakedev' "
                                                   r"\(TORCIA_PLUGINS\) is an entry-point "
                                                   "name; allowlists name distributions: "
                                                   "fake-dist"):
        plugins.manager()
    assert infos_by_name()["fakedev"].status == "blocked"


def test_a_third_party_plugin_cannot_take_the_name_of_one_of_torcias(site):
    if not importlib.metadata.entry_points(group="torcia", name="cpu"):
        pytest.skip("torcia-cpu is not installed")
    # found first on sys.path, and still the one refused
    install(site, "spoof-dist", {"cpu": "spoof_mod"},
            {"spoof_mod": "raise SystemExit('spoof ran')"})
    infos = infos_by_name()
    assert infos["cpu"].distribution == "torcia-cpu" and infos["cpu"].status == "loaded"
    assert infos["spoof-dist:cpu"].status == "refused"
    assert "spoof_mod" not in sys.modules


def test_metadata_alone_does_not_make_a_part(site, monkeypatch):
    install(site, "torcia-nn", {"fakenn": "fakenn_mod"}, {"fakenn_mod": "X = 1"})
    monkeypatch.setenv("TORCIA_PLUGINS", "torcia-cpu")
    info = infos_by_name()["fakenn"]
    assert not info.own
    assert info.status == "blocked" and info.reason == "not in the allowlist (TORCIA_PLUGINS)"
    assert infos_by_name()["core"].own


@pytest.mark.parametrize("entry", ["torcia_evil", "Torcia.Evil", "TORCIA-EVIL"])
def test_names_are_normalised(site, monkeypatch, entry):
    install(site, "torcia-evil", {"evil": "evil_mod"}, {"evil_mod": "X = 1"})
    monkeypatch.setenv("TORCIA_DISABLE_PLUGINS", entry)
    assert infos_by_name()["evil"].status == "blocked"
    assert infos_by_name()["evil"].distribution == "torcia-evil"


@pytest.mark.parametrize("text, message", [
    ("[plugins]\nallowed = ['x']\n", r":2: unknown key 'allowed' in \[plugins\] \(did you "
                                     r"mean 'allow'\?\)"),
    ("\n[plugin]\nallow = ['x']\n", r":2: unknown section \[plugin\]"),
    ("[plugins]\nblock = 'evil'\n", r":2: block must be a list of strings, got str 'evil'"),
    ("plugins = 5\n", r":1: plugins must be a table"),
    ("[plugins]\nstrict = 'yes'\n", r":2: strict must be bool"),
    ("[plugins]\nlocked = true\n", r":2: unknown key 'locked'"),  # system config only
])
def test_config_mistakes_are_errors_naming_the_line(site, monkeypatch, text, message):
    config = site / "config.toml"
    config.write_text(text)
    monkeypatch.setenv("TORCIA_CONFIG", str(config))
    with pytest.raises(plugins.PluginConfigError, match=f"{config}{message}"):
        plugins.manager()
    assert cli.main(["plugins"]) == 1


def test_a_missing_config_named_by_the_environment_is_an_error(site, monkeypatch):
    monkeypatch.setenv("TORCIA_CONFIG", str(site / "nowhere.toml"))
    with pytest.raises(plugins.PluginConfigError, match="nowhere.toml does not exist"):
        torcia.ones(1)


def test_the_environment_narrows_the_config_allowlist_never_widens_it(fakedev, monkeypatch):
    config = fakedev / "config.toml"
    config.write_text('[plugins]\nallow = ["other-dist"]\n')
    monkeypatch.setenv("TORCIA_CONFIG", str(config))
    monkeypatch.setenv("TORCIA_PLUGINS", "fake-dist")
    info = infos_by_name()["fakedev"]
    assert info.status == "blocked" and f"config file {config}" in info.reason


def test_a_locked_system_config_cannot_be_widened(fakedev, monkeypatch):
    system = fakedev / "system.toml"
    system.write_text('[plugins]\nallow = ["torcia-cpu"]\nstrict = false\nlocked = true\n')
    monkeypatch.setattr(plugins._policy, "SYSTEM_CONFIGS", (system,))
    monkeypatch.setenv("TORCIA_PLUGINS", "fake-dist")
    info = infos_by_name()["fakedev"]
    assert info.status == "blocked" and f"system config {system}" in info.reason
    # nor can the environment swap the user config or the lock
    monkeypatch.setenv("TORCIA_PLUGIN_LOCK", str(fakedev / "mine.lock"))
    with pytest.raises(plugins.PluginConfigError, match=f"locked by the system config "
                                                        f"{system}:4"):
        plugins.Policy()
    monkeypatch.delenv("TORCIA_PLUGIN_LOCK")
    monkeypatch.setenv("TORCIA_CONFIG", str(fakedev / "user.toml"))
    with pytest.raises(plugins.PluginConfigError, match="TORCIA_CONFIG is set, but the "
                                                        "plugin policy is locked"):
        plugins.Policy()


def test_strict_mode_turns_a_failed_plugin_into_an_error(fakedev, monkeypatch):
    install(fakedev, "broken-dist", {"broken": "broken_mod"},
            {"broken_mod": "raise ImportError('needs libfoo')"})
    monkeypatch.setenv("TORCIA_STRICT_PLUGINS", "1")
    with pytest.raises(plugins.PluginError, match="'broken'.*needs libfoo.*strict mode, set "
                                                  "by TORCIA_STRICT_PLUGINS"):
        torcia.ones(1)


# ---------------------------------------------------------------------------------------
# Pinning: the lock file and plugins --check
# ---------------------------------------------------------------------------------------


def _record(site, dist, modules):
    """Write the RECORD of ``dist`` (hashes of its modules and metadata), as pip does."""
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    lines = []
    for path in [site / f"{m}.py" for m in modules] + [info / "METADATA",
                                                       info / "entry_points.txt"]:
        digest = plugins._policy.sha256(path.read_bytes())
        lines.append(f"{path.relative_to(site)},{digest},{path.stat().st_size}")
    lines.append(f"{(info / 'RECORD').relative_to(site)},,")
    (info / "RECORD").write_text("\n".join(lines) + "\n")


def _locked(site, monkeypatch):
    # only the fake plugin and core take part: the real installed plugins are not locked
    install(site, "pinned-dist", {"pinned": "pinned_mod"}, {"pinned_mod": """
        import torcia

        RAN = True

        @torcia.hookimpl
        def torcia_register_kernels(registry):
            pass
    """})
    _record(site, "pinned-dist", ["pinned_mod"])
    lock = site / "plugins.lock"
    config = site / "config.toml"
    config.write_text('[plugins]\nallow = ["pinned-dist"]\nlock = "plugins.lock"\n')
    monkeypatch.setenv("TORCIA_CONFIG", str(config))
    # lock the fake one alone: this checkout's editable installs are not pristine
    # (patched in the module that looks them up for discovery and the lock)
    monkeypatch.setattr(plugins._identity, "is_own", lambda dist, shadowed=False: False)
    monkeypatch.setattr(plugins._identity, "core_dist", lambda: None)
    assert cli.main(["plugins", "lock", str(lock), "--in-process"]) == 0
    doc = json.loads(lock.read_text())
    assert [d["distribution"] for d in doc["distributions"]] == ["pinned-dist"]
    assert set(doc["distributions"][0]["files"]) == {
        "pinned_mod.py", "pinned_dist-1.0.dist-info/METADATA",
        "pinned_dist-1.0.dist-info/entry_points.txt"}
    plugins.reset()
    return lock


def test_the_lock_admits_the_locked_plugin_and_check_passes(site, monkeypatch, capsys):
    _locked(site, monkeypatch)
    assert infos_by_name()["pinned"].status == "loaded"
    capsys.readouterr()
    assert cli.main(["plugins", "--check", "--in-process"]) == 0


def test_the_lock_refuses_a_modified_file_before_importing_it(site, monkeypatch, capsys):
    _locked(site, monkeypatch)
    (site / "pinned_mod.py").write_text("RAN = 'tampered'\n")
    sys.modules.pop("pinned_mod", None)
    with pytest.warns(plugins.PluginWarning, match="pinned_mod.py was modified after locking"):
        info = plugins.plugin_infos() and plugins._state.infos["pinned"]
    assert info.status == "refused"
    assert "pinned_mod" not in sys.modules
    capsys.readouterr()
    # refused (1), and a locked plugin that does not load (8)
    assert cli.main(["plugins", "--check", "--in-process"]) == 1 + 8
    err = capsys.readouterr().err
    assert "[plugin] pinned-dist:pinned: refused" in err
    assert "[lock] pinned-dist:pinned: the locked plugin is not loaded" in err


def test_the_lock_refuses_another_version(site, monkeypatch):
    _locked(site, monkeypatch)
    meta = site / "pinned_dist-1.0.dist-info" / "METADATA"
    meta.write_text(meta.read_text().replace("Version: 1.0", "Version: 1.1"))
    info = _quiet(infos_by_name)["pinned"]
    assert info.status == "refused" and "version 1.1 differs from the locked 1.0" in info.reason


def test_check_fails_without_a_lock(site, capsys):
    assert cli.main(["plugins", "--check", "--in-process"]) == 4
    assert "no plugin lock in force" in capsys.readouterr().err


def test_the_json_listing_names_module_file_and_hash(fakedev, capsys):
    assert cli.main(["plugins", "--json"]) == 0
    entry = {p["name"]: p for p in json.loads(capsys.readouterr().out)["plugins"]}["fakedev"]
    assert entry["module"] == "fakedev_mod"
    assert entry["file"] == str(fakedev / "fakedev_mod.py")
    import hashlib

    assert entry["sha256"] == hashlib.sha256((fakedev / "fakedev_mod.py").read_bytes()
                                             ).hexdigest()


# ---------------------------------------------------------------------------------------
# A part that is not installed
# ---------------------------------------------------------------------------------------


@pytest.fixture
def absent_part(monkeypatch):
    """``torcia.gadgets``: a part of distribution torcia-gadgets, not installed."""
    monkeypatch.setitem(torcia._PARTS, "gadgets", "torcia-gadgets")
    monkeypatch.delitem(sys.modules, "torcia.gadgets", raising=False)
    return "torcia.gadgets"


def test_importing_an_absent_part_says_what_works(absent_part):
    with pytest.raises(ModuleNotFoundError) as err:
        importlib.import_module(absent_part)
    message = str(err.value)
    assert "part of the torcia-gadgets distribution, which is not installed" in message
    assert "--find-links WHEELHOUSE torcia-gadgets" in message
    assert "python tools/install_parts.py gadgets" in message
    assert "not published on PyPI" in message
    assert err.value.name == "torcia.gadgets"


def test_asking_for_an_absent_part_answers_no(absent_part):
    import importlib.util

    assert importlib.util.find_spec(absent_part) is None
    assert not hasattr(torcia, "gadgets")
    with pytest.raises(AttributeError, match="torcia-gadgets distribution"):
        torcia.gadgets  # noqa: B018
    # an installed part still answers yes
    assert importlib.util.find_spec("torcia.amp") is not None


def test_a_device_whose_plugin_failed_to_load_names_the_failure(site):
    install(site, "brokendev-dist", {"brokendev": "brokendev_mod"},
            {"brokendev_mod": "raise ImportError('libaccel.so: cannot open shared object')"})
    with pytest.raises(RuntimeError) as err:
        _quiet(lambda: torcia.tensor([1.0], device="brokendev"))
    assert str(err.value).startswith(
        "device backend 'brokendev' is provided by plugin 'brokendev' (brokendev-dist), which "
        "failed to load: ImportError: libaccel.so: cannot open shared object")


# ---- names lent across the arrows (torcia_register_names) -------------------------------


def test_a_lent_name_comes_from_the_part_that_owns_it(site):
    pytest.importorskip("torcia.nn")
    pytest.importorskip("torcia.compiler")
    functional = plugins.lent("torcia.nn.functional", "torcia-nn")
    assert functional is sys.modules["torcia.nn.functional"]
    assert torcia.compile is plugins.lent("torcia.compile", "torcia-compiler")


def test_a_name_lent_by_a_missing_part_names_the_distribution(site):
    with pytest.raises(ModuleNotFoundError,
                       match="torcia.gadget is part of the torcia-gadgets distribution, which "
                             "is not installed; install torcia-gadgets"):
        plugins.lent("torcia.gadget", "torcia-gadgets")


def test_a_name_lent_by_a_blocked_plugin_says_so(site, monkeypatch):
    pytest.importorskip("torcia.nn")  # blocked, as opposed to missing
    monkeypatch.setenv("TORCIA_DISABLE_PLUGINS", "nn")
    plugins.reset()
    with pytest.raises(ModuleNotFoundError, match="plugin 'nn' .torcia-nn., which is blocked"):
        torcia.kl_div(torcia.zeros(2), torcia.zeros(2))
