#!/bin/sh
# Test fixture: emulates NixOS's switch-to-configuration on a Debian test node, for
# exactly what switchyard's verdict depends on. It is not NixOS's script:
#   - "boot"/"switch": install the boot entry, as NixOS's boot loader installers do:
#     in a container (systemd-detect-virt --container) /sbin/init -> <toplevel>/init
#     (nixpkgs' lxc-container.nix installBootLoader); on a node with extlinux (the VM
#     tier: /boot/extlinux/extlinux.conf exists) a real extlinux.conf written the way
#     extlinux-conf-builder.sh writes it; on a node with systemd-boot
#     (/boot/loader/loader.conf exists) one /boot/loader/entries/nixos-generation-N.conf
#     per system-profile generation (options init=<toplevel>/init ...) and loader.conf's
#     "default" naming the generation that is this toplevel, as systemd-boot-builder.py
#     does; and the test marker /boot/switchyard-default, which no switchyard code reads
#   - like NixOS's script, "switch" installs the boot entry, then compares
#     <toplevel>/init-interface-version with /run/current-system's (a missing file reads
#     as empty here; NixOS requires the new one) and exits 100 without activating when
#     they differ: the new entry stays installed and the node needs a reboot
#   - "switch"/"test": point /run/current-system at the toplevel, install the closure's
#     units under /etc/systemd/system (removing the previous generation's), daemon-reload,
#     start the wanted units (restart the changed ones, and the units named in
#     etc/switchyard-test/restart-units), exit 4 when one of them failed
#   - "stage-2" (not NixOS's; run by the toplevel's init at boot, before systemd): point
#     /run/booted-system and /run/current-system at the toplevel and install its units,
#     with no systemctl (systemd is not running yet; it starts the wanted units itself)
#   - a toplevel holding etc/switchyard-test/never-activate exits 0 having done nothing,
#     like a switch that never activated; with etc/switchyard-test/bootloader-first too,
#     "switch" and "boot" install the boot entry first, as NixOS's script does before
#     it activates, so the never-activated generation is what the node would boot
#   - etc/switchyard-test/switch-delay holds seconds to sleep after the boot entry is
#     installed and before activating (NixOS's slow activation), so a test can cut the
#     connection while the switch runs, or hang the switch past its bound
#   - etc/switchyard-test/bootloader-delay holds seconds the boot entry's installation
#     takes ("switch" and "boot"; NixOS's boot loader installers can take seconds), so
#     a test can kill the deployer while finalize's `switch-to-configuration boot` runs
set -u
top=$(cd "$(dirname "$0")/.." && pwd -P)
action=${1:-}
state=/var/lib/switchyard-test
units_dir=/etc/systemd/system
profiles=/nix/var/nix/profiles
# How many system-profile generations get a boot entry (NixOS's configurationLimit default).
generations=20

case "$action" in
switch | boot | test | dry-activate | stage-2) ;;
*)
	echo "usage: switch-to-configuration switch|boot|test|dry-activate" >&2
	exit 1
	;;
esac
[ "$action" = dry-activate ] && exit 0

# extlinux_entry TOPLEVEL TAG prints one extlinux menu entry (extlinux-conf-builder.sh's
# addEntry). The kernel and initrd live on the file system extlinux reads (one root file
# system in the VM), so they are named in place, as the builder does when it need not
# copy them; a toplevel without them gets no entry.
extlinux_entry() {
	path=$(readlink -f "$1")
	[ -e "$path/kernel" ] && [ -e "$path/initrd" ] || return 0
	echo
	echo "LABEL nixos-$2"
	if [ "$2" = default ]; then
		echo "  MENU LABEL NixOS - Default"
	else
		echo "  MENU LABEL NixOS - Configuration $2 ($(date '+%Y-%m-%d %H:%M' -d "@$(stat -L -c %Z "$path")") - $(cat "$path/nixos-version"))"
	fi
	echo "  LINUX $(readlink -f "$path/kernel")"
	echo "  INITRD $(readlink -f "$path/initrd")"
	echo "  APPEND init=$path/init $(cat "$path/kernel-params")"
}

