package verdict

import "time"

// Unit is one unit's state in one sample, as systemd reports it.
type Unit struct {
	Name            string   // Id
	LoadState       string   // loaded, not-found, bad-setting, error, masked
	ActiveState     string   // active, inactive, failed, activating, deactivating, reloading
	SubState        string   // running, dead, auto-restart, exited, ...
	Result          string   // success, exit-code, signal, start-limit-hit, ...
	NRestarts       int      // services only
	InvocationID    string   // changes at every start
	ExecMainCode    int      // CLD_* of the main process: 1 exited, 2 killed, 3 dumped
	ExecMainStatus  int      // exit status (or signal number) of the main process
	ConditionResult string   // "yes" or "no"; systemd also says "no" when it never checked (see ConditionAt)
	ConditionAt     int64    // unix seconds (node clock) the conditions were last checked; 0 never
	ActiveEnter     int64    // unix seconds (node clock) the unit last entered active; 0 never
	ActiveExit      int64    // unix seconds it last left active; 0 never
	Environment     []string // the unit's Environment= assignments, KEY=VALUE
}

// Job is a queued systemd job.
type Job struct {
	ID   int
	Unit string
	Type string // start, stop, restart, ...
	Stat string // waiting, running
}

// Sample is the node's systemd state at one moment, read in one round trip.
// A field that could not be read is left at its "not read" value: SystemState "",
// Units nil, Jobs nil. Read but empty is a non-nil empty map or slice.
type Sample struct {
	At            time.Time       // host clock when the sample was taken
	NodeNow       int64           // node clock, unix seconds
	CurrentSystem string          // /run/current-system resolved; "" when absent
	Activated     int64           // unix seconds /run/current-system was last pointed (activation); 0 unknown
	BootEntry     string          // the system profile resolved; "" when absent
	SystemState   string          // running, degraded, starting, ...; "" not read
	Units         map[string]Unit // nil: not read
	Jobs          []Job           // nil: not read
	// Unread says which parts could not be read and why, one line each, e.g.
	// "units: exit 1: Failed to connect to bus: Connection refused"; nil when all read.
	// It is for logs: the fields above already carry "not read".
	Unread []string
}
