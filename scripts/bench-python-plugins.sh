#!/usr/bin/env bash
# Python plugins beside the other hook kinds, one run (BENCHMARKS.md, "Python plugins"):
# a native no-op plugin in-process and the same one isolated in a worker, a persistent
# Python shell hook, a Python plugin with one callback and one with ten, all answering
# nothing on pre_tool_call; then the reference's in-process loop over one callback, and
# the workers' start-up against a bare interpreter start.
#
#     bash scripts/bench-python-plugins.sh [python interpreter, default python3]
set -euo pipefail
cd "$(dirname "$0")/.."
python="${1:-python3}"
home="$PWD/target/bench-python-home"
cargo build --release -p noop -p hermes-host
rm -rf "$home" && mkdir -p "$home/plugins/noop"
cp target/release/libnoop.so tests/plugins/noop/plugin.yaml "$home/plugins/noop/"
mkdir -p "$home/plugins/noop-isolated"
cp target/release/libnoop.so "$home/plugins/noop-isolated/"
printf 'name: noop-isolated\nversion: 0.1.0\nlibrary: libnoop.so\nisolation: process\n' > "$home/plugins/noop-isolated/plugin.yaml"
plugin() { # plugin NAME CALLBACKS
    mkdir -p "$home/plugins/$1"
    printf 'name: %s\nversion: 1.0\n' "$1" > "$home/plugins/$1/plugin.yaml"
    { printf 'def make(i):\n    def allow(tool_name, args, **kwargs):\n        return None\n'
      printf '    allow.__name__ = "allow_%%d" %% i\n    return allow\n'
      printf 'def register(ctx):\n    for i in range(%s):\n        ctx.register_hook("pre_tool_call", make(i))\n' "$2"
    } > "$home/plugins/$1/__init__.py"
}
plugin py-one 1
plugin py-ten 10
printf 'import sys\nfor line in sys.stdin:\n    print("{}", flush=True)\n' > "$home/p.py"
cat > "$home/config.yaml" <<YAML
plugins:
  enabled: [noop, noop-isolated, py-one, py-ten]
  python: $python
hooks:
  pre_tool_call:
    - command: $python $home/p.py
      persistent: true
YAML
chmod 600 "$home/config.yaml"
hermes="target/release/hermes --home $home"
echo "load: $(cat /proc/loadavg) on $(nproc) cores; $("$python" --version)"
$hermes --accept-hooks bench pre_tool_call --duration 5s
"$python" scripts/bench-python-reference.py 1
"$python" scripts/bench-python-reference.py 10
# Start-up: `plugins list` (which loads every plugin) in homes with 0, 1 and 10 Python
# plugins, and a bare interpreter start, ten times each.
time_it() { local s e; s=$(date +%s%N); for _ in 1 2 3 4 5 6 7 8 9 10; do "$@" >/dev/null 2>&1; done; e=$(date +%s%N); echo "$(( (e - s) / 10000000 )) ms per run: $*"; }
for n in 0 1 10; do
    h="$PWD/target/bench-python-start-$n"
    rm -rf "$h" && mkdir -p "$h/plugins"
    names=()
    for i in $(seq 1 "$n"); do
        mkdir -p "$h/plugins/p$i"
        printf 'name: p%s
' "$i" > "$h/plugins/p$i/plugin.yaml"
        printf 'def register(ctx):
    ctx.register_hook("pre_tool_call", lambda **kw: None)
' > "$h/plugins/p$i/__init__.py"
        names+=("p$i")
    done
    printf 'plugins:\n  enabled: [%s]\n  python: %s\n' "$(IFS=,; echo "${names[*]}")" "$python" > "$h/config.yaml"
    chmod 600 "$h/config.yaml"
    time_it target/release/hermes --home "$h" plugins list
done
time_it "$python" -c pass
echo "load: $(cat /proc/loadavg)"
