package verdict

import "time"

// Unit is one unit's state in one sample, as systemd reports it.
//
// A sample reads every unit's cheap view (Listed: Name, LoadState, ActiveState,
// SubState, ExportedInvocation) and the full properties (Full: every other field)
// only of the units that need them (see ReadScript and Sampler). In a unit that is
// not Full every other field is "not read", never "none": its NRestarts 0 says
// nothing about its restarts. Samples of the first script (v1) read every unit in
// full and list none.
type Unit struct {
	Listed bool // in the sample's cheap view (systemctl list-units --all)
	Full   bool // its properties were read (systemctl show)
	// ExportedInvocation is the invocation ID systemd exports as the symlink
	// /run/systemd/units/invocation:<unit>: written when a unit that runs processes
	// starts, removed when it goes inactive, absent for units that run none
	// (targets, timers, devices, slices, mounts systemd did not mount); "" when
	// absent.
	ExportedInvocation string

	Name            string   // Id
	LoadState       string   // loaded, not-found, bad-setting, error, masked
	ActiveState     string   // active, inactive, failed, activating, deactivating, reloading
	SubState        string   // running, dead, auto-restart, exited, ...
	Result          string   // success, exit-code, signal, start-limit-hit, ...
	NRestarts       int      // services only
	InvocationID    string   // changes at every start; kept while the unit is inactive
	ExecMainCode    int      // CLD_* of the main process: 1 exited, 2 killed, 3 dumped
	ExecMainStatus  int      // exit status (or signal number) of the main process
	ConditionResult string   // "yes" or "no"; systemd also says "no" when it never checked (see ConditionAt)
	ConditionAt     int64    // unix seconds (node clock) the conditions were last checked; 0 never
	ActiveEnter     int64    // unix seconds (node clock) the unit last entered active; 0 never
	ActiveExit      int64    // unix seconds it last left active; 0 never
	Environment     []string // the unit's Environment= assignments, KEY=VALUE

	Type            string // simple, exec, forking, oneshot, notify, ...; "" for non-services
	RemainAfterExit bool
	// NeedReload is systemd's NeedDaemonReload: the unit's file changed on disk since
	// systemd loaded it, so what it runs is not what the file now says.
	NeedReload    bool
	ExecMainPID   int   // the main process while it runs; 0 none
	ExecMainStart int64 // unix seconds the main process of the last run started; 0 never
	ExecMainExit  int64 // unix seconds it exited; 0 not yet or never
	InactiveEnter int64 // unix seconds the unit last entered inactive or failed; 0 never
	InactiveExit  int64 // unix seconds it last left inactive or failed (a start began); 0 never
	// ExecStartPre and ExecStartPost are the status of each such command of the last
	// run, in order; a command that has not run has Code "".
	ExecStartPre  []ExecCommand
	ExecStartPost []ExecCommand
	// TriggeredBy are the units that start this one (its timers, paths, sockets);
	// nil when none (or in samples of the first script, which did not read it).
	TriggeredBy []string
	// Triggers are the units this one starts (a timer's, path's, socket's or
	// automount's units); nil when none, or in samples that did not read it.
	Triggers []string
}

// ExecCommand is one ExecStartPre=/ExecStartPost= command's last run, as
// `systemctl show` renders it: "{ path=... ; ... ; code=exited ; status=214 }".
type ExecCommand struct {
	Path   string
	Code   string // exited, killed, dumped; "" when it has not run ("(null)")
	Status int    // exit status, or the signal number when killed
	Start  int64  // unix seconds it started; 0 not run
	Stop   int64  // unix seconds it ended; 0 not ended
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
