package verdict

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// AllUnits is the argument of ReadScript that reads every unit in full.
const AllUnits = "*"

// Sampler takes the samples of one body and decides, from what the earlier ones
// showed, which units each reads in full (ReadScript names the rest of the rule: the
// units the node finds unsteady, with a job, or changed since the previous sample).
// The first sample, and every sample after one whose units could not be read, reads
// every unit in full: nothing is known yet of what ran before. A Sampler is used by
// one goroutine.
type Sampler struct {
	// Full names the units read in full in every sample: the units the deployed
	// configuration owns and wants, and the chain gate's members. A template
	// ("getty@.service") stands for its instances.
	Full map[string]bool

	prev  map[string]Unit // the previous sample's units; nil: none read yet
	watch map[string]bool // units put under watch: read in full for the rest of the body
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
// Read in full: Full and its template instances; the units under watch (restarted
// automatically, or once seen with NRestarts > 0); and the inactive units that have
// run (an invocation ID seen) or that a timer, path or socket starts (TriggeredBy):
// such a unit can start and stop between two samples (a timer's oneshot) with no
// trace in the cheap view, since systemd removes its exported invocation when it
// goes inactive; its InvocationID property still changes.
func (p *Sampler) Args() []string {
	if p.prev == nil {
		return []string{AllUnits}
	}
	var full, prev []string
	for _, name := range sortedNames(p.prev) {
		u := p.prev[name]
		if p.Full[name] || p.Full[template(name)] || p.watch[name] || (p.ran[name] && u.ActiveState == "inactive") {
			full = append(full, name)
		}
		inv := u.ExportedInvocation
		if inv == "" {
			inv = "-"
		}
		prev = append(prev, "="+name+" "+u.ActiveState+" "+inv)
	}
	for name := range p.Full { // not listed before: the node reads it if it lists it now
		if _, ok := p.prev[name]; !ok && !strings.Contains(name, "@.") {
			full = append(full, name)
		}
	}
	slices.Sort(full)
	return append(slices.Compact(full), prev...)
}

// template is the template of an instance name ("getty@.service" of
// "getty@tty1.service"); "" for a name that is not an instance.
func template(name string) string {
	at := strings.IndexByte(name, '@')
	dot := strings.LastIndexByte(name, '.')
	if at < 0 || dot < at+2 {
		return ""
	}
	return name[:at+1] + name[dot:]
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
