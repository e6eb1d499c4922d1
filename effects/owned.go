package effects

import (
	"context"
	"fmt"
	"strings"

	"github.com/switchyard-nix/switchyard/exitcode"
	"github.com/switchyard-nix/switchyard/localcmd"
)

// OwnedScript reads what the owned phase needs of a toplevel ($1) in one command:
// its unit directory, listed two levels deep following the symlinks NixOS builds it
// from ("<type> <relative path>" per entry), then its etc/fstab. It is a fixed
// text; the toplevel is its argument. Each part is read only when its path exists, a
// dangling or looping symlink included (-e follows it and fails, -L does not): a
// missing path reads as empty. A marker line opens each part and one ends the
// output, so a failed part is named by the last marker before it (the script exits
// with the failed command's status there) and a cut-short output is never read as
// complete. One command instead of two saves a round trip, which on a fleet is CPU
// every node pays.
const OwnedScript = `# switchyard: list a toplevel's units and read its fstab (fixed script)
sy_units=$1/etc/systemd/system
sy_fstab=$1/etc/fstab
printf '%s\n' '##switchyard-owned units'
if [ -e "$sy_units" ] || [ -L "$sy_units" ]; then
	find -L "$sy_units" -mindepth 1 -maxdepth 2 -printf '%y %P\n' || exit
fi
printf '%s\n' '##switchyard-owned fstab'
if [ -e "$sy_fstab" ] || [ -L "$sy_fstab" ]; then
	cat -- "$sy_fstab" || exit
fi
printf '\n%s\n' '##switchyard-owned end'
`

// OwnedArgv runs OwnedScript for toplevel.
func OwnedArgv(toplevel string) []string {
	return []string{"sh", "-c", OwnedScript, "sh", toplevel}
}

const (
	ownedUnitsMark = "##switchyard-owned units\n"
	ownedFstabMark = "##switchyard-owned fstab\n"
	ownedEndMark   = "\n##switchyard-owned end\n"
)

// splitOwned cuts OwnedScript's output into the unit listing and the fstab. ok is
// false when the output is not complete; failed then names the part that was being
// read ("units", "fstab", or "" when the script never started).
func splitOwned(out string) (units, fstab string, failed string, ok bool) {
	rest, started := strings.CutPrefix(out, ownedUnitsMark)
	if !started {
		return "", "", "", false
	}
	// The listing's lines start with a type letter, so the first fstab marker is the
	// script's; the fstab's text, which could hold anything, runs to the end marker
	// that closes the output.
	units, rest, inFstab := strings.Cut(rest, ownedFstabMark)
	if !inFstab {
		return "", "", "units", false
	}
	fstab, complete := strings.CutSuffix(rest, ownedEndMark)
	if !complete {
		return "", "", "fstab", false
	}
	return units, fstab, "", true
}

// parseOwned reads OwnedScript's unit listing: the units the configuration defines, and the
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

// 9. owned units: the unit files of <toplevel>/etc/systemd/system, and the mounts,
// automounts and swaps systemd's fstab generator makes from <toplevel>/etc/fstab
// (NixOS's fileSystems and swapDevices). An owned unit that fails fails the node, so
// a list that could not be read stops the node: it must never read as "owns nothing".
func (r *run) listOwned(ctx context.Context) error {
	r.owned, r.wanted = map[string]bool{}, map[string]bool{}
	if r.toplevel == "" {
		return nil
	}
	var units, fstab string
	err := retryUnreachable(ctx, func() error {
		stdout, errOut, code, err := r.command(ctx, OwnedArgv(r.toplevel))
		if err != nil {
			return fmt.Errorf("reading the configuration's units: %w", err)
		}
		var failed string
		var ok bool
		units, fstab, failed, ok = splitOwned(stdout)
		if ok && code == 0 {
			return nil
		}
		what := "reading the configuration's units: sh"
		switch failed {
		case "units":
			what = "listing the configuration's units: find"
		case "fstab":
			what = "reading the configuration's file systems: cat"
		}
		if code == 0 {
			return fmt.Errorf("%s: output cut short", what)
		}
		return fmt.Errorf("%s exited %d: %s", what, code, localcmd.LastLine(errOut))
	})
	if err != nil {
		return stopWith(exitcode.Infra, "%w", err)
	}
	r.owned, r.wanted = parseOwned(units)
	for _, name := range fstabUnits(fstab) {
		r.owned[name] = true
	}
	return nil
}

// OptionalScript runs its command ($2 on) only when the path $1 exists, a dangling
// or looping symlink included (-e follows it and fails, -L does not): a missing path
// exits 0 with no output. The command's exit status alone cannot tell a missing path
// from another failure (find and cat exit 1 for both), and asking in the same command
// saves a second round trip, which on a fleet is CPU every node pays.
const OptionalScript = `if [ -e "$1" ] || [ -L "$1" ]; then shift; exec "$@"; fi`

// OptionalArgv is argv run through OptionalScript for path.
func OptionalArgv(path string, argv []string) []string {
	return append([]string{"sh", "-c", OptionalScript, "sh", path}, argv...)
}

// readOptional runs argv, which reads path on the node, and returns its stdout. A
// path that does not exist reads as empty; any other failure of argv (a symlink loop,
// an I/O error, a missing tool) is an error. It reads through a bounced connection
// (retryUnreachable), as the owned phase's read does.
func (r *run) readOptional(ctx context.Context, path string, argv []string) (string, error) {
	var out string
	err := retryUnreachable(ctx, func() error {
		stdout, errOut, code, err := r.command(ctx, OptionalArgv(path, argv))
		if err == nil && code != 0 {
			err = fmt.Errorf("%s exited %d: %s", argv[0], code, localcmd.LastLine(errOut))
		}
		out = stdout
		return err
	})
	return out, err
}

