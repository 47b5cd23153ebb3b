#!/usr/bin/env bash
# containerd's ctr against the local cluster's containerd, namespace k8s.io (the kubelet's):
#   tools/cluster/ctr.sh images ls
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ctr_ "$@"
