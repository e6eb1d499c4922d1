package effects

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// The node-side deploy lock (issue 15): one deployer at a time changes a node,
// whatever method it uses (ssh, tf, ...), because the lock lives on the node.
//
//	/run/switchyard/lock             the holder: "TOKEN EXPIRES HOST PID SINCE WHERE"
//	                                 (tmpfs: a reboot ends every lock)
//	/run/switchyard/lock.flock       flock(1) target serialising every lock command
//	/var/lib/switchyard/lock-generation  the fence counter (persists across reboots)
//
// Every take increments the generation and writes it into the lock: that number is
// the holder's token. Every command that changes the node (the switch's start,
// finalize's and revert's steps) runs through LockScript's fence verb, which checks,
// under the same flock, that the token is still the node's current lock and its
// lease has not run out, and runs the command while holding the flock (so no take
// can come between the check and the act). A deployer paused past its lease and
// overtaken can therefore never act again: its token is no longer current.
//
// Times are the node's clock (date +%s on the node), never the deployer's, so
// deployers with skewed clocks agree on when a lease ends.

// LockScript is the fixed script of every lock command, run as
// `sh -c LockScript sh VERB ARGS...`; every input is an argument.
//
//	read                     print "now N", "generation N", "lock LINE" and one
//	                         "switch UNIT ACTIVE SUB" per switchyard switch unit
//	acquire HOST PID TTL WHERE  take the lock when there is none and no switch unit
//	                         runs (the common case: one command, not read then take)
//	                         and print "taken LINE"; otherwise what read prints
//	take EXPECTED HOST PID TTL WHERE  if the lock line is still EXPECTED (compare and set),
//	                         bump the generation and write a new lock; print it
//	renew TOKEN TTL          extend the lease of the lock holding TOKEN; print it
//	release TOKEN            remove the lock holding TOKEN
//	fence TOKEN TTL ARGV...  run ARGV if TOKEN is the current, unexpired lock, having
//	                         renewed its lease to TTL (0: left as it is); prints nothing
//	                         of its own, ARGV's output is the command's
//
// A verb that finds another lock than the one it was given exits LockFenced and
// prints the lock line it found (fence: on stderr, after LockLostMarker).
//
// Every command that changes the node runs through it, so it starts few processes
// (the shell's read for the one-line files, mkdir only when a directory is missing):
// flock, date, and mv for a write.
const LockScript = `set -eu
dir=/run/switchyard
state=/var/lib/switchyard
umask 077
[ -d "$dir" ] && [ -d "$state" ] || mkdir -p "$dir" "$state"
exec 9>>"$dir/lock.flock"
if ! flock -w 30 9; then
	echo "switchyard lock: $dir/lock.flock stayed busy for 30 s" >&2
	exit 70
fi
now=$(date +%s)
cur=""
if [ -f "$dir/lock" ]; then IFS= read -r cur < "$dir/lock" || :; fi
gen=0
if [ -f "$state/lock-generation" ]; then IFS= read -r gen < "$state/lock-generation" || :; fi
case $gen in
''|*[!0-9]*) echo "switchyard lock: $state/lock-generation holds no number" >&2; exit 70 ;;
esac
tok=${cur%% *}
rest=${cur#* }
exp=${rest%% *}
put() { # LINE [PREFIX]: write the lock, print it (after PREFIX)
	printf '%s\n' "$1" > "$dir/lock.tmp"
	mv -f "$dir/lock.tmp" "$dir/lock"
	printf '%s\n' "${2:+$2 }$1"
}
take_lock() { # HOST PID TTL WHERE [PREFIX]
	gen=$((gen + 1))
	printf '%s\n' "$gen" > "$state/lock-generation.tmp"
	mv -f "$state/lock-generation.tmp" "$state/lock-generation"
	put "$gen $((now + $3)) $1 $2 $now $4" "${5:-}"
}
verb=$1
shift
case $verb in
read | acquire)
	units=$(systemctl list-units --all --plain --no-legend --no-pager 'switchyard-switch-*' | awk '{ print "switch " $1 " " $3 " " $4 }')
	running=
	while read -r _ _ active sub; do
		case $active/$sub in activating/* | deactivating/* | */running | */start) running=1 ;; esac
	done <<EOF
$units
EOF
	if [ "$verb" = acquire ] && [ -z "$cur" ] && [ -z "$running" ]; then
		take_lock "$1" "$2" "$3" "$4" taken
		exit
	fi
	printf 'now %s\ngeneration %s\nlock %s\n' "$now" "$gen" "$cur"
	[ -z "$units" ] || printf '%s\n' "$units"
	;;
take)
	if [ "$cur" != "$1" ]; then printf '%s\n' "$cur"; exit 75; fi
	take_lock "$2" "$3" "$4" "$5"
	;;
renew)
	if [ -z "$cur" ] || [ "$tok" != "$1" ]; then printf '%s\n' "$cur"; exit 75; fi
	rest=${rest#* }
	put "$1 $((now + $2)) $rest"
	;;
release)
	if [ -z "$cur" ] || [ "$tok" != "$1" ]; then printf '%s\n' "$cur"; exit 75; fi
	rm -f "$dir/lock"
	;;
fence)
	if [ -z "$cur" ] || [ "$tok" != "$1" ] || [ "$now" -ge "$exp" ]; then
		echo "switchyard-lock-lost: the deploy lock with token $1 is no longer this deployer's (lock now: ${cur:-none}); $3 not run" >&2
		exit 75
	fi
	[ "$2" = 0 ] || put "$1 $((now + $2)) ${rest#* }" >/dev/null
	shift 2
	"$@" 9>&-
	;;
*)
	echo "switchyard lock: unknown verb $verb" >&2
	exit 70
	;;
esac
`

