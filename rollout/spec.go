package rollout

import (
	"fmt"
	"strconv"
	"strings"
)

// Spec is a parsed rollout, "canary=N,batch=M" or "canary=N,batch=P%". The zero
// Spec is no rollout: every node at once.
type Spec struct {
	Canary  int  // nodes deployed and judged first
	Batch   int  // nodes per batch after the canary; 0: all the rest in one batch
	Percent bool // Batch is a percentage (1..100) of the nodes after the canary
	set     bool // a spec was given (canary=0 alone is still a rollout)
}

// Enabled reports whether the spec stages the fleet at all.
func (s Spec) Enabled() bool { return s.set }

// String is the spec in its own syntax ("" for none).
func (s Spec) String() string {
	if !s.set {
		return ""
	}
	out := fmt.Sprintf("canary=%d", s.Canary)
	if s.Batch > 0 {
		out += fmt.Sprintf(",batch=%d", s.Batch)
	}
	if s.Percent {
		out += "%"
	}
	return out
}

// Parse reads a rollout spec: comma-separated canary=N (N >= 0) and batch=M (a count
// M >= 1 or a percentage M% in 1..100), each at most once. "" is no rollout. The
// error says what is wrong in one line, without the flag's or setting's name: the
// caller adds it.
func Parse(s string) (Spec, error) {
	var spec Spec
	if strings.TrimSpace(s) == "" {
		return spec, nil
	}
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		key, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return Spec{}, fmt.Errorf("%q is not key=value (want canary=N,batch=M or batch=M%%)", part)
		}
		if seen[key] {
			return Spec{}, fmt.Errorf("%s given twice", key)
		}
		seen[key] = true
		switch key {
		case "canary":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return Spec{}, fmt.Errorf("canary=%s: want a number of nodes, 0 or more", val)
			}
			spec.Canary = n
		case "batch":
			num, pct := strings.CutSuffix(val, "%")
			n, err := strconv.Atoi(num)
			switch {
			case err != nil || n <= 0:
				return Spec{}, fmt.Errorf("batch=%s: want a number of nodes, 1 or more, or a percentage", val)
			case pct && n > 100:
				return Spec{}, fmt.Errorf("batch=%s: a percentage is 1%% to 100%%", val)
			}
			spec.Batch, spec.Percent = n, pct
		default:
			return Spec{}, fmt.Errorf("unknown key %q (want canary or batch)", key)
		}
	}
	spec.set = true
	return spec, nil
}
