# testbed/versions.sh: every tool version the test bed and CI pin, in this one file.
# Sourced by the scripts (go.sh, setup.sh, test.sh, checkphase.sh); the Go side reads
# it through testbed.Pin (go:embed), so a test, a bench row and a script never
# disagree. The node and VM images are pinned by their recipes' hashes (setup.sh).
# shellcheck shell=bash disable=SC2034

# The Go toolchain fetched from the Go module proxy where a machine has none.
switchyard_go_version=1.26.8
# The unit tier as the flake's check runs it: the oldest Go nixos-26.05's go_1_26 can be.
switchyard_check_go_version=1.26.0
# OpenTofu, built from the Go module proxy (the tf methods' tests and bench row f).
switchyard_tofu_version=1.10.6
# spire-server, built from the Go module proxy (tf-incus-operator's tests).
switchyard_spire_version=1.13.3
# staticcheck (honnef.co/go/tools), the gate's linter, installed from the Go module proxy.
switchyard_staticcheck_version=v0.8.2
