package verdict

import (
	"slices"
	"strconv"
)

// execStage is one of systemd's own exit statuses (200 and up): systemd's forked
// child failed while setting up the process, before the unit's program ever ran.
type execStage struct {
	name string // systemd's name, as in "status=219/CGROUP"
	// host is true when the cause lies in the host (kernel, privileges, cgroups,
	// file systems) rather than in what the configuration asked for. Only host-side
	// statuses are spawn faults; the others are the closure's own failures and stay
	// failed units, so a broken configuration is never excused as a host fault.
	host bool
}

// execStages is systemd's exit status table for 200-245 (src/basic/exit-status.h;
// the names were checked against systemd 252's own rendering). 223 and 234 are
// reserved and unused.
//
// Closure-caused: what fails is something the configuration names and gets wrong.
// Host-side: the configuration asked for something ordinary and the host refused it.
// Where a status can be either, it counts as the closure's, so a real failure is
// never hidden.
var execStages = map[int]execStage{
	200: {"CHDIR", false},                  // WorkingDirectory= missing
	201: {"NICE", true},                    // the kernel refused Nice=
	202: {"FDS", true},                     // setting up file descriptors failed
	203: {"EXEC", false},                   // the program is missing or not executable
	204: {"MEMORY", true},                  // out of memory in the forked child
	205: {"LIMITS", true},                  // the kernel refused a Limit*=
	206: {"OOM_ADJUST", true},              // writing oom_score_adj was refused
	207: {"SIGNAL_MASK", true},             // resetting the signal mask failed
	208: {"STDIN", false},                  // StandardInput= names what is not there
	209: {"STDOUT", false},                 // StandardOutput= names what is not there
	210: {"CHROOT", false},                 // RootDirectory=/RootImage= wrong
	211: {"IOPRIO", true},                  // the kernel refused IOSchedulingClass=
	212: {"TIMERSLACK", true},              // prctl(PR_SET_TIMERSLACK) refused
	213: {"SECUREBITS", true},              // securebits refused
	214: {"SETSCHEDULER", true},            // CPUSchedulingPolicy= refused (e.g. no RT in a container)
	215: {"CPUAFFINITY", true},             // CPUAffinity= names CPUs the host lacks
	216: {"GROUP", false},                  // Group= does not exist
	217: {"USER", false},                   // User= does not exist
	218: {"CAPABILITIES", true},            // capabilities the host cannot grant
	219: {"CGROUP", true},                  // joining or creating the unit's cgroup failed
	220: {"SETSID", true},                  // setsid() failed
	221: {"CONFIRM", true},                 // refused at the console (systemd.confirm_spawn)
	222: {"STDERR", false},                 // StandardError= names what is not there
	224: {"PAM", false},                    // the PAM session of PAMName= failed
	225: {"NETWORK", true},                 // PrivateNetwork= namespace refused
	226: {"NAMESPACE", true},               // mount namespace setup refused
	227: {"NO_NEW_PRIVILEGES", true},       // prctl(PR_SET_NO_NEW_PRIVS) refused
	228: {"SECCOMP", true},                 // the kernel refused the seccomp filter
	229: {"SELINUX_CONTEXT", true},         // SELinux refused the context
	230: {"PERSONALITY", true},             // Personality= unsupported by the host
	231: {"APPARMOR", true},                // AppArmor refused the profile
	232: {"ADDRESS_FAMILIES", true},        // RestrictAddressFamilies= filter refused
	233: {"RUNTIME_DIRECTORY", true},       // creating RuntimeDirectory= failed
	235: {"CHOWN", true},                   // chown of the unit's sockets/tty failed
	236: {"SMACK_PROCESS_LABEL", true},     // SMACK refused the label
	237: {"KEYRING", true},                 // the kernel keyring could not be set up
	238: {"STATE_DIRECTORY", true},         // creating StateDirectory= failed
	239: {"CACHE_DIRECTORY", true},         // creating CacheDirectory= failed
	240: {"LOGS_DIRECTORY", true},          // creating LogsDirectory= failed
	241: {"CONFIGURATION_DIRECTORY", true}, // creating ConfigurationDirectory= failed
	242: {"NUMA_POLICY", true},             // NUMAPolicy=/NUMAMask= refused by the host
	243: {"CREDENTIALS", false},            // LoadCredential= source missing: a deploy must notice
	244: {"BPF", true},                     // BPF programs could not be attached
	245: {"KSM", true},                     // MemoryKSM= refused (systemd 254 and later)
}

// cldExited is ExecMainCode for a main process that exited (CLD_EXITED); systemd
// reports its exec-stage failures as such an exit.
const cldExited = 1

// Stages of SpawnFault: the command whose status names the fault, or none when
// systemd never started a process.
const (
	StageStartPre  = "ExecStartPre"
	StageStart     = "ExecStart"
	StageStartPost = "ExecStartPost"
	StageNone      = "" // Result=resources before any process ran
)

// StatusResources is SpawnFault.Status for a start that failed with
// Result=resources before any process ran: systemd could not fork or set up the
// process (seen on the test bed when PID 1's pids cgroup refused the fork).
const StatusResources = "resources"

// spawnFault returns the stage and status ("ExecStart", "219/CGROUP") when u is
// failed or waiting to restart because systemd could not spawn a process of its
// start for a host reason. At a start systemd resets the exec statuses of the
// unit, so the statuses read are the last start's: its commands run in the order
// ExecStartPre=, ExecStart=, ExecStartPost=, and the first that did not succeed is
// what stopped the start.
func spawnFault(u Unit) (stage, status string, ok bool) {
	if u.ActiveState != "failed" && !autoRestart(u) {
		return "", "", false
	}
	if u.Result == "resources" && noProcessRan(u) {
		return StageNone, StatusResources, true
	}
	for _, c := range u.ExecStartPre {
		if c.Code != "" && (c.Code != "exited" || c.Status != 0) {
			return hostStage(StageStartPre, c.Code == "exited", c.Status)
		}
	}
	if u.ExecMainCode != 0 && (u.ExecMainCode != cldExited || u.ExecMainStatus != 0) {
		return hostStage(StageStart, u.ExecMainCode == cldExited, u.ExecMainStatus)
	}
	for _, c := range u.ExecStartPost {
		if c.Code != "" && (c.Code != "exited" || c.Status != 0) {
			return hostStage(StageStartPost, c.Code == "exited", c.Status)
		}
	}
	return "", "", false
}

// hostStage is a spawn fault when the command exited with a host-side exec-stage status.
func hostStage(stage string, exited bool, status int) (string, string, bool) {
	st, ok := execStages[status]
	if !exited || !ok || !st.host {
		return "", "", false
	}
	return stage, strconv.Itoa(status) + "/" + st.name, true
}

// noProcessRan: the last start forked nothing, by systemd's own record: no main
// process (ExecMainPID, ExecMainStartTimestamp) and no ExecStartPre=/ExecStartPost=
// command that started.
func noProcessRan(u Unit) bool {
	if u.ExecMainPID != 0 || u.ExecMainStart != 0 {
		return false
	}
	for _, c := range append(slices.Clip(u.ExecStartPre), u.ExecStartPost...) {
		if c.Code != "" || c.Start != 0 {
			return false
		}
	}
	return true
}

// autoRestart: the unit failed and systemd waits to start it again ("auto-restart";
// systemd 254 and later pass "auto-restart-queued" once the restart job is queued).
func autoRestart(u Unit) bool {
	return u.SubState == "auto-restart" || u.SubState == "auto-restart-queued"
}
