package verdict

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"
)

// AllUnits is the argument of ReadScript that reads every unit in full.
const AllUnits = "*"

// TriggerUnits is the argument of ReadScript that reads in full every unit that
// starts others (timers, paths, sockets, automounts).
const TriggerUnits = "@triggers"

// Sampler takes the samples of one body and decides, from what the earlier ones
// showed, which units each reads in full (ReadScript names the rest of the rule: the
// units the node finds unsteady, with a job, or changed since the previous sample).
// A Sampler is used by one goroutine.
//
// The first sample reads in full only what it must: Full, the unsteady units, and
// the units that start others, whose Triggers say which inactive units can run
// between two samples (below). Reading every unit in full costs the node's PID 1
// one GetAll per unit, about three times a cheap sample; a body's first sample is
// the snapshot, taken on every node before its switch. A sample after one whose
// units could not be read reads every unit in full: what changed meanwhile is not
// known.
type Sampler struct {
	// Full names the units read in full in every sample: the units the deployed
	// configuration owns and wants, and the chain gate's members. A template
	// ("getty@.service") stands for its instances.
	Full map[string]bool

	prev  map[string]Unit // the previous sample's units; nil: none read yet
	watch map[string]bool // units put under watch: read in full for the rest of the body; nil until a sample's units were read
	ran   map[string]bool // units a full read showed with an invocation (they have run) or with a trigger (they can)
}

// Read takes one sample in one round trip, reading in full what Args names, and
// learns from it for the next.
func (p *Sampler) Read(ctx context.Context, exec Exec) (Sample, error) {
	s, err := ReadArgs(ctx, exec, p.Args())
	if err == nil {
		p.Observe(s)
	} else {
		p.prev = nil
	}
	return s, err
}

// Args are ReadScript's arguments for the next sample: the units read in full
// whatever the node shows, and the previous sample's cheap view as
// "=UNIT ACTIVE INVOCATION", so the node reads in full every unit that changed.
//
// Read in full: Full (a template by its listed instances, which the node picks);
// the units under watch (restarted automatically, or once seen with NRestarts > 0);
// and the inactive units that have run (an invocation ID seen) or that a timer,
// path, socket or automount starts (TriggeredBy, or a trigger's Triggers): such a
// unit can start and stop between two samples (a timer's oneshot) with no trace in
// the cheap view, since systemd removes its exported invocation when it goes
// inactive; its InvocationID property still changes. The first sample adds
// TriggerUnits. An inactive unit that ran before the first sample and that nothing
// triggers is read in full once a sample sees it change.
func (p *Sampler) Args() []string {
	if p.prev == nil && p.watch != nil { // after a sample whose units were not read
		return []string{AllUnits}
	}
	full := slices.Collect(maps.Keys(p.Full))
	full = append(full, slices.Collect(maps.Keys(p.watch))...)
	if p.prev == nil {
		full = append(full, TriggerUnits)
	}
	var prev []string
	for _, name := range sortedNames(p.prev) {
		u := p.prev[name]
		if p.ran[name] && u.ActiveState == "inactive" {
			full = append(full, name)
		}
		inv := u.ExportedInvocation
		if inv == "" {
			inv = "-"
		}
		prev = append(prev, "="+name+" "+u.ActiveState+" "+inv)
	}
	slices.Sort(full)
	return append(slices.Compact(full), prev...)
}

// Observe learns from a sample: the units it read in full that restarted
// automatically (NRestarts > 0, waiting to restart, or a loop suspect) go under
// watch for good, and the units seen with an invocation have run. A sample whose
// units were not read makes the next one read every unit in full.
func (p *Sampler) Observe(s Sample) {
	if s.Units == nil {
		p.prev = nil
		return
	}
	if p.watch == nil {
		p.watch, p.ran = map[string]bool{}, map[string]bool{}
	}
	for name, u := range s.Units {
		if !u.Full {
			continue
		}
		if u.NRestarts > 0 || autoRestart(u) {
			p.watch[name] = true
		}
		if u.InvocationID != "" || len(u.TriggeredBy) > 0 {
			p.ran[name] = true
		}
		for _, t := range u.Triggers {
			p.ran[t] = true
		}
	}
	for _, name := range LoopSuspects(s) {
		p.watch[name] = true
	}
	p.prev = s.Units
}

// Watched are the units under watch, sorted.
func (p *Sampler) Watched() []string {
	return slices.Sorted(maps.Keys(p.watch))
}

// ReadArgs takes one sample: it runs sh -c ReadScript sh ARG... once (see
// ReadScript for the arguments). What the node could not tell (a severed bus) is
// left not read in the sample and is no error; err is non-nil only when the exec
// failed or the script never ran.
func ReadArgs(ctx context.Context, exec Exec, args []string) (Sample, error) {
	at := time.Now()
	var out bytes.Buffer
	argv := append([]string{"sh", "-c", ReadScript, "sh"}, args...)
	exit, err := exec(ctx, argv, &out)
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
