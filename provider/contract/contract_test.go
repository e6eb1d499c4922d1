package contract

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// What the CLI encodes the provider decodes, field for field; unset is the zero Run;
// a value that is not the CLI's is an error naming the variable.
func TestRoundTrip(t *testing.T) {
	in := Run{JournalDir: "/s/journal", SSHKeyFile: "/k/ssh", ReceiptProvenance: json.RawMessage(`{"tree":"t"}`),
		ReceiptKey: "/k/receipt", IncusRemote: "r", IncusClientKeyFile: "/k/incus", DNSKeyFile: "/k/tsig",
		Rollout: map[string]Step{"web2": {Stage: "batch 1", After: []string{"web1"}, AfterStage: "the canary"}},
		Mode:    "boot", Reboot: true, RebootTimeout: Duration(90*time.Second + time.Millisecond)}
	enc, err := in.Encode()
	if err != nil {
		t.Fatal(err)
	}
	out, err := Decode(func(k string) string {
		if k == Env {
			return enc
		}
		return ""
	})
	if err != nil || !reflect.DeepEqual(in, out) {
		t.Errorf("Decode(Encode(%+v)) = %+v, %v", in, out, err)
	}
	if !strings.Contains(enc, `"reboot_timeout":"1m30.001s"`) {
		t.Errorf("the reboot timeout is not a duration string: %s", enc)
	}
	if plain, _ := (Run{}).Encode(); plain != "{}" {
		t.Errorf("the zero Run encodes as %s, want {}", plain)
	}
	if _, err := Decode(func(string) string { return `{"reboot_timeout":"soon"}` }); err == nil || !strings.HasPrefix(err.Error(), Env) {
		t.Errorf("bad duration: %v", err)
	}
	if r, err := Decode(func(string) string { return "" }); err != nil || !reflect.DeepEqual(r, Run{}) {
		t.Errorf("unset: %+v, %v", r, err)
	}
	if _, err := Decode(func(string) string { return "{" }); err == nil || err.Error()[:len(Env)] != Env {
		t.Errorf("bad JSON: %v", err)
	}
	if got := in.KeyFiles(); !reflect.DeepEqual(got, []string{"/k/ssh", "/k/incus", "/k/receipt", "/k/tsig"}) {
		t.Errorf("KeyFiles = %v", got)
	}
}
