package main_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/receipt"
	"github.com/switchyard-nix/switchyard/testbed"
)

// shownReceipt is one receipt of `receipts show`.
type shownReceipt struct {
	Node      string            `json:"node"`
	File      string            `json:"file"`
	Subject   string            `json:"subject"`
	NARSHA256 string            `json:"nar_sha256"`
	Signed    bool              `json:"signed"`
	KeyIDs    []string          `json:"keyids"`
	Predicate receipt.Predicate `json:"predicate"`
	Error     string            `json:"error"`
}

func showReceipts(t *testing.T, env []string, method, tree string) []shownReceipt {
	t.Helper()
	r := switchyard(t, env, method, "receipts", "show", "--tree", tree)
	wantCode(t, r, 0)
	var out []shownReceipt
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("receipts show: %v: %s", err, r.stdout)
	}
	return out
}

// noSecrets fails when any file under dir, or any text given, holds the receipt
// key's path or its private bytes.
func noSecrets(t *testing.T, keyFile string, dir string, texts ...string) {
	t.Helper()
	b, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	var secrets []string
	for _, l := range strings.Split(string(b), "\n") {
		if len(l) > 20 && !strings.HasPrefix(l, "-----") {
			secrets = append(secrets, l)
		}
	}
	secrets = append(secrets, keyFile)
	check := func(what, s string) {
		for _, secret := range secrets {
			if strings.Contains(s, secret) {
				t.Errorf("%s holds the receipt key (%.12s...)", what, secret)
			}
		}
	}
	for i, s := range texts {
		check("output "+string(rune('0'+i)), s)
	}
	if dir == "" {
		return
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if b, err := os.ReadFile(p); err == nil {
			check(p, string(b))
		}
		return nil
	})
}

