package nixserve

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// The export format of one store path (what `nix-store --export` writes after
// the marker 1): the path's NAR, then exportMagic, the path, its references, its
// deriver ("" when unknown), and 0 (or 1 and a legacy signature).
//
// A NAR is the string "nix-archive-1" and one node:
//
//	node      = "(" "type" ( regular | symlink | directory ) ")"
//	regular   = "regular" [ "executable" "" ] "contents" <contents>
//	symlink   = "symlink" "target" <target>
//	directory = "directory" { "entry" "(" "name" <name> "node" node ")" }
//
// every item a string of the wire encoding.

const (
	narMagic = "nix-archive-1"
	// maxNARDepth bounds the nesting of directories in a NAR.
	maxNARDepth = 2048
)

// trailer is what follows a path's NAR in its export record.
type trailer struct {
	Path       string
	References []string
	Deriver    string
}

// narForwarder copies one NAR from src to dst as it parses it, to find where it
// ends. Small items pass through a bounded buffer; file contents are streamed.
type narForwarder struct {
	src *bufio.Reader
	dst io.Writer
	tee io.Reader // src, copying what is read to dst
}

// forwardNAR copies one NAR from src to dst.
func forwardNAR(src *bufio.Reader, dst io.Writer) error {
	f := &narForwarder{src: src, dst: dst, tee: io.TeeReader(src, dst)}
	if err := f.expect(narMagic); err != nil {
		return err
	}
	return f.node(0)
}

func (f *narForwarder) token() (string, error) {
	s, err := readString(f.tee, maxToken)
	if err != nil {
		return "", noEOF(err)
	}
	return s, nil
}

func (f *narForwarder) expect(want string) error {
	got, err := f.token()
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("NAR: %q where %q belongs", clip(got), want)
	}
	return nil
}

func (f *narForwarder) node(depth int) error {
	if depth > maxNARDepth {
		return errors.New("NAR: directories nested too deep")
	}
	if err := f.expect("("); err != nil {
		return err
	}
	if err := f.expect("type"); err != nil {
		return err
	}
	typ, err := f.token()
	if err != nil {
		return err
	}
	switch typ {
	case "regular":
		tok, err := f.token()
		if err != nil {
			return err
		}
		if tok == "executable" {
			if err := f.expect(""); err != nil {
				return err
			}
			if tok, err = f.token(); err != nil {
				return err
			}
		}
		if tok != "contents" {
			return fmt.Errorf("NAR: %q where %q belongs", clip(tok), "contents")
		}
		if err := f.contents(); err != nil {
			return err
		}
	case "symlink":
		if err := f.expect("target"); err != nil {
			return err
		}
		if _, err := f.token(); err != nil {
			return err
		}
	case "directory":
		for {
			tok, err := f.token()
			if err != nil {
				return err
			}
			if tok == ")" {
				return nil
			}
			if tok != "entry" {
				return fmt.Errorf("NAR: %q where a directory entry belongs", clip(tok))
			}
			for _, want := range []string{"(", "name"} {
				if err := f.expect(want); err != nil {
					return err
				}
			}
			if _, err := f.token(); err != nil {
				return err
			}
			if err := f.expect("node"); err != nil {
				return err
			}
			if err := f.node(depth + 1); err != nil {
				return err
			}
			if err := f.expect(")"); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("NAR: unknown node type %q", clip(typ))
	}
	return f.expect(")")
}

// contents streams a file's contents (length, bytes, padding) from src to dst.
func (f *narForwarder) contents() error {
	n, err := readUint64(f.tee)
	if err != nil {
		return noEOF(err)
	}
	if n > 1<<62 {
		return fmt.Errorf("NAR: file of %d bytes", n)
	}
	// dst is buffered: this reads into dst's buffer, no copy of the file is held.
	if _, err := io.CopyN(f.dst, f.src, int64(n)); err != nil {
		return noEOF(err)
	}
	var padding [8]byte
	p := padding[:pad(n)]
	if _, err := io.ReadFull(f.tee, p); err != nil {
		return noEOF(err)
	}
	if !zeros(p) {
		return errors.New("NAR: file padding is not zero")
	}
	return nil
}

// readTrailer reads the part of an export record after the NAR. maxRefs bounds
// the references.
func readTrailer(src io.Reader, maxRefs int) (trailer, error) {
	var t trailer
	magic, err := readUint64(src)
	if err != nil {
		return t, noEOF(err)
	}
	if magic != exportMagic {
		return t, fmt.Errorf("export: %#x where the export magic belongs", magic)
	}
	if t.Path, err = readString(src, maxToken); err != nil {
		return t, noEOF(err)
	}
	if t.References, err = readStrings(src, maxRefs, maxToken); err != nil {
		return t, fmt.Errorf("references of %s: %w", t.Path, noEOF(err))
	}
	if t.Deriver, err = readString(src, maxToken); err != nil {
		return t, noEOF(err)
	}
	sig, err := readUint64(src)
	if err != nil {
		return t, noEOF(err)
	}
	switch sig {
	case 0:
	case 1: // a legacy signature: dropped
		if _, err := readString(src, 16*maxToken); err != nil {
			return t, noEOF(err)
		}
	default:
		return t, fmt.Errorf("export of %s: %d where 0 or 1 belongs", t.Path, sig)
	}
	return t, nil
}

// writeTrailer writes the part of an export record after the NAR, without a
// signature.
func writeTrailer(e *encoder, t trailer) {
	e.uint64(exportMagic)
	e.string(t.Path)
	e.strings(t.References)
	e.string(t.Deriver)
	e.uint64(0)
}

// clip shortens a string for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
