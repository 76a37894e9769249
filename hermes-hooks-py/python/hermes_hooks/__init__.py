"""hermes-hooks for Python: this project's Rust plugins inside Hermes Agent, and its hooks
in any Python agent.

**In Hermes Agent.** ``pip install hermes-hooks`` into Hermes's environment and add
``hermes-hooks`` to ``plugins.enabled`` of ``config.yaml``: Hermes then loads this package
as a plugin, and its :func:`register` loads the Rust plugins of ``$HERMES_HOME/plugins/``
that ``plugins.enabled`` names, as ``hermes`` does (same manifests, ownership checks,
order, settings and isolation), and hands each native callback to Hermes's
``ctx.register_hook``. A Rust plugin directory holds a two-line ``__init__.py`` (written by
``hermes plugins install``) so that Hermes's own directory scan registers the plugin under
its own name instead of failing on it; see ``docs/plugin-guide.md``.

**In any Python agent.** :class:`Hooks` loads all three hook systems of a Hermes home
(plugins, shell hooks, gateway hooks)::

    import hermes_hooks

    hooks = hermes_hooks.Hooks("/home/me/.hermes")
    args = {"command": "rm -rf /"}
    answer = hooks.fire("pre_tool_call", tool_name="terminal", args=args)
    if answer and answer["action"] == "block":
        print(answer["message"])

Answers have the shapes Hermes plugins return (``{"action": "block", "message": ...}``,
``{"context": ...}``, a replacement ``str``, ...), and argument rewrites are written into
the ``args`` dict passed in, as Hermes hands its hooks the live dict.
"""

import os as _os
import shutil as _shutil
import sys as _sys

from . import _native
from ._native import ABI_VERSION, Callback, HookError, Hooks, __version__
from ._hermes import register, register_directory


def _name_our_worker() -> None:
    # Plugins with `isolation: process` run in a worker program; in a Python process that
    # is the package's `hermes-hooks-worker`, installed beside the interpreter.
    beside = _os.path.join(_os.path.dirname(_sys.executable), "hermes-hooks-worker")
    worker = beside if _os.access(beside, _os.X_OK) else _shutil.which("hermes-hooks-worker")
    if worker:
        _native.set_worker_program(worker)


_name_our_worker()

__all__ = [
    "ABI_VERSION",
    "Callback",
    "HookError",
    "Hooks",
    "__version__",
    "register",
    "register_directory",
]
