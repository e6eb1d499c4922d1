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
//   - the arguments naming a unit ("*" reads every unit), and the listed instances
//     of an argument naming a template ("getty@.service");
//   - with the argument "@triggers", every unit that starts others: the timers,
//     paths, sockets and automounts, whose Triggers name the units a first sample
//     must read in full from the next one on (see Sampler);
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
// A sample's cost on the node is mostly the processes the script starts (on the
// test bed about 2-3 ms each, 12 ms for a systemctl), so it starts few: one find
// lists /run/current-system, the system profile's links and the exported invocation
// IDs, and the awk that picks the units resolves the links through the ones find
// listed (the profile's two levels; absolute or same-directory targets, as
// switch-to-configuration and nix-env write them) and gives their mtime; the clock is
// awk's srand(), which POSIX makes the time of day; and list-jobs runs only when the
// manager's NJobs is not 0. The sections and their format are v2's. A failed manager
// read is read again as its own section, for its stderr.
//
// ConditionTimestamp is read beyond the properties the classes are named after: a
// unit that was never started also shows ConditionResult=no, and only a set
// ConditionTimestamp tells a condition that was checked and failed. NeedDaemonReload
// tells a unit whose file changed since systemd loaded it (not restarted).
const ReadScript = `# switchyard verdict: read one sample of the node's systemd state (fixed script)
M='##switchyard-verdict'
export LC_ALL=C
set -f
exec 3>&1
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
sy_links() {
	sy_roots=
	for sy_p in /run/current-system /nix/var/nix/profiles /run/systemd/units; do
		if [ -e "$sy_p" ] || [ -L "$sy_p" ]; then
			sy_roots="$sy_roots $sy_p"
		fi
	done
	[ -z "$sy_roots" ] || find $sy_roots -maxdepth 1 \( -path /run/current-system -o -path '/nix/var/nix/profiles/system*' -o -path '/run/systemd/units/invocation:*' \) -printf '%p\t%l\t%T@\n'
}
sy_pick='
function steady(a, s) {
	return (a == "inactive" && s == "dead") || (a == "active" && s ~ /^(running|exited|listening|mounted|plugged|waiting|elapsed|active|abandoned)$/)
}
function resolve(p,   n, t, d) {
	for (n = 0; n < 40 && (p in lnk) && lnk[p] != ""; n++) {
		t = lnk[p]
		if (substr(t, 1, 1) != "/") {
			d = p
			sub(/\/[^\/]*$/, "", d)
			t = d "/" t
		}
		p = t
	}
	return p
}
function endline(name,   e) {
	e = lend
	sub(/ end links /, " end " name " ", e)
	print ""
	print e
}
function single(name, v) {
	printf "%s begin %s\n%s\n", M, name, v
	endline(name)
}
BEGIN {
	srand()
	printf "%s begin clock\n%d\n\n%s end clock 0 \n", M, srand(), M
}
function template(u,   at) {
	at = index(u, "@")
	if (at == 0 || !match(u, /\.[^.]*$/) || RSTART < at + 2) return ""
	return substr(u, 1, at) substr(u, RSTART)
}
$1 == "A" && NF >= 2 {
	if (substr($2, 1, 1) == "=") { prev[substr($2, 2)] = $3 " " $4; compare = 1 }
	else if ($2 == "@triggers") triggers = 1
	else if (index($2, "@.") > 1) tmpl[$2] = 1
	else want[$2] = 1
	next
}
$1 == "A" { next }
$1 == M && $2 == "begin" && $3 == "links" { sec = "links"; next }
$1 == M && $2 == "end" && $3 == "links" { lend = $0; sec = ""; next }
sec == "links" {
	if (split($0, f, "\t") >= 3) {
		if (substr(f[1], 1, 30) == "/run/systemd/units/invocation:") inv[substr(f[1], 31)] = f[2]
		else { lnk[f[1]] = f[2]; mt[f[1]] = f[3] }
	}
	next
}
{ print }
$1 == M && $2 == "begin" { sec = $3; next }
$1 == M { sec = ""; next }
sec == "jobs" && NF >= 4 { want[$2] = 1 }
sec == "list" && NF >= 4 {
	act[$1] = $3
	if (!steady($3, $4) || (template($1) in tmpl) || (triggers && $1 ~ /\.(timer|path|socket|automount)$/)) want[$1] = 1
}
END {
	if (compare) for (u in act) {
		i = (u in inv) ? inv[u] : "-"
		if (!(u in prev) || prev[u] != act[u] " " i) want[u] = 1
	}
	for (u in want) if (u == "*" || u in act) print "F " u > "/dev/stderr"
	if (lend == "") exit
	c = "/run/current-system"
	single("current", (c in lnk) ? resolve(c) : "")
	single("activated", ((c in lnk) && lnk[c] != "") ? int(mt[c]) : "")
	b = "/nix/var/nix/profiles/system"
	single("boot", (b in lnk) ? resolve(b) : "")
	printf "%s begin invocations\n", M
	for (u in inv) printf "invocation:%s %s\n", u, inv[u]
	endline("invocations")
}
'
printf '%s v2\n' "$M"
if sy_manager=$(systemctl --no-pager show --property=SystemState,NJobs 2>/dev/null); then
	sy_section manager printf '%s\n' "$sy_manager"
else
	sy_section manager systemctl --no-pager show --property=SystemState,NJobs
fi
sy_full=$(
	{
		printf 'A %s\n' "$@"
		case "
$sy_manager
" in
		*"
NJobs=0
"*) sy_section jobs true ;;
		*) sy_section jobs systemctl --no-pager list-jobs --no-legend --full --plain ;;
		esac
		sy_section list systemctl --no-pager list-units --all --no-legend --full --plain
		sy_section links sy_links
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
	sy_section units systemctl --no-pager show --all --timestamp=unix --property=Id,Type,RemainAfterExit,LoadState,ActiveState,SubState,Result,NRestarts,InvocationID,ExecMainPID,ExecMainCode,ExecMainStatus,ExecMainStartTimestamp,ExecMainExitTimestamp,ExecStartPre,ExecStartPost,ConditionResult,ConditionTimestamp,ActiveEnterTimestamp,ActiveExitTimestamp,InactiveEnterTimestamp,InactiveExitTimestamp,Environment,TriggeredBy,Triggers,NeedDaemonReload -- "$@"
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
