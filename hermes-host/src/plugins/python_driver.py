# The worker of Hermes Python plugins (hermes-host, src/plugins/python_driver.py): one
# interpreter for all the plugins of a home (as Hermes runs them), or for one plugin with
# `isolation: process`.
#
# Started as `python3 -I -B -c <this file> <log level>` by the host, which supervises it
# (src/plugins/python.rs). Its first message says which plugins to load; each is imported as
# the package `hermes_plugins.<key>` (as the reference does, so relative imports and sibling
# modules work), or, for a pip-installed plugin, loaded from its entry point of the
# `hermes_agent.plugins` group as the reference's `_load_entrypoint_module` does; then its
# `register(ctx)` runs with a `ctx` of its own, and the worker runs the plugins' callbacks
# for the host.
#
# Channels:
#   fd 3     the protocol, a socket: JSON lines both ways, nothing else ever written to it.
#   fd 1, 2  the log channel, a pipe the host reads: a `logging` record or a line a plugin
#            printed is one line starting with \x1f and a JSON object {"l": levelno, "n":
#            logger name, "m": message, "p": the plugin running}; anything else (a C
#            extension's output) is a line of text.
#   fd 4     when present, a small shared file: the number (1-based, little-endian u32) of
#            the plugin whose code runs, so that the host can name it if the worker dies.
#   fd 0     /dev/null.
#
# Protocol:
#   1. host:   {"load": [{"dir", "key", "name", "entry_point", "manifest", "skip"}, ...]}
#      worker: {"hello": {"plugins": [{"hooks": [[hook, callback name], ...], "middleware",
#                         "tools", "commands", "sections", "warnings",
#                         "error": null | "<the exception's last line>"}, ...]}}
#   2. host:   {"fire": "<hook>", "kw": {<the hook's fields>}, "ps": [plugin, ...]}
#      worker: {"answers": [[answer, ...], ...]}, for each plugin in order one answer per
#              callback it registered for the hook, in registration order: null (no
#              opinion), [action, text, json] (the canonical reply), or {"error":
#              "<str(exc)>"} (it raised).
#      Requests for one plugin carry "p": its number (tools, commands, sections, middleware;
#      see below).
#      While a request runs, plugin code may ask the host for something:
#      worker: {"call": "<capability>", "args": {...}, "p": plugin}
#      host:   {"ok": <answer>} | {"error": "<message>"}, or first another request (the
#              call ran a tool whose hooks are in this worker), answered as any other.
# The host combines the answers by the hook's rule; this side only turns each Python
# return value into the canonical reply, by the reference's rules for that hook.
# Only what every worker needs is imported up front (asyncio and traceback when used): an
# interpreter's start-up is most of a worker's.
import enum
import importlib.util
import io
import json
import logging
import os
import struct
import sys
import types

_HOOK_NAMES = (
    "pre_tool_call", "post_tool_call", "pre_llm_call", "post_llm_call", "on_session_start",
    "on_session_end", "on_session_finalize", "on_session_reset", "subagent_stop",
    "pre_gateway_dispatch", "pre_approval_request", "post_approval_response",
    "transform_tool_result", "transform_terminal_output", "transform_llm_output",
    "pre_api_request", "post_api_request",
)


