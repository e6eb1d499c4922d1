package nixserve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"reflect"
	"slices"
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
	infos   map[string]NARInfo
}

func (s scripted) Closure(context.Context, []string) ([]string, error) { return s.closure, nil }
func (s scripted) NARInfos(context.Context, []string) (map[string]NARInfo, error) {
	return s.infos, nil
}
func (s scripted) Export(_ context.Context, _ []string, w io.Writer) error {
	_, err := w.Write(s.export)
	return err
}

// TestCopyBytes runs Copy against fixed answers of a node of protocol 2.4 (Nix
// before 2.4, without cmdAddToStoreNar) and compares every byte it writes.
func TestCopyBytes(t *testing.T) {
	greeting := "eb9d0c39 00000000 06020000 00000000"
	answer := "cbee5254 00000000 04020000 00000000"
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

// goldenAdds reads testdata/nix-copy-closure-2.8.in, what Nix 2.8's own
// nix-copy-closure wrote to `nix-store --serve --write` (recorded through an ssh
// stand-in) to copy testdata/golden.nix's two paths to an empty store: its
// greeting, cmdQueryValidPaths, then a cmdAddToStoreNar per path. It gives the
// cmdAddToStoreNar commands with their registration times zeroed: Nix sends the
// time the path became valid here, this client 0 (the node's clock).
func goldenAdds(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/nix-copy-closure-2.8.in")
	if err != nil {
		t.Fatal(err)
	}
	r := bytes.NewReader(b)
	must := func(err error) {
		if err != nil {
			t.Fatalf("golden: %v", err)
		}
	}
	for range 3 { // greeting, version, cmdQueryValidPaths
		_, err := readUint64(r)
		must(err)
	}
	for range 2 { // lock, substitute
		_, err := readUint64(r)
		must(err)
	}
	_, err = readStrings(r, 2, maxToken)
	must(err)
	start := len(b) - r.Len()
	adds := slices.Clone(b[start:])
	for r.Len() > 0 {
		cmd, err := readUint64(r)
		must(err)
		if cmd != cmdAddToStoreNar {
			t.Fatalf("golden: command %d", cmd)
		}
		for range 3 { // path, deriver, hash
			_, err := readString(r, maxToken)
			must(err)
		}
		_, err = readStrings(r, 2, maxToken)
		must(err)
		clear(adds[len(b)-r.Len()-start:][:8]) // registration time
		_, err = readUint64(r)
		must(err)
		size, err := readUint64(r)
		must(err)
		_, err = readUint64(r) // ultimate
		must(err)
		_, err = readStrings(r, 0, maxToken)
		must(err)
		_, err = readString(r, maxToken)
		must(err)
		_, err = r.Seek(int64(size), io.SeekCurrent)
		must(err)
	}
	return adds
}

// TestCopyBytesAddToStoreNar: against a node of protocol 2.7 (Nix 2.8), Copy
// writes each missing path as Nix 2.8's nix-copy-closure does, byte for byte
// (registration time aside), from the local export of testdata/golden.nix's
// paths and their `nix-store --dump-db` records (both recorded here).
func TestCopyBytesAddToStoreNar(t *testing.T) {
	leaf := "/nix/store/ah8xhqlliqggpk56g9q28wkpk9xk07gc-sy-golden-leaf"
	top := "/nix/store/4dwv2cyhvcl2g09mbcvxk9q0jn78va2v-sy-golden-top"
	export, err := os.ReadFile("testdata/golden.export")
	if err != nil {
		t.Fatal(err)
	}
	db, err := os.ReadFile("testdata/golden.dump-db")
	if err != nil {
		t.Fatal(err)
	}
	infos := map[string]NARInfo{}
	if err := readDumpDB(string(db), infos); err != nil {
		t.Fatal(err)
	}
	store := scripted{closure: []string{leaf, top}, export: export, infos: infos}
	greeting := "eb9d0c39 00000000 06020000 00000000"
	query := "01000000 00000000 01000000 00000000 00000000 00000000 02000000 00000000" + wireString(leaf) + wireString(top)
	// The node: protocol 2.7, holds neither, adds both.
	in := unhex(t, "cbee5254 00000000 07020000 00000000"+"00000000 00000000"+"01000000 00000000 01000000 00000000")
	var out bytes.Buffer
	st, err := Copy(context.Background(), bytes.NewReader(in), &out, []string{top}, store)
	if err != nil {
		t.Fatal(err)
	}
	want := append(unhex(t, greeting+query), goldenAdds(t)...)
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("wrote\n% x\nwant\n% x", out.Bytes(), want)
	}
	if want := (Stats{Paths: 2, Missing: 2, Sent: 2, Bytes: int64(len(want))}); st != want {
		t.Errorf("stats %+v, want %+v", st, want)
	}

	// The node answers the first path and ends: the copy names the second.
	in = unhex(t, "cbee5254 00000000 07020000 00000000"+"00000000 00000000"+"01000000 00000000")
	_, err = Copy(context.Background(), bytes.NewReader(in), io.Discard, []string{top}, store)
	var ae *AddError
	if !errors.As(err, &ae) || ae.Path != top || ae.Added != 1 || ae.Missing != 2 || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("node ended after the first path: %v", err)
	}

	// A store whose record of a NAR's size differs from its export: nothing of
	// that path goes out.
	infos[leaf] = NARInfo{Hash: infos[leaf].Hash, Size: infos[leaf].Size + 8}
	in = unhex(t, "cbee5254 00000000 07020000 00000000"+"00000000 00000000")
	out.Reset()
	_, err = Copy(context.Background(), bytes.NewReader(in), &out, []string{top}, store)
	if err == nil || !strings.Contains(err.Error(), "the NAR of "+leaf+" has 120 bytes, the store records 128") {
		t.Errorf("size differs: %v", err)
	}
	if !bytes.Equal(out.Bytes(), unhex(t, greeting+query)) {
		t.Errorf("size differs: wrote % x", out.Bytes())
	}
}

