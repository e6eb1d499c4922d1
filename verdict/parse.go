package verdict

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// marker starts every line ReadScript prints itself. No line of the commands' own
// output can start with it: property lines start with a property name, job lines
// with a number, paths with "/".
const marker = "##switchyard-verdict"

// section is one command's output in ReadScript's output.
type section struct {
	lines  []string
	ended  bool   // the end marker was seen
	exit   int    // the command's exit status
	stderr string // the command's stderr, on one line
}

// ParseSample parses ReadScript's output, taken at host time at. A section that is
// missing, cut short or whose command failed is left not read (SystemState "", Units
// nil, Jobs nil, ...) and named in Sample.Unread; it is never read as empty. The
// error is non-nil only when out is not ReadScript's output at all.
func ParseSample(out []byte, at time.Time) (Sample, error) {
	s := Sample{At: at}
	secs, ok := splitSections(string(out))
	if !ok {
		return s, ErrNotScriptOutput
	}
	get := func(name string) ([]string, bool) {
		sec, found := secs[name]
		switch {
		case !found:
			s.Unread = append(s.Unread, name+": missing")
		case !sec.ended:
			s.Unread = append(s.Unread, name+": cut short")
		case sec.exit != 0:
			why := fmt.Sprintf("%s: exit %d", name, sec.exit)
			if sec.stderr != "" {
				why += ": " + sec.stderr
			}
			s.Unread = append(s.Unread, why)
		default:
			return sec.lines, true
		}
		return nil, false
	}
	fail := func(name string, err error) { s.Unread = append(s.Unread, name+": "+err.Error()) }

	if lines, ok := get("clock"); ok {
		n, err := parseSeconds(oneLine(lines))
		if err != nil {
			fail("clock", err)
		}
		s.NodeNow = n
	}
	if lines, ok := get("current"); ok {
		s.CurrentSystem = oneLine(lines)
	}
	if lines, ok := get("activated"); ok {
		if v := oneLine(lines); v != "" {
			n, err := parseSeconds(v)
			if err != nil {
				fail("activated", err)
			}
			s.Activated = n
		}
	}
	if lines, ok := get("boot"); ok {
		s.BootEntry = oneLine(lines)
	}
	if lines, ok := get("manager"); ok {
		props := properties(lines)
		if props["SystemState"] == "" {
			fail("manager", fmt.Errorf("no SystemState"))
		}
		s.SystemState = props["SystemState"]
	}
	if lines, ok := get("jobs"); ok {
		jobs, err := parseJobs(lines)
		if err != nil {
			fail("jobs", err)
		} else {
			s.Jobs = jobs
		}
	}
	s.Units = parseAllUnits(secs, get)
	return s, nil
}

// parseAllUnits merges a sample's views of its units. Output of the first script
// (v1, kept in old recordings) has only the units section, every unit read in full.
// Since v2 the list and invocations sections are the cheap view of every unit and
// the units section holds the units read in full: the sample's units are not read
// (nil) unless all three were read, so a unit that needed its properties is never
// judged from its cheap view alone.
func parseAllUnits(secs map[string]*section, get func(string) ([]string, bool)) map[string]Unit {
	if _, v2 := secs["list"]; !v2 {
		lines, ok := get("units")
		if !ok {
			return nil
		}
		units := parseUnits(lines)
		for name, u := range units {
			u.Full = true
			units[name] = u
		}
		return units
	}
	list, okList := get("list")
	inv, okInv := get("invocations")
	full, okFull := get("units")
	if !okList || !okInv || !okFull {
		return nil
	}
	exported := parseInvocations(inv)
	units := map[string]Unit{}
	for _, l := range list {
		f := strings.Fields(l)
		if len(f) < 4 {
			continue
		}
		units[f[0]] = Unit{Name: f[0], LoadState: f[1], ActiveState: f[2], SubState: f[3], Listed: true, ExportedInvocation: exported[f[0]]}
	}
	for name, u := range parseUnits(full) {
		if cheap, ok := units[name]; ok {
			u.Listed, u.ExportedInvocation = true, cheap.ExportedInvocation
		}
		u.Full = true
		units[name] = u
	}
	return units
}

// parseInvocations reads "invocation:<unit> <id>" lines (the symlinks of
// /run/systemd/units and their targets).
func parseInvocations(lines []string) map[string]string {
	m := map[string]string{}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		if name, ok := strings.CutPrefix(f[0], "invocation:"); ok {
			m[name] = f[1]
		}
	}
	return m
}

// splitSections cuts ReadScript's output into its sections. ok is false when the
// header line is missing.
func splitSections(out string) (secs map[string]*section, ok bool) {
	secs = map[string]*section{}
	var cur *section
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSuffix(line, "\r")
		rest, isMarker := strings.CutPrefix(line, marker+" ")
		if !isMarker {
			if cur != nil {
				cur.lines = append(cur.lines, line)
			}
			continue
		}
		verb, args, _ := strings.Cut(rest, " ")
		switch verb {
		case "v1", "v2":
			ok = true
		case "begin":
			cur = &section{}
			secs[args] = cur
		case "end":
			f := strings.SplitN(args, " ", 3)
			if cur == nil || len(f) < 2 || secs[f[0]] != cur {
				cur = nil
				continue
			}
			exit, err := strconv.Atoi(f[1])
			if err != nil {
				exit = -1
			}
			cur.ended, cur.exit = true, exit
			if len(f) == 3 {
				cur.stderr = strings.TrimSpace(f[2])
			}
			cur = nil
		default:
			cur = nil
		}
	}
	return secs, ok
}

