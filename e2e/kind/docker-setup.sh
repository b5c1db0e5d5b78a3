#!/usr/bin/env bash
# docker-setup.sh: make sure this machine has a Docker engine that runs the privileged containers
# kind's nodes are. On an ordinary Docker host it only checks. On a fresh Debian machine (root) it
# installs Debian's docker.io and starts dockerd. When a privileged container fails because the
# machine's capability bounding set lacks CAP_SYS_RESOURCE (some microVMs), it registers
# e2e/kind/runc-drop-sys-resource as dockerd's default runtime and checks again.
#
# Usage: e2e/kind/docker-setup.sh        (exit 0: `docker run --privileged` works)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
shim_src=$here/runc-drop-sys-resource
shim=/usr/local/libexec/cdplace/runc-drop-sys-resource
shim_name=runc-drop-sys-resource
probe_image=cdplace.local/privileged-probe:1
log=/var/log/cdplace-dockerd.log

say() { echo "docker-setup: $*" >&2; }

engine_up() { docker info >/dev/null 2>&1; }

start_dockerd() {
	if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
		systemctl restart docker
	else
		# No systemd (containers, microVMs): run dockerd in the background ourselves.
		if [ -f /var/run/docker.pid ] && kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
			kill "$(cat /var/run/docker.pid)"
			for _ in $(seq 50); do [ -f /var/run/docker.pid ] || break; sleep 0.2; done
		fi
		nohup dockerd >>"$log" 2>&1 &
	fi
	for _ in $(seq 60); do engine_up && return 0; sleep 1; done
	say "dockerd did not answer within 60s; its log: $log"
	tail -n 20 "$log" >&2 || true
	return 1
}

if ! engine_up && ! { command -v docker && command -v dockerd; } >/dev/null; then
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
		say "no Docker engine; install Docker (https://docs.docker.com/engine/install/) and run this again"
		exit 1
	fi
	say "installing Debian's docker.io"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
fi
engine_up || start_dockerd

# The probe image holds only /bin/true and the libraries it loads, so no registry is needed.
if ! docker image inspect "$probe_image" >/dev/null 2>&1; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	true_bin=$(command -v true | head -n1)
	[ "$true_bin" = true ] && true_bin=/bin/true
	mkdir -p "$tmp/root/bin"
	cp "$true_bin" "$tmp/root/bin/true"
	for lib in $(ldd "$true_bin" | grep -o '/[^ ]*'); do
		mkdir -p "$tmp/root$(dirname "$lib")"
		cp -L "$lib" "$tmp/root$lib"
	done
	tar -C "$tmp/root" -c . | docker import - "$probe_image" >/dev/null
fi

probe() { docker run --rm --privileged "$probe_image" /bin/true 2>&1; }

if out=$(probe); then
	say "privileged containers run"
	exit 0
fi
if ! grep -q 'unable to apply caps' <<<"$out"; then
	say "a privileged container fails, and not for the reason the shim fixes:"
	echo "$out" >&2
	exit 1
fi
say "a privileged container fails ($out); this machine's capability bounding set lacks" \
	"CAP_SYS_RESOURCE: registering $shim_name as dockerd's default runtime"
if [ "$(id -u)" != 0 ]; then
	say "that needs root: run this script with sudo"
	exit 1
fi
install -D -m 0755 "$shim_src" "$shim"
cfg=/etc/docker/daemon.json
mkdir -p /etc/docker
[ -s "$cfg" ] || echo '{}' >"$cfg"
if ! command -v jq >/dev/null; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq >/dev/null
fi
jq --arg n "$shim_name" --arg p "$shim" '.runtimes[$n] = {path: $p} | ."default-runtime" = $n' "$cfg" >"$cfg.new"
mv "$cfg.new" "$cfg"
start_dockerd
if out=$(probe); then
	say "privileged containers run through $shim_name"
	exit 0
fi
say "a privileged container still fails with $shim_name:"
echo "$out" >&2
exit 1