# systemd_boot writes systemd-boot's entries (systemd-boot-builder.py): one
# nixos-generation-N.conf per system-profile generation and loader.conf's default naming
# the generation that is this toplevel (left as it is when none is: the builder only
# moves the default to a generation of the profile).
systemd_boot() {
	loader=/boot/loader
	mkdir -p "$loader/entries" || return 1
	default=""
	for gen in $( (cd "$profiles" 2>/dev/null && ls -d system-*-link 2>/dev/null) |
		sed 's/system-\([0-9]\{1,\}\)-link/\1/' | sort -n -r | head -n "$generations"); do
		path=$(readlink -f "$profiles/system-$gen-link")
		{
			echo "title NixOS"
			echo "version Generation $gen $(cat "$path/nixos-version" 2>/dev/null)"
			echo "linux $(readlink -f "$path/kernel")"
			echo "initrd $(readlink -f "$path/initrd")"
			echo "options init=$path/init $(cat "$path/kernel-params" 2>/dev/null)"
			echo "sort-key nixos"
		} >"$loader/entries/nixos-generation-$gen.conf.tmp" &&
			mv -f "$loader/entries/nixos-generation-$gen.conf.tmp" "$loader/entries/nixos-generation-$gen.conf" || return 1
		[ -z "$default" ] && [ "$path" = "$top" ] && default=nixos-generation-$gen.conf
	done
	[ -n "$default" ] || return 0
	printf 'timeout 5\ndefault %s\nconsole-mode keep\n' "$default" >"$loader/loader.conf.tmp" &&
		mv -f "$loader/loader.conf.tmp" "$loader/loader.conf"
}

# install_bootloader points the boot entry at this toplevel, with the boot loader the
# node has; extlinux: DEFAULT is this toplevel, then one entry per system-profile
# generation, newest first.
install_bootloader() {
	if [ -f "$top/etc/switchyard-test/bootloader-delay" ]; then
		sleep "$(cat "$top/etc/switchyard-test/bootloader-delay")"
	fi
	mkdir -p /boot && ln -sfn "$top" /boot/switchyard-default || return 1
	if systemd-detect-virt --container --quiet; then
		ln -sfn "$top/init" /sbin/init || return 1
	fi
	if [ -f /boot/loader/loader.conf ]; then
		systemd_boot || {
			echo "switch-to-configuration: (fixture) could not write the systemd-boot entries" >&2
			return 1
		}
	fi
	conf=/boot/extlinux/extlinux.conf
	[ -f "$conf" ] || return 0
	tmp=$conf.tmp.$$
	{
		echo "# Written by switchyard's test fixture switch-to-configuration, after nixpkgs' extlinux-conf-builder.sh."
		echo
		echo "DEFAULT nixos-default"
		echo
		echo "MENU TITLE ------------------------------------------------------------"
		echo "TIMEOUT 10"
		extlinux_entry "$top" default
		for gen in $( (cd "$profiles" 2>/dev/null && ls -d system-*-link 2>/dev/null) |
			sed 's/system-\([0-9]\{1,\}\)-link/\1/' | sort -n -r | head -n "$generations"); do
			extlinux_entry "$profiles/system-$gen-link" "$gen"
		done
	} >"$tmp" && mv -f "$tmp" "$conf" || {
		rm -f "$tmp"
		echo "switch-to-configuration: (fixture) could not write $conf" >&2
		return 1
	}
}

