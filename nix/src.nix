# The package's source (flake.nix's `src`, a lib.fileset of these): the entries of the
# repository root that building switchyard and running its check phase (`go test ./...`,
# every package's unit tier) read (.ci: testbed's test that no script names a host reads
# it). Left out: flake.nix, flake.lock and .shellcheckrc, so that editing them does not
# rebuild the package. One quoted name per
# line and nothing else: testbed/checkphase.sh reads this file without Nix to copy the same
# tree, so the unit tier shows the list is enough, and nix/src_test.go checks that every
# other root entry is left out on purpose.
[
  ".ci"
  "README.md"
  "bench"
  "cmd"
  "console"
  "dnsupdate"
  "docs"
  "effects"
  "examples"
  "exitcode"
  "go.mod"
  "go.sum"
  "layers"
  "localcmd"
  "methods"
  "nix"
  "nixos-tests"
  "plan"
  "pool"
  "provider"
  "receipt"
  "redact"
  "rollout"
  "spire"
  "sshsig"
  "testbed"
  "tofu"
  "transports"
  "verdict"
]
