package definition

import (
	"regexp"

	"github.com/switchyard-nix/switchyard/plan/field"
)

// validName is a name usable as a node, group or application name: it becomes a
// directory name (nodes/<node>), an instance name and a Nix attribute name.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$`)

func checkName(at field.Path, what, name string) error {
	if !validName.MatchString(name) {
		return field.Errorf(at, "%q is not a valid %s name (letters, digits, _ and -, starting with a letter or digit, at most 63)", name, what)
	}
	return nil
}
