package cli

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/switchyard-nix/switchyard/plan/method"
)

// WriteReference writes docs/commands.md: every usage text the commands print for
// --help, in one page, so the reference of commands, flags and DEPLOY_* variables
// is the help itself and cannot drift from it (a golden test holds the page).
func WriteReference(w io.Writer) {
	fmt.Fprint(w, `# Commands, flags and variables

<!-- generated from the commands' own --help by `+"`go test ./cmd/switchyard/cli -run TestReference -update`"+`: do not edit. -->

Every command, method and verb prints its usage with `+"`--help`"+` (or `+"`switchyard help <command> [verb]`"+`);
this page is those texts. What the outputs and exit codes mean: [outputs.md](outputs.md).

`)
	section(w, "switchyard", "", writeMainUsage)
	section(w, "switchyard deploy", "", writeDeployUsage)
	for _, m := range method.All() {
		section(w, "switchyard "+m.Name, "", func(w io.Writer) { writeMethodUsage(w, m) })
		for _, v := range m.Verbs {
			section(w, "switchyard "+m.Name+" "+v, "#", func(w io.Writer) { writeVerbUsage(w, m, v) })
		}
	}
	fmt.Fprint(w, "## The DEPLOY_* variables\n\nRead by `deploy` and by every verb that deploys or judges nodes.\n\n```text")
	writeDeployVars(w)
	fmt.Fprint(w, "```\n")
}

// section is one usage text under a heading (deeper by extra); the DEPLOY_* list,
// the same in every text that has it, is printed once at the end instead.
func section(w io.Writer, title, extra string, usage func(io.Writer)) {
	var b bytes.Buffer
	usage(&b)
	text := b.String()
	if head, _, ok := strings.Cut(text, deployVarsHeading); ok {
		text = head + "\n(the DEPLOY_* variables: at the end of this page)"
	}
	fmt.Fprintf(w, "##%s `%s`\n\n```text\n%s\n```\n\n", extra, title, strings.TrimRight(text, "\n"))
}
