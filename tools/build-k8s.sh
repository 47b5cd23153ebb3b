#!/usr/bin/env bash
# Builds kube-apiserver, etcd and helm from the Go module proxy for tests/operator (no Docker, and no
# package registry ships kube-apiserver). The binaries go to a cache OUTSIDE the repo, keyed on
# the versions, because a cold kube-apiserver build takes minutes: it is done once per machine.
#
#   WAYLINE_K8S_BIN  cache root (default ~/.cache/wayline/k8s-bin); the binaries land in
#                    $WAYLINE_K8S_BIN/v1.37.2-etcd3.6.16/ (tests/operator/conftest.py looks there)
#
# Idempotent: a binary that is already there and reports the expected version is not rebuilt.
# The module files (tools/k8s, tools/etcd) are committed and used read-only: never `go get -u`.
set -euo pipefail

K8S_VERSION=v1.37.2
ETCD_VERSION=3.6.16
HELM_VERSION=v3.22.0

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out="${WAYLINE_K8S_BIN:-$HOME/.cache/wayline/k8s-bin}/${K8S_VERSION}-etcd${ETCD_VERSION}"

apiserver_ok() { [[ -x $out/kube-apiserver ]] && [[ $("$out/kube-apiserver" --version 2>/dev/null) == "Kubernetes $K8S_VERSION" ]]; }
# (a here-string, not a pipe: grep -q exiting early would SIGPIPE etcd and fail under pipefail)
etcd_ok() { [[ -x $out/etcd ]] && grep -qx "etcd Version: $ETCD_VERSION" <<<"$("$out/etcd" --version 2>/dev/null)"; }

helm_ok() { [[ -x $out/helm ]] && [[ $("$out/helm" version --template '{{.Version}}' 2>/dev/null) == "$HELM_VERSION" ]]; }

if apiserver_ok && etcd_ok && helm_ok; then
	echo "k8s test binaries: $out (kube-apiserver $K8S_VERSION, etcd $ETCD_VERSION, helm $HELM_VERSION, cached)"
	exit 0
fi

GO=$(command -v go || true)
[[ -n $GO ]] || GO=/usr/local/go/bin/go
[[ -x $GO ]] || { echo "build-k8s.sh: no Go toolchain (go >= 1.26 needed)" >&2; exit 1; }
export CGO_ENABLED=0 # as the official builds: static binaries, no C compiler needed
mkdir -p "$out"

# Build into a temporary name and rename, so an interrupted build never leaves a broken binary.
build() { # build MODULE_DIR NAME PACKAGE [go build flags...]
	local dir=$1 name=$2 pkg=$3 start=$SECONDS
	shift 3
	echo "building $name ($pkg) ..."
	(cd "$here/$dir" && "$GO" build -trimpath "$@" -o "$out/.$name.tmp" "$pkg")
	mv -f "$out/.$name.tmp" "$out/$name"
	echo "built $name in $((SECONDS - start))s"
}

if ! etcd_ok; then
	# The package is the module root, so name the output: go's default would be "v3".
	build etcd etcd go.etcd.io/etcd/server/v3 -ldflags "-s -w"
fi

if ! apiserver_ok; then
	# Without these, --version and /version say v0.0.0-master+$Format:%H$ and kubectl warns
	# about version skew.
	minor=$(cut -d. -f2 <<<"$K8S_VERSION")
	ldflags="-s -w"
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
	done
	ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
	build k8s kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver -ldflags "$ldflags"
fi

if ! helm_ok; then
	# helm's own module has no replace directives: go install builds it with its pinned
	# k8s.io versions. Without the k8sVersion ldflags, helm template/lint assume Kubernetes
	# 1.20 and refuse the chart's kubeVersion.
	start=$SECONDS
	echo "building helm $HELM_VERSION ..."
	minor=$(cut -d. -f2 <<<"$K8S_VERSION")
	hv=helm.sh/helm/v3
	GOBIN="$out/.helm-build" "$GO" install -trimpath -ldflags "-s -w \
		-X $hv/internal/version.version=$HELM_VERSION -X $hv/internal/version.gitTreeState=clean \
		-X $hv/pkg/chartutil.k8sVersionMajor=1 -X $hv/pkg/chartutil.k8sVersionMinor=$minor \
		-X $hv/pkg/lint/rules.k8sVersionMajor=1 -X $hv/pkg/lint/rules.k8sVersionMinor=$minor" \
		"$hv/cmd/helm@$HELM_VERSION"
	mv -f "$out/.helm-build/helm" "$out/helm"
	rmdir "$out/.helm-build"
	echo "built helm in $((SECONDS - start))s"
fi

apiserver_ok || { echo "build-k8s.sh: $out/kube-apiserver does not report $K8S_VERSION" >&2; exit 1; }
helm_ok || { echo "build-k8s.sh: $out/helm does not report $HELM_VERSION" >&2; exit 1; }
etcd_ok || { echo "build-k8s.sh: $out/etcd does not report $ETCD_VERSION" >&2; exit 1; }
echo "k8s test binaries: $out (kube-apiserver $K8S_VERSION, etcd $ETCD_VERSION, helm $HELM_VERSION)"
