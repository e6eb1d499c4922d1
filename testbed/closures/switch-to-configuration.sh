#!/bin/sh
# Test fixture: emulates NixOS's switch-to-configuration on a Debian test node, for
# exactly what switchyard's verdict depends on. It is not NixOS's script:
#   - "boot"/"switch": point the boot-entry marker /boot/switchyard-default at the toplevel
#   - "switch"/"test": point /run/current-system at the toplevel, install the closure's
#     units under /etc/systemd/system (removing the previous generation's), daemon-reload,
#     start the wanted units (restart the changed ones), exit 4 when one of them failed
#   - a toplevel holding etc/switchyard-test/never-activate exits 0 having done nothing,
#     like a switch that never activated
#   - etc/switchyard-test/switch-delay holds seconds to sleep before activating, so a
#     test can cut the connection while the switch runs
set -u
top=$(cd "$(dirname "$0")/.." && pwd -P)
action=${1:-}
state=/var/lib/switchyard-test
units_dir=/etc/systemd/system

case "$action" in
switch | boot | test | dry-activate) ;;
*)
	echo "usage: switch-to-configuration switch|boot|test|dry-activate" >&2
	exit 1
	;;
esac
[ "$action" = dry-activate ] && exit 0
if [ -e "$top/etc/switchyard-test/never-activate" ]; then
	echo "switch-to-configuration: (fixture) not activating $top" >&2
	exit 0
fi
if [ "$action" = switch ] && [ -f "$top/etc/switchyard-test/switch-delay" ]; then
	sleep "$(cat "$top/etc/switchyard-test/switch-delay")"
fi
if [ "$action" = boot ] || [ "$action" = switch ]; then
	mkdir -p /boot
	ln -sfn "$top" /boot/switchyard-default
fi
[ "$action" = boot ] && exit 0

mkdir -p "$state"
ln -sfn "$top" /run/current-system

# Remove what the previous generation installed and this one does not have.
old_units=""
if [ -f "$state/installed" ]; then
	while read -r rel; do
		if [ ! -e "$top/etc/systemd/system/$rel" ] && [ ! -L "$top/etc/systemd/system/$rel" ]; then
			case "$rel" in
			*/*) ;;
			*) systemctl stop "$rel" 2>/dev/null ;;
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
systemctl daemon-reload

[ -n "$changed" ] && systemctl restart $changed
[ -n "$wanted" ] && systemctl start $wanted
rc=0
for u in $wanted $changed; do
	if systemctl is-failed --quiet "$u"; then
		echo "switch-to-configuration: unit $u failed" >&2
		rc=4
	fi
done
exit $rc
