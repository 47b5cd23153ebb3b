#!/usr/bin/env bash
# Tears down the local cluster that up.sh made, leaving nothing: workloads deleted first (so the
# kubelet removes containers, pod network namespaces and volume mounts itself), then every
# daemon stopped by its recorded pid in order, leftover containers killed through containerd,
# what is still mounted under the state directory unmounted, the kubelet's cgroups removed from
# every hierarchy, the network namespace deleted, the node-wide sysctls restored, containerd's
# CNI result files removed, the state directory deleted. Ends with tools/cluster/check.sh.
# Idempotent: safe after a partial up.sh, and a second time.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
start=$SECONDS
[[ $(id -u) == 0 ]] || die "down.sh needs root"

pid_of() { [[ -f $STATE/pids/$1 ]] && cat "$STATE/pids/$1"; }
running() { local p; p=$(pid_of "$1") && kill -0 "$p" 2>/dev/null; }
stop() { # stop NAME [SECONDS]: SIGTERM by pid, SIGKILL after SECONDS (default 10)
	local p n
	p=$(pid_of "$1") || return 0
	kill -0 "$p" 2>/dev/null || return 0
	kill "$p" 2>/dev/null
	for ((n = 0; n < ${2:-10} * 10; n++)); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.1; done
	say "$1 ($p) did not stop on SIGTERM: SIGKILL"
	kill -9 "$p" 2>/dev/null
	sleep 0.2
}

if [[ -d $STATE ]]; then
	# 1. Workloads first, while the kubelet runs: it stops the containers through the CRI, which
	#    removes their network namespaces (CNI DEL) and unmounts their volumes.
	if running kube-apiserver && running kubelet && [[ -f $STATE/pki/admin-in-ns.kubeconfig ]]; then
		k() { timeout 60 nsenter --net="$NETNS_PATH" -- "$KUBECTL" --kubeconfig "$STATE/pki/admin-in-ns.kubeconfig" "$@"; }
		for ns in $(k get ns -o jsonpath='{.items[*].metadata.name}' 2>/dev/null); do
			[[ $ns == kube-system || $ns == kube-public || $ns == kube-node-lease ]] && continue
			k -n "$ns" delete deploy,statefulset,daemonset,replicaset,job --all --wait=false >/dev/null 2>&1
		done
		k delete pods --all -A --grace-period=1 --wait=false >/dev/null 2>&1
		for _ in $(seq 60); do
			[[ -z $(ctr_ tasks ls -q 2>/dev/null) ]] && break
			sleep 0.5
		done
	fi

	# 2. Daemons, in order (the API server before etcd; containerd after the kubelet).
	for d in "${DAEMONS[@]}"; do
		[[ $d == containerd ]] && continue
		stop "$d"
	done
	# 3. What the kubelet did not get to: kill the tasks, remove containers (and their netns
	#    through CNI when containerd stops sandboxes), then stop containerd and its shims.
	if running containerd; then
		for t in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks kill -s SIGKILL "$t" >/dev/null 2>&1; done
		sleep 0.5
		for t in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks delete -f "$t" >/dev/null 2>&1; done
		for ctn in $(ctr_ containers ls -q 2>/dev/null); do ctr_ containers delete "$ctn" >/dev/null 2>&1; done
		stop containerd 20
	fi
	# the shims of this containerd (identified by its socket in their command line), by pid
	for p in $(pgrep -f -- "-address $STATE/containerd/containerd.sock" 2>/dev/null); do
		kill -9 "$p" 2>/dev/null
	done

	# 4. Mounts left under the state directory and the pod network namespaces (deepest first).
	for _ in 1 2 3; do
		mapfile -t mounts < <(awk -v s="$STATE/" 'index($5, s) == 1 {print $5}' /proc/self/mountinfo | sort -r)
		((${#mounts[@]})) || break
		for m in "${mounts[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
	done
fi

# Pod network namespaces containerd pinned under /run/netns (cni-UUID) that are not the
# machine's: those that were not there before up.sh.
if [[ -f $STATE/netns.before ]]; then
	for n in /run/netns/cni-*; do
		[[ -e $n ]] || continue
		grep -qx "$n" "$STATE/netns.before" && continue
		umount "$n" 2>/dev/null || umount -l "$n" 2>/dev/null
		rm -f "$n"
	done
fi

# 5. cgroups: the kubelet's kubepods tree in every hierarchy (v1 controllers, named, unified).
for h in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods /sys/fs/cgroup/*/kubepods.slice; do
	[[ -d $h ]] || continue
	find "$h" -depth -type d -exec rmdir {} + 2>/dev/null
	[[ -d $h ]] && say "cgroup $h still has processes: $(cat "$h"/cgroup.procs 2>/dev/null | head -5 | tr '\n' ' ')"
done

# 6. The network namespace (its veth pair, bridge and iptables rules go with it).
if [[ -e $NETNS_PATH ]]; then
	ip netns del "$NETNS" 2>/dev/null || { umount -l "$NETNS_PATH" 2>/dev/null; rm -f "$NETNS_PATH"; }
fi

# 7. The node-wide sysctls as they were, and containerd's CNI result files (a fixed path).
if [[ -f $STATE/sysctl.saved ]]; then
	while IFS== read -r key value; do sysctl -qw "$key=$value"; done <"$STATE/sysctl.saved"
fi
rm -f /var/lib/cni/results/"$CNI_NETWORK"-* 2>/dev/null
# The fixed paths that up.sh found absent: removed once nothing but empty directories is left.
if [[ -f $STATE/new-paths ]]; then
	while read -r p; do
		[[ -d $p ]] || continue
		find "$p" -type s -delete 2>/dev/null # sockets of stopped daemons (the kubelet's)
		find "$p" -depth -type d -empty -delete 2>/dev/null
		# ip-netns makes /run/netns a mount of itself
		if [[ -d $p ]] && mountpoint -q "$p" && [[ -z $(ls -A "$p") ]]; then umount "$p" && rmdir "$p"; fi
		[[ -e $p ]] && say "$p is not empty, kept: $(find "$p" -mindepth 1 | head -5 | tr '\n' ' ')"
	done <"$STATE/new-paths"
	WAYLINE_CLUSTER_NEW_PATHS=$(cat "$STATE/new-paths") && export WAYLINE_CLUSTER_NEW_PATHS
fi

[[ -f $STATE/sysctl.saved ]] && WAYLINE_CLUSTER_SYSCTLS=$(cat "$STATE/sysctl.saved") && export WAYLINE_CLUSTER_SYSCTLS
rm -rf "$STATE"
rmdir "$(dirname "$STATE")" 2>/dev/null
say "cluster $NAME down in $((SECONDS - start))s"
exec bash "$(dirname "${BASH_SOURCE[0]}")/check.sh"
