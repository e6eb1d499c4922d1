package provider

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/provider/contract"
)

// setRun hands the provider run as the CLI does, through the contract's variable.
func setRun(t *testing.T, run contract.Run) {
	t.Helper()
	enc, err := run.Encode()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(contract.Env, enc)
}

// testSession is the session the provider's Configure makes of this process's
// environment.
func testSession(t *testing.T) *session {
	t.Helper()
	s, err := newSession(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// configuredFor is r configured with testSession, as the framework does.
func configuredFor[T resource.ResourceWithConfigure](t *testing.T, r resource.Resource) T {
	t.Helper()
	rc := r.(T)
	var resp resource.ConfigureResponse
	rc.Configure(context.Background(), resource.ConfigureRequest{ProviderData: testSession(t)}, &resp)
	if resp.Diagnostics.HasError() {
		t.Fatalf("configure: %v", resp.Diagnostics)
	}
	return rc
}

// configuredData is d configured with testSession.
func configuredData(t *testing.T, d datasource.DataSource) datasource.DataSource {
	t.Helper()
	var resp datasource.ConfigureResponse
	d.(datasource.DataSourceWithConfigure).Configure(context.Background(), datasource.ConfigureRequest{ProviderData: testSession(t)}, &resp)
	if resp.Diagnostics.HasError() {
		t.Fatalf("configure: %v", resp.Diagnostics)
	}
	return d
}

// The provider reads its run once, in Configure, from the contract's variable and
// DEPLOY_*; a run it cannot read fails Configure naming the variable, and a
// resource used before Configure says the provider is not configured.
func TestSessionFromContract(t *testing.T) {
	setRun(t, contract.Run{SSHKeyFile: "/k/ssh", JournalDir: "/s/journal", IncusRemote: "local",
		Rollout: map[string]contract.Step{"web2": {Stage: "batch 1", After: []string{"web1"}}}})
	t.Setenv("DEPLOY_WAIT_TIMEOUT", "7")
	s := testSession(t)
	if s.run.SSHKeyFile != "/k/ssh" || s.run.Rollout["web2"].Stage != "batch 1" || s.deployErr != nil ||
		s.deploy.WaitTimeout.Seconds() != 7 || s.journal() == nil {
		t.Errorf("session %+v, deploy %+v, %v", s.run, s.deploy, s.deployErr)
	}
	t.Setenv("DEPLOY_WAIT_TIMEOUT", "soon")
	if s := testSession(t); s.deployErr == nil {
		t.Error("a bad DEPLOY_WAIT_TIMEOUT: no error kept for the deploys")
	}
	t.Setenv(contract.Env, "{")
	if _, err := newSession(os.Getenv); err == nil {
		t.Error("a run that is not JSON: no error")
	}
	var d deployment
	var resp resource.ConfigureResponse
	d.Configure(context.Background(), resource.ConfigureRequest{}, &resp)
	if resp.Diagnostics.HasError() || d.s != nil {
		t.Errorf("configure before the provider's: %v", resp.Diagnostics)
	}
	var r instance
	resp = resource.ConfigureResponse{}
	if r.usable(&resp.Diagnostics) || !resp.Diagnostics.HasError() {
		t.Error("an unconfigured instance resource is usable")
	}
}

// apply --mode, --reboot and --reboot-timeout reach the deploy body through the run;
// a value the CLI refuses refuses the run's deploys (deployErr), as a bad DEPLOY_* does.
func TestSessionModeReboot(t *testing.T) {
	setRun(t, contract.Run{Mode: "boot", Reboot: true, RebootTimeout: contract.Duration(90 * time.Second)})
	if s := testSession(t); s.deployErr != nil || s.deploy.Mode != effects.ModeBoot || !s.deploy.Reboot || s.deploy.RebootTimeout != 90*time.Second {
		t.Errorf("deploy %+v, %v", s.deploy, s.deployErr)
	}
	setRun(t, contract.Run{})
	if s := testSession(t); s.deployErr != nil || s.deploy.Mode != effects.ModeSwitch || s.deploy.Reboot {
		t.Errorf("no mode, no reboot: deploy %+v, %v", s.deploy, s.deployErr)
	}
	for _, bad := range []contract.Run{{Mode: "dry"}, {Mode: "test", Reboot: true}, {Reboot: true, RebootTimeout: -1}} {
		setRun(t, bad)
		if s := testSession(t); s.deployErr == nil || !strings.HasPrefix(s.deployErr.Error(), contract.Env) {
			t.Errorf("%+v: deployErr %v, want one naming %s", bad, s.deployErr, contract.Env)
		}
	}
}

// The provider reads its environment in one place (issue 33 item 1): os.Getenv,
// os.LookupEnv and os.Environ appear only in Configure (the run) and IsPlugin
// (whether OpenTofu started this process), so a setting cannot be read past the
// contract again.
func TestEnvironmentReadOnlyInConfigure(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			allowed := ok && (fn.Name.Name == "Configure" && fn.Recv != nil || fn.Name.Name == "IsPlugin")
			ast.Inspect(decl, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok || allowed {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "os" &&
					(sel.Sel.Name == "Getenv" || sel.Sel.Name == "LookupEnv" || sel.Sel.Name == "Environ") {
					t.Errorf("%s: os.%s outside the provider's Configure: read it through provider/contract", fset.Position(sel.Pos()), sel.Sel.Name)
				}
				return true
			})
		}
	}
}
