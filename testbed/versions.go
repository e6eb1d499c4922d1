package testbed

import (
	_ "embed"
	"regexp"
)

//go:embed versions.sh
var versionsSh string

var pinLine = regexp.MustCompile(`(?m)^switchyard_([a-z_]+)_version=(\S+)$`)

// Pin is the version testbed/versions.sh pins for tool ("go", "check_go", "tofu",
// "spire", "staticcheck"): the scripts and the Go side read the one file. It
// panics for a tool the file does not pin, a programming error.
func Pin(tool string) string {
	for _, m := range pinLine.FindAllStringSubmatch(versionsSh, -1) {
		if m[1] == tool {
			return m[2]
		}
	}
	panic("testbed/versions.sh pins no " + tool)
}
