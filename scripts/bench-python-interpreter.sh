#!/usr/bin/env bash
# Python plugins in one interpreter against the reference (BENCHMARKS.md, "Python plugins
# in one interpreter"), one run: homes of 1, 10 and 30 Python plugins, each one callback on
# pre_tool_call that answers nothing; `hermes bench` over the 1 and 10 homes, then Hermes
# Agent's own `invoke_hook` over the same homes (hermes-agent from PyPI, installed into
# target/bench-hermes-agent when missing), then the RSS of each with the plugins loaded.
#
#     bash scripts/bench-python-interpreter.sh [python interpreter, default python3]
set -euo pipefail
cd "$(dirname "$0")/.."
python="${1:-python3}"
venv="$PWD/target/bench-hermes-agent"
if ! "$venv/bin/python" -c 'import hermes_cli.plugins' 2>/dev/null; then
    "$python" -m venv "$venv"
    "$venv/bin/pip" install -q 'hermes-agent==0.19.0'
fi
cargo build --release -p hermes-host
home_with() { # home_with N: a home of N plugins, its path on stdout
    local home="$PWD/target/bench-python-$1" names=()
    rm -rf "$home" && mkdir -p "$home/plugins"
    for i in $(seq 1 "$1"); do
        mkdir -p "$home/plugins/p$i"
        printf 'name: p%s\nversion: 1.0\n' "$i" > "$home/plugins/p$i/plugin.yaml"
        printf 'def allow(tool_name, args, **kwargs):\n    return None\n\ndef register(ctx):\n    ctx.register_hook("pre_tool_call", allow)\n' > "$home/plugins/p$i/__init__.py"
        names+=("p$i")
    done
    printf 'plugins:\n  enabled: [%s]\n  python: %s\n' "$(IFS=,; echo "${names[*]}")" "$python" > "$home/config.yaml"
    chmod 600 "$home/config.yaml"
    echo "$home"
}
homes=()
for n in 1 10 30; do homes+=("$(home_with "$n")"); done
echo "load: $(cat /proc/loadavg) on $(nproc) cores; $("$python" --version)"
for home in "${homes[@]:0:2}"; do
    target/release/hermes --home "$home" bench pre_tool_call --duration 5s
    HERMES_HOME="$home" "$venv/bin/python" scripts/bench-python-hermes-agent.py
done
for home in "${homes[@]}"; do
    "$python" scripts/tree-rss.py 3 target/release/hermes --home "$home" bench pre_tool_call --duration 5s
    HERMES_HOME="$home" "$venv/bin/python" scripts/bench-python-hermes-agent.py
done
echo "load: $(cat /proc/loadavg)"
