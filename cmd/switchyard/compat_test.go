package main_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// compatTests are the tf method's end-to-end tests that exercise what Terraform
// itself does, run again with Terraform in place of OpenTofu (SPEC 7: terraform also
// works): init, plan, apply, a change and destroy (TestTFApplyPlanChangeDestroy), the
// pg backend's state and lock (TestTFPgBackendLock), refresh through each
// deployment's Read and a rollout's staged graph (TestTFRolloutStagesDriftedNodes),
// and the version check that must read Terraform's `version -json`
// (TestTFBadTofuRefused). The tf tests left out (signed submissions, receipts,
// verdict-only, retries of a failed update, the state's subsets) exercise switchyard's
// logic on the same calls and run once, with OpenTofu, as do the Incus methods'
// tests (minutes of Incus instances) and the deploy body's. The full list ran with
// Terraform 1.11 for 14 minutes of a CI run's critical path; these four take about
// a third of it.
var compatTestNames = []string{"TestTFApplyPlanChangeDestroy", "TestTFPgBackendLock", "TestTFRolloutStagesDriftedNodes", "TestTFBadTofuRefused"}

var compatTests = "^(" + strings.Join(compatTestNames, "|") + ")$"

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
	for _, name := range compatTestNames {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Errorf("the tf tests with %s: %s did not pass\n%s", terraform, name, tail(string(out), 50))
		}
	}
	passed := strings.Count(string(out), "--- PASS: TestTF")
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