// TestCopyProtocolChoice: a node of protocol 2.5 or later gets cmdAddToStoreNar,
// an older one cmdImportPaths (as Nix's own ssh store chooses).
func TestCopyProtocolChoice(t *testing.T) {
	for version, want := range map[string]uint64{"04020000": cmdImportPaths, "05020000": cmdAddToStoreNar, "07020000": cmdAddToStoreNar, "ff020000": cmdAddToStoreNar} {
		store := scripted{closure: []string{pathA}, export: unhex(t, "01000000 00000000"+recordHi+"00000000 00000000"),
			infos: map[string]NARInfo{pathA: {Hash: strings.Repeat("0", 64), Size: uint64(len(unhex(t, narHi)))}}}
		in := unhex(t, "cbee5254 00000000 "+version+" 00000000"+"00000000 00000000"+"01000000 00000000")
		var out bytes.Buffer
		if _, err := Copy(context.Background(), bytes.NewReader(in), &out, []string{pathA}, store); err != nil {
			t.Fatalf("protocol %s: %v", version, err)
		}
		cmd := binary.LittleEndian.Uint64(out.Bytes()[len(unhex(t, "eb9d0c39 00000000 06020000 00000000 01000000 00000000 01000000 00000000 00000000 00000000 01000000 00000000"+wireString(pathA))):])
		if cmd != want {
			t.Errorf("protocol %s: command %d, want %d", version, cmd, want)
		}
	}
}

// TestReadDumpDB: the records of `nix-store --dump-db`, and what is refused.
func TestReadDumpDB(t *testing.T) {
	db, err := os.ReadFile("testdata/golden.dump-db")
	if err != nil {
		t.Fatal(err)
	}
	infos := map[string]NARInfo{}
	if err := readDumpDB(string(db), infos); err != nil {
		t.Fatal(err)
	}
	want := map[string]NARInfo{
		"/nix/store/ah8xhqlliqggpk56g9q28wkpk9xk07gc-sy-golden-leaf": {Hash: "10551daed7fa467d0b58826e7eb9a0f2af7d693de319f2ef775fffcda244b9f6", Size: 120,
			Deriver: "/nix/store/w0v5wd48blvqlxwlzva0sccx1psnf12g-sy-golden-leaf.drv", References: []string{}, HasTrailer: true},
		"/nix/store/4dwv2cyhvcl2g09mbcvxk9q0jn78va2v-sy-golden-top": {Hash: "308f9849a65996cb6e5260313a236241670c9559b744b0c3beae4f3af0634d2b", Size: 592,
			Deriver: "/nix/store/vvnwh7k48593c013jh6bsja13f2w387h-sy-golden-top.drv", References: []string{"/nix/store/ah8xhqlliqggpk56g9q28wkpk9xk07gc-sy-golden-leaf"}, HasTrailer: true},
	}
	if !reflect.DeepEqual(infos, want) {
		t.Errorf("got %v, want %v", infos, want)
	}
	lines := strings.Split(string(db), "\n")
	for name, bad := range map[string]string{
		"cut short":   strings.Join(lines[:3], "\n"),
		"bad hash":    strings.Replace(string(db), "10551dae", "10551dxe", 1),
		"base32 hash": strings.Replace(string(db), "10551daed7fa467d0b58826e7eb9a0f2af7d693de319f2ef775fffcda244b9f6", "sha256:071kygcjzm80c4hrkb0apkw4nvcfirvwnsbp585ps081jz3k13l3", 1),
		"bad size":    strings.Replace(string(db), "\n120\n", "\n12x\n", 1),
		"bad path":    strings.Replace(string(db), "/nix/store/ah8x", "nix/store/ah8x", 1),
		"refs beyond": strings.Replace(string(db), "drv\n1\n", "drv\n2\n", 1),
	} {
		if err := readDumpDB(bad, map[string]NARInfo{}); err == nil {
			t.Errorf("%s: accepted", name)
		}
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
