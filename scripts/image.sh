#!/usr/bin/env bash
# Builds metaquorum's image with podman, without an image registry, and runs a
# 3-voter cluster from it with the manifests' command lines. The recipe and its
# figures: docs/kubernetes.md, "The image"; why it is built this way:
# docs/decisions.md 78-80.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The package's one version (pyproject.toml reads it from there too).
VERSION=$(sed -n 's/^__version__ = "\([^"]*\)".*/\1/p' "$ROOT/metaquorum/__init__.py")
[ -n "$VERSION" ] || { echo "image.sh: no __version__ in metaquorum/__init__.py" >&2; exit 2; }
TAG=${METAQUORUM_IMAGE_TAG:-localhost/metaquorum:$VERSION}
SUITE=bookworm # Python 3.11, as the registry's python:3.11-slim-bookworm
BASE_PACKAGES=python3,python3-venv,binutils # binutils: strip, in the build stage only
LOCAL_BASE=localhost/metaquorum-base:$SUITE
CACHE=${METAQUORUM_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/metaquorum-image}
LABEL=io.metaquorum.image-sh # on every container and volume `cluster` makes
# podman's defaults ask for more open files and processes than a sandboxed
# host allows, and crun does not run in hybrid cgroup mode: every call gets
# runc, cgroupfs and explicit limits (decisions.md 80).
NPROC=4096 # per uid on the host: three voters' threads, with room

