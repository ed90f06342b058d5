#!/usr/bin/env bash
# Installs what the tests need (Apache ZooKeeper 3.8 as the oracle, its CLI and
# C client, a JDK for the Java-client test, Apache Curator, openssl, kazoo and
# prometheus_client from PyPI, node and
# node-zookeeper-client from npm) and runs every test of the workspace.
# Usage: bash client-tests/run-all.sh
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO=sudo; fi

need_apt=""
[ -x /usr/share/zookeeper/bin/zkCli.sh ] || need_apt=1
[ -f /usr/share/java/zookeeper.jar ] || need_apt=1
[ -x /usr/lib/zookeeper/bin/cli_mt ] || need_apt=1
[ -x /usr/bin/javac ] || need_apt=1
# The servlet API, without which ZooKeeper's AdminServer does not start
# (tests/admin_server.rs compares zkd's with it).
[ -f /usr/share/java/servlet-api.jar ] || need_apt=1
# Apache Curator for tests/curator.rs (a LeaderLatch under the fault API).
[ -f /usr/share/java/curator-recipes.jar ] || need_apt=1
# libfiu's fiu-run/fiu-ctrl make fsync fail with EIO for tests/disk_errors.rs.
[ -x /usr/bin/fiu-ctrl ] || need_apt=1
# libfaketime jumps a member's wall clock for zkd-nemesis's clock-jump.
[ -f /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ] || need_apt=1
# ip (iproute2) builds the network namespaces of tests/ensemble_faults.rs.
command -v ip >/dev/null || need_apt=1
command -v nft >/dev/null || need_apt=1
# openssl makes the certificates of tests/tls.rs.
command -v openssl >/dev/null || need_apt=1
# node (and npm, to fetch node-zookeeper-client) for tests/node_client.rs.
NODE_DIR=client-tests/tests/node
node_pkgs=""
if ! command -v node >/dev/null; then
  node_pkgs="nodejs npm"
elif [ ! -d "$NODE_DIR/node_modules/node-zookeeper-client" ] && ! command -v npm >/dev/null; then
  node_pkgs="npm"
fi
[ -z "$node_pkgs" ] || need_apt=1
if [ -n "$need_apt" ]; then
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086 # node_pkgs is a list of package names
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    zookeeper libzookeeper-java zookeeper-bin netcat-openbsd default-jdk-headless python3 fiu-utils faketime iproute2 nftables libcurator-recipes-java libservlet-api-java openssl $node_pkgs >/dev/null
fi

# kazoo, the stock Python client, for the kazoo smoke test.
python3 -c 'import kazoo' 2>/dev/null || python3 -m pip install -q --root-user-action=ignore kazoo==2.11.0

# pure-sasl: kazoo's SASL (DIGEST-MD5) for tests/sasl.rs.
python3 -c 'import puresasl' 2>/dev/null || python3 -m pip install -q --root-user-action=ignore pure-sasl==0.6.2

# The Prometheus text parser that tests/prometheus.rs reads /metrics with.
python3 -c 'import prometheus_client' 2>/dev/null || python3 -m pip install -q --root-user-action=ignore prometheus_client==0.26.0

# node-zookeeper-client, pinned by package.json and package-lock.json.
[ -d "$NODE_DIR/node_modules/node-zookeeper-client" ] || (cd "$NODE_DIR" && npm ci --no-audit --no-fund)

# The deliberately broken zkd of tests/nemesis_planted.rs (planted bugs behind
# the failpoints feature), built first and set aside: the same dependencies,
# only zkd-server is compiled twice.
cargo build --release --locked -p zkd-server --bin zkd --features failpoints 2>&1 | tail -n 1
cp target/release/zkd target/zkd-failpoints
export ZKD_FAILPOINTS_BIN="$PWD/target/zkd-failpoints"

# The harness runs this binary instead of building its own.
export ZKD_BIN="$PWD/target/release/zkd"
cargo build --workspace --bins --release --locked 2>&1 | tail -n 3
cargo test --workspace --exclude zkd-server --release --locked -- --test-threads 2
cargo test -p zkd-server --bins --test '*' --release --locked -- --test-threads 2
# zkd-server's own tests (the simulator, the member lifecycle's scripts)
# once, in the build that can plant each fix back: every plant is caught,
# and the rest run as in any build, since no plant is active unless planted.
cargo test -p zkd-server --lib --features failpoints --release --locked -- --test-threads 2
