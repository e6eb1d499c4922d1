#!/usr/bin/env bash
# The README's main job: install what is needed, start a throwaway test-bed node,
# deploy the bundled example operator tree (examples/tree, node web1) to it with
# `switchyard ssh apply`, print its verdict, and delete the node. Exits with
# switchyard's exit code.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. testbed/go.sh
switchyard_ensure_go

export SWITCHYARD_TESTBED_IMAGE
SWITCHYARD_TESTBED_IMAGE=$(bash testbed/setup.sh)
work=$(mktemp -d)
node=""
cleanup() {
	[ -n "$node" ] && go run ./testbed/cmd/testbed-node delete "$node"
	rm -rf "$work"
}
trap cleanup EXIT

echo "example: building switchyard" >&2
go build -o "$work/switchyard" ./cmd/switchyard
echo "example: starting a throwaway node" >&2
go run ./testbed/cmd/testbed-node launch example "$work" >"$work/node.json"
field() { sed -n 's/.*"'"$1"'":"\{0,1\}\([^",]*\)"\{0,1\}[,}].*/\1/p' "$work/node.json"; }
node=$(field name)
echo "example: node $node is up (ssh on 127.0.0.1:$(field ssh_port), host key pinned)" >&2

# Point the example tree's web1 at the throwaway node (a gitignored local.nix).
printf '{ web1 = { host = "127.0.0.1"; port = %d; user = "root"; hostKey = "%s"; }; }\n' \
	"$(field ssh_port)" "$(sed -n 's/.*"host_key":"\([^"]*\)".*/\1/p' "$work/node.json")" >examples/tree/local.nix
trap 'rm -f examples/tree/local.nix; cleanup' EXIT

echo "example: switchyard ssh apply --tree examples/tree --node web1" >&2
status=0
# The client key is staged as an API stages a run's credentials (SPEC 6.9): a file of
# the deployer's user, mode 0600, in a directory of its own under a credential directory.
creds="$work/credentials"
install -d -m 0700 "$creds" "$creds/run-1"
install -m 0600 "$(field key_file)" "$creds/run-1/ssh-key"
DEPLOYMENT="{\"deployment-method\":{\"ssh\":{\"sshKeyFile\":\"$creds/run-1/ssh-key\"}}}" \
	SWITCHYARD_CREDENTIAL_DIRS="$creds" DEPLOY_EVAL_CACHE_DIR="$work/eval-cache" \
	"$work/switchyard" ssh apply --tree examples/tree --node web1 --state-dir "$work/state" || status=$?
exit "$status"
