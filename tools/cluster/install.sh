#!/usr/bin/env bash
# A first install on this machine (what `make cluster` runs, as root): the images
# (images.sh), a one-node cluster of its own (up.sh, named $WAYLINE_CLUSTER_NAME, default
# wayline-dev: never the e2e suite's wayline-e2e, which `make e2e` tears down), and the chart
# installed as release $RELEASE in namespace $NAMESPACE with the values values.sh derives from
# the images just built (the examples' orders workflow on the workers). It ends by printing the
# `export KUBECONFIG=...` line and where helm and kubectl are.
#
#   install.sh          build, bring up, install
#   down.sh             (with the same WAYLINE_CLUSTER_NAME; `make cluster-down`) undoes it
set -euo pipefail
export WAYLINE_CLUSTER_NAME=${WAYLINE_CLUSTER_NAME:-wayline-dev}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TAG=wayline:dev          # the project image's tag (the e2e suite builds wayline:e2e)
RELEASE=wl
NAMESPACE=wayline
HELM=${HELM:-$CP_BIN/helm}
export KUBECTL

[[ $NAME != wayline-e2e ]] || die "wayline-e2e is the e2e suite's cluster (its fixture tears it down): pick another WAYLINE_CLUSTER_NAME"
other=$(other_cluster) # checked again by up.sh, but before minutes of image builds here
[[ -z $other ]] || die "another local cluster is up ($other): one at a time (make cluster-down CLUSTER=$(basename "$other"))"
reason=$(cluster_unsupported)
[[ -z $reason ]] || die "this machine cannot run the local cluster: $reason"
[[ -x $HELM ]] || die "no helm at $HELM: make k8s-bins"

bash "$REPO/tools/cluster/deps.sh" >&2
bash "$REPO/tools/cluster/build-node.sh" >&2
images=$(bash "$REPO/tools/cluster/images.sh" "$TAG") # "IMAGE=TAR" lines
archives=()
while IFS= read -r line; do
	[[ $line != *=* ]] || archives+=("${line#*=}")
done <<<"$images"
kubeconfig=$(bash "$REPO/tools/cluster/up.sh" "${archives[@]}" | tail -1)

values=$STATE/values.yaml
bash "$REPO/tools/cluster/values.sh" "$TAG" >"$values"
say "helm install $RELEASE in namespace $NAMESPACE (values: $values)"
"$HELM" --kubeconfig "$kubeconfig" install "$RELEASE" "$REPO/charts/wayline" \
	--namespace "$NAMESPACE" --create-namespace -f "$values" --wait --timeout 5m >&2 ||
	die "helm install failed; the cluster stays up for a look (KUBECONFIG=$kubeconfig; make cluster-down removes it)"

cat <<EOF

Wayline runs on cluster $NAME (release $RELEASE, namespace $NAMESPACE). In your shell:

  export KUBECONFIG=$kubeconfig
  helm:    $HELM
  kubectl: $KUBECTL

Start the example order and approve it:

  $KUBECTL -n $NAMESPACE apply -f $REPO/examples/k8s/orders-run.yaml
  $KUBECTL -n $NAMESPACE apply -f $REPO/examples/k8s/orders-approve.yaml
  $KUBECTL -n $NAMESPACE get workflowruns -w

Tear it down: make cluster-down
EOF
