package verdict

import (
	"slices"
	"strings"
)

// SwitchLog is what switch-to-configuration said it did with units, read from its
// messages (NixOS's switch-to-configuration-ng prints them to stderr, which the
// switch's transient unit sends to the journal). A zero SwitchLog is a switch that
// said nothing, or whose messages could not be read.
type SwitchLog struct {
	// NotRestarted: "NOT restarting the following changed units: ...": changed units
	// with X-RestartIfChanged=false, RefuseManualStop= or X-OnlyManualStart=, left
	// running their previous definition.
	NotRestarted []string
	// Stopped: "stopping the following units: ...", before the activation.
	Stopped []string
	// Started: "starting the following units: ..." and "restarting the following
	// units: ...", after the activation (ng leaves out the targets it starts, whose
	// wants it does not name).
	Started []string
}

// The prefixes of ng's messages (switch-to-configuration-ng's main.rs) that name units.
const (
	notRestartingPrefix = "NOT restarting the following changed units: "
	stoppingPrefix      = "stopping the following units: "
	startingPrefix      = "starting the following units: "
	restartingPrefix    = "restarting the following units: "
)

// SwitchLogArgv reads the messages of the switch's transient unit from the journal.
func SwitchLogArgv(unit string) []string {
	return []string{"journalctl", "--unit", unit, "--output", "cat", "--no-pager"}
}

// ParseSwitchLog reads ng's messages out of the switch's journal (SwitchLogArgv's
// output); other lines are ignored. A message may appear more than once (a switch
// run again after an interruption): the units of all of them count.
func ParseSwitchLog(journal string) SwitchLog {
	var l SwitchLog
	for _, line := range strings.Split(journal, "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, notRestartingPrefix); ok {
			l.NotRestarted = appendUnits(l.NotRestarted, rest)
		} else if rest, ok := strings.CutPrefix(line, stoppingPrefix); ok {
			l.Stopped = appendUnits(l.Stopped, rest)
		} else if rest, ok := strings.CutPrefix(line, startingPrefix); ok {
			l.Started = appendUnits(l.Started, rest)
		} else if rest, ok := strings.CutPrefix(line, restartingPrefix); ok {
			l.Started = appendUnits(l.Started, rest)
		}
	}
	return l
}

// appendUnits adds the units of ng's ", "-separated list to list, once each.
func appendUnits(list []string, units string) []string {
	for _, u := range strings.Split(units, ",") {
		if u = strings.TrimSpace(u); u != "" && !slices.Contains(list, u) {
			list = append(list, u)
		}
	}
	return list
}
