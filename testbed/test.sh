#!/usr/bin/env bash
# The README's test command (and .ci/run), in tiers, each timed, nothing run twice:
#
#   gate     gofmt, go vet, staticcheck, shellcheck (lint), then the unit tier
#            (checkphase.sh: `go test ./...` as the flake's check runs it, vendored,
#            offline, as nobody), in a few minutes, before anything of the test bed is
#            installed; a red gate ends the run there
#   setup    installs and starts the test bed (setup.sh; cached under
#            /var/cache/switchyard-testbed, so only a cold machine pays for it)
#   spire    spire-server's build (a cold machine's), beside the test-bed tier
#   testbed  the tests the unit tier skipped, and only those, with the test bed: real
#            nodes, real Nix closures, OpenTofu, bind9, knot, spire-server
#   vm       the VM tier (testbed/vm) on its own
#   fuzz     the fuzz targets, each for a bounded number of executions
#
# Versions of every tool are pinned in testbed/versions.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=testbed/go.sh
. testbed/go.sh
switchyard_ensure_go
cache=${SWITCHYARD_TESTBED_CACHE:-/var/cache/switchyard-testbed}

times=()
status=0
# tier NAME CMD...: runs CMD, prints its time, records a failure in status.
tier() {
	local name=$1 start rc=0
	shift
	start=$(date +%s)
	echo "tier $name: start" >&2
	"$@" || rc=$?
	times+=("$(printf '%-8s %5ss  %s' "$name" "$(($(date +%s) - start))" "$([ $rc = 0 ] && echo ok || echo "FAILED (exit $rc)")")")
	echo "tier ${times[-1]}" >&2
	[ $rc = 0 ] || status=1
	return 0
}
report() {
	echo "tiers:" >&2
	printf '  %s\n' "${times[@]}" >&2
}

lint() {
	local bad rc=0
	bad=$(gofmt -l .)
	if [ -n "$bad" ]; then
		echo "gofmt: not formatted: $bad" >&2
		rc=1
	fi
	go vet ./... || rc=1
	local sc=$cache/staticcheck-$switchyard_staticcheck_version/staticcheck
	if [ ! -x "$sc" ]; then
		echo "gate: installing staticcheck $switchyard_staticcheck_version from the Go module proxy" >&2
		GOBIN=$(dirname "$sc") go install "honnef.co/go/tools/cmd/staticcheck@$switchyard_staticcheck_version"
	fi
	"$sc" ./... || rc=1
	git ls-files -z '*.sh' .ci/run | xargs -0 shellcheck -x -S warning || rc=1
	return $rc
}

