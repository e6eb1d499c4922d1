package verdict

import (
	"context"
	"errors"
	"io"
)

// ReadScript reads everything one sample needs in one round trip. It is a fixed
// text, never built from input, so nothing a caller or a configuration holds can end
// up in the shell: the units to read come in as its positional arguments
// (sh -c ReadScript sh ARG...), which only awk and systemctl see, as data.
//
// Every command's stdout sits between a begin and an end marker line; the end line
// carries the command's exit status and its stderr folded onto that line. stderr is
// kept apart from stdout so that a warning can never be parsed as unit state, and a
// section whose command failed (e.g. "Failed to connect to bus") is left not read by
// ParseSample rather than read as empty. A section cut short (a dropped connection)
// has no end marker and is not read either.
//
// Every sample reads a cheap view of all units: `systemctl list-units --all` (one
// D-Bus call: Id, LoadState, ActiveState, SubState) and the invocation IDs systemd
// exports without D-Bus as /run/systemd/units/invocation:<unit> symlinks. The full
// properties (`systemctl show`, one D-Bus GetAll per unit, which is what costs PID 1
// its CPU) are read only for the units that need them:
//
//   - the arguments naming a unit ("*" reads every unit, as a first sample does);
//   - every unit not in a steady state in the cheap view (steady: inactive/dead, or
//     active in a resting sub-state), so a failed, activating, auto-restarting,
//     deactivating or reloading unit is always read in full;
//   - every unit with a queued job;
//   - when arguments "=UNIT ACTIVE INVOCATION" give the previous sample's cheap view
//     (INVOCATION "-" for none), every unit whose active state or exported
//     invocation differs from it, or that it did not list.
//
// A named unit that systemd does not list is not read: systemctl show would load it
// and report a unit the manager never had.
//
// ConditionTimestamp is read beyond the properties the classes are named after: a
// unit that was never started also shows ConditionResult=no, and only a set
// ConditionTimestamp tells a condition that was checked and failed.
const ReadScript = `# switchyard verdict: read one sample of the node's systemd state (fixed script)
M='##switchyard-verdict'
export LC_ALL=C
set -f
exec 3>&1
sy_link() { if [ -e "$1" ] || [ -L "$1" ]; then readlink -f "$1"; fi; }
sy_mtime() { if [ -L "$1" ]; then stat -c %Y "$1"; fi; }
sy_section() {
	sy_name=$1
	shift
	printf '%s begin %s\n' "$M" "$sy_name"
	sy_err=$("$@" 2>&1 >&3 3>&-)
	sy_rc=$?
	if [ -n "$sy_err" ]; then
		sy_err=$(printf '%s' "$sy_err" | tr '\n' ' ')
	fi
	printf '\n%s end %s %s %s\n' "$M" "$sy_name" "$sy_rc" "$sy_err"
}
sy_invocations() {
	[ ! -d /run/systemd/units ] || find /run/systemd/units -maxdepth 1 -name 'invocation:*' -printf '%f %l\n'
}
sy_pick='
function steady(a, s) {
	return (a == "inactive" && s == "dead") || (a == "active" && s ~ /^(running|exited|listening|mounted|plugged|waiting|elapsed|active|abandoned)$/)
}
$1 == "A" && NF >= 2 {
	if (substr($2, 1, 1) == "=") { prev[substr($2, 2)] = $3 " " $4; compare = 1 } else { want[$2] = 1 }
	next
}
$1 == "A" { next }
{ print }
$1 == M && $2 == "begin" { sec = $3; next }
$1 == M { sec = ""; next }
sec == "jobs" && NF >= 4 { want[$2] = 1 }
sec == "list" && NF >= 4 { act[$1] = $3; if (!steady($3, $4)) want[$1] = 1 }
sec == "invocations" && NF >= 2 { u = $1; sub(/^invocation:/, "", u); inv[u] = $2 }
END {
	if (compare) for (u in act) {
		i = (u in inv) ? inv[u] : "-"
		if (!(u in prev) || prev[u] != act[u] " " i) want[u] = 1
	}
	for (u in want) if (u == "*" || u in act) print "F " u > "/dev/stderr"
}
'
printf '%s v2\n' "$M"
sy_section clock date +%s
sy_section current sy_link /run/current-system
sy_section activated sy_mtime /run/current-system
sy_section boot sy_link /nix/var/nix/profiles/system
sy_section manager systemctl --no-pager show --property=SystemState,NJobs
sy_full=$(
	{
		printf 'A %s\n' "$@"
		sy_section jobs systemctl --no-pager list-jobs --no-legend --full --plain
		sy_section list systemctl --no-pager list-units --all --no-legend --full --plain
		sy_section invocations sy_invocations
	} 3>&1 | awk -v M="$M" "$sy_pick" 2>&1 >&3
)
set --
IFS='
'
for sy_line in $sy_full; do
	case $sy_line in
	'F '?*) set -- "$@" "${sy_line#F }" ;;
	esac
done
unset IFS
if [ $# -gt 0 ]; then
	sy_section units systemctl --no-pager show --all --timestamp=unix --property=Id,Type,RemainAfterExit,LoadState,ActiveState,SubState,Result,NRestarts,InvocationID,ExecMainPID,ExecMainCode,ExecMainStatus,ExecMainStartTimestamp,ExecMainExitTimestamp,ExecStartPre,ExecStartPost,ConditionResult,ConditionTimestamp,ActiveEnterTimestamp,ActiveExitTimestamp,InactiveEnterTimestamp,InactiveExitTimestamp,Environment,TriggeredBy -- "$@"
else
	sy_section units true
fi
printf '%s done\n' "$M"
exit 0
`

// Exec runs argv on a node as root, writing its stdout to stdout. exit is the
// command's exit status; err is non-nil only when the command could not be run or
// its status could not be read (the node is unreachable, the connection dropped).
type Exec func(ctx context.Context, argv []string, stdout io.Writer) (exit int, err error)

// ErrNotScriptOutput means the output holds no ReadScript header: the script never
// ran (no sh, sudo refused, a wrapper printed something else).
var ErrNotScriptOutput = errors.New("not the output of the verdict read script")

// Read takes one sample reading every unit in full (ReadArgs with AllUnits), as the
// first script did. A body samples with a Sampler, which reads most units cheaply.
func Read(ctx context.Context, exec Exec) (Sample, error) {
	return ReadArgs(ctx, exec, []string{AllUnits})
}
