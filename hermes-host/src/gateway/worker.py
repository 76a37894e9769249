# The long-lived Python worker of one gateway hook (hermes-host, src/gateway/worker.py).
#
# Started as `python3 -I -B -u -c <this file> <handler.py> <hook name>` in the hook directory.
# Protocol: JSON lines. The real stdout carries only protocol lines; fd 1 and sys.stdout are
# pointed at stderr before the handler is imported, so a handler's print() (or a child
# process it starts) cannot corrupt the protocol. Stdin carries only the host's lines; fd 0
# and sys.stdin are /dev/null for the handler.
#
# 1. load, as the reference's HookRegistry does: import handler.py as module
#    `hermes_hook_<name>`, then one line:
#      {"loaded": true} | {"skip": "no 'handle' function found"} | {"load_error": "<str(exc)>"}
# 2. then per request line {"event_type": "...", "context": {...}} one response line:
#      {"ok": true} | {"error": "<str(exc)>"}
#    handle(event_type, context) may be sync or `async def`: a returned coroutine is run on
#    one event loop that lives as long as the worker.
# 3. at any time, from any thread of the handler:
#      {"log": {"level": "INFO", "logger": "hooks.boot-md", "message": "..."}}
#        a `logging` record (the root logger is set to INFO and sends every record here);
#      {"call": "<capability>", "id": n, "args": {...}}
#        a call to the gateway (see the compatibility modules below), answered on stdin
#        by {"reply": n, "ok": <answer>} or {"reply": n, "error": "<message>"}.
#    A thread on stdin hands replies to their callers and requests to the main loop, so a
#    handler may call the gateway from handle() itself or from a thread it started.
# 4. {"shutdown": true}, or EOF on stdin, ends the worker once every thread the handler
#    started has finished (daemon threads too: the seed's BOOT.md hook runs its agent in
#    one). After EOF, calls fail at once. The host kills the worker at its deadline.
#
# Compatibility modules, found only when nothing on the path provides them, so a handler
# written for the Python Hermes gateway runs unchanged:
#   gateway.run: _resolve_gateway_model() -> the gateway's model name;
#                _resolve_runtime_agent_kwargs() -> provider keyword arguments for AIAgent;
#   run_agent:   AIAgent(model=None, **kwargs).run_conversation(message) -> the host runs
#                one agent turn (its tools and hooks, platform `gateway` by default) and
#                returns {"final_response": ..., "messages": [...], ...}.
import asyncio
import importlib.abc
import importlib.util
import inspect
import itertools
import json
import logging
import os
import queue
import sys
import threading


def _protocol_streams():
    out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    inp = os.fdopen(os.dup(0), "rb")
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdout = sys.stderr
    sys.stdin = open(os.devnull, "r")
    return inp, out


_WRITE = threading.Lock()


def _send(out, message):
    line = json.dumps(message) + "\n"
    with _WRITE:
        out.write(line)
        out.flush()


class _Host:
    """The gateway at the other end of the protocol."""

    def __init__(self, inp, out):
        self.inp = inp
        self.out = out
        self.requests = queue.Queue()
        self.pending = {}
        self.lock = threading.Lock()
        self.ids = itertools.count(1)
        self.closed = False

    def read_forever(self):
        for raw in iter(self.inp.readline, b""):
            if not raw.strip():
                continue
            try:
                message = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(message, dict):
                continue
            if "reply" in message:
                with self.lock:
                    waiter = self.pending.pop(message["reply"], None)
                if waiter is not None:
                    waiter[1] = message
                    waiter[0].set()
            else:
                self.requests.put(message)
        with self.lock:
            self.closed = True
            waiters = list(self.pending.values())
            self.pending.clear()
        for waiter in waiters:
            waiter[0].set()
        self.requests.put(None)

    def call(self, capability, args):
        waiter = [threading.Event(), None]
        with self.lock:
            if self.closed:
                raise RuntimeError(f"{capability}: the gateway has stopped this hook's worker")
            call_id = next(self.ids)
            self.pending[call_id] = waiter
        _send(self.out, {"call": capability, "id": call_id, "args": args})
        waiter[0].wait()
        reply = waiter[1]
        if reply is None:
            raise RuntimeError(f"{capability}: the gateway stopped this hook's worker before answering")
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return reply.get("ok")