# gate_tools installs the gate's Debian tools a machine lacks: shellcheck for lint;
# curl and unzip, which fetch the unit tier's Go.
gate_tools() {
	local missing=() tool
	for tool in shellcheck curl unzip; do
		command -v "$tool" >/dev/null || missing+=("$tool")
	done
	[ ${#missing[@]} = 0 ] && return 0
	echo "gate: installing ${missing[*]}" >&2
	# A fresh machine may have no package lists yet.
	{ DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" ||
		{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"; }; } >&2
}

skipped=$(mktemp)
skipped_tests=$(mktemp)
log=$(mktemp)
trap 'rm -f "$skipped" "$skipped_tests" "$log" "$log".spire*; report' EXIT
tier tools gate_tools
# The fast gate first. Run beside the unit tier instead it gained nothing on two cores
# (cold 329 s against 323 s one after the other; warm 168 s against 152 s): both are
# CPU-bound.
tier lint lint
tier unit env SWITCHYARD_SKIPPED_OUT="$skipped" SWITCHYARD_SKIPPED_TESTS_OUT="$skipped_tests" bash testbed/checkphase.sh
if [ $status != 0 ]; then
	echo "gate: red, the test bed is not started" >&2
	exit 1
fi

setup() {
	# The tests need OpenTofu, the VM tier's image (testbed/vm) and tf-incus-operator's
	# servers: bind9, knot, spire-server (built once, cached).
	# (set -e does not hold inside a function tier runs: each failure is checked.)
	# spire-server is built later, beside the test-bed tier (see spire_build).
	image=$(SWITCHYARD_TESTBED_TOFU=1 SWITCHYARD_TESTBED_OPERATOR=1 SWITCHYARD_TESTBED_VM=1 SWITCHYARD_TESTBED_SPIRE=later \
		bash testbed/setup.sh) || return 1
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
}
tier setup setup
[ $status = 0 ] || exit 1

export SWITCHYARD_TESTBED=require SWITCHYARD_TESTBED_IMAGE=$image SWITCHYARD_TESTBED_VM=1
# OpenTofu and spire-server as setup.sh built and cached them.
export SWITCHYARD_TOFU=${SWITCHYARD_TOFU:-$cache/tofu-$switchyard_tofu_version/tofu}
export SWITCHYARD_SPIRE_SERVER=${SWITCHYARD_SPIRE_SERVER:-$cache/spire-$switchyard_spire_version-min/spire-server}
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

# The test-bed tier: the tests the unit tier skipped (they need the test bed, root or a
# tool; the others ran there and do not run twice), in their packages, but the VM
# tier's. Its qemu runs in software emulation and would take both cores from the
# container tests' time-windowed verdicts, so it runs on its own after.
# -parallel 3: a package's test-bed tests mostly wait on their nodes (boots, verdict
# windows, switches), so three at once on two cores keep the cores busy where the
# default (GOMAXPROCS, 2) left them idle.
# The packages whose tests run spire-server go last (see spire_build).
spire_users='github.com/switchyard-nix/switchyard/(provider|spire)'
mapfile -t packages < <(grep -vx 'github.com/switchyard-nix/switchyard/testbed/vm' "$skipped" | grep -vxE "$spire_users"
	grep -xE "$spire_users" "$skipped")
echo "testbed: ${#packages[@]} packages skipped a test in the unit tier: ${packages[*]}" >&2
# One -run pattern for every package: a test name the unit tier skipped in one package
# also runs where another package has one of that name.
run_pattern="^($(paste -sd'|' "$skipped_tests"))\$"
echo "testbed: $(wc -l <"$skipped_tests") tests skipped in the unit tier" >&2
testbed_tier() {
	# Without a test bed cmd/switchyard's tests skip, always: no package here means the
	# unit tier's list was not read, and a tier that runs nothing must not pass.
	if ! printf '%s\n' "${packages[@]}" | grep -qx 'github.com/switchyard-nix/switchyard/cmd/switchyard'; then
		echo "testbed: the unit tier's list of packages with skipped tests lacks cmd/switchyard: not running a partial tier" >&2
		return 1
	fi
	if [ ! -s "$skipped_tests" ]; then
		echo "testbed: the unit tier's list of skipped tests is empty: not running a partial tier" >&2
		return 1
	fi
	# -vet=off: the gate ran go vet on every package.
	go test -v -count=1 -vet=off -parallel 3 -timeout 75m -run "$run_pattern" "${packages[@]}" 2>&1 | tee "$log"
}
# spire_build builds spire-server (a few minutes of CPU on a cold machine, nothing on a
# warm one) while the test-bed tier's first tests run, which mostly wait on their
# nodes; it writes its status to $SWITCHYARD_SPIRE_SERVER_BUILD, where the tests that
# run spire-server (the last ones of the operator's, and the last two packages) wait
# for it (testbed/spireserver).
spire_build() {
	local start rc=0
	start=$(date +%s)
	bash testbed/setup.sh spire >"$spire_log" 2>&1 || rc=$?
	if [ $rc = 0 ]; then
		echo "ok $(($(date +%s) - start))" >"$spire_status.part"
	else
		echo "FAILED $(($(date +%s) - start)) (exit $rc; its log: $spire_log)" >"$spire_status.part"
	fi
	mv "$spire_status.part" "$spire_status"
}
spire_log=$log.spire
spire_status=$log.spire-status
export SWITCHYARD_SPIRE_SERVER_BUILD=$spire_status
spire_build &
spire_pid=$!
tier testbed testbed_tier
wait "$spire_pid" || true
read -r spire_result spire_secs _ <"$spire_status" || true
times+=("$(printf '%-8s %5ss  %s' spire "${spire_secs:-?}" "$([ "$spire_result" = ok ] && echo "ok (beside testbed)" || echo FAILED)")")
if [ "$spire_result" != ok ]; then
	status=1
	echo "spire: the build of spire-server failed:" >&2
	tail -n 40 "$spire_log" >&2
fi
tier vm bash -c 'go test -v -count=1 -vet=off -timeout 40m ./testbed/vm/ 2>&1 | tee -a "$1"' _ "$log"
echo "tests: $(grep -cE '^\s*--- PASS' "$log") passed, $(grep -cE '^\s*--- FAIL' "$log") failed, $(grep -cE '^\s*--- SKIP' "$log") skipped" >&2

# Fuzz targets of the DEPLOYMENT merge and of the readers, each for a bounded number of
# executions. A count, not a duration: with a duration Go 1.26's fuzz coordinator can
# report its own deadline as a failure, "context deadline exceeded" with no crashing
# input (golang/go#75804, fixed in Go 1.27); a count has no deadline to race. 300,000
# executions take 12-18 s each on an idle 2-core machine.
fuzz() {
	local rc=0 target
	for target in "FuzzMerge ./plan/merge" "FuzzReadPlan ./plan" "FuzzParseCanonical ./plan/data"; do
		set -- $target
		echo "fuzz: $1 ($2) for 300000 executions" >&2
		go test -vet=off -run '^$' -fuzz "^$1\$" -fuzztime 300000x "$2" || rc=1
	done
	return $rc
}
tier fuzz fuzz
exit "$status"
