#!/usr/bin/env bash
# The README's test command (and .ci/run): installs and starts the test bed, then
# vets and runs every test, unit tier and test-bed tier, against real nodes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. testbed/go.sh
switchyard_ensure_go

image=$(bash testbed/setup.sh)
# Nodes left by an interrupted run on this machine.
incus list --format csv -c n user.switchyard-testbed=true | xargs -r incus delete --force

export SWITCHYARD_TESTBED=require SWITCHYARD_TESTBED_IMAGE=$image
echo "testbed: image $image; $(go version)" >&2
go vet ./...
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
go test -v -count=1 -timeout 75m ./... 2>&1 | tee "$log" || status=$?
echo "tests: $(grep -cE '^\s*--- PASS' "$log") passed, $(grep -cE '^\s*--- FAIL' "$log") failed, $(grep -cE '^\s*--- SKIP' "$log") skipped" >&2
exit "$status"
