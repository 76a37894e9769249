#!/usr/bin/env python3
"""What a gateway keeps in memory per chat (BENCHMARKS.md, "Memory per chat").

Starts `target/release/hermes gateway run --listen` in fresh homes, sends 150,000 messages
in one chat (pipelined, every answer read), then reads the gateway's VmRSS; then, in
another home, one message in each of 20,000 chats. Each load runs twice: with the default
`gateway.history_window` and with the window effectively off (1,000,000), which is what
the gateway kept before the window existed.

    python3 scripts/bench-gateway-memory.py [messages] [chats]
"""
import json, os, socket, subprocess, sys, tempfile, threading, time

HERMES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target", "release", "hermes")
TOKEN = "memory-bench-token-0123456789"


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def run(config, load):
    home = tempfile.mkdtemp(prefix="hermes-mem-")
    path = os.path.join(home, "config.yaml")
    with open(path, "w") as f:
        f.write(config)
    os.chmod(path, 0o600)
    env = dict(os.environ, HERMES_GATEWAY_TOKEN=TOKEN, HERMES_LOG="warn")
    proc = subprocess.Popen([HERMES, "--home", home, "gateway", "run", "--listen", "127.0.0.1:0", "--trace", "off"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env)
    host, port = proc.stdout.readline().decode().strip().rsplit(":", 1)
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
    time.sleep(0.5)
    before = rss_kib(proc.pid)
    sock = socket.create_connection((host, int(port)))
    sock.sendall(json.dumps({"token": TOKEN}).encode() + b"\n")
    reader = sock.makefile("rb")
    started = time.time()
    total = 0
    for batch in load:
        sock.sendall(b"".join(json.dumps(m).encode() + b"\n" for m in batch))
        for _ in batch:
            reader.readline()
        total += len(batch)
    took = time.time() - started
    time.sleep(0.5)
    after = rss_kib(proc.pid)
    sock.close()
    proc.terminate()
    proc.wait()
    return before, after, total, took


def one_chat(n):
    return [[{"chat_id": "c1", "user_id": "u", "text": f"message {i}"} for i in range(j, min(j + 500, n))]
            for j in range(0, n, 500)]


def many_chats(n):
    return [[{"chat_id": f"c{i}", "user_id": "u", "text": "hello"} for i in range(j, min(j + 500, n))]
            for j in range(0, n, 500)]


def main():
    messages = int(sys.argv[1]) if len(sys.argv) > 1 else 150_000
    chats = int(sys.argv[2]) if len(sys.argv) > 2 else 20_000
    print(f"load: {open('/proc/loadavg').read().strip()} on {os.cpu_count()} cores")
    for label, config in [("default window (200)", "model: x\n"),
                          ("window off (1000000)", "gateway:\n  history_window: 1000000\n")]:
        before, after, total, took = run(config, one_chat(messages))
        print(f"{messages} messages in one chat, {label}: VmRSS {before / 1024:.1f} -> {after / 1024:.1f} MiB ({total} answers in {took:.0f} s)")
        before, after, total, took = run(config, many_chats(chats))
        print(f"{chats} chats of one message, {label}: VmRSS {before / 1024:.1f} -> {after / 1024:.1f} MiB ({total} answers in {took:.0f} s)")


main()
