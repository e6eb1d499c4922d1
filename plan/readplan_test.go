package plan

import (
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/plan/field"
)

const samplePlan = `{"applications":{"hello":{"greeting":"hi","motd":{"_repoPath":"files/motd.txt"}}},"coordinates":{"HOSTING_ENV":"production"},"domain":"example.org","email":"ops@example.org","group":"web","method":"ssh","modules":[{"_repoPath":"hosts/web1.nix"}],"node":"web1","ssh":{"host":"192.0.2.11","port":22,"user":"root"}}`

func TestReadPlan(t *testing.T) {
	p, err := ReadPlan([]byte(samplePlan))
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.JSON()
	if err != nil || string(b) != samplePlan {
		t.Errorf("round trip:\n got %s\nwant %s (%v)", b, samplePlan, err)
	}
	// substituteOnNode = false is kept; the default (true) is never written, so a
	// tree that leaves it keeps its nixos_conf.
	off := strings.TrimSuffix(samplePlan, "}") + `,"substituteOnNode":false}`
	p, err = ReadPlan([]byte(off))
	if err != nil || !p.NoSubstitute {
		t.Fatalf("substituteOnNode false: %+v, %v", p, err)
	}
	if b, _ := p.JSON(); string(b) != off {
		t.Errorf("round trip:\n got %s\nwant %s", b, off)
	}
	if p, err := ReadPlan([]byte(strings.Replace(off, "false", "true", 1))); err != nil || p.NoSubstitute {
		t.Errorf("substituteOnNode true: %+v, %v", p, err)
	}
	for _, tc := range []struct{ edit, path, reason string }{
		{`"node":"web1"`, "node", "missing"},
		{`"node":"web1","substituteOnNode":"no"`, "substituteOnNode", "wrong type: a string, want a boolean"},
		{`"node":"web1","extra":1`, "extra", "unknown field"},
		{`"node":1`, "node", "wrong type"},
		{`"modules":["hosts/web1.nix"]`, "modules[0]", "wrong type: a string, want a tree path"},
		{`"modules":[{"_repoPath":"../x"}]`, "modules[0]", "leaves the tree"},
		{`"coordinates":{"HOSTING_ENV":1}`, "coordinates.HOSTING_ENV", "wrong type"},
		{`"ssh":{"host":"192.0.2.11","port":22,"user":"root"}`, "ssh.host", "not a host"},
		{`"applications":{"hello":[]}`, "applications.hello", "wrong type"},
	} {
		in := samplePlan
		switch {
		case tc.reason == "missing":
			in = strings.Replace(in, `,"node":"web1"`, "", 1)
		case strings.HasPrefix(tc.edit, `"ssh"`):
			in = strings.Replace(in, `"host":"192.0.2.11"`, `"host":"a b"`, 1)
		case strings.HasPrefix(tc.edit, `"modules"`):
			in = strings.Replace(in, `"modules":[{"_repoPath":"hosts/web1.nix"}]`, tc.edit, 1)
		case strings.HasPrefix(tc.edit, `"coordinates"`):
			in = strings.Replace(in, `"coordinates":{"HOSTING_ENV":"production"}`, tc.edit, 1)
		case strings.HasPrefix(tc.edit, `"applications"`):
			in = strings.Replace(in, `"applications":{"hello":{"greeting":"hi","motd":{"_repoPath":"files/motd.txt"}}}`, tc.edit, 1)
		default:
			in = strings.Replace(in, `"node":"web1"`, tc.edit, 1)
		}
		_, err := ReadPlan([]byte(in))
		fe, ok := err.(*field.Error)
		if !ok || string(fe.Path) != tc.path || !strings.Contains(fe.Reason, tc.reason) || fe.Source != "plan.json" {
			t.Errorf("%s: error %v, want plan.json: %s: ...%s", in, err, tc.path, tc.reason)
		}
	}
}

// FuzzReadPlan: whatever the bytes, ReadPlan never panics; a plan it accepts encodes to
// canonical plan.json that reads back to the same plan and the same bytes.
func FuzzReadPlan(f *testing.F) {
	f.Add([]byte(samplePlan))
	f.Add([]byte(`{"applications":{},"coordinates":{},"domain":"","email":"","group":"g","method":"tf-incus","modules":[],"node":"n","incus":{"image":"i","profiles":[],"limits":{"cpu":2}}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ReadPlan(b)
		if err != nil {
			if !field.IsRefusal(err) {
				t.Fatalf("error %v is not a refusal", err)
			}
			return
		}
		out, err := p.JSON()
		if err != nil {
			t.Fatalf("read plan does not encode: %v", err)
		}
		back, err := ReadPlan(out)
		if err != nil {
			t.Fatalf("canonical plan %s does not read back: %v", out, err)
		}
		again, _ := back.JSON()
		if string(again) != string(out) {
			t.Fatalf("unstable:\n%s\n%s", out, again)
		}
	})
}

// An incus node's plan.json holds its instance type and reads it back; an older
// plan.json without one is a container; an unknown type is refused at incus.type.
func TestReadPlanIncusType(t *testing.T) {
	incus := func(settings string) string {
		in := strings.Replace(samplePlan, `"method":"ssh"`, `"method":"tf-incus"`, 1)
		in = strings.Replace(in, `,"ssh":{"host":"192.0.2.11","port":22,"user":"root"}`, "", 1)
		return strings.Replace(in, `"group":"web",`, `"group":"web","incus":`+settings+",", 1) // canonical key order
	}
	vm := incus(`{"image":"i","profiles":["default"],"type":"virtual-machine"}`)
	p, err := ReadPlan([]byte(vm))
	if err != nil || p.Incus == nil || !p.Incus.VM() {
		t.Fatalf("a VM's plan: %+v, %v", p, err)
	}
	if b, err := p.JSON(); err != nil || string(b) != vm {
		t.Errorf("round trip:\n got %s\nwant %s (%v)", b, vm, err)
	}
	p, err = ReadPlan([]byte(incus(`{"image":"i","profiles":["default"]}`)))
	if err != nil || p.Incus.Type != "container" {
		t.Errorf("a plan without type: %+v, %v; want a container", p.Incus, err)
	}
	_, err = ReadPlan([]byte(incus(`{"image":"i","profiles":["default"],"type":"lxc"}`)))
	if fe, ok := err.(*field.Error); !ok || string(fe.Path) != "incus.type" || !strings.Contains(fe.Reason, "not an instance type") {
		t.Errorf("an unknown instance type: %v, want a refusal at incus.type", err)
	}
}
