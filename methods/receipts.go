package methods

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/plan"
	"github.com/switchyard-nix/switchyard/receipt"
)

// EnvReceiptKey names the deployer's receipt key file when --receipt-key is not
// given (SPEC 6.8). The OpenTofu provider reads it too.
const EnvReceiptKey = "SWITCHYARD_RECEIPT_KEY"

// receiptKey reads the deployer's receipt key: --receipt-key, else
// SWITCHYARD_RECEIPT_KEY; none: receipts are written unsigned. A key that cannot be
// used refuses the run naming the flag or the variable, never the path. file is
// where it was found, for the provider.
func receiptKey(flagFile string, getenv func(string) string) (key *receipt.Key, file string, err error) {
	file, what := flagFile, "--receipt-key"
	if file == "" {
		file, what = getenv(EnvReceiptKey), EnvReceiptKey
	}
	if file == "" {
		return nil, "", nil
	}
	key, err = receipt.LoadKey(file)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %v: %w", what, err, ErrRefused)
	}
	return key, file, nil
}

// receiptPub is the public key verify checks signatures with: --receipt-pubkey, else
// the receipt key's public half; nil: signatures are not checked.
func receiptPub(req Request) (ed25519.PublicKey, error) {
	if req.ReceiptPubKey != "" {
		pub, err := receipt.LoadPublicKey(req.ReceiptPubKey)
		if err != nil {
			return nil, fmt.Errorf("--receipt-pubkey: %v: %w", err, ErrRefused)
		}
		return pub, nil
	}
	key, _, err := receiptKey(req.ReceiptKey, req.Getenv)
	if key == nil || err != nil {
		return nil, err
	}
	return key.Public(), nil
}

// provenance is what every receipt of the run shares.
func runProvenance(p *plan.Plan, s signed) receipt.Provenance {
	prov := receipt.Provenance{Tree: p.TreeDigest, Submission: receipt.Submission{SHA256: s.SubmissionSHA256, Signer: s.Principal},
		PlanJSON: map[string]string{}}
	for _, n := range p.Nodes {
		prov.PlanJSON[n.Name] = receipt.SHA256(n.PlanJSON)
	}
	return prov
}

// receiptsDir is where the ssh method keeps a node's receipts.
func receiptsDir(stateDir, node string) string { return filepath.Join(stateDir, "receipts", node) }

// deliverTimeout bounds writing a receipt on a node, and verify's reads of it.
const deliverTimeout = 30 * time.Second

// keepReceipt makes the receipt of a node's deploy (a node reached and judged on a
// toplevel, SkipUnchanged's included: its verdict is new) and keeps it in the state
// dir and on the node. A receipt that cannot be made or kept is a warning: the node
// is deployed either way.
func (f *fleet) keepReceipt(ctx context.Context, n *plan.Node, t effects.Transport, drv string, r effects.Result) {
	if !receipt.Judged(r.Verdict) {
		return
	}
	warn := func(err error) { f.out.Log(n.Name, "warn", fmt.Sprintf("%s: receipt: %v", n.Name, err)) }
	env, name, err := receipt.Make(ctx, f.prov, n.Name, n.NixosConf, drv, r.Verdict, f.rec.Phases(n.Name), f.rkey)
	if err != nil {
		warn(err)
		return
	}
	dir := receiptsDir(f.p.StateDir, n.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		warn(err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name), env, 0o644); err != nil {
		warn(err)
		return
	}
	dctx, cancel := context.WithTimeout(ctx, deliverTimeout)
	defer cancel()
	if err := receipt.Deliver(dctx, t, r.Verdict.Toplevel, name, env); err != nil {
		warn(fmt.Errorf("on the node: %w", err))
		return
	}
	how := "unsigned"
	if f.rkey != nil {
		id, _ := f.rkey.KeyID()
		how = "signed by " + id
	}
	f.out.Log(n.Name, "info", fmt.Sprintf("%s: receipt: %s (%s)", n.Name, path.Join(receipt.NodeDir, name), how))
}

// kept is one receipt as the deployer keeps it.
type kept struct {
	name string // its file name (receipt.FileName), on the node too
	env  []byte
}

// keptReceipts is a node's receipts from the state dir (ssh method), oldest first.
func keptReceipts(stateDir, node string) ([]kept, error) {
	dir := receiptsDir(stateDir, node)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []kept
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, kept{name: e.Name(), env: b})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// shownReceipt is one receipt as `receipts show` prints it.
type shownReceipt struct {
	Node      string            `json:"node"`
	File      string            `json:"file"`
	Subject   string            `json:"subject"`
	NARSHA256 string            `json:"nar_sha256"`
	Signed    bool              `json:"signed"`
	KeyIDs    []string          `json:"keyids"`
	Predicate receipt.Predicate `json:"predicate"`
	Error     string            `json:"error,omitempty"`
}