// oneLine is a single-value section: its first non-empty line, trimmed.
func oneLine(lines []string) string {
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}

func parseSeconds(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not unix seconds: %q", v)
	}
	return n, nil
}

// properties reads KEY=VALUE lines.
func properties(lines []string) map[string]string {
	m := map[string]string{}
	for _, l := range lines {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}

// parseJobs reads `systemctl list-jobs --no-legend --full --plain`: "ID UNIT TYPE
// STATE" per line. Read and empty is a non-nil empty slice.
func parseJobs(lines []string) ([]Job, error) {
	jobs := []Job{}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) == 0 || strings.HasPrefix(l, "No jobs") {
			continue
		}
		if len(f) < 4 {
			return nil, fmt.Errorf("job line not understood: %q", l)
		}
		id, err := strconv.Atoi(f[0])
		if err != nil {
			return nil, fmt.Errorf("job line not understood: %q", l)
		}
		jobs = append(jobs, Job{ID: id, Unit: f[1], Type: f[2], Stat: f[3]})
	}
	return jobs, nil
}

// parseUnits reads `systemctl show --all ... '*'`: one block of properties per
// unit, blocks separated by blank lines, properties in any order, absent ones
// (NRestarts on a target) left at zero. A block without an Id is dropped.
func parseUnits(lines []string) map[string]Unit {
	units := map[string]Unit{}
	var block []string
	flush := func() {
		if len(block) == 0 {
			return
		}
		p := properties(block)
		pre, post := execCommands(block, "ExecStartPre="), execCommands(block, "ExecStartPost=")
		block = block[:0]
		if p["Id"] == "" {
			return
		}
		units[p["Id"]] = Unit{
			Name:            p["Id"],
			LoadState:       p["LoadState"],
			ActiveState:     p["ActiveState"],
			SubState:        p["SubState"],
			Result:          p["Result"],
			NRestarts:       atoi(p["NRestarts"]),
			InvocationID:    p["InvocationID"],
			ExecMainCode:    atoi(p["ExecMainCode"]),
			ExecMainStatus:  atoi(p["ExecMainStatus"]),
			ConditionResult: p["ConditionResult"],
			ConditionAt:     timestamp(p["ConditionTimestamp"]),
			ActiveEnter:     timestamp(p["ActiveEnterTimestamp"]),
			ActiveExit:      timestamp(p["ActiveExitTimestamp"]),
			Environment:     splitEnvironment(p["Environment"]),
			Type:            p["Type"],
			RemainAfterExit: p["RemainAfterExit"] == "yes",
			NeedReload:      p["NeedDaemonReload"] == "yes",
			ExecMainPID:     atoi(p["ExecMainPID"]),
			ExecMainStart:   timestamp(p["ExecMainStartTimestamp"]),
			ExecMainExit:    timestamp(p["ExecMainExitTimestamp"]),
			InactiveEnter:   timestamp(p["InactiveEnterTimestamp"]),
			InactiveExit:    timestamp(p["InactiveExitTimestamp"]),
			ExecStartPre:    pre,
			ExecStartPost:   post,
			TriggeredBy:     fieldsOrNil(p["TriggeredBy"]),
			Triggers:        fieldsOrNil(p["Triggers"]),
		}
	}
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			flush()
			continue
		}
		block = append(block, l)
	}
	flush()
	return units
}

// atoi is lenient: systemd prints numbers, and anything else ("[not set]") is 0.
func atoi(v string) int {
	n, _ := strconv.Atoi(v)
	return n
}

// timestamp reads a --timestamp=unix value, "@1732945201"; empty (never) is 0.
func timestamp(v string) int64 {
	n, err := strconv.ParseInt(strings.TrimPrefix(v, "@"), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// execCommands reads the lines of one exec property (systemctl show prints one line
// per command, "ExecStartPre={ path=/bin/true ; argv[]=... ; start_time=[@1796057494] ;
// ... ; code=exited ; status=214 }"). nil when the unit has none.
func execCommands(block []string, prefix string) []ExecCommand {
	var out []ExecCommand
	for _, l := range block {
		v, ok := strings.CutPrefix(l, prefix)
		if !ok {
			continue
		}
		v = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(v), "{"), "}")
		var c ExecCommand
		for _, field := range strings.Split(v, " ; ") {
			k, val, _ := strings.Cut(strings.TrimSpace(field), "=")
			switch k {
			case "path":
				c.Path = val
			case "code":
				if val != "(null)" {
					c.Code = val
				}
			case "status":
				n, _, _ := strings.Cut(val, "/") // "214" or "0/0" or "203/EXEC"
				c.Status = atoi(n)
			case "start_time":
				c.Start = timestamp(strings.Trim(val, "[]"))
			case "stop_time":
				c.Stop = timestamp(strings.Trim(val, "[]"))
			}
		}
		out = append(out, c)
	}
	return out
}

// fieldsOrNil is strings.Fields, nil for none.
func fieldsOrNil(v string) []string {
	if f := strings.Fields(v); len(f) > 0 {
		return f
	}
	return nil
}
