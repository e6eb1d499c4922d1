package nixserve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
)

// Golden bytes of the wire encoding, written out from the protocol's definition
// (every integer a little-endian uint64, a string its length then its bytes padded
// with zeros to a multiple of 8).

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func encode(f func(e *encoder)) []byte {
	var buf bytes.Buffer
	e := &encoder{w: bufio.NewWriter(&buf)}
	f(e)
	if err := e.flush(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

func TestEncoding(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func(e *encoder)
		want string
	}{
		{"uint64", func(e *encoder) { e.uint64(serveMagic1) }, "eb9d0c39 00000000"},
		{"big uint64", func(e *encoder) { e.uint64(0x0102030405060708) }, "08070605 04030201"},
		{"empty string", func(e *encoder) { e.string("") }, "00000000 00000000"},
		{"short string", func(e *encoder) { e.string("(") }, "01000000 00000000 28000000 00000000"},
		{"7 bytes", func(e *encoder) { e.string("regular") }, "07000000 00000000 72656775 6c617200"},
		{"8 bytes, no padding", func(e *encoder) { e.string("contents") }, "08000000 00000000 636f6e74 656e7473"},
		{"9 bytes", func(e *encoder) { e.string("directory") }, "09000000 00000000 64697265 63746f72 79000000 00000000"},
		{"list", func(e *encoder) { e.strings([]string{"a", ""}) },
			"02000000 00000000  01000000 00000000 61000000 00000000  00000000 00000000"},
		{"empty list", func(e *encoder) { e.strings(nil) }, "00000000 00000000"},
	} {
		if got, want := encode(c.f), unhex(t, c.want); !bytes.Equal(got, want) {
			t.Errorf("%s: % x\nwant % x", c.name, got, want)
		}
	}
}

func TestDecoding(t *testing.T) {
	s, err := readString(bytes.NewReader(unhex(t, "09000000 00000000 64697265 63746f72 79000000 00000000")), 16)
	if err != nil || s != "directory" {
		t.Errorf("readString = %q, %v", s, err)
	}
	list, err := readStrings(bytes.NewReader(unhex(t, "02000000 00000000 01000000 00000000 61000000 00000000 00000000 00000000")), 2, 16)
	if err != nil || len(list) != 2 || list[0] != "a" || list[1] != "" {
		t.Errorf("readStrings = %q, %v", list, err)
	}
	for name, c := range map[string]struct {
		in    string
		check func(error) bool
	}{
		"too long":        {"11000000 00000000", func(err error) bool { return errors.Is(err, errTooLong) }},
		"dirty padding":   {"01000000 00000000 61000001 00000000", func(err error) bool { return err != nil && strings.Contains(err.Error(), "padding") }},
		"cut in data":     {"09000000 00000000 64697265", func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
		"cut in padding":  {"01000000 00000000 610000", func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
		"cut in length":   {"0100", func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
		"nothing (clean)": {"", func(err error) bool { return err == io.EOF }},
	} {
		_, err := readString(bytes.NewReader(unhex(t, c.in)), 16)
		if !c.check(err) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if _, err := readStrings(bytes.NewReader(unhex(t, "03000000 00000000")), 2, 16); err == nil {
		t.Error("readStrings accepted a list longer than its bound")
	}
}

// A store path of the shape Nix prints: 45 bytes, so 3 bytes of padding.
const pathA = "/nix/store/00000000000000000000000000000000-a"

func wireString(s string) string {
	n := len(s)
	pad := (8 - n%8) % 8
	var b [8]byte
	for i := 0; i < 8; i++ {
		b[i] = byte(uint64(n) >> (8 * i))
	}
	return hex.EncodeToString(b[:]) + hex.EncodeToString([]byte(s)) + strings.Repeat("00", pad)
}

// The NAR of a regular file holding "hi", its export record with no references
// and no deriver.
var (
	narHi = wireString("nix-archive-1") + wireString("(") + wireString("type") + wireString("regular") +
		wireString("contents") + wireString("hi") + wireString(")")
	recordHi = narHi + "4e495845 00000000" + wireString(pathA) + "00000000 00000000" + wireString("") + "00000000 00000000"
)

// scripted is a Store whose closure and export are fixed.
type scripted struct {
	closure []string
	export  []byte
}

func (s scripted) Closure(context.Context, []string) ([]string, error) { return s.closure, nil }
func (s scripted) Export(_ context.Context, _ []string, w io.Writer) error {
	_, err := w.Write(s.export)
	return err
}

// TestCopyBytes runs Copy against fixed answers of a node and compares every byte
// it writes.
func TestCopyBytes(t *testing.T) {
	greeting := "eb9d0c39 00000000 06020000 00000000"
	answer := "cbee5254 00000000 07020000 00000000"
	query := "01000000 00000000 01000000 00000000 00000000 00000000 01000000 00000000" + wireString(pathA)
	store := scripted{closure: []string{pathA}, export: unhex(t, "01000000 00000000"+recordHi+"00000000 00000000")}

	// The node holds the path: greeting and query, nothing else.
	var out bytes.Buffer
	in := unhex(t, answer+"01000000 00000000"+wireString(pathA))
	st, err := Copy(context.Background(), bytes.NewReader(in), &out, []string{pathA}, store)
	if err != nil {
		t.Fatal(err)
	}
	if want := unhex(t, greeting+query); !bytes.Equal(out.Bytes(), want) {
		t.Errorf("wrote\n% x\nwant\n% x", out.Bytes(), want)
	}
	if want := (Stats{Paths: 1, Missing: 0, Sent: 0, Bytes: int64(out.Len())}); st != want {
		t.Errorf("stats %+v, want %+v", st, want)
	}

	// The node lacks it: then one import of the one record, and the node's 1.
	out.Reset()
	in = unhex(t, answer+"00000000 00000000"+"01000000 00000000")
	st, err = Copy(context.Background(), bytes.NewReader(in), &out, []string{pathA}, store)
	if err != nil {
		t.Fatal(err)
	}
	want := unhex(t, greeting+query+"04000000 00000000"+"01000000 00000000"+recordHi+"00000000 00000000")
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("wrote\n% x\nwant\n% x", out.Bytes(), want)
	}
	if want := (Stats{Paths: 1, Missing: 1, Sent: 1, Bytes: int64(len(want))}); st != want {
		t.Errorf("stats %+v, want %+v", st, want)
	}

	// A legacy signature in the local export is not passed on.
	signed := strings.TrimSuffix(recordHi, "00000000 00000000") + "01000000 00000000" + wireString("sig")
	store.export = unhex(t, "01000000 00000000"+signed+"00000000 00000000")
	out.Reset()
	if _, err := Copy(context.Background(), bytes.NewReader(in), &out, []string{pathA}, store); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("with a signature: wrote\n% x\nwant\n% x", out.Bytes(), want)
	}
}

func TestCheckStorePath(t *testing.T) {
	for _, p := range []string{
		pathA,
		"/nix/store/vzrvckbcs800s7h677s58fhgr9n0xrpi-sy-copy-leaf-90-probe1",
		"/nix/store/psxpc6wa16vvq0ngcwi0h14lgvnfjlfk-x.drv",
		"/var/other-store/00000000000000000000000000000000-a+b=c?d_e",
	} {
		if err := checkStorePath(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	for _, p := range []string{
		"", "nix/store/00000000000000000000000000000000-a", "/00000000000000000000000000000000-a",
		"/nix/store/", "/nix/store/00000000000000000000000000000000", "/nix/store/00000000000000000000000000000000-",
		"/nix/store/0000000000000000000000000000000e-a", "/nix/store/0000000000000000000000000000000-ab",
		"/nix/store/00000000000000000000000000000000-a/bin", "/nix/store/00000000000000000000000000000000-.a",
		"/nix/store/00000000000000000000000000000000-a b", "/nix/store/00000000000000000000000000000000-a\n",
		"/nix//store/00000000000000000000000000000000-a", "/nix store/00000000000000000000000000000000-a",
		"-/nix/store/00000000000000000000000000000000-a",
		"/nix/store/00000000000000000000000000000000-" + strings.Repeat("a", 212),
	} {
		if err := checkStorePath(p); err == nil {
			t.Errorf("%q accepted", p)
		}
	}
}
