package methods

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/plan"
	"github.com/switchyard-nix/switchyard/pool"
	"github.com/switchyard-nix/switchyard/receipt"
	"github.com/switchyard-nix/switchyard/verdict"
)

// lastReceiptScript prints the name of the node's last receipt under $1
// (receipt.NodeDir; names sort by time) on the first line, then its first $2 bytes.
const lastReceiptScript = `last=$(ls -- "$1" 2>/dev/null | grep '^[0-9A-Za-z._-]*\.json$' | sort | tail -n 1)
printf '%s\n' "$last"
[ -z "$last" ] || head -c "$2" -- "$1/$last"`

// receiptCap bounds a node's receipt as status reads it (SPEC 6.9: a node's answer
// may be hostile); a receipt is a few KiB.
const receiptCap = 1 << 20

// status is the status verb: every node's three truths read at once, each
// disagreement named; exit 1 when any node disagrees, 3 when a node could not be read.
func (f *fleet) status(ctx context.Context, cached bool) int {
	rows := pool.Map(ctx, f.p.Nodes, f.width(), func(ctx context.Context, n *plan.Node) verdict.NodeStatus {
		return f.nodeStatus(ctx, n, cached)
	})
	code, ok := ExitOK, 0
	for _, s := range rows {
		switch {
		case s.OK:
			ok++
		case !s.Present.Reachable:
			code = max(code, ExitInfra)
		default:
			code = max(code, ExitVerdict)
		}
		f.out.Status(s)
	}
	f.out.Summary(len(rows), ok, len(rows)-ok, code)
	return code
}

func (f *fleet) nodeStatus(ctx context.Context, n *plan.Node, cached bool) (s verdict.NodeStatus) {
	s = verdict.NodeStatus{Kind: "status", Node: n.Name, Expected: verdict.StatusExpected{NixosConf: n.NixosConf},
		Ready: verdict.StatusReady{Source: "none"}}
	// Every return below is judged the same way: named result, set after it.
	defer func() { s.Disagreements = verdict.Disagree(s); s.OK = len(s.Disagreements) == 0 }()
	if drv, _, err := f.evaluate(ctx, n); err == nil {
		if outs, err := f.outputs(ctx, drv); err == nil {
			s.Expected.Toplevel = strings.TrimSpace(outs)
		}
	}
	t, err := f.open(n)
	if err != nil {
		f.out.Log(n.Name, "error", fmt.Sprintf("%s: status: %v", n.Name, err))
		return s
	}
	defer t.Close()
	rctx, cancel := context.WithTimeout(ctx, f.cfg.WaitTimeout+deliverTimeout)
	defer cancel()
	o, err := effects.Observe(rctx, t)
	if err != nil {
		f.out.Log(n.Name, "error", fmt.Sprintf("%s: status: %v", n.Name, err))
		return s
	}
	s.Present = verdict.StatusPresent{Reachable: true, Running: o.Running, Profile: o.Profile, BootEntry: o.Boot}
	last := f.lastReceipt(rctx, n, t, &s.Present)
	switch {
	case cached && last != nil:
		s.Ready = cachedReady(*last)
	case !cached:
		s.Ready = f.freshReady(ctx, n, t)
	}
	return s
}

// lastReceipt reads the node's last receipt into p; nil when it has none, or one
// that does not open (named in a log line).
func (f *fleet) lastReceipt(ctx context.Context, n *plan.Node, t effects.Transport, p *verdict.StatusPresent) *receipt.Opened {
	var out bytes.Buffer
	code, err := t.Run(ctx, effects.Command{Argv: []string{"sh", "-c", lastReceiptScript, "sh", receipt.NodeDir, fmt.Sprint(receiptCap)}, Stdout: &out})
	if err != nil || code != 0 {
		f.out.Log(n.Name, "warn", fmt.Sprintf("%s: status: reading the last receipt: exit %d, %v", n.Name, code, err))
		return nil
	}
	name, env, _ := strings.Cut(out.String(), "\n")
	if name == "" {
		return nil
	}
	p.Receipt = name
	o, err := receipt.Open(ctx, []byte(env), nil)
	if err != nil {
		f.out.Log(n.Name, "warn", fmt.Sprintf("%s: status: the receipt %s: %v", n.Name, name, err))
		return nil
	}
	p.ReceiptToplevel = o.Subject
	return &o
}

// cachedReady is the verdict the receipt recorded, with its age.
func cachedReady(o receipt.Opened) verdict.StatusReady {
	var v struct {
		OK       bool     `json:"ok"`
		ExitCode int      `json:"exit_code"`
		Reasons  []string `json:"reasons"`
	}
	if err := json.Unmarshal(o.Verdict, &v); err != nil {
		return verdict.StatusReady{Source: "none"}
	}
	return verdict.StatusReady{Source: "cached", OK: v.OK, ExitCode: v.ExitCode, Reasons: v.Reasons,
		AgeSeconds: int64(time.Since(o.Time).Seconds())}
}

// freshReady is a verdict-only pass of the node, reported nowhere but here.
func (f *fleet) freshReady(ctx context.Context, n *plan.Node, t effects.Transport) verdict.StatusReady {
	cfg := f.cfg
	cfg.VerdictOnly = true
	res := (&effects.Deploy{Node: n.Name, Transport: t, Config: cfg, Reporter: silent{}}).Run(ctx)
	return verdict.StatusReady{Source: "fresh", OK: res.Verdict.OK, ExitCode: res.ExitCode, Reasons: res.Verdict.Reasons}
}

// silent is an effects.Reporter that reports nothing.
type silent struct{}

func (silent) Phase(string, string, effects.PhaseState, time.Duration) {}
func (silent) Log(string, string, string)                              {}
func (silent) Verdict(verdict.Verdict)                                 {}
