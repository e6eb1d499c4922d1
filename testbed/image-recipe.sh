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

# Every node must get its own host key: drop the ones debootstrap generated and create
# a fresh one on first boot, before sshd starts. Only ed25519, the one the test bed pins
# (testbed.Node.HostKey) and sshd offers: `ssh-keygen -A` also made a 3072-bit RSA key,
# 0.3 to 1 s of CPU at every node's boot, for some 200 nodes a run.
rm -f "$root"/etc/ssh/ssh_host_*
echo 'HostKey /etc/ssh/ssh_host_ed25519_key' >"$root/etc/ssh/sshd_config.d/host-key.conf"
cat >"$root/etc/systemd/system/ssh-hostkeys.service" <<'UNIT'
[Unit]
Description=Generate this node's SSH host key
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -q -t ed25519 -N "" -f /etc/ssh/ssh_host_ed25519_key

[Install]
WantedBy=multi-user.target
UNIT
ln -sf /etc/systemd/system/ssh-hostkeys.service "$root/etc/systemd/system/multi-user.target.wants/ssh-hostkeys.service"
mkdir -p "$root/root/.ssh" && chmod 700 "$root/root/.ssh"
# A node has no network: keep units that wait for one from stalling boot.
for u in systemd-networkd-wait-online.service; do ln -sf /dev/null "$root/etc/systemd/system/$u"; done
# What a container without disks, modules, a clock or a network does not use, masked so
# that no node spends CPU on it at boot (a test bed's CPU is its limit): kernel modules
# and sysctl (the host's), e2scrub, pstore, binfmt and the periodic timers. None of these
# is a unit the verdict or the test closures depend on.
for u in modprobe@.service systemd-modules-load.service systemd-sysctl.service systemd-binfmt.service \
	systemd-pstore.service e2scrub_reap.service e2scrub_all.timer apt-daily.timer apt-daily-upgrade.timer \
	man-db.timer fstrim.timer dpkg-db-backup.timer; do
	ln -sf /dev/null "$root/etc/systemd/system/$u"
done
# The same for systemd's generators, which run at boot and at every daemon-reload (each
# switch): disk encryption, integrity and verity, GPT auto-mounts, hibernation, SysV
# scripts, rc.local, the kernel command line's units (systemd.generator(7): a link to
# /dev/null in /etc disables one). fstab's (the test closures' mounts) and getty's
# (the console) stay.
mkdir -p "$root/etc/systemd/system-generators"
for g in systemd-cryptsetup-generator systemd-integritysetup-generator systemd-veritysetup-generator \
	systemd-gpt-auto-generator systemd-hibernate-resume-generator systemd-sysv-generator \
	systemd-rc-local-generator systemd-run-generator systemd-system-update-generator systemd-debug-generator; do
	ln -sf /dev/null "$root/etc/systemd/system-generators/$g"
done
echo switchyard-node >"$root/etc/hostname"
: >"$root/etc/machine-id"
rm -f "$root/etc/resolv.conf"
