"""Alert when the agent is taking many steps (a plain `def` handler).

Once per session, when `iteration` reaches `threshold` (HOOK.yaml `config`), append a line
to the alert log and, when TELEGRAM_BOT_TOKEN and TELEGRAM_HOME_CHANNEL are set, send it to
Telegram. The worker that runs this file lives as long as the gateway, so the set of
sessions already alerted survives from one event to the next.
"""

import json
import os
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

CONFIG = json.loads(os.environ.get("HERMES_HOOK_CONFIG") or "{}")
THRESHOLD = int(CONFIG.get("threshold", 10))
HOME = Path(os.environ.get("HERMES_HOME") or Path.home() / ".hermes")
LOG = Path(CONFIG.get("log") or HOME / "logs" / "long-tasks.log")
BOT_TOKEN = os.getenv("TELEGRAM_BOT_TOKEN")
CHAT_ID = os.getenv("TELEGRAM_HOME_CHANNEL")

_alerted = set()


def handle(event_type: str, context: dict):
    iteration = int(context.get("iteration") or 0)
    session = context.get("session_id") or ""
    if iteration < THRESHOLD or session in _alerted:
        return
    _alerted.add(session)
    tools = ", ".join(context.get("tool_names") or [])
    text = f"⚠️ Agent has been running for {iteration} steps. Last tools: {tools}"
    LOG.parent.mkdir(parents=True, exist_ok=True)
    with open(LOG, "a", encoding="utf-8") as f:
        stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
        f.write(f"{stamp} session={session} {text}\n")
    if BOT_TOKEN and CHAT_ID:
        body = json.dumps({"chat_id": CHAT_ID, "text": text}).encode("utf-8")
        request = urllib.request.Request(
            f"https://api.telegram.org/bot{BOT_TOKEN}/sendMessage",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(request, timeout=5).close()
