# The long-lived Python worker of one gateway hook (hermes-host, src/gateway/worker.py).
#
# Started as `python3 -u -c <this file> <handler.py> <hook name>` in the hook directory.
# Protocol: JSON lines. The real stdout carries only protocol lines; fd 1 and sys.stdout are
# pointed at stderr before the handler is imported, so a handler's print() (or a child
# process it starts) cannot corrupt the protocol. Stdin carries only requests; fd 0 and
# sys.stdin are /dev/null for the handler.
#
# 1. load, as the reference's HookRegistry does: import handler.py as module
#    `hermes_hook_<name>`, then one line:
#      {"loaded": true} | {"skip": "no 'handle' function found"} | {"load_error": "<str(exc)>"}
# 2. then per request line {"event_type": "...", "context": {...}} one response line:
#      {"ok": true} | {"error": "<str(exc)>"}
#    handle(event_type, context) may be sync or `async def`: a returned coroutine is run on
#    one event loop that lives as long as the worker.
# EOF on stdin ends the worker.
import asyncio
import importlib.util
import inspect
import json
import os
import sys


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


def _send(out, message):
    out.write(json.dumps(message) + "\n")
    out.flush()


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
    path, name = sys.argv[1], sys.argv[2]
    inp, out = _protocol_streams()
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
        line = inp.readline()
        if not line:
            break
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            result = handle(request.get("event_type"), request.get("context") or {})
            if inspect.isawaitable(result):
                loop.run_until_complete(result)
        except Exception as e:
            _send(out, {"error": str(e)})
        else:
            _send(out, {"ok": True})


main()
