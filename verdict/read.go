package verdict

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// ReadScript reads everything one sample needs in one round trip. It is a fixed
// text, never built from input, so nothing a caller or a configuration holds can end
// up in the shell.
//
// Every command's stdout sits between a begin and an end marker line; the end line
// carries the command's exit status and its stderr folded onto that line. stderr is
// kept apart from stdout so that a warning can never be parsed as unit state, and a
// section whose command failed (e.g. "Failed to connect to bus") is left not read by
// ParseSample rather than read as empty. A section cut short (a dropped connection)
// has no end marker and is not read either.
//
// ConditionTimestamp is read beyond the properties the classes are named after: a
// unit that was never started also shows ConditionResult=no, and only a set
// ConditionTimestamp tells a condition that was checked and failed.
const ReadScript = `# switchyard verdict: read one sample of the node's systemd state (fixed script)
M='##switchyard-verdict'
export LC_ALL=C
exec 3>&1
sy_link() { if [ -e "$1" ] || [ -L "$1" ]; then readlink -f "$1"; fi; }
sy_mtime() { if [ -L "$1" ]; then stat -c %Y "$1"; fi; }
sy_section() {
	sy_name=$1
	shift
	printf '%s begin %s\n' "$M" "$sy_name"
	sy_err=$("$@" 2>&1 >&3 3>&-)
	sy_rc=$?
	printf '\n%s end %s %s %s\n' "$M" "$sy_name" "$sy_rc" "$(printf '%s' "$sy_err" | tr '\n' ' ')"
}
printf '%s v1\n' "$M"
sy_section clock date +%s
sy_section current sy_link /run/current-system
sy_section activated sy_mtime /run/current-system
sy_section boot sy_link /nix/var/nix/profiles/system
sy_section manager systemctl --no-pager show --property=SystemState,NJobs
sy_section jobs systemctl --no-pager list-jobs --no-legend --full --plain
sy_section units systemctl --no-pager show --all --timestamp=unix --property=Id,Type,RemainAfterExit,LoadState,ActiveState,SubState,Result,NRestarts,InvocationID,ExecMainPID,ExecMainCode,ExecMainStatus,ExecMainStartTimestamp,ExecMainExitTimestamp,ExecStartPre,ExecStartPost,ConditionResult,ConditionTimestamp,ActiveEnterTimestamp,ActiveExitTimestamp,InactiveEnterTimestamp,InactiveExitTimestamp,Environment '*'
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

// Read takes one sample: it runs sh -c ReadScript once. What the node could not tell
// (a severed bus) is left not read in the sample and is no error; err is non-nil only
// when the exec failed or the script never ran.
func Read(ctx context.Context, exec Exec) (Sample, error) {
	at := time.Now()
	var out bytes.Buffer
	exit, err := exec(ctx, []string{"sh", "-c", ReadScript}, &out)
	if err != nil {
		return Sample{At: at}, fmt.Errorf("read systemd state: %w", err)
	}
	s, err := ParseSample(out.Bytes(), at)
	if err != nil {
		return s, fmt.Errorf("read systemd state: sh exited %d: %w", exit, err)
	}
	if exit != 0 {
		s.Unread = append(s.Unread, fmt.Sprintf("script: exit %d", exit))
	}
	return s, nil
}
