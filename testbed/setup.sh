#!/usr/bin/env bash
# testbed/setup.sh: install and start everything the test bed needs. Idempotent:
# on a machine that already ran it, it only checks and returns.
#
#   - packages: Incus (bookworm-backports), nix-bin, debootstrap, openssh-client, btrfs-progs
#   - host Nix configured for single-user root builds without a sandbox
#   - incusd started (there is no systemd on the host), a storage pool (btrfs on a loop
#     file, else a directory), a root disk
#   - the node image, built once per recipe and cached under $SWITCHYARD_TESTBED_CACHE
#   - with SWITCHYARD_TESTBED_TOFU=1 (test.sh), OpenTofu, built once from the Go module
#     proxy and cached under $SWITCHYARD_TESTBED_CACHE/tofu-<version>/tofu (test.sh
#     exports SWITCHYARD_TOFU)
#   - with SWITCHYARD_TESTBED_OPERATOR=1 (test.sh), what tf-incus-operator's tests run
#     against: bind9 and knot (Debian packages; the tests start them unprivileged on
#     loopback) and spire-server (versions.sh), built once from the Go module proxy with
#     only the plugins the tests use, and cached under
#     $SWITCHYARD_TESTBED_CACHE/spire-<version>-min/spire-server (test.sh exports
#     SWITCHYARD_SPIRE_SERVER); with SWITCHYARD_TESTBED_SPIRE=later not now, but by a
#     later `setup.sh spire`
#   - with SWITCHYARD_TESTBED_VM=1 (test.sh), the VM tier: qemu, extlinux, and the VM
#     image (testbed/vm-image.sh), built once per recipe and cached under
#     $SWITCHYARD_TESTBED_CACHE/vm-<recipe hash>/, the test client key put into it
#
# Prints nothing on stdout but the image alias, so callers can capture it.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=testbed/versions.sh
. "$here/versions.sh"
cache=${SWITCHYARD_TESTBED_CACHE:-/var/cache/switchyard-testbed}
log() { echo "testbed: $*" >&2; }

[ "$(id -u)" = 0 ] || { log "must run as root"; exit 2; }
mkdir -p "$cache"

debian_mirror() {
	# The Debian mirror the machine's apt sources already use: this script names none.
	local uri files=()
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] && files+=("$f")
	done
	uri=$(grep -hoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' "${files[@]}" /dev/null 2>/dev/null |
		grep -oE 'https?://[^ ]+' | head -n1 || true)
	if [ -z "$uri" ]; then
		log "no Debian mirror in the apt sources (/etc/apt/sources.list, /etc/apt/sources.list.d/*.list or *.sources): configure one first"
		exit 2
	fi
	echo "$uri"
}

