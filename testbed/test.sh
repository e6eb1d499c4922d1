#!/usr/bin/env bash
# The README's test command (and .ci/run): installs and starts the test bed, then
# vets and runs every test, unit tier and test-bed tier, against real nodes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. testbed/go.sh
switchyard_ensure_go

# The tests need OpenTofu and the VM tier's image (testbed/vm) too.
export SWITCHYARD_TESTBED_VM=1
# And tf-incus-operator's servers: bind9, knot, spire-server (built once, cached).
image=$(SWITCHYARD_TESTBED_TOFU=1 SWITCHYARD_TESTBED_OPERATOR=1 bash testbed/setup.sh)
# Nodes left by an interrupted run on this machine.
incus list --format csv -c n user.switchyard-testbed=true | xargs -r -n1 incus delete --force || true
# Projects (and their instances and cached images) left by an interrupted tf-incus test.
for project in $(incus project list --format csv | cut -d, -f1 | cut -d' ' -f1 | grep '^switchyard-test-' || true); do
	incus list --project "$project" --format csv -c n | xargs -r -n1 incus delete --force --project "$project" || true
	# Only a project with images of its own: another one lists (and would delete) the default project's.
	if [ "$(incus project get "$project" features.images 2>/dev/null)" = true ]; then
		incus image list --project "$project" --format csv -c F | xargs -r -n1 incus image delete --project "$project" || true
	fi
	incus project delete "$project" || true
done

export SWITCHYARD_TESTBED=require SWITCHYARD_TESTBED_IMAGE=$image
# OpenTofu as setup.sh built and cached it.
export SWITCHYARD_TOFU=${SWITCHYARD_TOFU:-${SWITCHYARD_TESTBED_CACHE:-/var/cache/switchyard-testbed}/tofu-1.10.6/tofu}
export SWITCHYARD_SPIRE_SERVER=${SWITCHYARD_SPIRE_SERVER:-${SWITCHYARD_TESTBED_CACHE:-/var/cache/switchyard-testbed}/spire-1.13.3/spire-server}
# Compatibility (SPEC 7: terraform also works): the tf method's tests run again with
# Terraform in place of OpenTofu, inside the package's run (TestTerraformCompat).
# Terraform 1.11 is preinstalled on the test machines; where it is missing the test
# says so.
if terraform=$(command -v terraform); then
	export SWITCHYARD_TERRAFORM=$terraform
	echo "compat: the tf tests also with $terraform ($("$terraform" version -json 2>/dev/null | sed -n 's/.*"terraform_version": *"\([^"]*\)".*/\1/p'))" >&2
else
	echo "compat: no terraform on PATH: the tf tests run with OpenTofu only" >&2
fi
echo "testbed: image $image; $(go version)" >&2
go vet ./...
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
# Every package but the VM tier, then the VM tier on its own: its qemu runs in software
# emulation and would take both cores from the container tests' time-windowed verdicts.
# -parallel 3: a package's test-bed tests mostly wait on their nodes (boots, verdict
# windows, switches), so three at once on two cores keep the cores busy where the
# default (GOMAXPROCS, 2) left them idle (cmd/switchyard, the long pole, took 33
# minutes at two).
go test -v -count=1 -parallel 3 -timeout 75m $(go list ./... | grep -vx 'github.com/switchyard-nix/switchyard/testbed/vm') 2>&1 | tee "$log" || status=$?
go test -v -count=1 -timeout 40m ./testbed/vm/ 2>&1 | tee -a "$log" || status=1
echo "tests: $(grep -cE '^\s*--- PASS' "$log") passed, $(grep -cE '^\s*--- FAIL' "$log") failed, $(grep -cE '^\s*--- SKIP' "$log") skipped" >&2

# The unit tier as the flake's package check runs it in the Nix sandbox (vendored,
# offline, unprivileged, stdenv's tools only), with Go 1.26.0: the oldest Go the pinned
# nixos-26.05 can hold (its go_1_26 is a 1.26 patch release; this machine's is 1.26.8).
bash testbed/checkphase.sh 1.26.0 || status=1

# Fuzz targets of the DEPLOYMENT merge and of the readers, each for a bounded number of
# executions. A count, not a duration: with a duration Go 1.26's fuzz coordinator can
# report its own deadline as a failure, "context deadline exceeded" with no crashing
# input (golang/go#75804, fixed in Go 1.27); a count has no deadline to race. 300,000
# executions take 12-18 s each on an idle 2-core machine.
for target in "FuzzMerge ./plan/merge" "FuzzReadPlan ./plan" "FuzzParseCanonical ./plan/data"; do
	set -- $target
	echo "fuzz: $1 ($2) for 300000 executions" >&2
	go test -run '^$' -fuzz "^$1\$" -fuzztime 300000x "$2" || status=1
done
exit "$status"
