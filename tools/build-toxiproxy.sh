#!/usr/bin/env bash
# Builds toxiproxy-server from the Go module proxy for the network-fault tests (tests/toxiproxy.py
# starts it on loopback and cuts a worker's link to nats-server through it). The binary goes to a
# cache OUTSIDE the repo, keyed on the version, like tools/build-k8s.sh: built once per machine.
#
#   WAYLINE_TOXIPROXY_BIN  cache root (default ~/.cache/wayline/toxiproxy); the binary lands in
#                          $WAYLINE_TOXIPROXY_BIN/$TOXIPROXY_VERSION/toxiproxy-server
#
# Idempotent: a binary that is already there and reports the expected version is not rebuilt.
set -euo pipefail

TOXIPROXY_VERSION=v2.5.0
MODULE=github.com/Shopify/toxiproxy/v2

out="${WAYLINE_TOXIPROXY_BIN:-$HOME/.cache/wayline/toxiproxy}/${TOXIPROXY_VERSION}"
bin="$out/toxiproxy-server"

# (a here-string, not a pipe: grep -q exiting early would SIGPIPE the server under pipefail)
server_ok() { [[ -x $bin ]] && grep -qx "toxiproxy-server version ${TOXIPROXY_VERSION#v}" <<<"$("$bin" -version 2>/dev/null)"; }

if server_ok; then
	echo "toxiproxy-server: $bin ($TOXIPROXY_VERSION, cached)"
	exit 0
fi

GO=$(command -v go || true)
[[ -n $GO ]] || GO=/usr/local/go/bin/go
[[ -x $GO ]] || { echo "build-toxiproxy.sh: no Go toolchain (go >= 1.18 needed)" >&2; exit 1; }
export CGO_ENABLED=0 GOFLAGS=-mod=mod
mkdir -p "$out"

# go install names the binary after its package ("server"): built into a scratch GOBIN and
# renamed, so an interrupted build never leaves a broken binary under the final name. Without
# the Version ldflag, -version and the API's /version say "git".
start=$SECONDS
echo "building toxiproxy-server $TOXIPROXY_VERSION ..."
rm -rf "$out/.build"
GOBIN="$out/.build" "$GO" install -trimpath \
	-ldflags "-s -w -X $MODULE.Version=${TOXIPROXY_VERSION#v}" "$MODULE/cmd/server@$TOXIPROXY_VERSION"
mv -f "$out/.build/server" "$bin"
rm -rf "$out/.build"
echo "built toxiproxy-server in $((SECONDS - start))s"

server_ok || { echo "build-toxiproxy.sh: $bin does not report $TOXIPROXY_VERSION" >&2; exit 1; }
echo "toxiproxy-server: $bin ($TOXIPROXY_VERSION)"
