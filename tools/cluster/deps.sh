#!/usr/bin/env bash
# The Debian packages tools/cluster needs (container runtime, CNI plugins, image builder, the
# base image's bootstrapper, iptables for kube-proxy, socat, dnsmasq). Installs only what is
# missing; ~50 s and ~1 GB on a fresh machine.
set -euo pipefail
PACKAGES=(containerd runc containernetworking-plugins docker.io debootstrap iptables conntrack
	socat dnsmasq-base iproute2 util-linux openssl)
missing=()
for p in "${PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
	start=$SECONDS
	echo "installing ${missing[*]} ..." >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >/dev/null
	# A policy-rc.d that says "no" keeps the packages' services (dockerd with its bridge and
	# iptables rules, containerd) from starting: the cluster starts its own, in its own places.
	own_policy=
	if [[ ! -e /usr/sbin/policy-rc.d ]]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
		own_policy=1
	fi
	apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
	[[ -z $own_policy ]] || rm -f /usr/sbin/policy-rc.d
	echo "installed in $((SECONDS - start))s" >&2
fi
