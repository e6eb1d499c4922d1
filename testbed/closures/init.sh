#!/bin/sh
# Test fixture: a toplevel's init, standing in for NixOS's stage 2 (the kernel's init=
# in the VM tier's boot entries; /sbin/init of an Incus container). The Debian
# initramfs has mounted the root file system read-write and moved /proc, /sys and /run
# into it; a container's LXC mounts /proc and /sys. Like NixOS's stage 2 it points
# /run/booted-system and /run/current-system at the generation it boots and installs
# that generation's units (switch-to-configuration's stage-2 action), then hands over
# to systemd, which starts the wanted units as any boot does.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
top=@out@
mountpoint -q /proc || mount -t proc proc /proc
mountpoint -q /run || mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs /run
"$top/bin/switch-to-configuration" stage-2 ||
	echo "init: (fixture) stage 2 of $top failed; booting systemd anyway" >&2
exec /lib/systemd/systemd "$@"
