# Hermes's own modules, as published plugins import them (hermes-host, src/plugins/hermes_compat.py).
#
# Prepended to the worker scripts of Python plugins (python_driver.py) and gateway hooks
# (worker.py). Plugins written for Hermes find their home, their settings and the profile
# through Hermes's modules: `hermes_constants` (get_hermes_home, ...), `hermes_cli.config`
# (load_config, cfg_get, ...) and `hermes_cli.profiles` (get_active_profile_name). Where
# Hermes itself is installed in the interpreter, its modules win: this finder comes last on
# sys.meta_path. Otherwise these give the same answers from this home: HERMES_HOME, its
# config.yaml (handed over by the host as JSON, since the standard library reads no YAML),
# and the profile the home is.
import importlib.abc as _hc_abc
import importlib.util as _hc_util
import os as _hc_os
import sys as _hc_sys

# config.yaml as the host parsed it: taken out of the environment at once, so nothing the
# plugin starts inherits it.
_HC_CONFIG_JSON = _hc_os.environ.pop("HERMES_HOOKS_CONFIG_JSON", None)
_HC_CONFIG = None


def _hc_config():
    global _HC_CONFIG
    if _HC_CONFIG is None:
        import json
        data = None
        if _HC_CONFIG_JSON:
            try:
                data = json.loads(_HC_CONFIG_JSON)
            except ValueError:
                data = None
        if data is None:
            # A host that did not hand it over (or a file too large to): PyYAML if present.
            try:
                import yaml
                with open(_hc_home() / "config.yaml", encoding="utf-8") as f:
                    data = yaml.safe_load(f)
            except Exception:
                data = None
        _HC_CONFIG = data if isinstance(data, dict) else {}
    import copy
    return copy.deepcopy(_HC_CONFIG)


def _hc_nested(root, segments, default):
    """`root[s0][s1]...`, or `default` at the first step that is missing."""
    current = root
    for segment in segments:
        if not isinstance(current, dict) or segment not in current:
            return default
        current = current[segment]
    return current


def _hc_set(segments, value):
    """Records in this worker's copy of config.yaml what the host just wrote to the file."""
    _hc_config()
    node = _HC_CONFIG
    for segment in segments[:-1]:
        if not isinstance(node.get(segment), dict):
            node[segment] = {}
        node = node[segment]
    import copy
    node[segments[-1]] = copy.deepcopy(value)


def _hc_home():
    from pathlib import Path
    value = _hc_os.environ.get("HERMES_HOME", "").strip()
    return Path(value) if value else Path.home() / ".hermes"


def _hc_default_root():
    from pathlib import Path
    native = Path.home() / ".hermes"
    home = _hc_home()
    try:
        home.resolve().relative_to(native.resolve())
        return native
    except ValueError:
        return home.parent.parent if home.parent.name == "profiles" else home


def _hc_profile_name():
    # "default" for ~/.hermes, the name of a <root>/profiles/<name> home, else "custom".
    from pathlib import Path
    home = _hc_home()
    try:
        if home.resolve() == (Path.home() / ".hermes").resolve():
            return "default"
    except OSError:
        pass
    if home.parent.name == "profiles" and not home.name.startswith("."):
        return home.name
    return "custom"


def _hc_build_constants(m):
    m.get_hermes_home = _hc_home
    m.get_process_hermes_home = _hc_home
    m.get_default_hermes_root = lambda home=None: _hc_default_root()

    def display_hermes_home():
        home = str(_hc_home())
        user = str(__import__("pathlib").Path.home())
        return "~" + home[len(user):] if home.startswith(user + "/") else home

    def hermes_home_key(path=None):
        from pathlib import Path
        candidate = Path(path) if path is not None else _hc_home()
        return _hc_os.path.normcase(str(candidate.expanduser().resolve(strict=False)))

    def get_hermes_dir(new_subpath, old_name, *, home=None):
        base = home or _hc_home()
        old = base / old_name
        try:
            if old.is_dir() and any(old.iterdir()):
                return old
        except OSError:
            pass
        return base / new_subpath

    def profile_name_for_home(path):
        return _hc_profile_name() if path is not None else None

    m.display_hermes_home = display_hermes_home
    m.hermes_home_key = hermes_home_key
    m.get_hermes_dir = get_hermes_dir
    m.profile_name_for_home = profile_name_for_home


def _hc_build_cli(m):
    m.__path__ = []


def _hc_build_config(m):
    m.get_hermes_home = _hc_home
    m.get_process_hermes_home = _hc_home
    m.get_config_path = lambda: _hc_home() / "config.yaml"
    m.get_env_path = lambda: _hc_home() / ".env"
    m.load_config = _hc_config
    m.load_config_readonly = _hc_config
    m.read_raw_config = _hc_config
    m.is_managed = lambda: False

    def cfg_get(config, *keys, default=None):
        """`cfg_get(cfg, "a.b.c")` or `cfg_get(cfg, "a", "b", "c")`: the value, or `default`."""
        path = []
        for key in keys:
            path.extend(str(key).split(".") if isinstance(key, str) else [key])
        value = config
        for key in path:
            if isinstance(value, dict) and key in value:
                value = value[key]
            else:
                return default
        return default if value is None else value

    def save_config(*args, **kwargs):
        raise PermissionError(
            "hermes-hooks: plugins do not rewrite config.yaml; the user edits it (or "
            "`hermes plugins enable|disable`)"
        )

    m.cfg_get = cfg_get
    m.save_config = save_config


def _hc_build_profiles(m):
    m.get_active_profile_name = _hc_profile_name
    m.get_profiles_root = lambda: _hc_default_root() / "profiles"
    m.get_profile_dir = lambda name: (
        _hc_default_root() if name in (None, "", "default") else _hc_default_root() / "profiles" / name
    )


class _HermesModules(_hc_abc.MetaPathFinder, _hc_abc.Loader):
    MODULES = {
        "hermes_constants": _hc_build_constants,
        "hermes_cli": _hc_build_cli,
        "hermes_cli.config": _hc_build_config,
        "hermes_cli.profiles": _hc_build_profiles,
    }

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.MODULES:
            return None
        return _hc_util.spec_from_loader(fullname, self, is_package=(fullname == "hermes_cli"))

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        self.MODULES[module.__name__](module)


_hc_sys.meta_path.append(_HermesModules())
