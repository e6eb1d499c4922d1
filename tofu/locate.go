package tofu

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"

	"github.com/hashicorp/go-version"
	install "github.com/hashicorp/hc-install"
	"github.com/hashicorp/hc-install/fs"
	"github.com/hashicorp/hc-install/product"
	"github.com/hashicorp/hc-install/src"
)

// EnvTofu names the OpenTofu binary to use.
const EnvTofu = "SWITCHYARD_TOFU"

// MinVersion is the oldest OpenTofu (or Terraform) the generated configuration
// works with: it uses a check block and OpenTofu's -json streams.
var MinVersion = version.Must(version.NewVersion("1.6.0"))

// binaryVersion reads `<bin> version -json` (OpenTofu and Terraform both print
// {"terraform_version": ...}) from stdout only: hc-install's own getter reads stderr
// too, where a CLI-configuration warning breaks the JSON, and then falls back to
// parsing "Terraform v..." text that OpenTofu does not print. A pre-release suffix
// is dropped: a tofu built from source says 1.10.6-dev, and go-version never lets
// a pre-release meet a plain constraint.
func binaryVersion(ctx context.Context, path string) (*version.Version, error) {
	out, err := exec.CommandContext(ctx, path, "version", "-json").Output()
	if err != nil {
		return nil, err
	}
	var v struct {
		Version string `json:"terraform_version"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		return nil, fmt.Errorf("version -json: %w", err)
	}
	ver, err := version.NewVersion(v.Version)
	if err != nil {
		return nil, fmt.Errorf("version -json: %w", err)
	}
	return ver.Core(), nil
}

var (
	openTofu = product.Product{
		Name:       "tofu",
		BinaryName: func() string { return "tofu" },
		GetVersion: binaryVersion,
	}
	terraform = product.Product{
		Name:       product.Terraform.Name,
		BinaryName: product.Terraform.BinaryName,
		GetVersion: binaryVersion,
	}
)

// sources is where hc-install looks, in order: $SWITCHYARD_TOFU exactly, else tofu
// on PATH, else terraform on PATH, each at MinVersion or newer.
func sources(getenv func(string) string) []src.Source {
	if p := getenv(EnvTofu); p != "" {
		return []src.Source{&fs.AnyVersion{ExactBinPath: p}}
	}
	atLeast := version.MustConstraints(version.NewConstraint(">= " + MinVersion.String()))
	return []src.Source{
		&fs.Version{Product: openTofu, Constraints: atLeast},
		&fs.Version{Product: terraform, Constraints: atLeast},
	}
}

// ErrBadTofu is a SWITCHYARD_TOFU that is not a usable binary: bad input.
var ErrBadTofu = fmt.Errorf("%s is not a usable OpenTofu", EnvTofu)

// Locate finds the binary with hc-install: $SWITCHYARD_TOFU as given (an executable
// file, else ErrBadTofu; its version is checked by CheckVersion once terraform-exec
// has read it, so a run asks the binary for its version once), or the first tofu or
// terraform on PATH whose version hc-install finds at MinVersion or newer.
func Locate(ctx context.Context, getenv func(string) string) (string, error) {
	path, err := install.NewInstaller().Ensure(ctx, sources(getenv))
	if err != nil {
		if getenv(EnvTofu) != "" {
			return "", fmt.Errorf("%w: not an executable file", ErrBadTofu)
		}
		return "", fmt.Errorf("OpenTofu %s or newer not found: set %s or put tofu (or terraform) on PATH", MinVersion, EnvTofu)
	}
	return path, nil
}

// CheckVersion checks the version the binary reported (a pre-release counts as its
// release) and gives the version to record in a state.
func CheckVersion(v *version.Version, err error) (*version.Version, error) {
	if err != nil {
		return nil, fmt.Errorf("%w: `version -json` failed: %v", ErrBadTofu, err)
	}
	if v.Core().LessThan(MinVersion) {
		return nil, fmt.Errorf("%w: version %s, need %s or newer", ErrBadTofu, v, MinVersion)
	}
	return v.Core(), nil
}