// receipts is `receipts show|verify` over each planned node's kept receipts (list).
// verify checks every receipt's statement and signature (with pub; nil: says they
// are not checked), and that the node runs the toplevel its last receipt names, and
// holds the same last receipt. Any failure is exit 1, naming the node.
func (f *fleet) receipts(ctx context.Context, action string, pub ed25519.PublicKey, list func(node string) ([]kept, error), stdout io.Writer) (int, error) {
	if action == "show" {
		shown := []shownReceipt{}
		for _, n := range f.p.Nodes {
			ks, err := list(n.Name)
			if err != nil {
				return ExitInfra, fmt.Errorf("%s: receipts: %w", n.Name, err)
			}
			for _, k := range ks {
				o, err := receipt.Open(ctx, k.env, pub)
				s := shownReceipt{Node: n.Name, File: k.name, Subject: o.Subject, NARSHA256: o.NARSHA256, Signed: o.Signed,
					KeyIDs: o.KeyIDs, Predicate: o.Predicate}
				if err != nil {
					s.Error = err.Error()
				}
				shown = append(shown, s)
			}
		}
		return ExitOK, writeJSON(stdout, shown)
	}
	code, ok := ExitOK, 0
	for _, n := range f.p.Nodes {
		c := f.verifyNode(ctx, n, pub, list)
		code = max(code, c)
		if c == ExitOK {
			ok++
		}
	}
	f.out.Summary(len(f.p.Nodes), ok, len(f.p.Nodes)-ok, code)
	return code, nil
}

func (f *fleet) verifyNode(ctx context.Context, n *plan.Node, pub ed25519.PublicKey, list func(node string) ([]kept, error)) int {
	fail := func(code int, msg string) int {
		f.out.Log(n.Name, "error", n.Name+": receipts: "+msg)
		return code
	}
	ks, err := list(n.Name)
	if err != nil {
		return fail(ExitInfra, err.Error())
	}
	if len(ks) == 0 {
		return fail(ExitVerdict, "no receipt: the node was never applied")
	}
	code := ExitOK
	var last receipt.Opened
	unsigned := 0
	for _, k := range ks {
		o, err := receipt.Open(ctx, k.env, pub)
		switch {
		case errors.Is(err, receipt.ErrUnsigned) || (err == nil && !o.Signed):
			unsigned++
		case err != nil:
			code = fail(ExitVerdict, fmt.Sprintf("%s: %v", k.name, err))
			continue
		}
		if o.Node != n.Name {
			code = fail(ExitVerdict, fmt.Sprintf("%s: a receipt of node %q", k.name, o.Node))
			continue
		}
		last = o
	}
	switch {
	case unsigned > 0 && pub != nil:
		code = fail(ExitVerdict, fmt.Sprintf("%d of %d receipts unsigned, while a receipt key is given", unsigned, len(ks)))
	case unsigned > 0:
		f.out.Log(n.Name, "warn", fmt.Sprintf("%s: receipts: %d of %d unsigned (written without --receipt-key): their origin is not checked", n.Name, unsigned, len(ks)))
	case pub == nil:
		f.out.Log(n.Name, "warn", fmt.Sprintf("%s: receipts: signatures not checked: no --receipt-key, %s or --receipt-pubkey", n.Name, EnvReceiptKey))
	}
	if code != ExitOK {
		return code
	}
	final := ks[len(ks)-1]
	t, err := f.open(n)
	if err != nil {
		return fail(ExitInfra, fmt.Sprintf("wait: %v", err))
	}
	defer t.Close()
	rctx, cancel := context.WithTimeout(ctx, f.cfg.WaitTimeout+deliverTimeout)
	defer cancel()
	var running, copy bytes.Buffer
	if _, err := t.Run(rctx, effects.Command{Argv: []string{"readlink", "-f", "/run/current-system"}, Stdout: &running}); err != nil {
		return fail(ExitInfra, fmt.Sprintf("wait: %v", err))
	}
	if got := strings.TrimSpace(running.String()); got != last.Toplevel {
		return fail(ExitVerdict, fmt.Sprintf("runs %s, but its last receipt (%s) names %s", got, final.name, last.Toplevel))
	}
	// The node's copy of its last receipt is the deployer's.
	if _, err := t.Run(rctx, effects.Command{Argv: []string{"cat", "--", path.Join(receipt.NodeDir, final.name)}, Stdout: &copy}); err != nil {
		return fail(ExitInfra, fmt.Sprintf("reading the node's receipt: %v", err))
	}
	if !bytes.Equal(copy.Bytes(), final.env) {
		return fail(ExitVerdict, fmt.Sprintf("the node's %s is missing or differs from the deployer's", path.Join(receipt.NodeDir, final.name)))
	}
	what := fmt.Sprintf("%d well-formed, signatures not checked", len(ks))
	if pub != nil {
		what = fmt.Sprintf("%d verified, signed by %s", len(ks), receipt.KeyID(pub))
	}
	f.out.Log(n.Name, "info", fmt.Sprintf("%s: receipts: %s; runs %s as its last receipt names, and holds that receipt", n.Name, what, last.Toplevel))
	return ExitOK
}

// receiptName is the file name of a receipt the state holds: from its time, as the
// provider named it on the node.
func receiptName(env []byte) (string, error) {
	o, err := receipt.Open(context.Background(), env, nil)
	if err != nil {
		return "", fmt.Errorf("the state's receipt: %w", err)
	}
	return receipt.FileName(o.Time), nil
}
