"""Hermes Agent's side of the package: registering native callbacks with Hermes's
``PluginContext``.

Hermes loads plugins in this order: directories of ``$HERMES_HOME/plugins/``, then pip
entry points. A Rust plugin's directory holds an ``__init__.py`` that calls
:func:`register_directory`, so Hermes registers that plugin under its own name (and
``hermes plugins list`` shows its hooks there); the ``hermes-hooks`` entry point
(:func:`register`) then registers every enabled Rust plugin no directory registered. One
load serves both: the plugins load once per process and Hermes home.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from . import _native

log = logging.getLogger("hermes_hooks")

_lock = threading.Lock()
_loaded: dict[str, _native.Hooks] = {}
# (home, plugin name) of every plugin whose callbacks Hermes has already.
_registered: set[tuple[str, str]] = set()


def _hermes_home() -> str:
    """The home Hermes uses: its own answer when it can give one."""
    try:
        from hermes_constants import get_hermes_home

        return str(get_hermes_home())
    except Exception:
        return os.environ.get("HERMES_HOME") or os.path.expanduser("~/.hermes")


def _native_hooks(home: str) -> _native.Hooks:
    with _lock:
        hooks = _loaded.get(home)
        if hooks is None:
            hooks = _native.Hooks(home, native_only=True)
            for problem in hooks.report()["problems"]:
                log.warning("%s: %s", problem["file"], problem["message"])
            _loaded[home] = hooks
        return hooks


def _known_hooks() -> set[str] | None:
    try:
        from hermes_cli.plugins import VALID_HOOKS

        return set(VALID_HOOKS)
    except Exception:
        return None


def _register(ctx: Any, home: str, hooks: _native.Hooks, only: str | None) -> int:
    known = _known_hooks()
    count = 0
    for plugin in hooks.report()["plugins"]:
        name = plugin["name"]
        if not plugin["loaded"] or plugin["kind"] != "native":
            continue
        if only is not None and name != only:
            continue
        with _lock:
            if (home, name) in _registered:
                continue
            _registered.add((home, name))
        for hook, position, label, _ in hooks.callbacks(name):
            if known is not None and hook not in known:
                log.info(
                    "%s: Hermes Agent does not fire '%s'; the callback runs in hermes only",
                    label,
                    hook,
                )
                continue
            ctx.register_hook(hook, hooks.callback(hook, position))
            count += 1
    return count


def register(ctx: Any) -> None:
    """The ``hermes-hooks`` entry point: registers the callbacks of every enabled Rust
    plugin of the Hermes home that its own directory did not register already."""
    home = _hermes_home()
    _register(ctx, home, _native_hooks(home), None)


def register_directory(ctx: Any) -> None:
    """What a Rust plugin directory's ``__init__.py`` calls: registers that plugin's
    callbacks with Hermes, under the plugin's own name."""
    manifest = getattr(ctx, "manifest", None)
    name = getattr(manifest, "name", None)
    if not name:
        raise _native.HookError(
            "register_directory(ctx) needs Hermes Agent's plugin context (ctx.manifest.name)"
        )
    home = _hermes_home()
    hooks = _native_hooks(home)
    for plugin in hooks.report()["plugins"]:
        if plugin["name"] == name and not plugin["loaded"]:
            raise _native.HookError(f"Rust plugin '{name}' did not load: {plugin['error']}")
    _register(ctx, home, hooks, name)