class _Protocol:
    def __init__(self):
        self.rfile = io.open(3, "rb", closefd=False)

    def send(self, message):
        self.write(json.dumps(message, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n")

    def write(self, line):
        data = memoryview(line)
        while data:
            data = data[os.write(3, data):]

    def receive(self):
        line = self.rfile.readline()
        if not line:
            return None
        return json.loads(line)


_PROTOCOL = None


_REQUESTS = ("fire", "tool", "command", "section", "middleware", "resume")


def _call_host(capability, args):
    plugin = _CURRENT
    _PROTOCOL.send({"call": capability, "args": args, "p": plugin.index if plugin else None})
    while True:
        reply = _PROTOCOL.receive()
        if reply is None:
            raise RuntimeError(f"{capability}: the host closed this plugin's worker")
        if not any(key in reply for key in _REQUESTS):
            break
        # The host needs this worker before it can answer: a tool the call ran fired hooks
        # of plugins here. Answered now, then the wait goes on.
        _answer(reply)
        _enter(plugin)
    if "error" in reply:
        raise RuntimeError(reply["error"])
    return reply.get("ok")


class _LogToHost(logging.Handler):
    def emit(self, record):
        try:
            message = record.getMessage()
            if record.exc_info:
                message += "\n" + logging.Formatter().formatException(record.exc_info)
            _log_line(record.levelno, record.name, message)
        except Exception:
            self.handleError(record)


def _log_line(level, name, message):
    plugin = _CURRENT.name if _CURRENT else ""
    line = "\x1f" + json.dumps({"l": level, "n": name, "m": message, "p": plugin}) + "\n"
    os.write(2, line.encode("utf-8", "backslashreplace"))


class _Printed(io.TextIOBase):
    """`sys.stdout` and `sys.stderr`: each line printed becomes a log record naming the
    plugin that printed it."""

    def __init__(self):
        self._pending = ""

    def writable(self):
        return True

    def write(self, text):
        text = self._pending + str(text)
        *lines, self._pending = text.split("\n")
        for line in lines:
            if line.strip():
                _log_line(20, "print", line)
        return len(text)

    def flush(self):
        if self._pending.strip():
            _log_line(20, "print", self._pending)
        self._pending = ""


class PluginManifest:
    """The reference's `ctx.manifest`: an object with its attributes, read from plugin.yaml."""

    _LISTS = ("requires_env", "provides_tools", "provides_hooks", "capabilities",
              "requires_plugins", "python_dependencies", "tags")

    def __init__(self, data, name, key, path):
        data = data if isinstance(data, dict) else {}
        text = lambda k: "" if data.get(k) is None else str(data.get(k))
        self.name = text("name") or name
        self.version = text("version")
        self.description = text("description")
        author = data.get("author")
        self.author = (", ".join(str(author[f]) for f in ("name", "email", "url") if author.get(f))
                       if isinstance(author, dict) else text("author"))
        for field in self._LISTS:
            value = data.get(field)
            setattr(self, field, list(value) if isinstance(value, list) else [])
        self.source = "user"
        self.path = path
        self.kind = text("kind") or "standalone"
        self.key = key
        self.requires_hermes = text("requires_hermes")
        self.portable = False
        self.skill_namespace = ""
        self.manifest_version = data.get("manifest_version", 1) if isinstance(
            data.get("manifest_version", 1), int) else 1
        self.api_version = data.get("api_version") if isinstance(data.get("api_version"), int) else None
        self.config_schema = dict(data["config_schema"]) if isinstance(data.get("config_schema"), dict) else {}
        self.license = text("license")
        self.homepage = text("homepage")

    def __repr__(self):
        return f"PluginManifest(name={self.name!r}, version={self.version!r}, key={self.key!r})"


# What each member this host lacks does here instead, said once per plugin and member.
_NOT_HERE = {
    "register_cli_command": "hermes here has no plugin CLI commands",
    "inject_message": "messages cannot be injected here; it returns False",
    "register_approval_transport": "approvals here are hermes's own",
    "register_context_engine": "this host keeps its own context",
    "register_context_reference": "this host has no @references",
    "register_memory_provider": "this host has no memory providers",
    "register_dashboard_auth_provider": "this host has no dashboard",
    "register_platform": "gateway platforms here are hermes's adapters",
    "register_slack_action_handler": "this host has no Slack adapter",
    "register_platform_handler": "this host has no platform SDK handlers",
    "register_telegram_handler": "this host has no Telegram adapter",
    "register_auxiliary_task": "this host has no auxiliary LLM tasks",
    "register_redaction_patterns": "this host has no redaction registry; it returns 0",
    "register_skill": "this host has no skills",
    "emit": "this host has no plugin event bus; it returns 0",
    "subscribe": "this host has no plugin event bus",
    "call_mcp": "this host has no MCP servers; it raises PermissionError, as the reference does for a server not allowed",
    "spawn_task": "the task is created, but nothing cancels it at unload",
    "llm": "this host has no model for plugins; its methods raise RuntimeError",
    "platform_actions": "this host has no platform actions; they return {'ok': False}",
    "subagent_lifecycle": "this host has no subagent lifecycle service",
}
for _provider in ("image_gen", "video_gen", "web_search", "browser", "terminal_environment", "tts",
                  "transcription"):
    _NOT_HERE[f"register_{_provider}_provider"] = f"this host has no {_provider.replace('_', ' ')} providers"
_NOT_HERE["register_secret_source"] = "this host has no secret sources"


_UNSET = object()
_SECTION_MAX_CHARS = 4000
_SETTING_SEGMENT = "[A-Za-z0-9][A-Za-z0-9_-]{0,127}"
_SETTING_RESERVED_ROOTS = frozenset({"model", "plugins", "security", "settings"})


def _setting_segments(key, plugin_id):
    """A plugin-relative settings key (`endpoint`, `retry.policy`) as its segments; global,
    cross-plugin and traversal paths raise ValueError, as in the reference."""
    import re
    segments = tuple(key.split(".")) if isinstance(key, str) else ()
    valid = (isinstance(key, str) and key and "/" not in key and "\\" not in key
             and segments[0].lower() not in _SETTING_RESERVED_ROOTS
             and all(re.fullmatch(_SETTING_SEGMENT, s) for s in segments))
    if not valid:
        logging.getLogger("hermes").warning("Rejected config path %r from plugin %s", key, plugin_id)
        raise ValueError("Expected a plugin-relative config key such as 'endpoint' or "
                         "'retry.policy'; global, cross-plugin, and traversal paths are forbidden")
    return segments


def _portable_skill_namespace(key):
    import hashlib
    slug = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "_-") else "-" for ch in key.lower())
    slug = slug.strip("-_") or "plugin"
    return f"agent-plugin-{slug}-{hashlib.sha256(key.encode('utf-8')).hexdigest()[:8]}"


class PluginState:
    """The reference's `ctx.state`: this plugin's durable JSON key-value store, at the
    reference's path (`$HERMES_HOME/plugin-data/<namespace>/state.json`, so a Hermes home
    copied over keeps its plugins' state). Every change is a read-modify-write under a lock
    on a sibling file, written atomically and private to the user (0600 in a 0700
    directory), within the reference's 10 MiB quota."""

    _KEY = "[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}"
    _QUOTA_BYTES = 10 * 1024 * 1024

    def __init__(self, plugin_id, skill_namespace=""):
        candidate = skill_namespace or plugin_id
        portable = skill_namespace and candidate.startswith("agent-plugin-")
        self._namespace = candidate if portable else _portable_skill_namespace(candidate)

    @property
    def data_dir(self):
        return _hc_home() / "plugin-data" / self._namespace

    @property
    def path(self):
        return self.data_dir / "state.json"

    @property
    def quota_bytes(self):
        return self._QUOTA_BYTES

    @classmethod
    def _validate_key(cls, key):
        import re
        if not isinstance(key, str) or not re.fullmatch(cls._KEY, key) or ".." in key:
            raise ValueError("Plugin state keys must be 1-128 characters using letters, "
                             "numbers, '_', '-', '.', or ':' (without '..')")

    def _locked(self):
        import contextlib
        import fcntl

        @contextlib.contextmanager
        def held():
            os.makedirs(self.data_dir, mode=0o700, exist_ok=True)
            fd = os.open(self.data_dir / ".state.json.lock",
                         os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)
        return held()

    def _read_unlocked(self):
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with open(fd, encoding="utf-8-sig") as f:
                data = json.load(f)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise RuntimeError(f"Cannot parse plugin state {self.path}: {exc}") from exc
        if not isinstance(data, dict):
            raise RuntimeError(f"Cannot parse plugin state {self.path}: root must be an object")
        return data

    def get(self, key, default=None):
        self._validate_key(key)
        with self._locked():
            return self._read_unlocked().get(key, default)

    def set(self, key, value):
        self._validate_key(key)
        with self._locked():
            data = self._read_unlocked()
            data[key] = value
            try:
                encoded = json.dumps(data, ensure_ascii=False, indent=2).encode("utf-8")
            except (TypeError, ValueError) as exc:
                raise ValueError(f"Plugin state value for {key!r} is not JSON-serializable") from exc
            if len(encoded) > self.quota_bytes:
                raise ValueError(f"Plugin state quota exceeded: {len(encoded)} bytes is greater "
                                 f"than the {self.quota_bytes}-byte per-plugin quota")
            import tempfile
            fd, tmp = tempfile.mkstemp(dir=self.data_dir, prefix=".state.json.", suffix=".tmp")
            try:
                with open(fd, "wb") as f:
                    f.write(encoded)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, self.path)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise

    def __repr__(self):
        return f"PluginState(path={str(self.path)!r})"


