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
# The functions handed to Hermes, per (home, plugin name). A plugin is registered once per
# discovery sweep (its directory's __init__.py and the entry point may both ask); a forced
# rediscovery clears Hermes's hooks, and then registers it again.
_handed: dict[tuple[str, str], list[Any]] = {}


def _has(ctx: Any, key: tuple[str, str]) -> bool:
    """Whether Hermes holds the plugin's callbacks already."""
    handed = _handed.get(key)
    if not handed:
        return False
    manager = getattr(ctx, "_manager", None)
    tables = [getattr(manager, "_hooks", None), getattr(manager, "_middleware", None)]
    tables = [t for t in tables if isinstance(t, dict)]
    if not tables:
        return True  # no way to look: once per process
    return any(fn in callbacks for t in tables for callbacks in t.values() for fn in handed)


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


def _text(value: Any) -> str:
    value = getattr(value, "value", value)  # an enum member (Platform.TELEGRAM)
    return "" if value is None else str(value)


def _gateway_fields(event: Any) -> dict[str, Any]:
    """The fields of ``pre_gateway_dispatch`` from Hermes's ``MessageEvent``."""
    source = getattr(event, "source", None)
    platform = _text(getattr(source, "platform", ""))
    chat_id = _text(getattr(source, "chat_id", ""))
    user_name = getattr(source, "user_name", None)
    message_id = getattr(event, "message_id", None)
    return {
        "platform": platform,
        "chat_id": chat_id,
        "user_id": _text(getattr(source, "user_id", "")),
        "text": _text(getattr(event, "text", "")),
        "message_id": None if message_id is None else str(message_id),
        "session_key": f"{platform}:{chat_id}",
        "chat_type": _text(getattr(source, "chat_type", "")) or "dm",
        "user_name": None if user_name is None else str(user_name),
    }


def _for_hermes(hook: str, callback: _native.Callback) -> Any:
    """What Hermes calls. Hermes hands ``pre_gateway_dispatch`` its message event and the
    gateway itself; a native callback reads the message's fields instead (the gateway's
    own objects cannot cross to native code)."""
    if hook != "pre_gateway_dispatch":
        return callback.function()

    def pre_gateway_dispatch(event: Any = None, **_objects: Any) -> Any:
        return callback(**_gateway_fields(event))

    pre_gateway_dispatch.__name__ = callback.__name__
    pre_gateway_dispatch.__qualname__ = callback.__name__
    return pre_gateway_dispatch


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
            if _has(ctx, (home, name)):
                continue
            handed = _handed[(home, name)] = []
        for hook, position, label, _ in hooks.callbacks(name):
            if known is not None and hook not in known:
                log.info(
                    "%s: Hermes Agent does not fire '%s'; the callback runs in hermes only",
                    label,
                    hook,
                )
                continue
            function = _for_hermes(hook, hooks.callback(hook, position))
            ctx.register_hook(hook, function)
            handed.append(function)
            count += 1
        handed.extend(_middleware(ctx, hooks, name))
        _offer(ctx, hooks, name)
    return count


def _middleware(ctx: Any, hooks: _native.Hooks, plugin: str) -> list[Any]:
    """The plugin's request rewrites and tool wrappers, in its place in Hermes's own chain.
    ``llm_execution`` wrappers are not offered: Hermes's ``next_call`` there returns the
    provider's response object, which native code cannot take."""
    register = getattr(ctx, "register_middleware", None)
    handed = []
    for entry in hooks.middleware(plugin):
        kind = entry["kind"]
        if register is None or kind == "llm_execution":
            log.info(
                "%s: its %s middleware runs in hermes only, not in this Hermes Agent",
                plugin,
                kind,
            )
            continue
        callback = hooks.middleware_callback(kind, plugin)
        register(kind, callback)
        handed.append(callback)
    return handed


def _offer(ctx: Any, hooks: _native.Hooks, plugin: str) -> None:
    """The plugin's tools and slash commands, registered as a Python plugin's are: a tool
    runs through Hermes's own guards, a command in its CLI and gateway sessions; either may
    run other tools through Hermes's ``ctx.dispatch_tool``."""
    dispatch = getattr(ctx, "dispatch_tool", None)
    for tool in hooks.tools(plugin):

        def handler(args: Any = None, _name: str = tool["name"], **context: Any) -> str:
            ids = {k: v for k, v in context.items() if isinstance(v, (str, int, float, bool))}
            return hooks.call_tool(_name, args or {}, dispatch=dispatch, **ids)

        try:
            ctx.register_tool(
                name=tool["name"],
                toolset=tool["toolset"],
                schema=tool["schema"],
                handler=handler,
                description=tool["description"],
            )
        except Exception as exc:  # a name Hermes refuses (a built-in tool's)
            log.warning("%s: tool '%s' not registered in Hermes Agent: %s", plugin, tool["name"], exc)
    for command in hooks.commands(plugin):

        def run(raw_args: str = "", _name: str = command["name"]) -> str | None:
            return hooks.run_command(_name, raw_args or "", dispatch=dispatch)

        ctx.register_command(
            command["name"],
            run,
            description=command["description"],
            args_hint=command["args_hint"],
        )


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