# install_units installs this generation's units under /etc/systemd/system and removes
# what the previous generation installed and this one lacks. With "live", systemd is
# running: stop removed units; sets $changed (units whose file changed) and $wanted.
install_units() {
	live=$1
	mkdir -p "$state"
	if [ -f "$state/installed" ]; then
		while read -r rel; do
			if [ ! -e "$top/etc/systemd/system/$rel" ] && [ ! -L "$top/etc/systemd/system/$rel" ]; then
				case "$rel" in
				*/*) ;;
				*) [ "$live" = live ] && systemctl stop "$rel" 2>/dev/null ;;
				esac
				rm -f "$units_dir/$rel"
			fi
		done <"$state/installed"
	fi

	: >"$state/installed.new"
	changed=""
	wanted=""
	for f in "$top"/etc/systemd/system/*; do
		[ -e "$f" ] || continue
		name=$(basename "$f")
		if [ -d "$f" ]; then
			mkdir -p "$units_dir/$name"
			for w in "$f"/*; do
				[ -e "$w" ] || [ -L "$w" ] || continue
				unit=$(basename "$w")
				ln -sfn "$units_dir/$unit" "$units_dir/$name/$unit"
				echo "$name/$unit" >>"$state/installed.new"
				case " $wanted " in *" $unit "*) ;; *) wanted="$wanted $unit" ;; esac
			done
		else
			if [ "$(readlink "$units_dir/$name" 2>/dev/null)" != "$f" ]; then
				[ -e "$units_dir/$name" ] && changed="$changed $name"
				ln -sfn "$f" "$units_dir/$name"
			fi
			echo "$name" >>"$state/installed.new"
		fi
	done
	mv "$state/installed.new" "$state/installed"
}

# install_fstab stands in for NixOS's /etc/fstab: activation links it to the
# generation's etc/fstab, and switch-to-configuration starts the new file systems
# (local-fs.target) and unmounts the ones that disappeared. Here /etc/fstab becomes the
# node's own entries (saved on the first switch) followed by the toplevel's, the mounts
# the previous generation had and this one lacks are stopped, and the new mounts (not
# noauto; no swaps: systemd ignores them in a container) join $wanted, so they are
# started after the daemon-reload and a failed one makes the switch exit 4. The mount
# units are started one by one, not through local-fs.target: Debian's has
# OnFailure=emergency.target, which would take the test node down.
install_fstab() {
	[ -f "$state/fstab.node" ] || cp /etc/fstab "$state/fstab.node" 2>/dev/null || : >"$state/fstab.node"
	old=""
	[ -f "$state/fstab.generation" ] && old=$(awk '$1 !~ /^#/ && NF >= 3 && $3 != "swap" { print $2 }' "$state/fstab.generation")
	new=""
	[ -f "$top/etc/fstab" ] && new=$(awk '$1 !~ /^#/ && NF >= 3 && $3 != "swap" && $4 !~ /(^|,)noauto(,|$)/ { print $2 }' "$top/etc/fstab")
	for where in $old; do
		case " $(echo $new) " in *" $where "*) ;; *) systemctl stop "$(systemd-escape --path --suffix=mount -- "$where")" 2>/dev/null ;; esac
	done
	if [ -f "$top/etc/fstab" ]; then cp "$top/etc/fstab" "$state/fstab.generation"; else rm -f "$state/fstab.generation"; fi
	{ cat "$state/fstab.node" && { [ ! -f "$top/etc/fstab" ] || cat "$top/etc/fstab"; }; } >/etc/fstab.switchyard-test &&
		mv -f /etc/fstab.switchyard-test /etc/fstab || return 1
	for where in $new; do
		wanted="$wanted $(systemd-escape --path --suffix=mount -- "$where")"
	done
}

if [ "$action" = stage-2 ]; then
	ln -sfn "$top" /run/booted-system
	ln -sfn "$top" /run/current-system
	install_units boot
	exit 0
fi

if [ -e "$top/etc/switchyard-test/never-activate" ]; then
	if [ -e "$top/etc/switchyard-test/bootloader-first" ] && { [ "$action" = boot ] || [ "$action" = switch ]; }; then
		install_bootloader || exit 1
	fi
	echo "switch-to-configuration: (fixture) not activating $top" >&2
	exit 0
fi
if [ "$action" = boot ] || [ "$action" = switch ]; then
	install_bootloader || exit 1
fi
[ "$action" = boot ] && exit 0

# NixOS's check before activating: an init that is incompatible with the running one
# needs a reboot.
if [ "$(cat /run/current-system/init-interface-version 2>/dev/null)" != "$(cat "$top/init-interface-version" 2>/dev/null)" ]; then
	echo "Warning: the new NixOS configuration has an 'init' that is incompatible with the current configuration. The new configuration won't take effect until you reboot the system." >&2
	exit 100
fi
if [ "$action" = switch ] && [ -f "$top/etc/switchyard-test/switch-delay" ]; then
	sleep "$(cat "$top/etc/switchyard-test/switch-delay")"
fi

ln -sfn "$top" /run/current-system
install_units live
install_fstab || exit 1
systemctl daemon-reload

# Units the activation restarts although their files are not the closure's (NixOS
# restarts sshd or systemd-networkd when their configuration changed).
restart=""
if [ -f "$top/etc/switchyard-test/restart-units" ]; then
	restart=$(cat "$top/etc/switchyard-test/restart-units")
fi
[ -n "$changed$restart" ] && systemctl restart $changed $restart
[ -n "$wanted" ] && systemctl start $wanted
rc=0
for u in $wanted $changed $restart; do
	if systemctl is-failed --quiet "$u"; then
		echo "switch-to-configuration: unit $u failed" >&2
		rc=4
	fi
done

# etc/switchyard-test/bounce-after-switch holds seconds: a process left in the switch's
# unit cuts the node's SSH sessions and keeps sshd down that long once the unit is
# stopped (the deployer stops it right after reading the result), like an activation
# whose sshd or network restart lands late.
if [ "$action" = switch ] && [ -f "$top/etc/switchyard-test/bounce-after-switch" ]; then
	secs=$(cat "$top/etc/switchyard-test/bounce-after-switch")
	(
		trap 'systemctl stop ssh.service; pkill -f "^sshd: "; sleep "$secs"; systemctl start ssh.service; exit 0' TERM
		while :; do sleep 1; done
	) </dev/null >/dev/null 2>&1 &
fi
exit $rc