class _Unavailable:
    """What a member whose feature this host lacks hands back: every use says so."""

    def __init__(self, what, answer=None, error=None):
        self._what, self._answer, self._error = what, answer, error

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)

        def call(*args, **kwargs):
            if self._error is not None:
                raise self._error(f"{self._what}.{attr}: {_NOT_HERE[self._what]}")
            return self._answer
        return call

    def __bool__(self):
        return False


class PluginContext:
    """What `register(ctx)` receives: the reference's members, no more (an unknown attribute
    raises AttributeError, as there). `register_hook` works as in Hermes; a member whose
    feature this host lacks is present, does what `_NOT_HERE` says, and says so once."""

    def __init__(self, name, key, path, manifest_data):
        self._name = name
        self._key = key
        self._hooks = []
        self._middleware = []
        self._tools = {}
        self._commands = {}
        self._sections = {}
        self._warned = set()
        self._hello_sent = False
        self._unload = []
        self._state = None
        self.warnings = []
        self.manifest = PluginManifest(manifest_data, name, key, path)

    def _not_here(self, member):
        if member in self._warned:
            return
        self._warned.add(member)
        self._warn(f"Plugin '{self._name}' called ctx.{member}(), which hermes-hooks does not offer: "
                   f"{_NOT_HERE[member]} (its hooks still load)")

    def _warn(self, line):
        # Before the hello, warnings travel in it (the host logs them with the plugin's
        # report); after it, they are log records.
        if self._hello_sent:
            logging.getLogger("hermes").warning(line)
        else:
            self.warnings.append(line)

    @property
    def name(self):
        return self._name

    @property
    def plugin_id(self):
        return self.manifest.key or self.manifest.name

    @property
    def profile_name(self):
        from hermes_cli.profiles import get_active_profile_name
        return get_active_profile_name()

    def register_hook(self, hook_name, callback):
        self._hooks.append((hook_name, callback))

    def register_tool(self, name, toolset, schema, handler, check_fn=None, requires_env=None,
                      is_async=False, description="", emoji="", override=False):
        """The reference's: the model may call the tool by `name`; `handler(args, **kw)`
        answers its result text."""
        if name in self._tools:
            logging.getLogger("hermes").warning(
                "Plugin %s tried to shadow global tool %s without override=True", self.manifest.name, name)
            return None
        self._tools[name] = {"handler": handler, "check_fn": check_fn, "is_async": is_async,
                             "requires_env": list(requires_env or []),
                             "spec": {"name": name, "toolset": toolset,
                                      "schema": schema if isinstance(schema, dict) else {},
                                      "description": description or (schema or {}).get("description", "")
                                      if isinstance(schema, dict) else description}}
        return None

    def register_command(self, name, handler, description="", args_hint=""):
        """The reference's: `/name args` in a user message runs `handler(raw_args)`."""
        clean = str(name).lower().strip().lstrip("/").replace(" ", "-")
        if not clean:
            logging.getLogger("hermes").warning(
                "Plugin '%s' tried to register a command with an empty name.", self.manifest.name)
            return
        self._commands[clean] = {"handler": handler, "spec": {
            "name": clean, "description": description or "Plugin command",
            "args_hint": (args_hint or "").strip()}}

    def register_middleware(self, kind, callback):
        """The reference's: an unknown kind is warned about and kept (it never runs)."""
        if kind not in _MIDDLEWARE_KINDS:
            self._warn(f"Plugin '{self.manifest.name}' registered unknown middleware '{kind}' "
                       f"(valid: {', '.join(sorted(_MIDDLEWARE_KINDS))})")
        self._middleware.append((kind, callback))

    def has_plugin(self, plugin_id):
        from hermes_cli.config import load_config
        enabled = (load_config().get("plugins") or {}).get("enabled") or []
        return isinstance(enabled, list) and plugin_id in enabled

    def has_capability(self, capability):
        return False

    def get_config(self, key, default=None):
        """`plugins.entries.<plugin_id>.settings.<key>` of config.yaml (the legacy `config`
        subtree after it), as the reference reads it."""
        segments = _setting_segments(key, self.plugin_id)
        entry = _hc_nested(_hc_config(), ("plugins", "entries", self.plugin_id), None)
        if not isinstance(entry, dict):
            return default
        value = _hc_nested(entry.get("settings"), segments, _UNSET)
        if value is not _UNSET:
            return value
        return _hc_nested(entry.get("config"), segments, default)

    def set_config(self, key, value):
        """Writes one value of this plugin's `settings` in config.yaml, through the host's
        locked editor that keeps the rest of the file (comments included) as it was."""
        segments = _setting_segments(key, self.plugin_id)
        try:
            json.dumps(value)
        except (TypeError, ValueError) as e:
            raise ValueError(f"Plugin setting {key!r} is not JSON-serializable") from e
        _call_host("config.set", {"key": list(segments), "value": value})
        _hc_set(("plugins", "entries", self.plugin_id, "settings") + segments, value)

    def on_unload(self, callback):
        if not callable(callback):
            raise TypeError("on_unload callback must be callable")
        self._unload.append(callback)

    def spawn_task(self, coro, *, name=None):
        import asyncio
        if not asyncio.iscoroutine(coro):
            raise TypeError("spawn_task expects a coroutine")
        self._not_here("spawn_task")
        return asyncio.get_running_loop().create_task(coro, name=name)

    def call_mcp(self, server, tool, arguments=None, timeout=30):
        self._not_here("call_mcp")
        raise PermissionError(
            f"Plugin {self._name!r} is not allowed to call MCP server {server!r}: "
            "hermes-hooks has no MCP servers")

    def dispatch_tool(self, tool_name, args, **kwargs):
        """The reference's: runs a tool and returns its result text. The plugin's own tools
        run here, directly, as the reference's registry runs them; any other tool (hermes's
        own, another plugin's) runs in the host as the model's calls do, through the user's
        hooks and approvals, which is how a slash command reaches `terminal` or
        `delegate_task`. Outside a command or a tool there is no call to run it in: the
        result is an error, as the reference's for a tool it cannot find."""
        if tool_name in self._tools:
            message = {"tool": tool_name, "args": args if isinstance(args, dict) else {}, "kw": kwargs}
            return _run_tool(self._tools, message)["tool_result"]
        try:
            return _call_host("tool.dispatch", {"name": str(tool_name),
                                                "args": args if isinstance(args, dict) else {}})
        except RuntimeError as e:
            return json.dumps({"error": f"Tool {tool_name} cannot be dispatched: {e}"})

    def register_system_prompt_section(self, id, content, *, position="after_memory",
                                       max_chars=_SECTION_MAX_CHARS):
        """The reference's: bounded text (or a callable given the session's info) put at the
        head of every new session's prompt. Invalid arguments raise as there."""
        import re
        if not isinstance(id, str) or not re.fullmatch(r"[a-z0-9][a-z0-9._-]{0,127}", id):
            raise ValueError("system prompt section id must be 1-128 lowercase characters "
                             "using letters, numbers, '.', '_', or '-'")
        if not isinstance(content, str) and not callable(content):
            raise TypeError("system prompt section content must be a string or callable")
        if position != "after_memory":
            raise ValueError("system prompt section position must be one of: after_memory")
        if (isinstance(max_chars, bool) or not isinstance(max_chars, int)
                or not 0 < max_chars <= _SECTION_MAX_CHARS):
            raise ValueError(f"system prompt section max_chars must be between 1 and {_SECTION_MAX_CHARS}")
        if id in self._sections:
            raise ValueError(f"system prompt section {id!r} is already registered by plugin {self.plugin_id!r}")
        self._sections[id] = {"content": content, "spec": {
            "id": id, "position": position, "max_chars": max_chars,
            "content": content if isinstance(content, str) else None}}

    def inject_message(self, content, role="user", *, session_key=None):
        self._not_here("inject_message")
        return False

    def register_redaction_patterns(self, patterns):
        self._not_here("register_redaction_patterns")
        return 0

    def emit(self, event, payload=None):
        self._not_here("emit")
        return 0

    @property
    def state(self):
        if self._state is None:
            self._state = PluginState(self.plugin_id, self.manifest.skill_namespace)
        return self._state

    @property
    def llm(self):
        self._not_here("llm")
        return _Unavailable("llm", error=RuntimeError)

    @property
    def platform_actions(self):
        self._not_here("platform_actions")
        return _Unavailable("platform_actions", answer={"ok": False, "error": "not available here"})

    @property
    def subagent_lifecycle(self):
        self._not_here("subagent_lifecycle")
        return _Unavailable("subagent_lifecycle", error=RuntimeError)


