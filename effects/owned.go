package effects

import (
	"context"
	"strings"
)

// ownedArgv lists a toplevel's unit directory, two levels deep, following the
// symlinks NixOS builds it from: "<type> <relative path>" per entry.
func ownedArgv(toplevel string) []string {
	return []string{"find", "-L", toplevel + "/etc/systemd/system", "-mindepth", "1", "-maxdepth", "2", "-printf", `%y %P\n`}
}

// parseOwned reads ownedArgv's output: the units the configuration defines, and the
// units linked from its *.wants/ and *.requires/ directories.
func parseOwned(out string) (owned, wanted map[string]bool) {
	owned, wanted = map[string]bool{}, map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		typ, rel, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || rel == "" {
			continue
		}
		dir, name, nested := strings.Cut(rel, "/")
		switch {
		case !nested && typ != "d":
			owned[dir] = true
		case nested && (strings.HasSuffix(dir, ".wants") || strings.HasSuffix(dir, ".requires")):
			wanted[name] = true
		}
	}
	return owned, wanted
}

// 9. owned units
func (r *run) listOwned(ctx context.Context) error {
	if r.toplevel == "" {
		r.owned, r.wanted = map[string]bool{}, map[string]bool{}
		return nil
	}
	out, code, err := r.exec(ctx, ownedArgv(r.toplevel)...)
	if err != nil {
		return stopWith(exitInfra, "listing the configuration's units: %w", err)
	}
	// find exits 1 when the directory is missing: a configuration without units.
	_ = code
	r.owned, r.wanted = parseOwned(out)
	return nil
}
