#!/usr/bin/env bash
# Brings up a one-node Kubernetes on this Linux machine, without a container engine running and
# without a registry: containerd + runc + the CNI bridge, etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet and kube-proxy (v1.37.2), dnsmasq as the
# cluster DNS, and a small agent (tools/cluster/agent.py) that keeps DNS records and provisions
# hostPath PersistentVolumes. Everything runs inside a network namespace of its own
# ($NETNS, node IP 10.250.0.1 on a veth pair whose both ends live in it); the only thing in the
# host's namespace is a socat forwarder on 127.0.0.1 to the API server.
#
#   up.sh [IMAGE_TAR ...]   the image archives to import (tools/cluster/images.sh prints them)
#
# Prints the host-side kubeconfig's path on stdout. Needs root; the facts and traps behind every
# flag are in the project's research notes on real pods. down.sh undoes all of it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
start=$SECONDS

reason=$(cluster_unsupported)
[[ -z $reason ]] || die "this machine cannot run the local cluster: $reason"
for b in "$CP_BIN/etcd" "$CP_BIN/kube-apiserver" "$NODE_BIN/kubelet" "$NODE_BIN/kube-proxy" \
	"$NODE_BIN/kube-scheduler" "$NODE_BIN/kube-controller-manager" "$KUBECTL"; do
	[[ -x $b ]] || die "missing $b (make k8s-bins; make .venv/.installed)"
done
for b in containerd runc socat dnsmasq iptables conntrack; do
	command -v "$b" >/dev/null || die "missing $b: run tools/cluster/deps.sh"
done
[[ ! -e $NETNS_PATH && ! -d $STATE ]] || die "a cluster $NAME exists ($STATE): run tools/cluster/down.sh first"
other=$(other_cluster)
[[ -z $other ]] || die "another local cluster is up ($other): one at a time (WAYLINE_CLUSTER_NAME=$(basename "$other") tools/cluster/down.sh)"

mkdir -p "$STATE"/{pki,logs,pids,manifests,dns,pv,cni/net.d,cni/ipam,containerd,kubelet,pod-logs}
# From here on, a failure (a failed command or a die) tears down what was made.
up_ok=
trap '[[ -n $up_ok ]] || { say "up failed; tearing down"; bash "$REPO/tools/cluster/down.sh" >&2 || true; }' EXIT

# --- what down.sh restores or compares with -----------------------------------------------
sysctl -n "${NODE_SYSCTLS[@]}" | paste -d= <(printf '%s\n' "${NODE_SYSCTLS[@]}") - >"$STATE/sysctl.saved"
for p in "${FIXED_PATHS[@]}"; do [[ -e $p ]] || echo "$p"; done >"$STATE/new-paths"
{ ls -d /run/netns/cni-* 2>/dev/null || true; } >"$STATE/netns.before"

# --- the network namespace ------------------------------------------------------------------
ip netns add "$NETNS"
ip -n "$NETNS" link set lo up
ip -n "$NETNS" link add wl0 type veth peer name wl1
ip -n "$NETNS" addr add "$NODE_IP/24" dev wl0
ip -n "$NETNS" addr add 10.250.0.2/24 dev wl1
ip -n "$NETNS" link set wl0 up
ip -n "$NETNS" link set wl1 up
ip -n "$NETNS" route add default via 10.250.0.2 dev wl0 # nowhere: nothing leaves the namespace
in_ns sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
echo "nameserver $NODE_IP" >"$STATE/resolv.conf"

# --- PKI (EC P-256, throwaway) and kubeconfigs -------------------------------------------------
pki=$STATE/pki
ossl() { (cd "$pki" && openssl "$@" 2>/dev/null) || die "openssl $1 failed"; }
cert() { # cert NAME SUBJECT [EXTENSION ...]
	local name=$1 subject=$2 ext=() ca=()
	shift 2
	for e in "$@"; do ext+=(-addext "$e"); done
	[[ $name == ca ]] || ca=(-CA ca.crt -CAkey ca.key)
	ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 7 "${ca[@]}" \
		-keyout "$name.key" -out "$name.crt" -subj "$subject" "${ext[@]}"
}
leaf=basicConstraints=CA:FALSE
client=extendedKeyUsage=clientAuth
cert ca /CN=wayline-cluster-ca
cert apiserver /CN=kube-apiserver $leaf extendedKeyUsage=serverAuth \
	"subjectAltName=IP:127.0.0.1,IP:$NODE_IP,IP:$API_SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert admin /O=system:masters/CN=admin $leaf $client