def _not_offered(member):
    def method(self, *args, **kwargs):
        self._not_here(member)
        return None
    method.__name__ = member
    return method


for _member in _NOT_HERE:
    if not hasattr(PluginContext, _member):
        setattr(PluginContext, _member, _not_offered(_member))


# --- pre_gateway_dispatch: the reference's objects, backed by the host's capabilities ---

class Platform(str, enum.Enum):
    """The reference's gateway `Platform` (`gateway.config`): a member per platform, with
    `.value`, and a pseudo-member made on demand for any other platform name. A `str` as
    well, so `platform == "discord"` holds beside `platform.value == "discord"`."""
    LOCAL = "local"
    TELEGRAM = "telegram"
    DISCORD = "discord"
    WHATSAPP = "whatsapp"
    WHATSAPP_CLOUD = "whatsapp_cloud"
    SLACK = "slack"
    SIGNAL = "signal"
    MATTERMOST = "mattermost"
    MATRIX = "matrix"
    HOMEASSISTANT = "homeassistant"
    EMAIL = "email"
    SMS = "sms"
    DINGTALK = "dingtalk"
    API_SERVER = "api_server"
    WEBHOOK = "webhook"
    MSGRAPH_WEBHOOK = "msgraph_webhook"
    FEISHU = "feishu"
    WECOM = "wecom"
    WECOM_CALLBACK = "wecom_callback"
    WEIXIN = "weixin"
    BLUEBUBBLES = "bluebubbles"
    QQBOT = "qqbot"
    YUANBAO = "yuanbao"
    RELAY = "relay"

    @classmethod
    def _missing_(cls, value):
        if not isinstance(value, str) or not value.strip():
            return None
        value = value.strip().lower()
        if value in cls._value2member_map_:
            return cls._value2member_map_[value]
        pseudo = str.__new__(cls, value)
        pseudo._value_ = value
        pseudo._name_ = value.upper().replace("-", "_").replace(" ", "_")
        cls._value2member_map_[value] = pseudo
        return pseudo


