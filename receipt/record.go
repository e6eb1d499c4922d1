package receipt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/verdict"
)

// NodeDir is where a node keeps its receipts, one file per apply (FileName).
const NodeDir = "/var/lib/switchyard/receipts"

// Provenance is what every receipt of a run shares, and each node's plan.json hash.
// It is no secret: the OpenTofu provider gets it in its environment.
type Provenance struct {
	Tree       string            `json:"tree_sha256"`
	Submission Submission        `json:"submission"`
	PlanJSON   map[string]string `json:"plan_json_sha256"` // by node
}

// SHA256 is b's SHA-256, hex.
func SHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Judged says whether a deploy body's verdict is one a receipt records: the node
// was reached and judged on a toplevel. A node that was not reached, whose build
// failed, or that a rollout held gets none.
func Judged(v verdict.Verdict) bool {
	return v.Reachable && v.Toplevel != "" && v.Switch.Result != verdict.SwitchHeld
}

// Make seals the receipt of one node's deploy, and names its file.
func Make(ctx context.Context, prov Provenance, node, nixosConf, drv string, v verdict.Verdict, phases []Phase, key *Key) (env []byte, name string, err error) {
	nar, err := NARHash(ctx, v.Toplevel)
	if err != nil {
		return nil, "", err
	}
	vb, err := json.Marshal(v)
	if err != nil {
		return nil, "", err
	}
	now := time.Now().UTC()
	p := Predicate{Node: node, Tree: prov.Tree, Submission: prov.Submission, PlanJSON: prov.PlanJSON[node],
		NixosConf: nixosConf, Drv: drv, Toplevel: v.Toplevel, Previous: v.Previous, Phases: phases, Verdict: vb, Time: now}
	if p.Phases == nil {
		p.Phases = []Phase{}
	}
	env, err = Seal(ctx, p, nar, key)
	return env, FileName(now), err
}

// deliverScript writes stdin to the file $1 through a temporary file beside it, so a
// node never holds half a receipt.
const deliverScript = `set -e; umask 022; mkdir -p "${1%/*}"; cat > "$1.tmp"; mv -f "$1.tmp" "$1"`

// Deliver writes the receipt on the node under NodeDir.
func Deliver(ctx context.Context, t effects.Transport, toplevel, name string, env []byte) error {
	var stderr bytes.Buffer
	code, err := t.Run(ctx, effects.Command{Argv: []string{"sh", "-c", deliverScript, "sh", path.Join(NodeDir, name)},
		Stdin: bytes.NewReader(env), Stderr: &stderr, Path: []string{toplevel + "/sw/bin", "/run/current-system/sw/bin"}})
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("writing %s exited %d: %s", path.Join(NodeDir, name), code, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// Recorder forwards a deploy body's events to its Reporter and keeps each node's
// phases for its receipt.
type Recorder struct {
	effects.Reporter
	mu     sync.Mutex
	phases map[string][]Phase
}

// NewRecorder wraps r.
func NewRecorder(r effects.Reporter) *Recorder {
	return &Recorder{Reporter: r, phases: map[string][]Phase{}}
}

// Phase records a phase's end (its last state) and forwards the event.
func (r *Recorder) Phase(node, phase string, state effects.PhaseState, elapsed time.Duration) {
	if state != effects.PhaseStart {
		r.mu.Lock()
		ps := r.phases[node]
		p := Phase{Name: phase, State: string(state), Seconds: elapsed.Seconds()}
		replaced := false
		for i := range ps {
			if ps[i].Name == phase {
				ps[i], replaced = p, true
			}
		}
		if !replaced {
			ps = append(ps, p)
		}
		r.phases[node] = ps
		r.mu.Unlock()
	}
	r.Reporter.Phase(node, phase, state, elapsed)
}

// Copied forwards a copy's progress to a Reporter that shows it.
func (r *Recorder) Copied(node string, n int64) {
	if c, ok := r.Reporter.(effects.CopyReporter); ok {
		c.Copied(node, n)
	}
}

// Phases is what node's body reported, in order.
func (r *Recorder) Phases(node string) []Phase {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Phase(nil), r.phases[node]...)
}
