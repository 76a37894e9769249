"""POST every new or reset session to a webhook (an `async def` handler, stdlib only).

The URL comes from this hook's own HOOK.yaml (`config: {url: ..., timeout: ...}`), which the
gateway hands to the handler as JSON in the HERMES_HOOK_CONFIG environment variable.
"""

import asyncio
import json
import os
import urllib.request

CONFIG = json.loads(os.environ.get("HERMES_HOOK_CONFIG") or "{}")
WEBHOOK_URL = CONFIG.get("url", "")
TIMEOUT = float(CONFIG.get("timeout", 5))


def _post(body: bytes) -> int:
    request = urllib.request.Request(
        WEBHOOK_URL,
        data=body,
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
        return response.status


async def handle(event_type: str, context: dict):
    if not WEBHOOK_URL:
        raise RuntimeError("session-webhook: set config.url in HOOK.yaml")
    body = json.dumps({"event": event_type, **context}).encode("utf-8")
    # urllib blocks; run it off the event loop like an httpx.AsyncClient call would.
    await asyncio.to_thread(_post, body)