def _platform(value):
    try:
        return Platform(value)
    except ValueError:
        return value


class SessionSource:
    def __init__(self, kw):
        self.platform = _platform(kw.get("platform", ""))
        self.chat_id = kw.get("chat_id", "")
        self.chat_type = kw.get("chat_type") or "dm"
        self.user_id = kw.get("user_id", "")
        self.user_name = kw.get("user_name")
        self.thread_id = None

    def __repr__(self):
        return (f"SessionSource(platform={self.platform!r}, chat_id={self.chat_id!r}, "
                f"chat_type={self.chat_type!r}, user_id={self.user_id!r})")


class MessageEvent:
    def __init__(self, kw):
        self.text = kw.get("text", "")
        self.message_id = kw.get("message_id")
        self.internal = False
        self.source = SessionSource(kw)
        self.session_key = kw.get("session_key", "")

    def __repr__(self):
        return f"MessageEvent(text={self.text!r}, source={self.source!r})"


class _Adapter:
    def __init__(self, platform):
        self.platform = platform

    def send(self, chat_id, text, *args, **kwargs):
        return _call_host("gateway.send", {"platform": self.platform, "chat_id": str(chat_id), "text": str(text)})


class _Adapters(dict):
    def __missing__(self, platform):
        adapter = _Adapter(platform)
        self[platform] = adapter
        return adapter

    def get(self, platform, default=None):
        return self[platform]


class GatewayRunner:
    def __init__(self):
        self.adapters = _Adapters()


class SessionEntry:
    """The reference's `gateway.session.SessionEntry`: a chat's session as the store has it."""

    def __init__(self, session_key, session_id, source):
        import datetime
        now = datetime.datetime.now()
        self.session_key = session_key
        self.session_id = session_id
        self.created_at = now
        self.updated_at = now
        self.origin = source
        self.display_name = getattr(source, "user_name", None)
        self.platform = getattr(source, "platform", None)
        self.chat_type = getattr(source, "chat_type", "dm")
        self.input_tokens = self.output_tokens = self.total_tokens = 0
        self.cache_read_tokens = self.cache_write_tokens = self.last_prompt_tokens = 0
        self.estimated_cost_usd = 0.0
        self.cost_status = "unknown"
        self.was_auto_reset = False
        self.auto_reset_reason = None

    def __repr__(self):
        return f"SessionEntry(session_key={self.session_key!r}, session_id={self.session_id!r})"


class SessionStore:
    """The reference's gateway `SessionStore`, for the chat being dispatched and the others
    the gateway has: sessions are reached through the host while they are a chat's current
    one."""

    def __init__(self, session_key):
        self._session_key = session_key

    def get_or_create_session(self, source, force_new=False):
        platform = getattr(getattr(source, "platform", ""), "value", getattr(source, "platform", ""))
        answer = _call_host("session.get_or_create", {
            "platform": str(platform), "chat_id": str(getattr(source, "chat_id", "")),
            "force_new": bool(force_new)})
        return SessionEntry(answer["session_key"], answer["session_id"], source)

    def update_session(self, session_key, last_prompt_tokens=None):
        _call_host("session.update", {"session_key": str(session_key)})

    def append_to_transcript(self, session, message=None, skip_db=False, *args, **kwargs):
        if message is None:
            session, message = self._session_key, session
        if not isinstance(message, dict):
            raise TypeError("append_to_transcript: the message must be a dict")
        session = str(session or self._session_key)
        # The reference takes the session id; plugins written for this host the key.
        return _call_host("session.append", {"session_key": session, "entry": message})

    def load_transcript(self, session_id):
        return _call_host("session.load", {"session_id": str(session_id)}) or []

    def has_any_sessions(self):
        return True


def _dispatch_kwargs(kw):
    return {"event": MessageEvent(kw), "gateway": GatewayRunner(), "session_store": SessionStore(kw.get("session_key", "")),
            "telemetry_schema_version": _TELEMETRY}


class _Message(dict):
    """`assistant_message` of `post_api_request`: the reference passes the provider SDK's
    message object (`.content`, `.tool_calls[i].function.name`); this is that, and still
    the dict it was sent as."""

    def __getattr__(self, attr):
        try:
            value = self[attr]
        except KeyError:
            raise AttributeError(attr) from None
        if isinstance(value, dict):
            return _Message(value)
        if isinstance(value, list):
            return [_Message(v) if isinstance(v, dict) else v for v in value]
        return value


# What the reference's invoke_hook adds to every hook's kwargs.
_TELEMETRY = "hermes.observer.v1"


def _kwargs(hook, kw):
    if hook == "pre_gateway_dispatch":
        return _dispatch_kwargs(kw)
    if "args" in kw and not isinstance(kw["args"], dict):
        kw["args"] = {}
    if hook == "post_api_request" and isinstance(kw.get("assistant_message"), dict):
        kw["assistant_message"] = _Message(kw["assistant_message"])
    kw.setdefault("telemetry_schema_version", _TELEMETRY)
    return kw


# --- middleware (the reference's hermes_cli/middleware.py contract) ---
#
#   host:   {"middleware": "<kind>", "kw": {...}}           a request rewrite
#   worker: {"rewritten": {"payload", "trace", "failures"}}
#   host:   {"middleware": "<kind>", "kw": {...}, "id": n}  an execution wrapper
#   worker: {"next": <payload>, "id": n}                    the chain reached its end: the host
#                                                           runs the rest, then
#   host:   {"resume": n, "ok": <result>} | {"resume": n, "error": "..."}
#   worker: {"result": <value>} | {"error": "..."}          once the wrappers are done
# A wrapper chain runs on a thread of its own, so that while the host runs the tool or the
# model request (which may fire this plugin's hooks) the main loop answers them.

# The plugin whose code runs (an _Plugin), for messages (`<plugin>::<callback>`, as hooks'
# warnings name them), log records, host calls and the host's crash report.
_CURRENT = None
_MARK = None

