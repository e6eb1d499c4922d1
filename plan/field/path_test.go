package field

import (
	"errors"
	"fmt"
	"testing"
)

func TestPath(t *testing.T) {
	for _, tc := range []struct {
		p    Path
		want string
	}{
		{"", "(top level)"},
		{Path("").Key("groups").Key("web").Key("nodes").Key("web1").Key("modules").Index(0), "groups.web.nodes.web1.modules[0]"},
		{Path("").Key("deployment-method").Key("tf-incus"), "deployment-method.tf-incus"},
		{Path("").Key("applications").Key("my app").Key("settings"), `applications."my app".settings`},
		{Path("").Key("1x").Key(""), `"1x".""`},
		{Path("").Key(`a"b`), `"a\"b"`},
		{Path("").Index(3), "[3]"},
	} {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("path %q prints %q, want %q", string(tc.p), got, tc.want)
		}
	}
}

func TestError(t *testing.T) {
	inner := WithSource(Errorf(Path("").Key("a").Key("b"), "unknown field"), "DEPLOYMENT")
	err := fmt.Errorf("loading: %w", inner)
	if !IsRefusal(err) {
		t.Fatal("a wrapped *Error is a refusal")
	}
	if IsRefusal(errors.New("x")) {
		t.Fatal("a plain error is not a refusal")
	}
	if got, want := err.Error(), "loading: DEPLOYMENT: a.b: unknown field"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	WithSource(err, "other")
	if got, want := err.Error(), "loading: DEPLOYMENT: a.b: unknown field"; got != want {
		t.Errorf("a set source is kept: got %q", got)
	}
	if p, ok := PathOf(err); !ok || p != "a.b" {
		t.Errorf("PathOf = %q, %v", p, ok)
	}
	if got := (&Error{Reason: "empty"}).Error(); got != "empty" {
		t.Errorf("got %q", got)
	}
}
