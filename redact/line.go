package redact

import (
	"bytes"
	"encoding/pem"
)

// PEMLine is the line (from 1) an error about a PEM key file names, never its
// content: the first non-blank line outside the PEM blocks that decode, else the
// BEGIN line of the first block (the one that did not parse), else 1.
func PEMLine(data []byte) int {
	line := 1 // of rest[0]
	first := 0
	for rest := data; len(rest) > 0; {
		block, next := pem.Decode(rest)
		if block == nil {
			if l := nonBlank(rest); l > 0 {
				return line + l - 1
			}
			break
		}
		consumed := rest[:len(rest)-len(next)]
		begin := bytes.LastIndex(consumed, []byte("-----BEGIN "+block.Type+"-----"))
		if begin < 0 {
			begin = 0
		}
		if l := nonBlank(consumed[:begin]); l > 0 {
			return line + l - 1
		}
		if first == 0 {
			first = line + bytes.Count(consumed[:begin], []byte("\n"))
		}
		line += bytes.Count(consumed, []byte("\n"))
		rest = next
	}
	if first == 0 {
		first = 1
	}
	return first
}

// nonBlank is the line (from 1) of b's first non-blank line, 0 when none.
func nonBlank(b []byte) int {
	for i, l := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			return i + 1
		}
	}
	return 0
}