cert apiserver-kubelet /O=system:masters/CN=kube-apiserver-kubelet-client $leaf $client
cert controller-manager /CN=system:kube-controller-manager $leaf $client
cert scheduler /CN=system:kube-scheduler $leaf $client
cert kube-proxy /CN=system:kube-proxy $leaf $client
cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" $leaf $client
cert kubelet-serving "/CN=$NODE_NAME" $leaf extendedKeyUsage=serverAuth "subjectAltName=IP:$NODE_IP,DNS:$NODE_NAME"
ossl ecparam -name prime256v1 -genkey -noout -out sa.key
ossl ec -in sa.key -pubout -out sa.pub

kubeconfig() { # kubeconfig FILE SERVER CERT_NAME
	local b64ca b64crt b64key
	b64ca=$(base64 -w0 "$pki/ca.crt") b64crt=$(base64 -w0 "$pki/$3.crt") b64key=$(base64 -w0 "$pki/$3.key")
	cat >"$1" <<-YAML
		apiVersion: v1
		kind: Config
		clusters: [{name: $NAME, cluster: {server: "$2", certificate-authority-data: $b64ca}}]
		users: [{name: $3, user: {client-certificate-data: $b64crt, client-key-data: $b64key}}]
		contexts: [{name: $NAME, context: {cluster: $NAME, user: $3}}]
		current-context: $NAME
	YAML
}
inside=https://$NODE_IP:6443
for who in admin controller-manager scheduler kube-proxy kubelet; do
	kubeconfig "$pki/$who-in-ns.kubeconfig" "$inside" "$who"
done

# --- starting daemons: each in the namespace, logging to a file, its pid recorded ------------
daemon() { # daemon NAME COMMAND ARGS...
	local name=$1
	shift
	nsenter --net="$NETNS_PATH" -- "$@" >"$STATE/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$STATE/pids/$name"
}
alive() { kill -0 "$(cat "$STATE/pids/$1")" 2>/dev/null || { tail -30 "$STATE/logs/$1.log" >&2; die "$1 exited"; }; }
wait_for() { # wait_for SECONDS WHAT COMMAND...: until COMMAND succeeds
	local until=$((SECONDS + $1)) what=$2
	shift 2
	until "$@" >/dev/null 2>&1; do
		((SECONDS < until)) || die "$what: not after ${1}s"
		sleep 0.2
	done
}

