#!/usr/bin/env bash
# The VM image recipe: a bootable Debian 12 disk for the VM tier (testbed/vm): minbase +
# systemd + sshd + Nix + a kernel and initramfs, booted by a real BIOS bootloader
# (SeaBIOS -> extlinux -> kernel), for what containers cannot show (a bootloader, a
# reboot, sshd and the network restarted under a switch). setup.sh keys the cache by this
# file's hash, so any change here rebuilds the image exactly once per machine.
#
#   vm-image.sh OUT MIRROR [DEB_CACHE]
#
# writes OUT/disk.img (a raw 2G disk that is one ext4 file system, extlinux in its boot
# sector) and OUT/ssh_host_ed25519_key.pub (the image's host key, pinned by the tests:
# every VM of the image shares it). The test client key is put in by setup.sh.
set -euo pipefail
out=$1
mirror=$2
debs=${3:-}

work=$(mktemp -d "$out/build.XXXXXX")
root=$work/root
mnt=$work/mnt
cleanup() {
	for m in "$mnt" "$root/var/cache/apt/archives" "$root/dev" "$root/sys" "$root/proc"; do
		mountpoint -q "$m" 2>/dev/null && umount "$m"
	done
	rm -rf "$work"
}
trap cleanup EXIT

include=systemd,systemd-sysv,dbus,openssh-server,iproute2
if [ -n "$debs" ]; then
	mkdir -p "$debs"
	debootstrap --variant=minbase --include=$include --cache-dir="$debs" bookworm "$root" "$mirror"
else
	debootstrap --variant=minbase --include=$include bookworm "$root" "$mirror"
fi

mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount --bind /dev "$root/dev"
# The kernel is the biggest download: keep apt's archives next to debootstrap's.
if [ -n "$debs" ]; then
	mkdir -p "$debs/apt"
	mount --bind "$debs/apt" "$root/var/cache/apt/archives"
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"
echo "deb $mirror bookworm main" >"$root/etc/apt/sources.list"
# Kernel and initrd links in /boot (the test closures' kernel and initrd point there).
echo 'link_in_boot = yes' >"$root/etc/kernel-img.conf"
# A small initramfs: only what mounts a virtio disk (MODULES=most would detect nothing
# useful inside a chroot and pack every storage driver, slow to unpack under TCG).
mkdir -p "$root/etc/initramfs-tools/conf.d"
echo 'MODULES=list' >"$root/etc/initramfs-tools/conf.d/switchyard.conf"
printf '%s\n' virtio_pci virtio_blk virtio_net ext4 crc32c_generic >>"$root/etc/initramfs-tools/modules"
chroot "$root" apt-get update -q
# --include cannot resolve nix-bin's virtual dependency perl-dbdabi-94; apt can.
DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -q --no-install-recommends \
	linux-image-amd64 initramfs-tools nix-bin
if [ -n "$debs" ]; then umount "$root/var/cache/apt/archives"; fi
chroot "$root" apt-get clean
rm -rf "$root"/var/lib/apt/lists/*

mkdir -p "$root/etc/nix"
printf 'sandbox = false\nbuild-users-group =\nsubstituters =\n' >"$root/etc/nix/nix.conf"
# The Nix database exists before any deploy, as on a NixOS node (image-recipe.sh says why).
chroot "$root" nix-store --init

echo '/dev/vda / ext4 rw,errors=remount-ro 0 0' >"$root/etc/fstab"
echo switchyard-vm >"$root/etc/hostname"
: >"$root/etc/machine-id"
rm -f "$root/etc/resolv.conf"

# slirp's user network, static (slirp's fixed addresses): no DHCP wait at boot, and a
# switch can restart systemd-networkd under an open SSH connection.
mkdir -p "$root/etc/systemd/network"
cat >"$root/etc/systemd/network/10-slirp.network" <<'NET'
[Match]
Name=en* eth*

[Network]
Address=10.0.2.15/24
Gateway=10.0.2.2
NET
chroot "$root" systemctl enable systemd-networkd.service
# Nothing waits for a network or runs maintenance while a test watches the node.
chroot "$root" systemctl mask systemd-networkd-wait-online.service apt-daily.timer \
	apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service
mkdir -p "$root/root/.ssh" && chmod 700 "$root/root/.ssh"
# The host keys openssh-server generated in the chroot stay: the tests pin this one.
cp "$root/etc/ssh/ssh_host_ed25519_key.pub" "$work/ssh_host_ed25519_key.pub"

# The bootloader's first configuration boots Debian as installed; a test closure's
# `switch-to-configuration boot` rewrites it the way NixOS's extlinux builder does.
kernel=$(readlink "$root/boot/vmlinuz")
initrd=$(readlink "$root/boot/initrd.img")
mkdir -p "$root/boot/extlinux"
cat >"$root/boot/extlinux/extlinux.conf" <<CONF
# The image's first entry: Debian as installed (no generation yet).
DEFAULT debian
TIMEOUT 10

LABEL debian
  LINUX /boot/${kernel#/boot/}
  INITRD /boot/${initrd#/boot/}
  APPEND root=/dev/vda rw console=ttyS0
CONF

for m in "$root/dev" "$root/sys" "$root/proc"; do umount "$m"; done
# One file system over the whole disk: extlinux's boot sector is the disk's first
# sector, which SeaBIOS loads. syslinux 6.04 reads neither 64bit nor metadata_csum.
mkfs.ext4 -q -F -O ^64bit,^metadata_csum -L switchyard-vm -d "$root" "$work/disk.img" 2G
mkdir -p "$mnt"
mount -o loop "$work/disk.img" "$mnt"
extlinux --install "$mnt/boot/extlinux"
umount "$mnt"
mv "$work/disk.img" "$work/ssh_host_ed25519_key.pub" "$out/"
