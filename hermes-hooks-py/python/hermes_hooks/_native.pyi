"""Types of the compiled module (see ``hermes_hooks``)."""

from os import PathLike
from typing import Any, Callable, Optional

ABI_VERSION: str
WORKER_ARG: str
__version__: str

class HookError(RuntimeError):
    """A hermes-hooks plugin or hook failed; the message names the plugin, the hook and
    what to do. Never a ``BaseException``: a host's ``except Exception`` catches it."""

class Callback:
    """One native callback, callable as a Hermes plugin's hook callback."""

    __name__: str
    hook: str

    def function(self) -> Callable[..., Any]:
        """The callback as a built-in function named ``<plugin>::<callback>``: the same
        call, without the copy of the keyword arguments that calling this object costs."""

    def __call__(self, **kwargs: Any) -> Any:
        """Fires this callback alone with the hook's keyword arguments and returns its
        answer in the shape a Hermes plugin returns (``None`` for no decision). Argument
        rewrites of ``pre_tool_call`` are written into ``kwargs["args"]``."""

class MiddlewareCallback:
    """One plugin's native middleware of one kind, callable as a Hermes middleware
    callback (``hermes_cli.middleware`` passes ``args`` or ``request``, the original beside
    it, the call's ids, and ``next_call`` to a wrapper)."""

    __name__: str

    def __call__(self, **kwargs: Any) -> Any:
        """A request rewrite answers ``{"args": ...}`` / ``{"request": ...}`` (with the
        trace's ``source``, ``reason``, ``name``) or ``None``; a ``tool_execution`` wrapper
        answers the tool's result, calling ``next_call`` at most once."""

class Hooks:
    """The hooks of a Hermes home, loaded as ``hermes`` loads them."""

    home: str

    def __init__(
        self,
        home: Optional[str | PathLike[str]] = None,
        *,
        native_only: bool = False,
        shell_hooks: bool = True,
        accept_shell_hooks: bool = False,
        gateway: bool = False,
    ) -> None:
        """Loads the plugins (and, unless ``native_only``, Python plugins and the shell
        hooks of ``config.yaml``; with ``gateway``, the gateway hooks) of ``home``, else of
        ``$HERMES_HOME``, else of ``~/.hermes``. Shell hooks run when allowlisted
        (``hermes hooks approve``), or all of them for this process with
        ``accept_shell_hooks``. Problems are in :meth:`report`; a home that is not a
        directory raises :class:`HookError`."""

    def fire(self, hook: str, /, **kwargs: Any) -> Any:
        """Fires ``hook`` at every callback and returns the combined answer, as one Hermes
        plugin would return it (``None`` when nothing decided)."""

    def emit(self, event: str, context: Optional[dict[str, Any]] = None) -> None:
        """Queues a gateway event for the gateway hooks subscribed to it; never blocks."""

    def callbacks(self, plugin: Optional[str] = None) -> list[tuple[str, int, str, Optional[str]]]:
        """``(hook, position, label, plugin)`` of every callback, in firing order."""

    def callback(self, hook: str, position: int) -> Callback:
        """The callable that fires only the callback at ``position`` of ``hook``."""

    def tools(self, plugin: Optional[str] = None) -> list[dict[str, Any]]:
        """``{name, toolset, schema, description, plugin}`` of every plugin tool."""

    def call_tool(
        self,
        name: str,
        args: Optional[dict[str, Any]] = None,
        *,
        dispatch: Optional[Callable[[str, dict[str, Any]], str]] = None,
        **context: Any,
    ) -> str:
        """Runs plugin tool ``name`` and returns its result text (``{"error": ...}`` JSON on
        failure); ``dispatch`` runs the tools the handler asks for in turn."""

    def commands(self, plugin: Optional[str] = None) -> list[dict[str, Any]]:
        """``{name, description, args_hint, plugin}`` of every plugin slash command."""

    def run_command(
        self,
        name: str,
        raw_args: str = "",
        *,
        dispatch: Optional[Callable[[str, dict[str, Any]], str]] = None,
    ) -> Optional[str]:
        """Runs ``/name raw_args``; a failing command raises :class:`HookError`."""

    def middleware(self, plugin: Optional[str] = None) -> list[dict[str, Any]]:
        """``{kind, plugin}`` of every middleware the plugins registered, in order."""

    def middleware_callback(self, kind: str, plugin: str) -> MiddlewareCallback:
        """``plugin``'s middleware of ``kind`` as one Hermes middleware callback."""

    def report(self) -> dict[str, Any]:
        """``{"plugins": [...], "problems": [...]}``: what loaded, and why not."""

def worker_main(args: list[str]) -> int: ...
def set_worker_program(program: str) -> bool: ...