_MIDDLEWARE_KINDS = frozenset({"tool_request", "tool_execution", "llm_request", "llm_execution"})


def _payload_key(kind):
    return "request" if kind.startswith("llm") else "args"


def _trace_entry(result):
    entry = {k: result[k] for k in ("source", "reason", "name")
             if isinstance(result.get(k), str) and result.get(k)}
    return entry or {"source": "plugin"}


def _rewrite(callbacks, kind, kw):
    import copy
    key = _payload_key(kind)
    original, current = kw.get("original_" + key), kw.get(key)
    trace, failures = [], []
    for callback in callbacks:
        kwargs = dict(kw)
        kwargs[key], kwargs["original_" + key] = copy.deepcopy(current), copy.deepcopy(original)
        try:
            result = callback(**kwargs)
            if hasattr(result, "__await__"):
                result = _await(result)
        except Exception as e:
            failures.append(f"Middleware '{kind}' callback {_CURRENT.name}::{_callback_name(callback)} raised: {e}")
            continue
        if kind == "llm_request" and isinstance(result, dict) and "response" in result:
            # This host's extension: the request is answered without the model.
            trace.append(_trace_entry(result))
            return {"payload": current, "trace": trace, "failures": failures,
                    "response": result["response"]}
        if isinstance(result, dict) and isinstance(result.get(key), dict):
            current = result[key]
            trace.append(_trace_entry(result))
    return {"payload": current, "trace": trace, "failures": failures}


class _Downstream(Exception):
    def __init__(self, original):
        super().__init__(str(original))
        self.original = original


class _Execution:
    """One wrapper chain of this plugin, run on its own thread (see above)."""

    def __init__(self, callbacks, kind, kw, ident):
        import queue
        import threading
        self.callbacks, self.kind, self.kw, self.id = callbacks, kind, kw, ident
        self.plugin = _CURRENT
        self.outbox = queue.Queue()   # what the thread says to the main loop
        self.inbox = queue.Queue()    # the host's answer to its `next`
        self.thread = threading.Thread(target=self._run, name=f"hermes-middleware-{ident}", daemon=True)
        self.thread.start()

    def _downstream(self, payload):
        self.outbox.put({"next": payload, "id": self.id})
        answer = self.inbox.get()
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return answer.get("ok")

    def _call_at(self, index, payload):
        if index >= len(self.callbacks):
            return self._downstream(payload)
        callback = self.callbacks[index]
        name = f"{self.plugin.name}::{_callback_name(callback)}"
        state = {"called": False, "ok": False, "result": None}

        def next_call(next_payload=None):
            if state["called"]:
                raise RuntimeError(f"Middleware '{self.kind}' callback {name} called next_call() more "
                                   "than once; downstream execution is single-use")
            state["called"] = True
            try:
                result = self._call_at(index + 1, payload if next_payload is None else next_payload)
            except Exception as exc:
                raise _Downstream(exc) from exc
            state["ok"], state["result"] = True, result
            return result

        kwargs = dict(self.kw)
        kwargs[_payload_key(self.kind)] = payload
        kwargs["next_call"] = next_call
        try:
            result = callback(**kwargs)
            if hasattr(result, "__await__"):
                import asyncio
                result = asyncio.run(result)
            return result
        except _Downstream as exc:
            raise exc.original
        except Exception as exc:
            logging.getLogger("hermes").warning("Middleware '%s' callback %s raised: %s", self.kind, name, exc)
            if state["ok"]:
                return state["result"]
            if state["called"]:
                raise
            return self._call_at(index + 1, payload)

    def _run(self):
        _enter(self.plugin)
        try:
            result = self._call_at(0, self.kw.get(_payload_key(self.kind)))
            json.dumps(result)
            self.outbox.put({"result": result})
        except Exception as e:
            self.outbox.put({"error": str(e) or type(e).__name__})


_EXECUTIONS = {}


def _middleware_message(message, by_kind):
    """Answers a middleware message of the host (see above)."""
    if "resume" in message:
        execution = _EXECUTIONS.get(message["resume"])
        if execution is None:
            return {"error": "this worker has no such middleware run (it was restarted)"}
        execution.inbox.put(message)
        return _outcome(execution)
    kind = message.get("middleware")
    callbacks = by_kind.get(kind, ())
    kw = message.get("kw") or {}
    if kind in ("tool_request", "llm_request"):
        return {"rewritten": _rewrite(callbacks, kind, kw)}
    execution = _Execution(callbacks, kind, kw, message.get("id"))
    _EXECUTIONS[execution.id] = execution
    return _outcome(execution)


def _outcome(execution):
    said = execution.outbox.get()
    if "next" not in said:
        _EXECUTIONS.pop(execution.id, None)
    return said


# --- plugin tools and commands ---
#   host:   {"tool": "<name>", "args": {...}, "kw": {...}}   worker: {"tool_result": "<text>"}
#   host:   {"command": "<name>", "raw_args": "..."}          worker: {"command_result": str|null}
#                                                              or {"error": "..."}
#   host:   {"section": "<id>", "info": {...}}                worker: {"section_text": str|null}
#                                                              or {"error": "..."}
#   While a tool or a command runs, `ctx.dispatch_tool` asks the host for another tool:
#   worker: {"call": "tool.dispatch", "args": {"name", "args"}}  host: {"ok": "<result text>"}

