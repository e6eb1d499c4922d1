package main_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// compatTests are the tf method's own end-to-end tests, run again with Terraform in
// place of OpenTofu (SPEC 7: terraform also works). What Terraform meets there (init,
// plan, apply, destroy, the state, the lock, a rollout's graph, the provider
// protocol) the Incus methods meet the same way, so their tests (TestTFIncus*,
// minutes of Incus instances) and the deploy body's run once, with OpenTofu.
const compatTests = "^TestTF(Apply|Drift|SelfState|Rollout|Signed|PgBackend|VerdictOnly|BadTofu)"

// TestTerraformCompat runs compatTests with SWITCHYARD_TERRAFORM (testbed/test.sh
// sets it where Terraform is installed) as SWITCHYARD_TOFU, in a child of this test
// binary. It is one parallel test of the package, and its child runs one test at a
// time: the compatibility run shares the package's -parallel slots with the rest
// instead of running after them (it mostly waits on its nodes, as they do).
func TestTerraformCompat(t *testing.T) {
	terraform := os.Getenv("SWITCHYARD_TERRAFORM")
	if terraform == "" {
		t.Skip("SWITCHYARD_TERRAFORM not set: the tf tests ran with OpenTofu only")
	}
	if _, err := os.Stat(terraform); err != nil {
		t.Fatalf("SWITCHYARD_TERRAFORM: %v", err)
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], compatArgs()...)
	cmd.Env = append(compatEnv(os.Environ()), "SWITCHYARD_TOFU="+terraform)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the tf tests with %s: %v\n%s", terraform, err, tail(string(out), 200))
	}
	passed := strings.Count(string(out), "--- PASS: TestTF")
	if passed == 0 {
		t.Fatalf("the tf tests with %s: none ran\n%s", terraform, tail(string(out), 50))
	}
	t.Logf("%d tf tests passed with %s", passed, terraform)
}

// compatArgs is the child's command line: compatTests, one at a time, verbose so the
// parent can count them.
func compatArgs() []string {
	return []string{"-test.run", compatTests, "-test.count=1", "-test.parallel=1", "-test.v", "-test.timeout=40m"}
}

// compatEnv is env without the parent's SWITCHYARD_TOFU and SWITCHYARD_TERRAFORM (the
// child must not run this test again).
func compatEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "SWITCHYARD_TOFU=") && !strings.HasPrefix(kv, "SWITCHYARD_TERRAFORM=") {
			out = append(out, kv)
		}
	}
	return out
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
