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
#   - "switch"/"test", in switch-to-configuration-ng's order and with its unit rules
#     (testbed/closures/NG.md lists them, modelled or not): read which units are
#     active; stop the changed ones (their old definitions) and the sockets of changed
#     socket-activated services; point /run/current-system at the toplevel and install
#     the closure's units under /etc/systemd/system (removing the previous
#     generation's; a removed unit is stopped unless it says X-StopOnRemoval=false);
#     reset-failed; daemon-reload; reload the changed units that say
#     X-ReloadIfChanged=true ("reloading the following units: ..."); restart what is restarted rather
#     than stopped (non-services, X-StopIfChanged=false, and the units named in
#     etc/switchyard-test/restart-units); start the stopped units (a socket-activated
#     service's socket, not the service) and what the active targets pull in; then
#     exit 4 when any unit of the node is failed, or auto-restarting after a non-zero
#     exit. A changed unit with X-RestartIfChanged=false (NixOS writes it in
#     [Service]), RefuseManualStop= or X-OnlyManualStart= is not touched: ng's
#     "NOT restarting the following changed units: ..." goes to stderr (the journal),
#     as do ng's "stopping/restarting/starting the following units: ..." lines
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
# running: stop removed units.
install_units() {
	live=$1
	mkdir -p "$state"
	if [ -f "$state/installed" ]; then
		while read -r rel; do
			if [ ! -e "$top/etc/systemd/system/$rel" ] && [ ! -L "$top/etc/systemd/system/$rel" ]; then
				case "$rel" in
				*/*) ;;
				*)
					# ng stops a removed unit unless its old file says
					# X-StopOnRemoval=false in [Unit].
					if [ "$live" = live ] && unit_bool "$units_dir/$rel" Unit X-StopOnRemoval true; then
						systemctl stop "$rel" 2>/dev/null
					fi
					;;
				esac
				rm -f "$units_dir/$rel"
			fi
		done <"$state/installed"
	fi

	: >"$state/installed.new"
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
			done
		else
			if [ "$(readlink "$units_dir/$name" 2>/dev/null)" != "$f" ]; then
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
# noauto; no swaps: systemd ignores them in a container) join $mounts, so they are
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
		mounts="$mounts $(systemd-escape --path --suffix=mount -- "$where")"
	done
}

# add LIST UNIT prints the space-separated LIST with UNIT appended, once.
add() {
	case " $1 " in
	*" $2 "*) printf '%s\n' "$1" ;;
	*) printf '%s\n' "${1:+$1 }$2" ;;
	esac
}

# has LIST UNIT: UNIT is in the space-separated LIST (the lists here are built with
# add, or printed by awk as one line).
has() {
	case " $1 " in *" $2 "*) return 0 ;; esac
	return 1
}

# display LIST prints the units as ng's messages name them: sorted without regard to
# case, comma-separated.
display() {
	printf '%s\n' $1 | sort -f | sed -n 'H; ${x; s/^\n//; s/\n/, /g; p;}'
}

# unit_values FILE SECTION KEY prints the values KEY has in SECTION of a unit file, as
# ng reads them: every assignment adds one, an empty assignment clears the ones before.
# Drop-ins are not read (no test closure has any).
unit_values() {
	awk -v sec="$2" -v key="$3" '
		/^[ \t]*\[.*\][ \t]*$/ { cur = $0; gsub(/^[ \t]*\[|\][ \t]*$/, "", cur); next }
		cur == sec && index($0, "=") {
			k = substr($0, 1, index($0, "=") - 1); v = substr($0, index($0, "=") + 1)
			gsub(/^[ \t]+|[ \t]+$/, "", k); gsub(/^[ \t]+|[ \t]+$/, "", v)
			if (k != key) next
			if (v == "") vals = ""; else vals = vals (vals == "" ? "" : " ") v
		}
		END { print vals }' "$1"
}

# unit_bool FILE SECTION KEY DEFAULT: ng's parse_systemd_bool, the last value is
# 1, yes, true or on; DEFAULT (true or false) when the key is not set.
unit_bool() {
	v=$(unit_values "$1" "$2" "$3")
	[ -z "$v" ] && { [ "$4" = true ]; return; }
	case ${v##* } in 1 | yes | true | on) return 0 ;; esac
	return 1
}

# plan_units decides, before anything is activated, what ng's handle_modified_unit
# does with each unit that is active now and whose file the new generation changes
# (compared by content: every generation has its own copy of a file): sets $stop
# (stopped before the activation), $start (started after it), $reload (reloaded after
# the daemon-reload: X-ReloadIfChanged=true, ng's first rule), $restart and $skip (not
# restarted). A changed unit that is not active is left to what pulls it in.
plan_units() {
	stop="" start="" restart="" skip="" reload=""
	running=$(systemctl list-units --all --plain --no-legend --full | awk '$3 == "active" || $3 == "activating" { printf "%s ", $1 }')
	present=$(systemctl list-units --all --plain --no-legend --full | awk '$3 != "inactive" { printf "%s ", $1 }')
	for f in "$top"/etc/systemd/system/*; do
		[ -f "$f" ] || continue
		unit=$(basename "$f")
		old=$units_dir/$unit
		[ -e "$old" ] && has "$running" "$unit" || continue
		cmp -s "$old" "$f" && continue
		case $unit in
		*.target | *.slice | *.socket) ;;
		*.mount) restart=$(add "$restart" "$unit") ;;
		*)
			if unit_bool "$f" Service X-ReloadIfChanged false; then
				reload=$(add "$reload" "$unit")
			elif ! unit_bool "$f" Service X-RestartIfChanged true ||
				unit_bool "$f" Unit RefuseManualStop false || unit_bool "$f" Unit X-OnlyManualStart false; then
				skip=$(add "$skip" "$unit")
			elif ! unit_bool "$f" Service X-StopIfChanged true || [ "${unit%.service}" = "$unit" ]; then
				restart=$(add "$restart" "$unit")
			else
				plan_service "$f" "$unit"
			fi
			;;
		esac
	done
}

# plan_service: a changed service is stopped now and started after the activation;
# when it is socket-activated (a socket of its Sockets=, or its own name's, is
# present), its sockets are stopped too and started again, and the service is not:
# the next connection starts it.
plan_service() {
	stop=$(add "$stop" "$2")
	sockets=$(unit_values "$1" Service Sockets)
	[ -n "$sockets" ] || sockets=${2%.service}.socket
	activated=false
	for socket in $sockets; do
		has "$present" "$socket" || continue
		stop=$(add "$stop" "$socket")
		if [ -e "$top/etc/systemd/system/$socket" ]; then
			start=$(add "$start" "$socket")
			activated=true
		fi
	done
	unit_bool "$1" Service X-NotSocketActivated false && activated=false
	[ "$activated" = true ] || start=$(add "$start" "$2")
}

# pulled_in prints the closure's units that the node's active targets pull in: ng
# starts the active targets, and they start what their *.wants/ and *.requires/ name;
# a target pulled in pulls in its own. Here the units are started rather than the
# targets: Debian's local-fs.target has OnFailure=emergency.target, so a start of it
# (or of a target that pulls it in) with a failing new mount would take the test node
# down, while the units are the same.
pulled_in() {
	targets=$(systemctl list-units --type=target --plain --no-legend --full | awk '$3 == "active" || $3 == "activating" { printf "%s ", $1 }')
	pulled=""
	more=true
	while [ "$more" = true ]; do
		more=false
		for d in "$top"/etc/systemd/system/*.wants "$top"/etc/systemd/system/*.requires; do
			[ -d "$d" ] || continue
			target=$(basename "$d")
			target=${target%.*}
			has "$targets" "$target" || continue
			for w in "$d"/*; do
				[ -e "$w" ] || [ -L "$w" ] || continue
				unit=$(basename "$w")
				has "$pulled" "$unit" && continue
				pulled=$(add "$pulled" "$unit")
				case $unit in *.target) targets=$(add "$targets" "$unit") more=true ;; esac
			done
		done
	done
	printf '%s\n' "$pulled"
}

# dry_activate prints what a switch would do, in ng's dry-activate words, and changes
# nothing: the units plan_units would stop, leave alone, reload and restart, and those
# it would start (the stopped ones started again, and what the active targets pull in
# that is not active now).
dry_activate() {
	[ -n "$stop" ] && echo "would stop the following units: $(display "$stop")" >&2
	[ -n "$skip" ] && echo "would NOT stop the following changed units: $(display "$skip")" >&2
	echo "would activate the configuration..." >&2
	[ -n "$reload" ] && echo "would reload the following units: $(display "$reload")" >&2
	[ -n "$restart" ] && echo "would restart the following units: $(display "$restart")" >&2
	for u in $(pulled_in); do
		has "$running" "$u" || start=$(add "$start" "$u")
	done
	[ -n "$start" ] && echo "would start the following units: $(display "$start")" >&2
	return 0
}

# failed_units prints what ng counts as failed once the jobs are done and systemd has
# settled (it waits for a quiet bus): every failed unit of the node, and every service
# waiting to restart whose main process exited non-zero.
failed_units() {
	sleep 0.25
	out=""
	for u in $(systemctl list-units --all --plain --no-legend --full --state=failed | awk '{ print $1 }'); do
		out=$(add "$out" "$u")
	done
	for u in $(systemctl list-units --all --plain --no-legend --full --state=auto-restart | awk '$1 ~ /\.service$/ { print $1 }'); do
		[ "$(systemctl show --property=ExecMainStatus --value -- "$u")" = 0 ] || out=$(add "$out" "$u")
	done
	printf '%s\n' "$out"
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

plan_units
if [ "$action" = dry-activate ]; then
	dry_activate
	exit 0
fi
if [ -n "$stop" ]; then
	echo "stopping the following units: $(display "$stop")" >&2
	systemctl stop $stop
fi
[ -n "$skip" ] && echo "NOT restarting the following changed units: $(display "$skip")" >&2

echo "activating the configuration..." >&2
ln -sfn "$top" /run/current-system
install_units live
mounts=""
install_fstab || exit 1
# ng forgets the failures of before the switch, then reloads: a unit failed before it
# and not started by it is inactive afterwards.
systemctl reset-failed
systemctl daemon-reload

# Units the activation restarts although their files are not the closure's (NixOS
# restarts sshd or systemd-networkd when their configuration changed).
if [ -f "$top/etc/switchyard-test/restart-units" ]; then
	for u in $(cat "$top/etc/switchyard-test/restart-units"); do
		restart=$(add "$restart" "$u")
	done
fi
rc=0
if [ -n "$reload" ]; then
	echo "reloading the following units: $(display "$reload")" >&2
	systemctl reload $reload || rc=4
fi
if [ -n "$restart" ]; then
	echo "restarting the following units: $(display "$restart")" >&2
	systemctl restart $restart || rc=4
fi
[ -n "$start" ] && echo "starting the following units: $(display "$start")" >&2
pulled=$(pulled_in)
if [ -n "$start$pulled$mounts" ]; then
	systemctl start $start $pulled $mounts || rc=4
fi
failed=$(failed_units)
if [ -n "$failed" ]; then
	echo "warning: the following units failed: $(display "$failed")" >&2
	rc=4
fi

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
