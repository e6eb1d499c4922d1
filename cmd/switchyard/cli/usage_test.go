package cli

import (
	"bytes"
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/exitcode"
	"github.com/switchyard-nix/switchyard/plan/method"
)

func run(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

// flagsListed checks that usage lists every flag of fs with its non-zero default.
func flagsListed(t *testing.T, what, usage string, fs *flag.FlagSet) {
	t.Helper()
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(usage, "--"+f.Name+" ") {
			t.Errorf("%s: flag --%s not listed:\n%s", what, f.Name, usage)
		}
		switch f.DefValue {
		case "", "0", "false":
		default:
			if !strings.Contains(usage, fmt.Sprintf("(default %s)", f.DefValue)) {
				t.Errorf("%s: default %q of --%s not listed", what, f.DefValue, f.Name)
			}
		}
	})
}

// varsListed checks that usage lists every DEPLOY_* variable with its default, or none.
func varsListed(t *testing.T, what, usage string, want bool) {
	t.Helper()
	if !want {
		if strings.Contains(usage, "DEPLOY_") {
			t.Errorf("%s: lists DEPLOY_* variables it does not read", what)
		}
		return
	}
	for _, v := range effects.Variables {
		if !strings.Contains(usage, v.Name+"="+v.Default) {
			t.Errorf("%s: %s=%s not listed", what, v.Name, v.Default)
		}
	}
}

// Issue 13, part 2: -h, --help and `switchyard help ...` on every command, method and
// verb print the usage on stdout and exit 0, with every flag, its default, and the
// DEPLOY_* variables of a deploying verb.
func TestHelpEverywhere(t *testing.T) {
	type want struct {
		args  [][]string
		head  string
		check func(t *testing.T, what, out string)
	}
	var cases []want
	cases = append(cases,
		want{[][]string{{"--help"}, {"-h"}, {"help"}, {"help", "help"}}, "switchyard deploys", func(t *testing.T, what, out string) {
			for _, name := range method.Names() {
				if !strings.Contains(out, "  "+name+" ") {
					t.Errorf("%s: method %s not listed", what, name)
				}
			}
		}},
		want{[][]string{{"deploy", "--help"}, {"deploy", "-h"}, {"deploy", "--target", "x", "-help"}, {"help", "deploy"}, {"--help", "deploy"}},
			"usage: switchyard deploy", func(t *testing.T, what, out string) {
				var f deployFlags
				flagsListed(t, what, out, deployFlagSet(&f))
				varsListed(t, what, out, true)
			}},
		want{[][]string{{"version", "--help"}, {"help", "version"}}, "usage: switchyard version", nil},
	)
	for _, m := range method.All() {
		m := m
		cases = append(cases, want{[][]string{{m.Name, "--help"}, {m.Name, "-h"}, {m.Name, "help"}, {"help", m.Name}},
			"usage: switchyard " + m.Name + " <verb>", func(t *testing.T, what, out string) {
				for _, v := range m.Verbs {
					if !strings.Contains(out, "  "+v+" ") {
						t.Errorf("%s: verb %s not listed", what, v)
					}
				}
			}})
		for _, v := range m.Verbs {
			v := v
			cases = append(cases, want{[][]string{{m.Name, v, "--help"}, {m.Name, v, "-h"}, {m.Name, v, "--tree", "/nonexistent", "--help"},
				{"help", m.Name, v}, {m.Name, "help", v}},
				"usage: switchyard " + m.Name + " " + v, func(t *testing.T, what, out string) {
					var f methodFlags
					flagsListed(t, what, out, methodFlagSet(m, v, &f))
					// issue 14 item 2: a staged rollout is the apply of ssh, tf and tf-incus.
					if rollout := strings.Contains(out, "--rollout SPEC"); rollout != (m.Name != "tf-incus-operator" && v == "apply") {
						t.Errorf("%s: --rollout listed: %v", what, rollout)
					}
					varsListed(t, what, out, method.VerbDeploys(v))
				}})
		}
	}
	for _, c := range cases {
		for _, args := range c.args {
			what := strings.Join(args, " ")
			code, out, errOut := run(args...)
			if code != exitcode.OK || errOut != "" {
				t.Errorf("%s: exit %d, stderr %q; want 0 and nothing", what, code, errOut)
				continue
			}
			if !strings.HasPrefix(out, c.head) {
				t.Errorf("%s: stdout starts %q, want %q", what, firstLine(out), c.head)
			}
			if c.check != nil {
				c.check(t, what, out)
			}
		}
	}
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

// Issue 13, part 2: an unknown flag, verb or command prints the error and then the usage
// on stderr, nothing on stdout, and exits 2.
func TestUnknownFlagOrVerbExit2(t *testing.T) {
	type refusal struct {
		args       []string
		says, head string
	}
	cases := []refusal{
		{[]string{"deploy", "--bogus"}, "-bogus", "usage: switchyard deploy"},
		{[]string{"deploy", "--output", "xml", "--target", "x"}, "--output", "usage: switchyard deploy"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`, "switchyard deploys"},
		{[]string{"help", "frobnicate"}, `unknown command "frobnicate"`, "switchyard deploys"},
		{[]string{"help", "ssh", "destroy"}, `unknown verb "destroy"`, "usage: switchyard ssh <verb>"},
		{[]string{"help", "deploy", "apply"}, "no verbs", "switchyard deploys"},
		{[]string{"version", "--bogus"}, "takes no arguments", "usage: switchyard version"},
		{nil, "give a command", "switchyard deploys"},
	}
	for _, m := range method.All() {
		cases = append(cases,
			refusal{[]string{m.Name}, "give a verb", "usage: switchyard " + m.Name + " <verb>"},
			refusal{[]string{m.Name, "bogus"}, `unknown verb "bogus"`, "usage: switchyard " + m.Name + " <verb>"})
		for _, v := range m.Verbs {
			cases = append(cases, refusal{[]string{m.Name, v, "--bogus"}, "-bogus", "usage: switchyard " + m.Name + " " + v})
		}
	}
	for _, c := range cases {
		what := strings.Join(c.args, " ")
		code, out, errOut := run(c.args...)
		if code != exitcode.Refused || out != "" {
			t.Errorf("%s: exit %d, stdout %q; want 2 and nothing", what, code, out)
			continue
		}
		first, rest, _ := strings.Cut(errOut, "\n")
		if !strings.Contains(first, c.says) {
			t.Errorf("%s: first stderr line %q does not say %q", what, first, c.says)
		}
		if !strings.HasPrefix(strings.TrimLeft(rest, "\n"), c.head) {
			t.Errorf("%s: usage after the error starts %q, want %q", what, firstLine(strings.TrimLeft(rest, "\n")), c.head)
		}
	}
}
