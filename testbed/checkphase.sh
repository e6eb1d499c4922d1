#!/usr/bin/env bash
# testbed/checkphase.sh: the unit tier as the flake's package check runs it, here.
#
# nixpkgs' buildGoModule builds from a vendored tree (its goModules output), offline
# (GOPROXY=off), as an unprivileged build user, with GOTOOLCHAIN=local, a PATH of stdenv's
# tools only and HOME pointing nowhere; flake.nix's checkPhase runs `go test ./...` there
# (GOFLAGS=-mod=vendor: buildGoModule drops -trimpath for its tests, and so do we).
# No nixpkgs is reachable on this machine, so this script makes the same conditions by
# hand and runs the same command, once per Go version given (default:
# switchyard_check_go_version of versions.sh, 1.26.0, the first Go 1.26 release: the
# pinned nixos-26.05's go_1_26 is a 1.26 patch release at or after it, and go.mod and
# its dependencies ask for no more than 1.26.0).
#
# It is test.sh's unit tier. With SWITCHYARD_SKIPPED_OUT=FILE it writes there the
# packages in which a test skipped (it needs a tool, root or the test bed), and with
# SWITCHYARD_SKIPPED_TESTS_OUT=FILE the names of those tests (the top-level test of a
# skipped subtest): the test-bed tier runs those tests again with the test bed, and no
# others.
#
#   bash testbed/checkphase.sh [GO_VERSION...]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. testbed/go.sh
switchyard_ensure_go

[ "$(id -u)" = 0 ] || { echo "checkphase: run as root (it drops to the nobody user)" >&2; exit 2; }
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=("$switchyard_check_go_version")

# A short path, like the sandbox's /build: unix sockets of tests live under it.
work=$(mktemp -d /tmp/cp.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src" "$work/bin" "$work/home"
# The tree buildGoModule gets: flake.nix's src, the root entries nix/src.nix names, of the
# committed files and the work tree's changes to them (untracked files too, so a new
# package is tested before it is committed).
mapfile -t src < <(sed -n 's/^[[:space:]]*"\([^"]*\)"[[:space:]]*$/\1/p' nix/src.nix)
[ ${#src[@]} -gt 0 ] || { echo "checkphase: nix/src.nix lists nothing" >&2; exit 2; }
git ls-files -z --cached --others --exclude-standard -- "${src[@]}" | xargs -0 cp --parents -t "$work/src" 2>/dev/null || true
(cd "$work/src" && GOFLAGS=-mod=mod GOWORK=off go mod vendor)
# stdenv's tools (coreutils, findutils, diffutils, sed, grep, gawk, tar, gzip, bash),
# nothing else: no incus, no nix, no ssh, no tofu, so every test-bed test skips.
for tool in bash sh cat ls mkdir rm cp mv ln chmod chown touch sed grep awk tr head tail \
	env id sleep true false readlink dirname basename printf echo test expr sort uniq wc \
	cut date find xargs diff cmp tar gzip mktemp stat tee uname; do
	p=$(type -P "$tool") && ln -sf "$p" "$work/bin/$tool"
done
chown -R nobody:nogroup "$work"

status=0
for v in "${versions[@]}"; do
	godir=$(switchyard_fetch_go "$v")
	echo "checkphase: go test ./... with Go $v, vendored, offline, as nobody" >&2
	rm -rf "$work/home/gocache"
	if ! (cd "$work/src" && setpriv --reuid=nobody --regid=nogroup --clear-groups \
		env -i PATH="$godir/bin:$work/bin" HOME="$work/home" TMPDIR="$work/home" \
		GOCACHE="$work/home/gocache" GOPATH="$work/home/gopath" GOFLAGS=-mod=vendor \
		GOPROXY=off GOSUMDB=off GOTOOLCHAIN=local \
		go test -v -vet=off -count=1 ./... >"$work/out" 2>&1); then
		status=1
		cat "$work/out" >&2
	fi
	# go test -v prints each package's tests together, then its line: "ok  " and a tab,
	# or "FAIL" and a tab.
	awk '/^[[:space:]]*--- SKIP:/ { skipped = 1 } /^(ok|FAIL)[[:space:]]/ { if (skipped) print $2; skipped = 0 }' \
		"$work/out" | sort -u >"$work/skipped"
	# The top-level tests that skipped, or one of whose subtests did.
	awk '/^[[:space:]]*--- SKIP:/ { name = $3; sub(/\/.*/, "", name); print name }' "$work/out" | sort -u >"$work/skipped-tests"
	echo "checkphase: Go $v: $(grep -cE '^ok[[:space:]]' "$work/out") packages passed, $(grep -cE '^FAIL[[:space:]]' "$work/out") failed," \
		"$(grep -cE '^[[:space:]]*--- PASS' "$work/out") tests passed, $(grep -cE '^[[:space:]]*--- SKIP' "$work/out") skipped" \
		"(in $(wc -l <"$work/skipped") packages)" >&2
done
if [ -n "${SWITCHYARD_SKIPPED_OUT:-}" ]; then cp "$work/skipped" "$SWITCHYARD_SKIPPED_OUT"; fi
if [ -n "${SWITCHYARD_SKIPPED_TESTS_OUT:-}" ]; then cp "$work/skipped-tests" "$SWITCHYARD_SKIPPED_TESTS_OUT"; fi
exit "$status"