// leaseSeconds is the lease a take or a renew writes, in the node's whole seconds: the
// TTL, at least 1, plus one. The node's clock counts whole seconds, so a lease written
// late in second s as s+TTL would lapse up to a second early, and with a short TTL
// between two renewals (every third of it): the holder's own fenced step was refused
// one time in a few with DEPLOY_LOCK_TTL=1.
func leaseSeconds(ttl time.Duration) string {
	return strconv.FormatInt(int64(max(ttl.Seconds(), 1))+1, 10)
}

// LockFenced is LockScript's exit status when the lock is not the caller's.
const LockFenced = 75

// LockLostMarker starts the line the fence verb prints on stderr when it refuses.
const LockLostMarker = "switchyard-lock-lost:"

// ErrLockLost marks a step refused on the node because this deployer's lock was
// taken over (it was paused past its lease, or could not renew it).
var ErrLockLost = errors.New("deploy lock lost")

type fenceKey struct{}

// fence is what WithFence puts in a context.
type fence struct {
	token uint64
	lease string // LockScript's fence TTL: leaseSeconds, or "0"
}

// WithFence is ctx carrying the lock token: a transport's Run under it runs every
// command through FenceArgv, so the node refuses it unless token is still its lock.
// A command that passes the fence renews the lease to ttl (0: leaves it as it is), in
// the same command: the holder's own steps keep its lease, and its renewer can wait.
func WithFence(ctx context.Context, token uint64, ttl time.Duration) context.Context {
	f := fence{token: token, lease: "0"}
	if ttl > 0 {
		f.lease = leaseSeconds(ttl)
	}
	return context.WithValue(ctx, fenceKey{}, f)
}

// FenceToken is the token WithFence put in ctx.
func FenceToken(ctx context.Context) (uint64, bool) {
	f, ok := ctx.Value(fenceKey{}).(fence)
	return f.token, ok
}

// FenceArgv is argv as a transport must run it under ctx: unchanged, or, when ctx
// carries a fence (WithFence), wrapped in LockScript's fence verb. Every
// transport's Run calls it first, so the bootloader hooks' own commands are fenced
// too.
func FenceArgv(ctx context.Context, argv []string) []string {
	f, ok := ctx.Value(fenceKey{}).(fence)
	if !ok || len(argv) == 0 {
		return argv
	}
	return append([]string{"sh", "-c", LockScript, "sh", "fence", strconv.FormatUint(f.token, 10), f.lease}, argv...)
}