def _run_tool(tools, message):
    name = message.get("tool")
    entry = tools.get(name)
    if entry is None:
        return {"tool_result": json.dumps({"error": f"Unknown tool: {name}"})}
    missing = [v for v in entry["requires_env"] if not os.environ.get(v)]
    check = entry["check_fn"]
    try:
        available = not missing and (check is None or bool(check()))
    except Exception as e:
        available = False
        missing = [f"its check_fn raised {type(e).__name__}: {e}"]
    if not available:
        why = f" (missing: {', '.join(missing)})" if missing else ""
        return {"tool_result": json.dumps({"error": f"Tool {name} is not available here{why}"})}
    args = message.get("args") if isinstance(message.get("args"), dict) else {}
    try:
        result = entry["handler"](args, **(message.get("kw") or {}))
        if hasattr(result, "__await__"):
            result = _await(result)
    except Exception as e:
        logging.getLogger("hermes").error("Tool %s dispatch error: %s", name, e)
        return {"tool_result": json.dumps({"error": f"Tool execution failed: {type(e).__name__}: {e}"})}
    if isinstance(result, str):
        return {"tool_result": result}
    if isinstance(result, dict) and result.get("_multimodal") is True and isinstance(result.get("content"), list):
        return {"tool_result": json.dumps(result, ensure_ascii=False)}
    logging.getLogger("hermes").error("Tool %s handler returned unsupported result type: %s", name, type(result).__name__)
    return {"tool_result": json.dumps({
        "error": f"Tool handler returned unsupported result type: {type(result).__name__}",
        "error_type": "tool_result_contract"})}


def _render_section(sections, message):
    entry = sections.get(message.get("section"))
    if entry is None:
        return {"error": f"no section {message.get('section')}"}
    content = entry["content"]
    if not callable(content):
        return {"section_text": content}
    import types
    info = types.MappingProxyType(dict(message.get("info") or {}))
    try:
        value = content(info)
    except (Exception, SystemExit) as e:
        return {"error": f"{type(e).__name__}: {e}"}
    if value is None or isinstance(value, str):
        return {"section_text": value}
    return {"error": f"returned {type(value).__name__}, not str; skipped"}


def _run_command(commands, message):
    entry = commands.get(message.get("command"))
    if entry is None:
        return {"error": f"no command /{message.get('command')}"}
    try:
        result = entry["handler"](str(message.get("raw_args") or ""))
        if hasattr(result, "__await__"):
            result = _await(result)
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}
    return {"command_result": None if result is None else str(result)}


# --- return values, by the reference's rules ---

def _reply(hook, value):
    if value is None:
        return None
    if hook == "pre_tool_call":
        if isinstance(value, dict):
            action = value.get("action")
            message = value.get("message")
            if action == "block" and isinstance(message, str) and message:
                return ["block", message, ""]
            if action == "modify" and isinstance(value.get("args"), dict):
                return ["modify", "", json.dumps(value["args"], ensure_ascii=False)]
            if action == "approve":
                rule_key = value.get("rule_key")
                rule_key = rule_key if isinstance(rule_key, str) and rule_key else None
                text = message if isinstance(message, str) else ""
                return ["approve", text, json.dumps({"rule_key": rule_key})]
        return None
    if hook == "pre_verify":
        if isinstance(value, dict):
            directive = value.get("action", value.get("decision"))
            message = value.get("message") or value.get("reason")
            if directive in ("continue", "block") and isinstance(message, str) and message.strip():
                return ["continue", message, ""]
        return None
    if hook == "pre_llm_call":
        if isinstance(value, dict):
            context = value.get("context")
            return ["context", str(context), ""] if context else None
        if isinstance(value, str) and value.strip():
            return ["context", value, ""]
        return None
    if hook in ("transform_tool_result", "transform_terminal_output", "transform_llm_output"):
        return ["replace", value, ""] if isinstance(value, str) else None
    if hook == "pre_gateway_dispatch":
        if not isinstance(value, dict):
            return None
        action = value.get("action")
        if action == "skip":
            return ["skip", str(value.get("reason") or ""), ""]
        if action == "rewrite":
            text = value.get("text")
            return ["rewrite", text, ""] if isinstance(text, str) else ["allow", "", ""]
        if action == "allow":
            return ["allow", "", ""]
        return None
    return None


_LOOP = None


def _await(result):
    global _LOOP
    if _LOOP is None:
        import asyncio
        _LOOP = asyncio.new_event_loop()
        asyncio.set_event_loop(_LOOP)
    return _LOOP.run_until_complete(result)


def _fire(callbacks, hook, kwargs):
    answers = []
    for callback in callbacks:
        try:
            result = callback(**kwargs)
            if hasattr(result, "__await__"):
                result = _await(result)
            answers.append(_reply(hook, result))
        except Exception as e:
            answers.append({"error": str(e) or type(e).__name__})
    return answers


def _callback_name(callback):
    return getattr(callback, "__name__", None) or type(callback).__name__


def _last_line(e):
    import traceback
    return "".join(traceback.format_exception_only(type(e), e)).strip().splitlines()[-1]