install_packages() {
	local want=() mirror
	command -v nix-build >/dev/null || want+=(nix-bin)
	command -v debootstrap >/dev/null || want+=(debootstrap)
	command -v ssh >/dev/null || want+=(openssh-client)
	command -v ssh-keygen >/dev/null || want+=(openssh-client)
	command -v mkfs.btrfs >/dev/null || want+=(btrfs-progs)
	if [ "${SWITCHYARD_TESTBED_OPERATOR:-0}" = 1 ]; then
		[ -x /usr/sbin/named ] || want+=(bind9)
		command -v tsig-keygen >/dev/null || want+=(bind9-utils)
		command -v nsupdate >/dev/null || want+=(bind9-dnsutils)
		[ -x /usr/sbin/knotd ] || want+=(knot)
		command -v gcc >/dev/null || want+=(gcc libc6-dev)
	fi
	if [ "${SWITCHYARD_TESTBED_VM:-0}" = 1 ]; then
		command -v qemu-system-x86_64 >/dev/null || want+=(qemu-system-x86)
		command -v qemu-img >/dev/null || want+=(qemu-utils)
		command -v extlinux >/dev/null || want+=(extlinux)
		[ -e /usr/lib/syslinux/mbr/mbr.bin ] || want+=(syslinux-common)
	fi
	if ! command -v incus >/dev/null; then
		mirror=$(debian_mirror)
		if ! grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/; then
			log "adding bookworm-backports from $mirror"
			printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
				"$mirror" >/etc/apt/sources.list.d/switchyard-bookworm-backports.sources
		fi
	fi
	if [ ${#want[@]} -gt 0 ] || ! command -v incus >/dev/null; then
		log "installing packages: ${want[*]} $(command -v incus >/dev/null || echo incus)"
		apt-get update -q >&2
		if [ ${#want[@]} -gt 0 ]; then
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${want[@]}" >&2
		fi
		if ! command -v incus >/dev/null; then
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q -t bookworm-backports incus >&2
		fi
	fi
}

configure_nix() {
	# Single-user Nix as root: no build users, no sandbox (no user namespaces for
	# builds here), and no binary cache (none is reachable; asking costs seconds).
	mkdir -p /etc/nix
	local conf='sandbox = false
build-users-group =
substituters ='
	if [ "$(grep -sE '^(sandbox|build-users-group|substituters) *=' /etc/nix/nix.conf | sort)" != "$(echo "$conf" | sort)" ]; then
		log "configuring /etc/nix/nix.conf for single-user root builds without a binary cache"
		{
			grep -vsE '^(sandbox|build-users-group|substituters) *=' /etc/nix/nix.conf || true
			echo "$conf"
		} >/etc/nix/nix.conf.new
		mv /etc/nix/nix.conf.new /etc/nix/nix.conf
	fi
}

# raise_limits lifts the kernel limits every unprivileged container shares (they all
# map to one host user, and each systemd inside takes inotify instances and keys):
# at the defaults (128 inotify instances) about fifteen nodes run and the next one's
# systemd stops at once ("Failed to allocate manager object: Too many open files").
# Values of the order Incus recommends for production hosts; never lowered.
raise_limits() {
	for kv in fs.inotify.max_user_instances=8192 fs.inotify.max_user_watches=524288 \
		kernel.keys.maxkeys=2000 kernel.keys.maxbytes=2000000; do
		key=${kv%%=*} min=${kv#*=}
		have=$(sysctl -n "$key" 2>/dev/null || echo 0)
		if [ "$have" -lt "$min" ]; then sysctl -qw "$kv" || log "cannot raise $key to $min"; fi
	done
}

# create_pool makes the nodes' storage pool: btrfs on a loop file where the kernel and
# btrfs-progs allow, so a node is a snapshot of the image's volume. The dir driver
# unpacks the image (108 MB of gzip, 305 MB of files) for every node instead: about
# 3 s of CPU and 305 MB written per node, for some 200 nodes a run, on the same two
# cores and disk the tests' time-windowed verdicts wait on. The loop file is sparse;
# Incus sizes it (a fifth of the free space, at most 30 GiB).
create_pool() {
	if grep -qw btrfs /proc/filesystems && command -v mkfs.btrfs >/dev/null &&
		incus storage create default btrfs >&2; then
		return
	fi
	log "no btrfs here: the nodes' pool is a directory (each node unpacks the image)"
	incus storage create default dir >&2
}

start_incusd() {
	if incus admin waitready --timeout=2 >/dev/null 2>&1; then return; fi
	log "starting incusd"
	mkdir -p /var/log/incus
	setsid /usr/libexec/incus/incusd --group root --logfile /var/log/incus/incusd.log </dev/null >/dev/null 2>&1 &
	incus admin waitready --timeout=60 >&2
	if ! incus storage show default >/dev/null 2>&1; then
		create_pool
	fi
	if ! incus profile device get default root pool >/dev/null 2>&1; then
		incus profile device add default root disk path=/ pool=default >&2
	fi
}

ensure_image() {
	local key dir alias tmp mirror
	key=$(sha256sum "$here/image-recipe.sh" | cut -c1-12)
	dir=$cache/image-$key
	alias=switchyard-node-$key
	if [ ! -s "$dir/rootfs.tar.gz" ] || [ ! -s "$dir/meta.tar.gz" ]; then
		mirror=$(debian_mirror)
		log "building node image $alias from $mirror (about a minute once packages are cached)"
		tmp=$(mktemp -d "$cache/build.XXXXXX")
		trap 'umount "'"$tmp"'/rootfs/proc" 2>/dev/null || true; rm -rf "'"$tmp"'"' EXIT
		debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,openssh-server,iproute2 \
			--cache-dir="$cache/debootstrap-debs" bookworm "$tmp/rootfs" "$mirror" >&2 ||
			debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,openssh-server,iproute2 \
				bookworm "$tmp/rootfs" "$mirror" >&2
		bash "$here/image-recipe.sh" "$tmp/rootfs" "$mirror" >&2
		tar -C "$tmp/rootfs" --numeric-owner -czf "$tmp/rootfs.tar.gz" .
		printf 'architecture: x86_64\ncreation_date: %s\nproperties:\n  description: switchyard test node (Debian 12, systemd, sshd, Nix)\n' \
			"$(date +%s)" >"$tmp/metadata.yaml"
		tar -C "$tmp" -czf "$tmp/meta.tar.gz" metadata.yaml
		mkdir -p "$dir"
		mv "$tmp/rootfs.tar.gz" "$tmp/meta.tar.gz" "$dir/"
		rm -rf "$tmp"
		trap - EXIT
	fi
	if ! incus image info "$alias" >/dev/null 2>&1; then
		log "importing node image $alias"
		incus image import "$dir/meta.tar.gz" "$dir/rootfs.tar.gz" --alias "$alias" >&2
	fi
	echo "$alias"
}

ensure_tofu() {
	# `go install` of OpenTofu is refused (its module has a replace directive):
	# download the module and build ./cmd/tofu inside it (about 2.5 minutes on an
	# idle machine). version.dev=no as in OpenTofu's releases ("1.10.6", not "-dev").
	local version=$switchyard_tofu_version dir bin tmp src
	dir=$cache/tofu-$version
	bin=$dir/tofu
	if [ -x "$bin" ] && "$bin" version >/dev/null 2>&1; then return; fi
	command -v go >/dev/null || { log "go is needed to build OpenTofu"; exit 2; }
	log "building OpenTofu $version from the Go module proxy (about 2.5 minutes)"
	mkdir -p "$dir"
	src=$(cd "$dir" && go mod download -json "github.com/opentofu/opentofu@v$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
	[ -n "$src" ] || { log "go mod download of OpenTofu $version gave no Dir"; exit 3; }
	tmp=$(mktemp "$dir/tofu.XXXXXX")
	(cd "$src" && CGO_ENABLED=0 go build -ldflags "-X github.com/opentofu/opentofu/version.dev=no" -o "$tmp" ./cmd/tofu) >&2
	chmod 0755 "$tmp"
	mv "$tmp" "$bin"
}

ensure_spire() {
	# SPIRE publishes no Go-installable server: download the module and build
	# ./cmd/spire-server from a copy of it whose server catalog keeps only the built-in
	# plugins the tests configure (testbed/cmd/spire-catalog). The whole catalog took
	# about 16 minutes on 2 cores (1,874 packages, the cloud and Kubernetes SDKs of its
	# other plugins); this one builds 1,013. "-min" in the cache's name: the same
	# server, not a full one.
	local version=$switchyard_spire_version dir bin tmp src work
	dir=$cache/spire-$version-min
	bin=$dir/spire-server
	if [ -x "$bin" ] && "$bin" --version >/dev/null 2>&1; then return; fi
	command -v go >/dev/null || { log "go is needed to build spire-server"; exit 2; }
	log "building spire-server $version (the test bed's plugins only) from the Go module proxy"
	mkdir -p "$dir"
	src=$(cd "$dir" && go mod download -json "github.com/spiffe/spire@v$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
	[ -n "$src" ] || { log "go mod download of SPIRE $version gave no Dir"; exit 3; }
	work=$(mktemp -d "$dir/src.XXXXXX")
	cp -R "$src/." "$work"
	chmod -R u+w "$work"
	(cd "$here/.." && go run ./testbed/cmd/spire-catalog "$work/pkg/server/catalog") >&2
	tmp=$(mktemp "$dir/spire-server.XXXXXX")
	# The tests need the server's behaviour, not its speed: sqlite's C (one large file,
	# compiled on one core) at -O1 takes half the time of cgo's -O2 (measured: 67 s
	# against 123 s), and no symbol or DWARF tables spare the linker.
	(cd "$work" && CGO_ENABLED=1 CGO_CFLAGS="-O1" go build -trimpath -ldflags "-s -w" -o "$tmp" ./cmd/spire-server) >&2
	rm -rf "$work"
	chmod 0755 "$tmp"
	mv "$tmp" "$bin"
}

client_key() {
	# The test bed's client key, made as testbed.go's clientKey makes it (same path; a
	# fresh directory renamed into place, so concurrent makers agree on one key).
	local dir=$cache/ssh tmp
	if [ ! -s "$dir/id_ed25519.pub" ]; then
		tmp=$(mktemp -d "$cache/ssh.tmpXXXXXX")
		ssh-keygen -q -t ed25519 -N "" -C switchyard-testbed -f "$tmp/id_ed25519" >&2
		chmod 0700 "$tmp"
		mv -T "$tmp" "$dir" 2>/dev/null || rm -rf "$tmp"
	fi
	echo "$dir/id_ed25519"
}

ensure_vm_image() {
	# The VM tier's disk (testbed/vm-image.sh: debootstrap, kernel, extlinux; 2 to 7
	# minutes), then the test client key in root's authorized_keys, written through a
	# loop mount whenever the key differs from the one recorded (the image itself does
	# not depend on the key). VMs run on overlays: the base is read-only to them.
	local key dir tmp mnt pub
	key=$(sha256sum "$here/vm-image.sh" | cut -c1-12)
	dir=$cache/vm-$key
	if [ ! -s "$dir/disk.img" ] || [ ! -s "$dir/ssh_host_ed25519_key.pub" ]; then
		log "building VM image vm-$key from $(debian_mirror) (2 to 7 minutes)"
		tmp=$(mktemp -d "$cache/vm-build.XXXXXX")
		chmod 0755 "$tmp"
		trap 'rm -rf "'"$tmp"'"' EXIT
		bash "$here/vm-image.sh" "$tmp" "$(debian_mirror)" "$cache/vm-debs" >&2
		rm -rf "$dir"
		mv -T "$tmp" "$dir"
		trap - EXIT
	fi
	pub=$(client_key).pub
	if ! cmp -s "$pub" "$dir/authorized_keys"; then
		log "putting the test client key into VM image vm-$key"
		mnt=$(mktemp -d)
		trap 'umount "'"$mnt"'" 2>/dev/null || true; rmdir "'"$mnt"'"' EXIT
		mount -o loop "$dir/disk.img" "$mnt"
		install -m 0600 "$pub" "$mnt/root/.ssh/authorized_keys"
		umount "$mnt"
		rmdir "$mnt"
		trap - EXIT
		cp "$pub" "$dir/authorized_keys"
	fi
	chmod 0444 "$dir/disk.img"
}

if [ "${1:-}" = spire ]; then
	# `setup.sh spire`: only spire-server, on a machine a full run of this script set
	# up with SWITCHYARD_TESTBED_SPIRE=later (test.sh builds it while the first
	# test-bed tests run: they mostly wait on their nodes).
	ensure_spire
	exit
fi
install_packages
configure_nix
raise_limits
start_incusd
# On a cold machine the images' builds (debootstrap: the network and the disk) and the
# tools' builds (go build: the CPU) run side by side; each caches its result, so a
# warm machine only checks.
alias_file=$(mktemp)
(ensure_image >"$alias_file") &
image_pid=$!
vm_pid=
if [ "${SWITCHYARD_TESTBED_VM:-0}" = 1 ]; then
	ensure_vm_image &
	vm_pid=$!
fi
# The tests need OpenTofu; the main job (ssh method) does not.
if [ "${SWITCHYARD_TESTBED_TOFU:-0}" = 1 ]; then ensure_tofu; fi
if [ "${SWITCHYARD_TESTBED_OPERATOR:-0}" = 1 ] && [ "${SWITCHYARD_TESTBED_SPIRE:-now}" != later ]; then ensure_spire; fi
wait "$image_pid" || { log "the node image could not be made"; exit 3; }
if [ -n "$vm_pid" ]; then wait "$vm_pid" || { log "the VM image could not be made"; exit 3; }; fi
cat "$alias_file"
rm -f "$alias_file"
