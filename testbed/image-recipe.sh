#!/usr/bin/env bash
# The node image recipe: Debian 12 + systemd + sshd + Nix, configured inside a
# debootstrapped root. setup.sh keys the image cache by this file's hash, so any
# change here rebuilds the image exactly once per machine.
set -euo pipefail
root=$1
mirror=$2

mount -t proc proc "$root/proc"
trap 'umount "$root/proc" || true' EXIT
cp /etc/resolv.conf "$root/etc/resolv.conf"
echo "deb $mirror bookworm main" >"$root/etc/apt/sources.list"
chroot "$root" apt-get update -q
# --include cannot resolve nix-bin's virtual dependency perl-dbdabi-94; apt can.
DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -q --no-install-recommends nix-bin sudo
chroot "$root" apt-get clean
rm -rf "$root"/var/lib/apt/lists/*

mkdir -p "$root/etc/nix"
printf 'sandbox = false\nbuild-users-group =\n' >"$root/etc/nix/nix.conf"
# A NixOS node has its Nix database before any deploy: NixOS images register their
# store at first boot (lxc-container.nix: `nix-store --load-db < /nix-path-registration`).
# Without one the first nix-store a deploy runs creates it, and a second nix-store that
# opens the store meanwhile (or a kill between creating /nix/var/nix/db/schema and
# writing it) finds an empty schema file: "'/nix/var/nix/db/schema' is corrupt".
chroot "$root" nix-store --init

# Every node must get its own host keys: drop the ones debootstrap generated and
# create fresh ones on first boot, before sshd starts.
rm -f "$root"/etc/ssh/ssh_host_*
cat >"$root/etc/systemd/system/ssh-hostkeys.service" <<'UNIT'
[Unit]
Description=Generate this node's SSH host keys
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A

[Install]
WantedBy=multi-user.target
UNIT
ln -sf /etc/systemd/system/ssh-hostkeys.service "$root/etc/systemd/system/multi-user.target.wants/ssh-hostkeys.service"
mkdir -p "$root/root/.ssh" && chmod 700 "$root/root/.ssh"
# A node has no network: keep units that wait for one from stalling boot.
for u in systemd-networkd-wait-online.service; do ln -sf /dev/null "$root/etc/systemd/system/$u"; done
echo switchyard-node >"$root/etc/hostname"
: >"$root/etc/machine-id"
rm -f "$root/etc/resolv.conf"
