#!/usr/bin/env bash
# After down.sh: shows that the local cluster left nothing behind, and fails if it did.
# Looks for its network namespace, mounts under its state directory, pod network namespaces,
# kubepods cgroups, processes that name its state directory, containerd's CNI result files of
# its network, and (given WAYLINE_CLUSTER_SYSCTLS, the "key=value" lines saved before the
# kubelet started) node-wide sysctls that differ from the saved values.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
left=0
report() { # report WHAT LINES
	if [[ -n $2 ]]; then
		printf 'teardown check: %s LEFT:\n%s\n' "$1" "$2"
		left=1
	else
		printf 'teardown check: %s: none\n' "$1"
	fi
}
report "network namespace $NETNS" "$(ip netns list 2>/dev/null | awk -v n="$NETNS" '$1 == n')"
report "state directory $STATE" "$([[ -e $STATE ]] && echo "$STATE")"
report "mounts under $STATE" "$(awk -v s="$STATE" 'index($5, s) == 1 {print $5}' /proc/self/mountinfo)"
report "pod network namespaces (/run/netns/cni-*)" "$(ls -d /run/netns/cni-* 2>/dev/null)"
report "kubepods cgroups" "$(ls -d /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods 2>/dev/null)"
report "processes naming $STATE" "$(pgrep -af -- "$STATE" | grep -v -e check.sh -e down.sh)"
report "CNI result files of $CNI_NETWORK" "$(ls /var/lib/cni/results/"$CNI_NETWORK"-* 2>/dev/null)"
if [[ -n ${WAYLINE_CLUSTER_NEW_PATHS:-} ]]; then
	report "paths the cluster created ($(tr '\n' ' ' <<<"$WAYLINE_CLUSTER_NEW_PATHS"))" \
		"$(while read -r p; do [[ -e $p ]] && echo "$p"; done <<<"$WAYLINE_CLUSTER_NEW_PATHS")"
fi
if [[ -n ${WAYLINE_CLUSTER_SYSCTLS:-} ]]; then
	diff=$(while IFS== read -r key value; do
		now=$(sysctl -n "$key")
		[[ $now == "$value" ]] || echo "$key=$now (was $value)"
	done <<<"$WAYLINE_CLUSTER_SYSCTLS")
	report "node-wide sysctls changed ($(tr '\n' ' ' <<<"$WAYLINE_CLUSTER_SYSCTLS"))" "$diff"
fi
exit $left
