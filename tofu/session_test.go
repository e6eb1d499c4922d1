package tofu

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-exec/tfexec"
)

// The options each verb hands terraform-exec, built purely from the Session's
// options: a subset run's targets first, then where and how wide.
func TestVerbOptions(t *testing.T) {
	web1, web2 := Address("web1"), InstanceAddress("web1")
	for _, c := range []struct {
		name    string
		in      PlanOptions
		plan    []tfexec.PlanOption
		destroy []tfexec.DestroyOption
		refresh []tfexec.RefreshCmdOption
	}{
		{name: "the whole graph", in: PlanOptions{Out: "p.tfplan", Options: Options{Parallelism: 8}},
			plan:    []tfexec.PlanOption{tfexec.Out("p.tfplan"), tfexec.Parallelism(8)},
			destroy: []tfexec.DestroyOption{tfexec.Parallelism(8)},
			refresh: []tfexec.RefreshCmdOption{}},
		{name: "a subset", in: PlanOptions{Out: "p.tfplan", Options: Options{Targets: []string{web1, web2}, Parallelism: 2}},
			plan:    []tfexec.PlanOption{tfexec.Target(web1), tfexec.Target(web2), tfexec.Out("p.tfplan"), tfexec.Parallelism(2)},
			destroy: []tfexec.DestroyOption{tfexec.Target(web1), tfexec.Target(web2), tfexec.Parallelism(2)},
			refresh: []tfexec.RefreshCmdOption{tfexec.Target(web1), tfexec.Target(web2)}},
		{name: "offline, OpenTofu's parallelism", in: PlanOptions{Out: "p.tfplan", NoRefresh: true},
			plan:    []tfexec.PlanOption{tfexec.Out("p.tfplan"), tfexec.Refresh(false)},
			destroy: []tfexec.DestroyOption{},
			refresh: []tfexec.RefreshCmdOption{}},
	} {
		if got := planOptions(c.in); !reflect.DeepEqual(got, c.plan) {
			t.Errorf("%s: planOptions = %#v, want %#v", c.name, got, c.plan)
		}
		if got := destroyOptions(c.in.Options); !reflect.DeepEqual(got, c.destroy) {
			t.Errorf("%s: destroyOptions = %#v, want %#v", c.name, got, c.destroy)
		}
		if got := refreshOptions(c.in.Options); !reflect.DeepEqual(got, c.refresh) {
			t.Errorf("%s: refreshOptions = %#v, want %#v", c.name, got, c.refresh)
		}
	}
}

func TestLastLines(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"one\n", "one"},
		{"a\nb\nc\nd\n", "b c d"},
	} {
		if got := lastLines(c.in, 3); got != c.want {
			t.Errorf("lastLines(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// Raw runs OpenTofu with the user's arguments, input and output, in the working
// directory with its environment; an exit status other than 0 is an error naming
// the command and the status.
func TestSessionRaw(t *testing.T) {
	w := &Workspace{Dir: t.TempDir(), Env: map[string]string{"A": "b"}}
	w.Bin = script(t, `read line; echo "$line $A $*"; pwd >&2; exit 3`)
	s, err := w.Session(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	err = s.Raw(context.Background(), []string{"state", "list"}, strings.NewReader("in\n"), &out, &errOut)
	if out.String() != "in b state list\n" || strings.TrimSpace(errOut.String()) != w.Dir {
		t.Errorf("stdout %q, stderr %q", out.String(), errOut.String())
	}
	if err == nil || err.Error() != "tofu state list: exit 3" {
		t.Errorf("err %v, want tofu state list: exit 3", err)
	}
}