usage() {
    cat <<EOF
usage: scripts/image.sh build [--base IMAGE] [--rebuild-base] [--mirror URL]
       scripts/image.sh cluster
       scripts/image.sh clean

build    Builds $TAG from ./Dockerfile with podman: the local base image
         ($LOCAL_BASE, made once with debootstrap from the Debian
         mirror apt uses, then reused), the wheelhouse (pip wheel, run in the
         base image), the image; prints its size. Installs podman, runc and
         debootstrap with apt-get where missing.
           --base IMAGE     build FROM IMAGE instead (e.g. python:3.11-slim-bookworm,
                            where a registry is reachable)
           --rebuild-base   make the debootstrap base again
           --mirror URL     Debian mirror for debootstrap (default: apt's)
cluster  Starts 3 voters from $TAG as the StatefulSet runs them
         (\`metaquorum serve\`, k8s/base/config.env and the pod's METAQUORUM_*
         variables, secrets from k8s/make-secrets.py, read-only root, one data
         volume each) on 127.0.0.1 ports the OS picks (--network host), waits
         for a leader, registers a broker, kills the leader (SIGKILL), checks
         the registration on the new leader and on the killed voter once
         restarted, stops every voter with SIGTERM (exit 0 expected), then
         removes what it started. Run build first.
clean    Removes what a killed \`cluster\` run left (it also does so itself).

Environment: METAQUORUM_IMAGE_TAG (default $TAG), METAQUORUM_IMAGE_CACHE
(pip cache and cluster files; default $CACHE).
EOF
}

say() { printf '==> %s\n' "$*"; }
note() { printf '    %s\n' "$*"; }
die() {
    printf 'image.sh: %s\n' "$1" >&2
    shift
    for line in "$@"; do printf '          %s\n' "$line" >&2; done
    exit 1
}
now() { date +%s%3N; } # milliseconds
elapsed() { # seconds since START, one decimal
    local ms=$(($(now) - $1))
    printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100))
}
past() { [ $(($(now) - $1)) -gt $(($2 * 1000)) ]; } # past START SECONDS

# ---------------------------------------------------------------- prerequisites

need_tools() { # need_tools CMD:PACKAGE ...
    local missing=() pair
    for pair in "$@"; do
        command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        die "missing: ${missing[*]}" \
            "install them (Debian/Ubuntu: sudo apt-get install -y ${missing[*]}) and run again;" \
            "podman here runs rootful, so run this script as root"
    fi
    say "installing ${missing[*]} (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq || die "apt-get update failed" "check the network and /etc/apt/sources.list*"
    apt-get install -y -qq "${missing[@]}" >/dev/null ||
        die "apt-get install ${missing[*]} failed" "see the lines above"
    for pair in "$@"; do
        command -v "${pair%%:*}" >/dev/null 2>&1 ||
            die "${pair#*:} is installed but ${pair%%:*} is not on PATH ($PATH)"
    done
}

need_root() {
    [ "$(id -u)" = 0 ] || die "podman runs rootful here: run as root (sudo scripts/image.sh $*)"
}

PODMAN=()
RUN_FLAGS=()
setup_podman() {
    need_tools podman:podman runc:runc
    local runc nofile
    runc=$(command -v runc)
    nofile=$(ulimit -Hn)
    [ "$nofile" = unlimited ] || [ "$nofile" -gt 1048576 ] && nofile=1048576
    PODMAN=(podman --cgroup-manager=cgroupfs)
    RUN_FLAGS=(--runtime "$runc" --ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$NPROC:$NPROC")
}

# ------------------------------------------------------------------------ build

debian_mirror() {
    local uri=""
    if [ -r /etc/apt/sources.list.d/debian.sources ]; then
        uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
    fi
    if [ -z "$uri" ] && [ -r /etc/apt/sources.list ]; then
        uri=$(awk '/^deb / && $2 ~ /^http/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list)
    fi
    echo "${uri:-http://deb.debian.org/debian}"
}

make_local_base() { # the build stage's base, from Debian's packages (no registry)
    local mirror=$1 rebuild=$2 have=""
    if "${PODMAN[@]}" image exists "$LOCAL_BASE"; then
        have=$("${PODMAN[@]}" image inspect --format \
            '{{index .Labels "io.metaquorum.base-packages"}}' "$LOCAL_BASE")
    fi
    if [ "$rebuild" = 0 ] && [ "$have" = "$BASE_PACKAGES" ]; then
        say "base image $LOCAL_BASE: reused (--rebuild-base makes it again)"
        return
    fi
    need_tools debootstrap:debootstrap
    local started rootfs
    started=$(now)
    rootfs=$(mktemp -d "${TMPDIR:-/tmp}/metaquorum-base.XXXXXX")
    TEMP_DIRS+=("$rootfs" "$rootfs.log")
    say "base image $LOCAL_BASE: debootstrap $SUITE ($BASE_PACKAGES) from $mirror (1-3 minutes)"
    # In the foreground (Ctrl-C stops it); one line each time its phase changes.
    if ! debootstrap --variant=minbase --include="$BASE_PACKAGES" "$SUITE" "$rootfs" "$mirror" 2>&1 |
        tee "$rootfs.log" | awk '$1 != "I:" || $2 == "Validating" { next }
            $2 == "Retrieving" { if (n++ % 25 == 0) { print "    I: Retrieving packages (" n ")"; fflush() }; next }
            $2 != last { last = $2; print "    " $0; fflush() }'; then
        tail -n 20 "$rootfs.log" >&2
        die "debootstrap failed (above)" \
            "check that $mirror is reachable (apt-get update), or pass --mirror URL"
    fi
    # Only the build stage runs on it (the image itself is assembled FROM
    # scratch): trim what would only make the cached base bigger, keeping the
    # copyright files the image ships.
    rm -rf "$rootfs"/var/cache/apt/* "$rootfs"/var/lib/apt/lists/* \
        "$rootfs"/usr/share/{man,info,locale}
    find "$rootfs/usr/share/doc" -type f ! -name copyright -delete
    tar -C "$rootfs" -c . | "${PODMAN[@]}" import -q \
        --change "LABEL io.metaquorum.base-packages=$BASE_PACKAGES" - "$LOCAL_BASE" >/dev/null ||
        die "podman import of the base failed (above)"
    rm -rf --one-file-system "$rootfs"
    note "made in $(elapsed "$started") s: $(image_mb "$LOCAL_BASE") MB"
}

image_mb() {
    echo $(($("${PODMAN[@]}" image inspect --format '{{.Size}}' "$1") / 1000000))
}

make_wheelhouse() { # pip wheel, run in the base image: the wheels match its Python
    local base=$1 started out
    started=$(now)
    out="$ROOT/wheelhouse.partial"
    rm -rf "$out" && mkdir -p "$out" "$CACHE/pip"
    TEMP_DIRS+=("$out")
    say "wheelhouse: pip wheel . in $base (the index through the host's network)"
    # SOURCE_DATE_EPOCH: the same sources give the same metaquorum wheel, byte
    # for byte, so podman build reuses its cached layers.
    local flags=(--rm -i --network host -v "$CACHE/pip:/root/.cache/pip" -v "$out:/out"
        -e SOURCE_DATE_EPOCH=315532800)
    # A TLS-intercepting proxy's CA is in the host's bundle, not the base's.
    if [ -r /etc/ssl/certs/ca-certificates.crt ]; then
        flags+=(-v /etc/ssl/certs/ca-certificates.crt:/host-ca.crt:ro -e PIP_CERT=/host-ca.crt)
    fi
    local var
    for var in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY PIP_INDEX_URL; do
        [ -n "${!var:-}" ] && flags+=(-e "$var")
    done
    # The wheel holds the packages alone: tests, docs, bench and k8s stay out.
    tar -C "$ROOT" -c --exclude-vcs --exclude-vcs-ignores --exclude=./.venv \
        --exclude=./wheelhouse --exclude=./wheelhouse.partial --exclude=./tests \
        --exclude=./bench --exclude=./docs --exclude=./k8s . |
        "${PODMAN[@]}" run "${RUN_FLAGS[@]}" "${flags[@]}" "$base" sh -c '
            set -e; mkdir /tmp/src; tar -x -C /tmp/src
            python3 -m venv /tmp/pip
            /tmp/pip/bin/pip wheel --quiet --disable-pip-version-check --use-pep517 \
                --wheel-dir /out /tmp/src' ||
        die "pip wheel failed (above)" \
            "a CERTIFICATE_VERIFY_FAILED error: put the proxy's CA in /etc/ssl/certs/ca-certificates.crt;" \
            "no route to the index: set https_proxy or PIP_INDEX_URL and run again"
    rm -rf "$ROOT/wheelhouse"
    mv "$out" "$ROOT/wheelhouse"
    note "$(find "$ROOT/wheelhouse" -name '*.whl' | wc -l) wheels in $(elapsed "$started") s"
}

cmd_build() {
    local base="" rebuild=0 mirror=""
    while [ $# -gt 0 ]; do
        case $1 in
        --base) base=${2:?--base needs an image}; shift 2 ;;
        --rebuild-base) rebuild=1; shift ;;
        --mirror) mirror=${2:?--mirror needs a URL}; shift 2 ;;
        *) die "build: unknown option $1" "scripts/image.sh --help" ;;
        esac
    done
    need_root build
    setup_podman
    local started
    started=$(now)
    if [ -z "$base" ]; then
        make_local_base "${mirror:-$(debian_mirror)}" "$rebuild"
        base=$LOCAL_BASE
    fi
    make_wheelhouse "$base"
    local building
    building=$(now)
    say "image $TAG: podman build FROM $base"
    local log
    log=$(mktemp)
    TEMP_DIRS+=("$log")
    if ! "${PODMAN[@]}" build "${RUN_FLAGS[@]}" --network host --build-arg "BASE=$base" \
        --tag "$TAG" --file "$ROOT/Dockerfile" "$ROOT" 2>&1 | tee "$log" |
        { grep --line-buffered -E '^\[[0-9]/[0-9]\] STEP|^image_rootfs' || true; }; then
        tail -n 30 "$log" >&2
        die "podman build failed (its last lines are above)"
    fi
    note "built in $(elapsed "$building") s"
    local compressed
    compressed=$("${PODMAN[@]}" save --format docker-archive "$TAG" 2>/dev/null | gzip -6 | wc -c)
    say "$TAG: $(image_mb "$TAG") MB ($((compressed / 1000000)) MB gzipped, as a registry" \
        "stores it); build total $(elapsed "$started") s"
}

# ---------------------------------------------------------------------- cluster

NAMES=(metaquorum-image-0 metaquorum-image-1 metaquorum-image-2)
VOLUMES=(metaquorum-image-data-0 metaquorum-image-data-1 metaquorum-image-data-2)

remove_leftovers() { # containers and volumes of an earlier run, by label
    local found
    found=$("${PODMAN[@]}" ps -a -q --filter "label=$LABEL")
    if [ -n "$found" ]; then
        note "removing containers left by an earlier run: $("${PODMAN[@]}" ps -a \
            --filter "label=$LABEL" --format '{{.Names}}' | tr '\n' ' ')"
        # shellcheck disable=SC2086
        "${PODMAN[@]}" rm -f -t 0 $found >/dev/null
    fi
    found=$("${PODMAN[@]}" volume ls -q --filter "label=$LABEL")
    if [ -n "$found" ]; then
        note "removing volumes left by an earlier run: $(echo "$found" | tr '\n' ' ')"
        # shellcheck disable=SC2086
        "${PODMAN[@]}" volume rm -f $found >/dev/null
    fi
    rm -rf "$CACHE/cluster"
}

cmd_clean() {
    need_root clean
    setup_podman
    lock_cluster
    say "removing what scripts/image.sh cluster left"
    remove_leftovers
}

lock_cluster() {
    mkdir -p "$CACHE"
    exec 9>"$CACHE/cluster.lock"
    flock -n 9 || die "another scripts/image.sh cluster (or clean) is running" \
        "wait for it, or stop it (Ctrl-C removes what it started)"
}

API_CURL=()
api() { # api PORT PATH [curl args]: an HTTPS call to one voter, admin token
    local port=$1 path=$2
    shift 2
    "${API_CURL[@]}" "$@" "https://127.0.0.1:$port$path"
}

json_field() { # json_field NAME: the first scalar NAME in the JSON on stdin
    sed -n "s/.*\"$1\":\(\"[^\"]*\"\|[^,}]*\).*/\1/p" | head -n 1 | tr -d '"'
}

running() { [ "$("${PODMAN[@]}" inspect --format '{{.State.Running}}' "${NAMES[$1]}" 2>/dev/null)" = true ]; }

voter_logs() {
    local i
    for i in "$@"; do
        printf -- '--- %s (last 15 lines):\n' "${NAMES[$i]}" >&2
        "${PODMAN[@]}" logs --tail 15 "${NAMES[$i]}" >&2 2>&1 || true
    done
}

wait_leader() { # wait_leader SECONDS NOT VOTER...: the leader all VOTERs name (never NOT)
    local limit=$1 not=$2 started i id leader ids last=""
    shift 2
    started=$(now)
    while true; do
        ids=()
        for i in "$@"; do
            running "$i" || {
                voter_logs "$i"
                die "${NAMES[$i]} exited (its log is above)"
            }
            id=$(api "${HTTP_PORTS[$i]}" /v1/quorum/status 2>/dev/null | json_field leaderId || true)
            ids+=("${id:--}") # - : no answer yet
        done
        leader=${ids[0]}
        if [[ $leader =~ ^[0-9]+$ ]] && [ "$leader" != "$not" ] &&
            [ "$(printf '%s\n' "${ids[@]}" | sort -u | wc -l)" = 1 ] &&
            [ "$(api "${HTTP_PORTS[$leader]}" /readyz -o /dev/null -w '%{http_code}' 2>/dev/null)" = 200 ]; then
            echo "$leader"
            return
        fi
        if past "$started" "$limit"; then
            voter_logs "$@"
            die "no leader named by voters $* after $limit s (each one's leaderId: ${ids[*]:-none})" \
                "their logs are above; a voter that cannot reach the others logs why"
        fi
        if [ "${ids[*]}" != "$last" ]; then
            note "waiting for a leader ($(elapsed "$started") s; leaderId per voter: ${ids[*]})" >&2
            last="${ids[*]}"
        fi
        sleep 0.2
    done
}

cleanup_cluster() {
    local code=$?
    trap - EXIT INT TERM
    if [ "${#PODMAN[@]}" -gt 0 ] && [ -n "${CLUSTER_STARTED:-}" ]; then
        [ "$code" = 0 ] || say "removing the cluster's containers and volumes"
        "${PODMAN[@]}" rm -f -t 0 "${NAMES[@]}" >/dev/null 2>&1 || true
        "${PODMAN[@]}" volume rm -f "${VOLUMES[@]}" >/dev/null 2>&1 || true
        rm -rf "$CACHE/cluster"
    fi
    exit "$code"
}

cmd_cluster() {
    [ $# -eq 0 ] || die "cluster takes no options" "scripts/image.sh --help"
    need_root cluster
    setup_podman
    need_tools curl:curl flock:util-linux
    "${PODMAN[@]}" image exists "$TAG" ||
        die "no image $TAG" "build it first: scripts/image.sh build"
    lock_cluster
    local started
    started=$(now)
    say "cluster from $TAG: 3 voters on 127.0.0.1 (--network host)"
    remove_leftovers
    CLUSTER_STARTED=1
    trap cleanup_cluster EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM

    local python=(--rm --network host --entrypoint /opt/metaquorum/bin/python)
    # Ports from the OS: six at once, so no two are the same.
    local ports
    read -r -a ports <<<"$("${PODMAN[@]}" run "${RUN_FLAGS[@]}" "${python[@]}" "$TAG" -c '
import socket
socks = [socket.socket() for _ in range(6)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))')"
    HTTP_PORTS=("${ports[@]:0:3}")
    local raft_ports=("${ports[@]:3:3}")

    # The Secrets and the cluster id, made by the manifests' own script with
    # the image's Python, laid out as the pod mounts them (mode 0440, group 10001).
    local files="$CACHE/cluster"
    mkdir -p "$files/raft" "$files/auth" "$files/tls"
    "${PODMAN[@]}" run "${RUN_FLAGS[@]}" "${python[@]}" --user 0 \
        -v "$ROOT/k8s/make-secrets.py:/make-secrets.py:ro" -v "$files:/out" "$TAG" \
        /make-secrets.py --dir /out/local >/dev/null || die "k8s/make-secrets.py failed (above)"
    mv "$files/local/raft-secret" "$files/local/delegation-token-secret" "$files/raft/"
    mv "$files/local/tokens" "$files/local/admin-token" "$files/auth/"
    mv "$files/local/tls.crt" "$files/local/tls.key" "$files/local/ca.crt" "$files/tls/"
    chown -R 0:10001 "$files/raft" "$files/auth" "$files/tls"
    chmod 0440 "$files"/{raft,auth,tls}/*
    local cluster_id
    cluster_id=$(sed -n 's/^METAQUORUM_CLUSTER_ID=//p' "$files/local/cluster.env")
    API_CURL=(curl -sS --max-time 5 --cacert "$files/tls/ca.crt"
        -H "Authorization: Bearer $(cat "$files/auth/admin-token")")

    local voters="" i
    for i in 0 1 2; do voters+="${voters:+,}$i@127.0.0.1:${raft_ports[$i]}"; done
    # Voter 1 in the layout a pod of 3 CPUs or more gets (`auto`): an HTTP
    # worker and the orderer process beside the core, which is pid 1 in its
    # container; the others in the one-process layout 2 CPUs give.
    local HTTP_WORKERS=(0 1 0)
    for i in 0 1 2; do
        "${PODMAN[@]}" volume create --label "$LABEL" "${VOLUMES[$i]}" >/dev/null
        # k8s/base/statefulset.yaml's container: its command (the image's
        # ENTRYPOINT and CMD, `metaquorum serve`), the ConfigMap (config.env and
        # the cluster id), then the pod's env with the pod DNS names, the
        # wildcard binds and the ports rewritten to this voter's 127.0.0.1 ports.
        local run=(run "${RUN_FLAGS[@]}" -d --name "${NAMES[$i]}" --label "$LABEL"
            --hostname "metaquorum-$i" --network host
            --read-only --tmpfs /tmp:size=64m --cap-drop ALL --security-opt no-new-privileges
            --user 10001:10001
            -v "${VOLUMES[$i]}:/var/lib/metaquorum"
            -v "$files/raft:/etc/metaquorum/raft:ro"
            -v "$files/auth:/etc/metaquorum/auth:ro"
            -v "$files/tls:/etc/metaquorum/tls:ro"
            --env-file "$ROOT/k8s/base/config.env"
            --env-file "$files/local/cluster.env"
            -e "METAQUORUM_VOTERS=$voters"
            -e "METAQUORUM_HTTP_WORKERS=${HTTP_WORKERS[$i]}"
            -e METAQUORUM_HTTP_HOST=127.0.0.1
            -e "METAQUORUM_HTTP_PORT=${HTTP_PORTS[$i]}"
            -e METAQUORUM_RAFT_BIND=127.0.0.1
            -e "HOSTNAME=metaquorum-$i"
            -e POD_NAMESPACE=default
            -e METAQUORUM_NODE_ID_FROM_HOSTNAME=true
            -e "METAQUORUM_RAFT_ADDRESS=127.0.0.1:${raft_ports[$i]}"
            -e "METAQUORUM_ADVERTISED_URL=https://127.0.0.1:${HTTP_PORTS[$i]}"
            -e METAQUORUM_DATA_DIR=/var/lib/metaquorum/data
            -e METAQUORUM_RAFT_SECRET_FILE=/etc/metaquorum/raft/raft-secret
            -e METAQUORUM_DELEGATION_TOKEN_SECRET_FILE=/etc/metaquorum/raft/delegation-token-secret
            -e METAQUORUM_TOKENS_FILE=/etc/metaquorum/auth/tokens
            -e METAQUORUM_TLS_CERT_FILE=/etc/metaquorum/tls/tls.crt
            -e METAQUORUM_TLS_KEY_FILE=/etc/metaquorum/tls/tls.key
            -e METAQUORUM_TOKEN_FILE=/etc/metaquorum/auth/admin-token
            -e "METAQUORUM_URL=https://127.0.0.1:${HTTP_PORTS[$i]}"
            -e METAQUORUM_CACERT=/etc/metaquorum/tls/ca.crt
            "$TAG")
        note "voter $i: HTTPS ${HTTP_PORTS[$i]}, Raft ${raft_ports[$i]}, HTTP workers ${HTTP_WORKERS[$i]}"
        printf '      $ podman'
        printf ' %q' "${run[@]}"
        printf '\n'
        "${PODMAN[@]}" "${run[@]}" >/dev/null || die "podman run of ${NAMES[$i]} failed (above)"
    done
    local booted leader
    booted=$(now)
    leader=$(wait_leader 120 none 0 1 2)
    local start_s
    start_s=$(elapsed "$booted")
    say "voter $leader leads, ${start_s} s after the containers started"

    # A broker registers through the API, on any voter (307 to the leader).
    local incarnation body reply epoch
    incarnation=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
    body="{\"brokerId\":1,\"clusterId\":\"$cluster_id\",\"incarnationId\":\"$incarnation\","
    body+="\"listeners\":[{\"name\":\"PLAINTEXT\",\"host\":\"broker-1\",\"port\":9092,\"securityProtocol\":0}],"
    body+="\"features\":[{\"name\":\"metadata.version\",\"minSupportedVersion\":6,\"maxSupportedVersion\":12}],"
    body+="\"rack\":null}"
    local other=$(((leader + 1) % 3))
    reply=$(api "${HTTP_PORTS[$other]}" /v1/brokers/register --location-trusted -X POST \
        -H 'Content-Type: application/json' -d "$body") ||
        die "POST /v1/brokers/register failed: $reply"
    epoch=$(json_field brokerEpoch <<<"$reply")
    [ "$(json_field errorName <<<"$reply")" = NONE ] && [[ $epoch =~ ^[0-9]+$ ]] ||
        die "the registration was refused: $reply"
    say "broker 1 registered through voter $other (307 to $leader): brokerEpoch $epoch"

    say "killing the leader, voter $leader (SIGKILL: no handover)"
    local killed
    killed=$(now)
    "${PODMAN[@]}" kill --signal KILL "${NAMES[$leader]}" >/dev/null
    local survivors=() new
    for i in 0 1 2; do [ "$i" = "$leader" ] || survivors+=("$i"); done
    new=$(wait_leader 60 "$leader" "${survivors[@]}")
    say "voter $new leads, $(elapsed "$killed") s after the kill"
    check_broker "$new" "$epoch" "?consistency=linearizable" "the new leader"

    say "restarting voter $leader on its volume"
    "${PODMAN[@]}" start "${NAMES[$leader]}" >/dev/null
    wait_caught_up "$leader" "$epoch" 60

    say "stopping the voters with SIGTERM (each hands over or drains, then exits 0)"
    "${PODMAN[@]}" stop -t 30 "${NAMES[@]}" >/dev/null
    for i in 0 1 2; do
        local code
        code=$("${PODMAN[@]}" inspect --format '{{.State.ExitCode}}' "${NAMES[$i]}")
        [ "$code" = 0 ] || {
            voter_logs "$i"
            die "${NAMES[$i]} exited $code on SIGTERM, not 0 (its log is above)"
        }
    done
    say "cluster check passed in $(elapsed "$started") s (leader in $start_s s);" \
        "removing its containers and volumes"
}

check_broker() { # check_broker VOTER EPOCH QUERY WHO
    local reply
    reply=$(api "${HTTP_PORTS[$1]}" "/v1/brokers/1$3") || die "GET /v1/brokers/1 on voter $1 failed"
    [ "$(json_field brokerEpoch <<<"$reply")" = "$2" ] ||
        die "the acknowledged registration is not on $4 (voter $1): $reply"
    note "broker 1 (epoch $2) is on $4 (voter $1)"
}

wait_caught_up() { # wait_caught_up VOTER EPOCH SECONDS: ready and serving the broker
    local started
    started=$(now)
    until [ "$(api "${HTTP_PORTS[$1]}" /readyz -o /dev/null -w '%{http_code}' 2>/dev/null)" = 200 ]; do
        running "$1" || {
            voter_logs "$1"
            die "${NAMES[$1]} exited after its restart (its log is above)"
        }
        if past "$started" "$3"; then
            voter_logs "$1"
            die "voter $1 not ready $3 s after its restart (its log is above)"
        fi
        sleep 0.2
    done
    note "voter $1 ready again in $(elapsed "$started") s"
    check_broker "$1" "$2" "" "the restarted voter"
}

# ------------------------------------------------------------------------- main

TEMP_DIRS=()
remove_temp() {
    local dir mount
    for dir in "${TEMP_DIRS[@]}"; do
        # A debootstrap interrupted while configuring has /proc, /sys (and
        # maybe the host's /dev) mounted in its root: unmount, never descend.
        for mount in $(awk -v d="$dir/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r); do
            umount -l "$mount" 2>/dev/null || true
        done
        rm -rf --one-file-system "$dir"
    done
}

case ${1:-} in
build)
    shift
    trap remove_temp EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    cmd_build "$@"
    ;;
cluster) shift && cmd_cluster "$@" ;;
clean) shift && cmd_clean "$@" ;;
-h | --help | help) usage ;;
"") usage >&2 && exit 2 ;;
*) printf 'image.sh: unknown command %s\n\n' "$1" >&2 && usage >&2 && exit 2 ;;
esac