// fstabUnits are the units systemd-fstab-generator makes from an fstab (systemd 252,
// as recorded from a test-bed node in testdata/fstab): a .mount per mount point (and an
// .automount with x-systemd.automount), a .swap per swap device. Like the generator it
// skips comments, autofs, mount points that are not absolute paths (NixOS writes
// absolute ones), and the API file systems systemd mounts itself. noauto mounts still
// get their unit. It cannot resolve symlinks in a mount point, which the generator
// does on the node.
func fstabUnits(fstab string) []string {
	var units []string
	for _, line := range strings.Split(fstab, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		spec, where := unescapeFstab(f[0]), unescapeFstab(f[1])
		var fstype, opts string
		if len(f) > 2 {
			fstype = f[2]
		}
		if len(f) > 3 {
			opts = unescapeFstab(f[3])
		}
		if fstype == "swap" {
			if name, ok := unitNameFromPath(udevNode(spec), ".swap"); ok {
				units = append(units, name)
			}
			continue
		}
		if fstype == "autofs" || !strings.HasPrefix(where, "/") || apiMountPoint(simplifyPath(where)) {
			continue
		}
		name, ok := unitNameFromPath(where, ".mount")
		if !ok {
			continue
		}
		units = append(units, name)
		if where != "/" && hasOption(opts, "x-systemd.automount", "comment=systemd.automount") {
			units = append(units, strings.TrimSuffix(name, ".mount")+".automount")
		}
	}
	return units
}

// unescapeFstab undoes the octal escapes getmntent(3) decodes: space, tab, newline
// and backslash.
func unescapeFstab(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`, `\\`, `\`).Replace(s)
}

func hasOption(opts string, names ...string) bool {
	for _, o := range strings.Split(opts, ",") {
		for _, n := range names {
			if o == n {
				return true
			}
		}
	}
	return false
}

// apiMountPoint: the file systems systemd mounts itself (mount-setup.c's mount_table
// and mount_point_ignore); the fstab generator makes no unit for them.
func apiMountPoint(p string) bool {
	switch p {
	case "/sys", "/proc", "/dev", "/run", "/dev/shm", "/dev/pts", "/sys/kernel/security", "/sys/fs/smackfs",
		"/sys/fs/cgroup", "/sys/fs/pstore", "/sys/firmware/efi/efivars", "/sys/fs/bpf",
		"/sys/fs/selinux", "/dev/console", "/proc/kmsg", "/proc/sys", "/proc/sys/kernel/random/boot_id":
		return true
	}
	return strings.HasPrefix(p, "/sys/fs/cgroup/")
}

// udevNode is fstab_node_to_udev_node: LABEL=, UUID=, PARTUUID= and PARTLABEL= name
// the /dev/disk/by-* link udev makes for them; anything else is used as it is.
func udevNode(spec string) string {
	for _, tag := range []string{"LABEL", "UUID", "PARTUUID", "PARTLABEL"} {
		if v, ok := strings.CutPrefix(spec, tag+"="); ok {
			v = strings.Trim(v, `"'`)
			return "/dev/disk/by-" + strings.ToLower(tag) + "/" + encodeDevnode(v)
		}
	}
	return spec
}

// encodeDevnode is udev's encode_devnode_name: bytes outside its safe set become \xNN
// (valid UTF-8 stays as it is).
func encodeDevnode(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 0x80 && r != 0xFFFD, r >= '0' && r <= '9', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', strings.ContainsRune("#+-.:=@_", r):
			b.WriteRune(r)
		default:
			for _, c := range []byte(string(r)) {
				fmt.Fprintf(&b, `\x%02x`, c)
			}
		}
	}
	return b.String()
}

// simplifyPath is systemd's path_simplify: no repeated, trailing or "." components.
func simplifyPath(p string) string {
	var parts []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			parts = append(parts, c)
		}
	}
	return "/" + strings.Join(parts, "/")
}

// unitNameMax is systemd's UNIT_NAME_MAX. systemd 252 shortens a longer name with a
// hash of it (unit_name_hash_long, seen on a test-bed node); such a name is not derived
// here, so a mount point that long is not owned.
const unitNameMax = 256

// unitNameFromPath is systemd's unit_name_from_path (`systemd-escape --path
// --suffix=...`): "/" is "-"; otherwise the simplified path without its leading slash,
// "/" becoming "-", a leading "." and every byte but ASCII letters, digits, ":", "_"
// and "." escaped as \xNN. A path with a ".." component or a component longer than
// NAME_MAX (255) has no unit name, nor has a name of unitNameMax bytes or more.
func unitNameFromPath(p, suffix string) (string, bool) {
	p = simplifyPath(p)
	if p == "/" {
		return "-" + suffix, true
	}
	for _, c := range strings.Split(p[1:], "/") {
		if c == ".." || len(c) > 255 {
			return "", false
		}
	}
	var b strings.Builder
	for i, c := range []byte(p[1:]) {
		switch {
		case c == '/':
			b.WriteByte('-')
		case c == '.' && i == 0, !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == ':' || c == '_' || c == '.'):
			fmt.Fprintf(&b, `\x%02x`, c)
		default:
			b.WriteByte(c)
		}
	}
	name := b.String() + suffix
	if len(name) >= unitNameMax {
		return "", false
	}
	return name, true
}
