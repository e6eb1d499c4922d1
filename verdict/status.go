package verdict

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// NodeStatus is the status verb's answer for one node, its three truths: what is
// expected of it (the plan), what it has (what it runs, its profile, its boot entry, its
// last receipt) and whether it is ready (a verdict), with each disagreement named.
type NodeStatus struct {
	Kind          string         `json:"kind"` // "status"
	Node          string         `json:"node"`
	Expected      StatusExpected `json:"expected"`
	Present       StatusPresent  `json:"present"`
	Ready         StatusReady    `json:"ready"`
	Disagreements []string       `json:"disagreements"`
	OK            bool           `json:"ok"`
}

// StatusExpected is what the plan expects: the toplevel evaluated for the node ("":
// the evaluation failed) and its nixos_conf.
type StatusExpected struct {
	Toplevel  string `json:"toplevel"`
	NixosConf string `json:"nixos_conf"`
}

// StatusPresent is what the node has, as read from it.
type StatusPresent struct {
	Reachable bool   `json:"reachable"`
	Running   string `json:"running"`    // /run/current-system
	Profile   string `json:"profile"`    // the system profile
	BootEntry string `json:"boot_entry"` // the toplevel of the default boot entry ("": none read)
	// Receipt is the node's last receipt file (under receipt.NodeDir), and
	// ReceiptToplevel the toplevel it names ("": none, or not readable).
	Receipt         string `json:"receipt"`
	ReceiptToplevel string `json:"receipt_toplevel"`
}

// StatusReady is whether the node is ready: a fresh verdict-only pass ("fresh"), or
// the verdict of its last receipt with its age ("cached"); "none" when neither is.
type StatusReady struct {
	Source     string   `json:"source"`
	OK         bool     `json:"ok"`
	ExitCode   int      `json:"exit_code"`
	Reasons    []string `json:"reasons"`
	AgeSeconds int64    `json:"age_s,omitempty"`
}

// Disagree names every way the three truths of s disagree; none: the node is as
// planned, as recorded and ready.
func Disagree(s NodeStatus) []string {
	p := s.Present
	if !p.Reachable {
		return []string{"unreachable"}
	}
	var out []string
	switch {
	case s.Expected.Toplevel == "":
		out = append(out, "no expected toplevel: the evaluation failed")
	case p.Running != s.Expected.Toplevel:
		out = append(out, fmt.Sprintf("drift: runs %s, the plan expects %s", orNone(p.Running), s.Expected.Toplevel))
	}
	if p.Profile != p.Running {
		out = append(out, fmt.Sprintf("the system profile is %s, not the running generation", orNone(p.Profile)))
	}
	if p.BootEntry != p.Running {
		out = append(out, fmt.Sprintf("the boot entry boots %s, not the running generation", orNone(p.BootEntry)))
	}
	switch {
	case p.ReceiptToplevel == "":
		out = append(out, "no receipt: switchyard never applied this node (or its receipts are gone)")
	case p.ReceiptToplevel != p.Running:
		out = append(out, fmt.Sprintf("runs a generation no receipt names (the last, %s, names %s)", p.Receipt, p.ReceiptToplevel))
	}
	switch {
	case s.Ready.Source == "none":
		out = append(out, "no verdict")
	case !s.Ready.OK:
		out = append(out, fmt.Sprintf("%s verdict failed (exit %d): %s", s.Ready.Source, s.Ready.ExitCode, strings.Join(s.Ready.Reasons, "; ")))
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// WriteStatusTable writes the status verb's text: one row per node with short store
// hashes, then each node's disagreements.
func WriteStatusTable(w io.Writer, rows []NodeStatus) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tEXPECTED\tRUNNING\tPROFILE\tBOOT\tRECEIPT\tREADY\tSTATUS")
	for _, s := range rows {
		state := "ok"
		if !s.OK {
			state = plural(len(s.Disagreements), "disagreement")
		}
		ready := s.Ready.Source
		if s.Ready.Source != "none" {
			ready = map[bool]string{true: "ok", false: "FAILED"}[s.Ready.OK] + " (" + s.Ready.Source + ")"
		}
		p := s.Present
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Node, short(s.Expected.Toplevel), short(p.Running),
			short(p.Profile), short(p.BootEntry), short(p.ReceiptToplevel), ready, state)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range rows {
		for _, d := range s.Disagreements {
			if _, err := fmt.Fprintf(w, "%s: %s\n", s.Node, d); err != nil {
				return err
			}
		}
	}
	return nil
}

// short is a store path's hash, first 8 characters: "-" for none.
func short(storePath string) string {
	base := strings.TrimPrefix(storePath, "/nix/store/")
	if storePath == "" || base == storePath || len(base) < 8 {
		return "-"
	}
	return base[:8]
}
