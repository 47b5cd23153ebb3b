#!/usr/bin/env bash
# The chart's values for the images images.sh builds (their names come from `images.sh
# --names`, so they cannot drift): the project image, the NATS image, and a worker serving the
# examples' orders workflow. install.sh gives them to `helm install -f`; needs no root.
#
#   values.sh [TAG]     TAG of the project image (default wayline:dev)
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
TAG=${1:-wayline:dev}
mapfile -t names < <(bash "$here/images.sh" --names "$TAG")
nats=
for image in "${names[@]}"; do [[ $image != */nats:* ]] || nats=$image; done
[[ -n $nats ]] || { echo "images.sh --names printed no NATS image" >&2; exit 1; }
cat <<YAML
# Written by tools/cluster/values.sh for the images tools/cluster/images.sh built.
image:
  repository: ${TAG%:*}
  tag: "${TAG##*:}"
  pullPolicy: IfNotPresent   # imported into the node's containerd: there is no registry
nats:
  image: $nats
workers:
  - name: default
    apps: [examples.orders]
YAML
