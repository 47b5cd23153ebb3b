#!/usr/bin/env bash
# Builds the node binaries of the local cluster (tools/cluster/up.sh) from the Go module proxy:
# kubelet, kube-scheduler, kube-controller-manager, kube-proxy (v1.37.2, as kube-apiserver in
# tools/build-k8s.sh) and the pod sandbox "pause" binary (tools/cluster/node/pause). They go to a
# cache OUTSIDE the repo, because a cold build takes ~10 minutes on two cores: done once per
# machine.
#
#   WAYLINE_K8S_BIN  cache root (default ~/.cache/wayline/k8s-bin); the binaries land in
#                    $WAYLINE_K8S_BIN/node-v1.37.2/
#
# Idempotent: binaries that are there and report the expected version are not rebuilt.
# The module (tools/cluster/node) is committed and used read-only: never `go get -u` there.
set -euo pipefail

K8S_VERSION=v1.37.2
BINS=(kubelet kube-scheduler kube-controller-manager kube-proxy)

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out="${WAYLINE_K8S_BIN:-$HOME/.cache/wayline/k8s-bin}/node-${K8S_VERSION}"
start=$SECONDS

bins_ok() {
	local b
	for b in "${BINS[@]}"; do
		[[ -x $out/$b ]] && [[ $("$out/$b" --version 2>/dev/null) == "Kubernetes $K8S_VERSION" ]] || return 1
	done
	[[ -x $out/pause ]]
}

if bins_ok; then
	echo "node binaries: $out (${BINS[*]} pause, $K8S_VERSION, cached, $((SECONDS - start))s)"
	exit 0
fi

GO=$(command -v go || true)
[[ -n $GO ]] || GO=/usr/local/go/bin/go
[[ -x $GO ]] || { echo "build-node.sh: no Go toolchain (go >= 1.26 needed)" >&2; exit 1; }
export CGO_ENABLED=0 # static binaries, as the official builds; no C compiler needed
mkdir -p "$out"
tmp="$out/.build"
rm -rf "$tmp" && mkdir -p "$tmp"

minor=$(cut -d. -f2 <<<"$K8S_VERSION")
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
done
ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"

echo "building ${BINS[*]} pause ($K8S_VERSION) ..."
pkgs=()
for b in "${BINS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
# One go build for all: the packages they share are compiled once. Into a temporary directory,
# then renamed, so an interrupted build never leaves a broken binary in place.
(cd "$here/node" && "$GO" build -trimpath -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}" ./pause)
for b in "${BINS[@]}" pause; do mv -f "$tmp/$b" "$out/$b"; done
rmdir "$tmp"
bins_ok || { echo "build-node.sh: $out does not hold ${BINS[*]} $K8S_VERSION" >&2; exit 1; }
echo "node binaries: $out (${BINS[*]} pause, $K8S_VERSION, built in $((SECONDS - start))s)"