# --- containerd -------------------------------------------------------------------------------
cat >"$STATE/cni/net.d/10-$CNI_NETWORK.conflist" <<JSON
{"cniVersion": "0.4.0", "name": "$CNI_NETWORK", "plugins": [
  {"type": "bridge", "bridge": "wlcni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$STATE/cni/ipam",
            "ranges": [[{"subnet": "$NODE_POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
JSON
c=$STATE/containerd
cat >"$c/config.toml" <<TOML
version = 2
root = "$c/root"
state = "$c/state"
plugin_dir = "$c/plugins"
[grpc]
  address = "$c/containerd.sock"
[ttrpc]
  address = "$c/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$c/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$STATE/cni/net.d"
TOML
daemon containerd containerd --config "$c/config.toml"
wait_for 30 "containerd" ctr_ version
for tar in "$@"; do
	ctr_ images import "$tar" >/dev/null || die "import of $tar failed"
done
say "containerd up, $# image archives imported ($((SECONDS - start))s)"

# --- etcd, kube-apiserver -----------------------------------------------------------------
no_fsync=$("$CP_BIN/etcd" --help 2>&1 | grep -q -- --unsafe-no-fsync && echo --unsafe-no-fsync || true)
daemon etcd "$CP_BIN/etcd" --name=node --data-dir="$STATE/etcd" \
	--listen-client-urls=http://127.0.0.1:2379 --advertise-client-urls=http://127.0.0.1:2379 \
	--listen-peer-urls=http://127.0.0.1:2380 --initial-advertise-peer-urls=http://127.0.0.1:2380 \
	--initial-cluster=node=http://127.0.0.1:2380 --listen-metrics-urls=http://127.0.0.1:2381 \
	--log-level=warn $no_fsync
daemon kube-apiserver "$CP_BIN/kube-apiserver" --etcd-servers=http://127.0.0.1:2379 \
	--bind-address="$NODE_IP" --advertise-address="$NODE_IP" --secure-port=6443 \
	--tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
	--client-ca-file="$pki/ca.crt" \
	--kubelet-client-certificate="$pki/apiserver-kubelet.crt" --kubelet-client-key="$pki/apiserver-kubelet.key" \
	--kubelet-preferred-address-types=InternalIP \
	--service-account-issuer=https://kubernetes.default.svc.cluster.local \
	--service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
	--service-cluster-ip-range=$SERVICE_CIDR --authorization-mode=Node,RBAC \
	--enable-admission-plugins=NodeRestriction --allow-privileged=true --profiling=false
wait_for 60 "kube-apiserver /readyz" kubectl_ns get --raw /readyz
alive etcd
say "API server ready ($((SECONDS - start))s)"

# The host side reaches the API server through 127.0.0.1:PORT (kopf, helm, pytest, kubectl).
port=${WAYLINE_CLUSTER_PORT:-}
if [[ -z $port ]]; then
	for port in $(seq 6443 6543); do
		! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
	done
fi
socat "TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork" \
	"EXEC:nsenter --net=$NETNS_PATH -- socat STDIO TCP\:$NODE_IP\:6443" \
	>"$STATE/logs/apiserver-forward.log" 2>&1 </dev/null &
echo $! >"$STATE/pids/apiserver-forward"
kubeconfig "$STATE/admin.kubeconfig" "https://127.0.0.1:$port" admin
KUBECONFIG_HOST=$STATE/admin.kubeconfig
wait_for 10 "the forwarder on 127.0.0.1:$port" "$KUBECTL" --kubeconfig "$KUBECONFIG_HOST" get --raw /readyz

# --- controllers, DNS, the agent ---------------------------------------------------------------
daemon kube-controller-manager "$NODE_BIN/kube-controller-manager" \
	--kubeconfig="$pki/controller-manager-in-ns.kubeconfig" \
	--authentication-kubeconfig="$pki/controller-manager-in-ns.kubeconfig" \
	--authorization-kubeconfig="$pki/controller-manager-in-ns.kubeconfig" \
	--bind-address=127.0.0.1 --leader-elect=false --use-service-account-credentials \
	--service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
	--allocate-node-cidrs --cluster-cidr=$POD_CIDR --node-cidr-mask-size=24 \
	--service-cluster-ip-range=$SERVICE_CIDR --cluster-name="$NAME" --profiling=false
daemon kube-scheduler "$NODE_BIN/kube-scheduler" --kubeconfig="$pki/scheduler-in-ns.kubeconfig" \
	--authentication-kubeconfig="$pki/scheduler-in-ns.kubeconfig" \
	--authorization-kubeconfig="$pki/scheduler-in-ns.kubeconfig" \
	--bind-address=127.0.0.1 --leader-elect=false --profiling=false
# dnsmasq answers cluster.local from the hosts files the agent writes; no upstream at all.
daemon dnsmasq dnsmasq --keep-in-foreground --no-resolv --no-hosts --no-poll --bind-interfaces \
	--listen-address="$NODE_IP" --port=53 --hostsdir="$STATE/dns" --local=/cluster.local/ \
	--domain-needed --bogus-priv --user=root --pid-file= --log-facility=-
daemon agent python3 "$REPO/tools/cluster/agent.py" --kubectl "$KUBECTL" \
	--kubeconfig "$pki/admin-in-ns.kubeconfig" --dns-dir "$STATE/dns" --pv-dir "$STATE/pv"

# --- the node: kubelet and kube-proxy ----------------------------------------------------------
cat >"$STATE/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $pki/kubelet-serving.crt
tlsPrivateKeyFile: $pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://$c/containerd.sock
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
clusterDomain: cluster.local
clusterDNS: [$NODE_IP]
resolvConf: $STATE/resolv.conf
staticPodPath: $STATE/manifests
podLogsDir: $STATE/pod-logs
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
makeIPTablesUtilChains: false
serializeImagePulls: false
maxPods: 110
YAML
daemon kubelet "$NODE_BIN/kubelet" --config="$STATE/kubelet.yaml" \
	--kubeconfig="$pki/kubelet-in-ns.kubeconfig" --root-dir="$STATE/kubelet" \
	--hostname-override="$NODE_NAME" --node-ip="$NODE_IP" --cert-dir="$STATE/kubelet/pki"
daemon kube-proxy "$NODE_BIN/kube-proxy" --kubeconfig="$pki/kube-proxy-in-ns.kubeconfig" \
	--proxy-mode=iptables --cluster-cidr=$POD_CIDR --hostname-override="$NODE_NAME" \
	--bind-address="$NODE_IP" --healthz-bind-address=127.0.0.1:10256 \
	--metrics-bind-address=127.0.0.1:10249 --conntrack-max-per-core=0 \
	--conntrack-tcp-timeout-established=0 --conntrack-tcp-timeout-close-wait=0 --profiling=false

node_ready() {
	[[ $(kubectl_ns get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]]
}
wait_for 60 "node $NODE_NAME Ready" node_ready
# The kubelet rewrote the node-wide sysctls once at its start: put the machine's values back.
while IFS== read -r key value; do sysctl -qw "$key=$value"; done <"$STATE/sysctl.saved"
for d in kube-controller-manager kube-scheduler kube-proxy dnsmasq agent; do alive "$d"; done
wait_for 60 "the default ServiceAccount" kubectl_ns -n default get serviceaccount default
say "cluster $NAME up in $((SECONDS - start))s: KUBECONFIG=$KUBECONFIG_HOST"
up_ok=1
echo "$KUBECONFIG_HOST"