// Issue 16 item 2 (SPEC 6.8), the ssh method: an apply writes a receipt per node,
// signed with the deployer's key, in the state dir and on the node; `receipts verify`
// passes; one byte edited fails; a receipt written without a key is unsigned and
// verify says so; a node switched by hand afterwards fails naming the node and both
// toplevels. A bad key refuses the apply before any node is touched, and no key path
// or key material is in any receipt, plan, state or output.
func TestSSHReceipts(t *testing.T) {
	bed := testbed.Require(t)
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		testbed.Unavailable(t, "ssh-keygen", "testbed/setup.sh", err)
	}
	t.Parallel()
	node := bed.Node(t)
	tree, deployment := treeFor(t, "ssh", "healthy", map[string]*testbed.Node{"web1": node})
	key, _ := operatorKey(t, "ed25519")
	env := []string{"DEPLOYMENT=" + deployment, "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir()}
	signing := append([]string{"SWITCHYARD_RECEIPT_KEY=" + key}, env...)
	stateDir := filepath.Join(tree, ".switchyard")

	// A bad key: exit 2 naming the variable or flag, not the path; nothing ran.
	garbage := filepath.Join(t.TempDir(), "garbage")
	if err := os.WriteFile(garbage, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env  []string
		args []string
		says string
	}{
		{append([]string{"SWITCHYARD_RECEIPT_KEY=" + garbage}, env...), nil, "SWITCHYARD_RECEIPT_KEY: not an unencrypted OpenSSH ed25519 private key"},
		{env, []string{"--receipt-key", key + ".pub"}, "--receipt-key: not an unencrypted OpenSSH ed25519 private key"},
	} {
		r := switchyard(t, c.env, append([]string{"ssh", "apply", "--tree", tree, "--output", "json"}, c.args...)...)
		wantCode(t, r, 2)
		if !strings.Contains(r.stderr, c.says) || strings.Contains(r.stderr, garbage) || strings.Contains(r.stderr, key) {
			t.Errorf("stderr %q, want %q without the path", r.stderr, c.says)
		}
		if p := phaseOrder(r); len(p) != 0 {
			t.Errorf("a bad receipt key ran phases %v", p)
		}
	}
	if _, err := os.Stat(filepath.Join(stateDir, "receipts")); err == nil {
		t.Error("a refused apply wrote receipts")
	}

	r := switchyard(t, signing, "ssh", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	v := r.verdict(t)
	running := node.Readlink(t, "/run/current-system")
	if running == "" || running != v["toplevel"] {
		t.Fatalf("the node runs %q, the verdict says %v", running, v["toplevel"])
	}
	files, _ := filepath.Glob(filepath.Join(stateDir, "receipts", "web1", "*.json"))
	if len(files) != 1 {
		t.Fatalf("receipts in the state dir: %v, want one", files)
	}
	kept, _ := os.ReadFile(files[0])
	onNode := node.MustExec(t, "cat", "/var/lib/switchyard/receipts/"+filepath.Base(files[0]))
	if onNode != string(kept) {
		t.Errorf("the node's receipt differs from the deployer's:\n%s\n%s", onNode, kept)
	}

	// What the receipt says.
	shown := showReceipts(t, signing, "ssh", tree)
	if len(shown) != 1 {
		t.Fatalf("receipts show: %+v", shown)
	}
	s := shown[0]
	p := s.Predicate
	planJSON, _ := os.ReadFile(filepath.Join(stateDir, "nodes", "web1", "plan.json"))
	sum := sha256.Sum256(planJSON)
	nar, err := exec.Command("nix-store", "--query", "--hash", running).Output()
	if err != nil {
		t.Fatal(err)
	}
	narHex, _ := receipt.HexSHA256(strings.TrimSpace(string(nar)))
	fp, _ := exec.Command("ssh-keygen", "-l", "-f", key+".pub").Output()
	var verdict map[string]any
	_ = json.Unmarshal(p.Verdict, &verdict)
	if s.Error != "" || !s.Signed || len(s.KeyIDs) != 1 || !strings.Contains(string(fp), s.KeyIDs[0]) ||
		s.Subject != running || s.NARSHA256 != narHex || p.Node != "web1" || p.Toplevel != running ||
		p.Previous != v["previous"] || p.PlanJSON != hex.EncodeToString(sum[:]) ||
		len(p.Tree) != 64 || len(p.NixosConf) != 64 || !strings.HasSuffix(p.Drv, ".drv") ||
		len(p.Submission.SHA256) != 64 || len(p.Phases) == 0 || verdict["ok"] != true || verdict["toplevel"] != running {
		t.Errorf("receipt: %+v", s)
	}

	// verify passes, with the key or its public half.
	r = switchyard(t, signing, "ssh", "receipts", "verify", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	if !strings.Contains(strings.Join(logMsgs(r), "\n"), "web1: receipts: 1 verified, signed by "+s.KeyIDs[0]+"; runs "+running) {
		t.Errorf("verify: %q", logMsgs(r))
	}
	r2 := switchyard(t, env, "ssh", "receipts", "verify", "--tree", tree, "--node", "web1", "--receipt-pubkey", key+".pub", "--output", "json")
	wantCode(t, r2, 0)
	// Another key's public half: fails.
	other, _ := operatorKey(t, "ed25519")
	r3 := switchyard(t, env, "ssh", "receipts", "verify", "--tree", tree, "--receipt-pubkey", other+".pub")
	wantCode(t, r3, 1)
	if !strings.Contains(r3.stderr+r3.stdout, "web1: receipts: ") || !strings.Contains(r3.stderr+r3.stdout, "does not verify") {
		t.Errorf("another key: %s %s", r3.stdout, r3.stderr)
	}

	// One byte edited (in the signed payload): verify fails naming the node.
	edited := bytes.Clone(kept)
	i := bytes.Index(edited, []byte(`"payload": "`)) + len(`"payload": "`) + 40
	if edited[i] == 'A' {
		edited[i] = 'B'
	} else {
		edited[i] = 'A'
	}
	if err := os.WriteFile(files[0], edited, 0o644); err != nil {
		t.Fatal(err)
	}
	r = switchyard(t, signing, "ssh", "receipts", "verify", "--tree", tree, "--output", "json")
	wantCode(t, r, 1)
	if !strings.Contains(strings.Join(logMsgs(r), "\n"), "web1: receipts: "+filepath.Base(files[0])) {
		t.Errorf("an edited receipt: %q", logMsgs(r))
	}
	if err := os.WriteFile(files[0], kept, 0o644); err != nil {
		t.Fatal(err)
	}

	// Applied again, unchanged: the node gets a receipt too, since its verdict is new.
	r = switchyard(t, signing, "ssh", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	files, _ = filepath.Glob(filepath.Join(stateDir, "receipts", "web1", "*.json"))
	if len(files) != 2 || r.verdict(t)["switch"].(map[string]any)["result"] != "unchanged" {
		t.Fatalf("receipts after an unchanged apply: %v", files)
	}

	// Another configuration without a key: its receipt is unsigned, and names what
	// ran before; verify without a key says so and passes, with the key it fails.
	next := strings.Replace(deployment, `"sshKeyFile"`, `"applications":{"hello":{"enable":true,"settings":{"greeting":"hey"}}},"sshKeyFile"`, 1)
	nextEnv := []string{"DEPLOYMENT=" + next, env[1]}
	r = switchyard(t, nextEnv, "ssh", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	second := node.Readlink(t, "/run/current-system")
	if second == running {
		t.Fatal("the second configuration deployed nothing new")
	}
	shown = showReceipts(t, nextEnv, "ssh", tree)
	if len(shown) != 3 || shown[2].Signed || shown[2].Predicate.Previous != running || shown[2].Subject != second {
		t.Fatalf("receipts after the second configuration: %+v", shown)
	}
	r = switchyard(t, nextEnv, "ssh", "receipts", "verify", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	if !strings.Contains(strings.Join(logMsgs(r), "\n"), "web1: receipts: 1 of 3 unsigned") {
		t.Errorf("verify of an unsigned receipt: %q", logMsgs(r))
	}
	r = switchyard(t, append([]string{"SWITCHYARD_RECEIPT_KEY=" + key}, nextEnv...), "ssh", "receipts", "verify", "--tree", tree, "--output", "json")
	wantCode(t, r, 1)
	noSecrets(t, key, stateDir, r.stdout, r.stderr)

	// Switched by hand back to the first configuration: verify fails naming the node
	// and both toplevels.
	node.MustExec(t, running+"/bin/switch-to-configuration", "switch")
	if got := node.Readlink(t, "/run/current-system"); got != running {
		t.Fatalf("the hand switch left the node on %s", got)
	}
	r = switchyard(t, nextEnv, "ssh", "receipts", "verify", "--tree", tree)
	wantCode(t, r, 1)
	if !strings.Contains(r.stderr+r.stdout, "web1: receipts: runs "+running+", but its last receipt") ||
		!strings.Contains(r.stderr+r.stdout, "names "+second) {
		t.Errorf("verify after a hand switch: %s %s", r.stdout, r.stderr)
	}
}