def _load(plugin_dir, key, name):
    package = sys.modules.get("hermes_plugins")
    if package is None:
        package = types.ModuleType("hermes_plugins")
        package.__path__ = []
        sys.modules["hermes_plugins"] = package
    module_name = "hermes_plugins." + key.replace("/", "__").replace("-", "_")
    spec = importlib.util.spec_from_file_location(
        module_name, os.path.join(plugin_dir, "__init__.py"), submodule_search_locations=[plugin_dir]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


_ENTRY_POINT_GROUP = "hermes_agent.plugins"


def _entry_point(name):
    import importlib.metadata
    eps = importlib.metadata.entry_points()
    if hasattr(eps, "select"):
        found = eps.select(group=_ENTRY_POINT_GROUP)
    elif isinstance(eps, dict):
        found = eps.get(_ENTRY_POINT_GROUP, [])
    else:
        found = [ep for ep in eps if ep.group == _ENTRY_POINT_GROUP]
    for ep in found:
        if ep.name == name:
            return ep
    raise ImportError(f"Entry point '{name}' not found in group '{_ENTRY_POINT_GROUP}'")


def _honour_pythonpath():
    # -I ignores PYTHONPATH. Its absolute entries are the operator's own choice and go first,
    # as Python would put them; an empty or relative entry would mean the launch directory.
    entries = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    sys.path[0:0] = [e for e in entries if os.path.isabs(e)]


class _Plugin:
    """One plugin of this worker: its `ctx` and what it registered."""

    def __init__(self, index, spec):
        self.index = index
        self.name = str(spec.get("name") or "")
        self.key = str(spec.get("key") or self.name)
        self.dir = str(spec.get("dir") or "")
        self.entry_point = str(spec.get("entry_point") or "")
        self.mark = struct.pack("<I", index + 1)
        manifest = spec.get("manifest") if isinstance(spec.get("manifest"), dict) else {}
        self.ctx = PluginContext(self.name, self.key, self.dir, manifest)
        self.by_hook = {}
        self.by_kind = {}
        self.error = None

    def load(self):
        ctx = self.ctx
        try:
            if self.entry_point:
                ep = _entry_point(self.entry_point)
                ctx.manifest.source, ctx.manifest.path = "entrypoint", ep.value
                module = ep.load()
            else:
                module = _load(self.dir, self.key, self.name)
            register = getattr(module, "register", None)
            if register is None:
                self.error = "no register() function"
            else:
                register(ctx)
        except Exception as e:
            self.error = _last_line(e)
        for hook, callback in ctx._hooks:
            self.by_hook.setdefault(hook, []).append(callback)
        for kind, callback in ctx._middleware:
            self.by_kind.setdefault(kind, []).append(callback)
        ctx._hello_sent = True

    def hello(self):
        ctx = self.ctx
        return {
            "hooks": [[hook, _callback_name(callback)] for hook, callback in ctx._hooks],
            "middleware": [[kind, _callback_name(callback)] for kind, callback in ctx._middleware],
            "tools": [entry["spec"] for entry in ctx._tools.values()],
            "commands": [entry["spec"] for entry in ctx._commands.values()],
            "sections": [entry["spec"] for entry in ctx._sections.values()],
            "warnings": ctx.warnings,
            "error": self.error,
        }

    def unload(self):
        _enter(self)
        for callback in reversed(self.ctx._unload):
            try:
                callback()
            except Exception as e:
                logging.getLogger("hermes").warning(
                    "Plugin '%s' on_unload callback raised: %s", self.name, _last_line(e))


_PLUGINS = []


def _enter(plugin):
    """Marks `plugin` as the one whose code runs now."""
    global _CURRENT
    _CURRENT = plugin
    if _MARK is not None and plugin is not None:
        _MARK[0:4] = plugin.mark


def _plugin_of(message):
    index = message.get("p")
    if isinstance(index, int) and 0 <= index < len(_PLUGINS) and _PLUGINS[index] is not None:
        return _PLUGINS[index]
    return None


# Most firings answer nothing at all: those answer lines are made once per callback count.
_NO_OPINION = {}


def _answer(message):
    """Answers one request of the host."""
    if "fire" in message:
        hook = message.get("fire")
        kwargs = _kwargs(hook, message.get("kw") or {})
        answers = []
        for index in message.get("ps") or ():
            plugin = _PLUGINS[index] if isinstance(index, int) and 0 <= index < len(_PLUGINS) else None
            if plugin is None:
                answers.append([])
                continue
            _enter(plugin)
            answers.append(_fire(plugin.by_hook.get(hook, ()), hook, kwargs))
        if any(a is not None for plugin in answers for a in plugin):
            _PROTOCOL.send({"answers": answers})
            return
        shape = tuple(len(a) for a in answers)
        line = _NO_OPINION.get(shape)
        if line is None:
            line = _NO_OPINION[shape] = json.dumps({"answers": answers}).encode() + b"\n"
        _PROTOCOL.write(line)
        return
    plugin = _plugin_of(message)
    if plugin is None and "resume" not in message:
        _PROTOCOL.send({"error": f"this worker has no plugin {message.get('p')!r}"})
        return
    _enter(plugin)
    if "tool" in message:
        _PROTOCOL.send(_run_tool(plugin.ctx._tools, message))
    elif "command" in message:
        _PROTOCOL.send(_run_command(plugin.ctx._commands, message))
    elif "section" in message:
        _PROTOCOL.send(_render_section(plugin.ctx._sections, message))
    else:
        _PROTOCOL.send(_middleware_message(message, plugin.by_kind if plugin else {}))


def main():
    global _PROTOCOL, _MARK
    level = int(sys.argv[1])
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdin = open(os.devnull, "r")
    _PROTOCOL = _Protocol()
    root = logging.getLogger()
    root.addHandler(_LogToHost())
    root.setLevel(level)
    sys.stdout = sys.stderr = _Printed()
    try:
        import mmap
        _MARK = mmap.mmap(4, 8)
    except (OSError, ValueError):
        _MARK = None
    load = _PROTOCOL.receive() or {}
    specs = load.get("load") if isinstance(load.get("load"), list) else []
    # Started with -I: the plugins' own directories are the only additions to the path,
    # after the standard library and site-packages, so their sibling modules import but
    # never shadow `json` or `logging`. Pip-installed plugins are on the path already.
    sys.path.extend(spec["dir"] for spec in specs
                    if isinstance(spec, dict) and not spec.get("entry_point") and spec.get("dir"))
    _honour_pythonpath()
    hellos = []
    for index, spec in enumerate(specs):
        if not isinstance(spec, dict) or spec.get("skip"):
            _PLUGINS.append(None)
            hellos.append({"error": "disabled after repeated crashes"})
            continue
        plugin = _Plugin(index, spec)
        _PLUGINS.append(plugin)
        _enter(plugin)
        plugin.load()
        hellos.append(plugin.hello())
    _enter(None)
    _PROTOCOL.send({"hello": {"plugins": hellos}})
    while True:
        message = _PROTOCOL.receive()
        if message is None:
            break
        _answer(message)
    # The host let the worker go: each plugin's on_unload callbacks, last registered first.
    for plugin in _PLUGINS:
        if plugin is not None:
            plugin.unload()
    sys.stdout.flush()


main()
