// Package contract is the one typed boundary between the switchyard CLI and the
// provider process OpenTofu starts: what a run hands the provider, encoded once by
// the CLI into one environment variable (OpenTofu passes its environment to its
// plugins) and decoded once in the provider's Configure. Credentials are per-run
// values: paths here, never in the configuration or the state.
package contract

import (
	"encoding/json"
	"fmt"
	"time"
)

// Env is the variable that carries the Run, as JSON.
const Env = "SWITCHYARD_PROVIDER_RUN"

// Run is what the CLI hands the provider for one OpenTofu run.
type Run struct {
	// JournalDir is the directory of the per-node journal the deploy body keeps (the
	// state dir's journal/, shared with the ssh method): a file rather than the
	// resource's state, since a killed apply never writes that state. "": none.
	JournalDir string `json:"journal_dir,omitempty"`
	// LogSocket is a unix socket the CLI listens on for the deploy body's log lines
	// (one LogLine a line, as JSON), which it reports as the run's own log events, as
	// the ssh method does: OpenTofu's output carries no provider log. "": none (the
	// lines go to the provider log only).
	LogSocket string `json:"log_socket,omitempty"`
	// SSHKeyFile is the sshKeyFile setting: the private key the deployments' SSH
	// connections offer ("": the ssh configuration's and the agent's).
	SSHKeyFile string `json:"ssh_key_file,omitempty"`
	// ReceiptProvenance is the run's receipt.Provenance (nil: no receipts are made);
	// ReceiptKey the deployer's receipt key file ("": receipts unsigned). SPEC 6.8.
	ReceiptProvenance json.RawMessage `json:"receipt_provenance,omitempty"`
	ReceiptKey        string          `json:"receipt_key,omitempty"`
	// IncusRemote is the remote of the Incus client configuration the instances and
	// Incus deployments are reached through ("" or "local": the local daemon's unix
	// socket); IncusClientKeyFile, the incusClientKeyFile setting, a PEM client key
	// that replaces the client configuration's for an HTTPS remote.
	IncusRemote        string `json:"incus_remote,omitempty"`
	IncusClientKeyFile string `json:"incus_client_key_file,omitempty"`
	// DNSKeyFile is the TSIG key file (BIND format) the DNS RRsets are updated with.
	DNSKeyFile string `json:"dns_tsig_key_file,omitempty"`
	// Rollout is a staged rollout (issue 14 item 2): node to its Step. OpenTofu
	// orders the stages itself (each node's deployment depends on the stage before
	// it); the provider holds a node whose stage before it did not pass. nil: none.
	Rollout map[string]Step `json:"rollout,omitempty"`
	// NoSubstitute is the nodes whose copies stream every path they lack: their
	// substituteOnNode = false, or every node with --no-substitute. The others
	// first fetch what the binary caches of their own Nix configuration hold.
	NoSubstitute []string `json:"no_substitute,omitempty"`
	// Mode is apply --mode: switch, boot or test ("": switch), as effects.ParseMode
	// reads it. Reboot is apply --reboot, RebootTimeout its --reboot-timeout (0: the
	// body's default). The provider validates them as it does DEPLOY_*: a bad value
	// refuses every deploy of the run.
	Mode          string   `json:"mode,omitempty"`
	Reboot        bool     `json:"reboot,omitempty"`
	RebootTimeout Duration `json:"reboot_timeout,omitempty"`
}

// Duration is a time.Duration in JSON as Go's duration string ("10m0s"): exact both
// ways, and readable in a provider log.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration: %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// LogLine is one log line of a deploy body, as the provider sends it to LogSocket.
type LogLine struct {
	Node  string `json:"node"`
	Level string `json:"level"` // error, warn or info
	Msg   string `json:"msg"`   // "<node>: <phase>: ...", as the ssh method's
}

// Step is a node's place in a staged rollout.
type Step struct {
	Stage      string   `json:"stage"`                 // its stage: "the canary", "batch 2"
	After      []string `json:"after,omitempty"`       // the nodes of the stage before it
	AfterStage string   `json:"after_stage,omitempty"` // that stage's name
}

// KeyFiles are the run's credential files, whose contents and paths the outputs
// redact.
func (r Run) KeyFiles() []string {
	return []string{r.SSHKeyFile, r.IncusClientKeyFile, r.ReceiptKey, r.DNSKeyFile}
}

// Encode is the value of Env for r.
func (r Run) Encode() (string, error) {
	b, err := json.Marshal(r)
	return string(b), err
}

// Decode reads the Run from getenv's Env; unset is the zero Run (a provider started
// by hand, or by a test, gets no credentials and no rollout).
func Decode(getenv func(string) string) (Run, error) {
	var r Run
	raw := getenv(Env)
	if raw == "" {
		return r, nil
	}
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return Run{}, fmt.Errorf("%s: %w", Env, err)
	}
	return r, nil
}