_HOST = None


class _LogToHost(logging.Handler):
    def __init__(self, out):
        super().__init__(logging.NOTSET)
        self.out = out

    def emit(self, record):
        try:
            message = record.getMessage()
            if record.exc_info:
                message += "\n" + logging.Formatter().formatException(record.exc_info)
            _send(self.out, {"log": {"level": record.levelname, "logger": record.name, "message": message}})
        except Exception:
            self.handleError(record)


def _build_gateway(module):
    module.__doc__ = "hermes-hooks compatibility package for handlers written for the Python gateway."


def _build_gateway_run(module):
    def _resolve_gateway_model():
        """The model the gateway is configured with."""
        return (_HOST.call("gateway.model", {}) or {}).get("model")

    def _resolve_runtime_agent_kwargs():
        """Provider keyword arguments for AIAgent, as the gateway resolves them."""
        return dict(_HOST.call("gateway.runtime", {}) or {})

    module._resolve_gateway_model = _resolve_gateway_model
    module._resolve_runtime_agent_kwargs = _resolve_runtime_agent_kwargs


def _build_run_agent(module):
    class AIAgent:
        """A one-shot agent run by the gateway that loaded this hook."""

        def __init__(self, model=None, max_iterations=90, platform=None, **kwargs):
            self.model = model
            self.max_iterations = max_iterations
            self.platform = platform or "gateway"
            self.options = kwargs

        def run_conversation(self, user_message, system_message=None, conversation_history=None, task_id=None, **kwargs):
            args = {"prompt": user_message, "platform": self.platform, "max_iterations": self.max_iterations}
            if self.model:
                args["model"] = self.model
            return _HOST.call("agent.run_once", args)

        def chat(self, message):
            return (self.run_conversation(message) or {}).get("final_response", "")

    module.AIAgent = AIAgent


class _Compat(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    MODULES = {"gateway": _build_gateway, "gateway.run": _build_gateway_run, "run_agent": _build_run_agent}

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.MODULES:
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=(fullname == "gateway"))

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        self.MODULES[module.__name__](module)


def _finish_threads(reader):
    me = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not me and thread is not reader:
            thread.join()


def _load(path, name):
    module_name = f"hermes_hook_{name}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return getattr(module, "handle", None)


def main():
    global _HOST
    path, name = sys.argv[1], sys.argv[2]
    # Started with -I: the hook's directory is the one addition to the path, last.
    sys.path.append(os.path.dirname(os.path.abspath(path)))
    # -I ignores PYTHONPATH; its absolute entries are the operator's choice and go first.
    entries = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    sys.path[0:0] = [e for e in entries if os.path.isabs(e)]
    inp, out = _protocol_streams()
    _HOST = _Host(inp, out)
    root = logging.getLogger()
    root.addHandler(_LogToHost(out))
    root.setLevel(logging.INFO)
    sys.meta_path.append(_Compat())
    # Reading starts before the import, so a module body that calls the gateway works.
    reader = threading.Thread(target=_HOST.read_forever, name="hermes-worker-stdin", daemon=True)
    reader.start()
    try:
        handle = _load(path, name)
    except Exception as e:
        _send(out, {"load_error": str(e)})
        return
    if handle is None:
        _send(out, {"skip": "no 'handle' function found"})
        return
    _send(out, {"loaded": True})
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    while True:
        request = _HOST.requests.get()
        if request is None or request.get("shutdown"):
            break
        try:
            result = handle(request.get("event_type"), request.get("context") or {})
            if inspect.isawaitable(result):
                loop.run_until_complete(result)
        except Exception as e:
            _send(out, {"error": str(e)})
        else:
            _send(out, {"ok": True})
    _finish_threads(reader)


main()
