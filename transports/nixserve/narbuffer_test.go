package nixserve

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// A NAR goes into the buffer whole, whichever way it is written (Write, or ReadFrom
// as io.CopyN calls it, in pieces of any size), in memory up to the limit and in
// the temporary file beyond it, and comes out the same; the buffer is reused for
// the next NAR of the copy, larger or smaller.
func TestNARBufferHoldsEveryNAR(t *testing.T) {
	const limit = 1024
	b := &narBuffer{limit: limit}
	defer b.close()
	pieces := map[string]func(w *narBuffer, data []byte) error{
		"Write": func(w *narBuffer, data []byte) error {
			for len(data) > 0 {
				k := min(len(data), 300)
				if _, err := w.Write(data[:k]); err != nil {
					return err
				}
				data = data[k:]
			}
			return nil
		},
		"CopyN": func(w *narBuffer, data []byte) error {
			_, err := io.CopyN(w, iotest.HalfReader(bytes.NewReader(data)), int64(len(data)))
			return err
		},
		"CopyN one byte at a time": func(w *narBuffer, data []byte) error {
			_, err := io.CopyN(w, iotest.OneByteReader(bytes.NewReader(data)), int64(len(data)))
			return err
		},
	}
	for name, write := range pieces {
		for _, size := range []int{0, 7, limit - 1, limit, limit + 1, 3*limit + 5, 10, limit} {
			data := make([]byte, size)
			for i := range data {
				data[i] = byte(i*7 + size)
			}
			b.reset()
			if err := write(b, data); err != nil {
				t.Fatalf("%s of %d bytes: %v", name, size, err)
			}
			var out bytes.Buffer
			if err := b.writeTo(&out); err != nil {
				t.Fatalf("%s of %d bytes: writeTo: %v", name, size, err)
			}
			if b.n != int64(size) || !bytes.Equal(out.Bytes(), data) {
				t.Errorf("%s of %d bytes: held %d bytes, %d written out, equal %v", name, size, b.n, out.Len(), bytes.Equal(out.Bytes(), data))
			}
			if spilled := size > limit; b.spilled != spilled || len(b.mem) > limit || cap(b.mem) > limit {
				t.Errorf("%s of %d bytes: spilled %v (want %v), %d in memory of capacity %d (limit %d)", name, size, b.spilled, spilled, len(b.mem), cap(b.mem), limit)
			}
		}
	}
}

// A file's contents copied into the buffer (io.CopyN, as narForwarder.contents does)
// allocate no copy buffer: io.Copy's 32 KiB buffer for every file of every NAR was
// most of a fleet copy's garbage.
func TestNARBufferCopyAllocatesNoBuffer(t *testing.T) {
	b := &narBuffer{limit: 1 << 20}
	defer b.close()
	data := bytes.Repeat([]byte("x"), 4096)
	r := bytes.NewReader(data)
	b.grow()
	allocs := testing.AllocsPerRun(100, func() {
		b.reset()
		r.Reset(data)
		if _, err := io.CopyN(b, r, int64(len(data))); err != nil {
			t.Fatal(err)
		}
	})
	// io.CopyN's LimitedReader is the one allocation left.
	if allocs > 1 {
		t.Errorf("io.CopyN into the NAR buffer: %v allocations a file, want at most 1", allocs)
	}
}

// A NAR already n bytes long is of the one path not yet sent whose recorded NAR is
// that long or longer, if its store gave the trailer and its references are on the
// node; otherwise it is held until its trailer names it.
func TestLongNAR(t *testing.T) {
	const a, b, c, leaf = "/nix/store/a", "/nix/store/b", "/nix/store/c", "/nix/store/leaf"
	infos := map[string]NARInfo{
		a:    {Size: 1 << 30, HasTrailer: true, References: []string{leaf}},
		b:    {Size: 4 << 20, HasTrailer: true, References: []string{a}},
		c:    {Size: 4 << 20, HasTrailer: true},
		leaf: {Size: 100, HasTrailer: true},
	}
	noTrailer := map[string]NARInfo{a: {Size: 1 << 30}}
	for _, tc := range []struct {
		name        string
		n           int64
		missing     []string
		done, valid map[string]bool
		infos       map[string]NARInfo
		want        string
	}{
		{"the only one that long", 5 << 20, []string{leaf, a, b, c}, map[string]bool{leaf: true}, nil, infos, a},
		{"its reference not there yet", 5 << 20, []string{leaf, a}, nil, nil, infos, ""},
		{"its reference on the node", 5 << 20, []string{a}, nil, map[string]bool{leaf: true}, infos, a},
		{"two as long", 1 << 20, []string{leaf, a, b, c}, map[string]bool{leaf: true}, nil, infos, ""},
		{"the other sent already", 1 << 20, []string{b, c}, map[string]bool{b: true, a: true}, nil, infos, c},
		{"none that long", 2 << 30, []string{a}, nil, map[string]bool{leaf: true}, infos, ""},
		{"no trailer from the store", 5 << 20, []string{a}, nil, nil, noTrailer, ""},
		{"no infos", 5 << 20, []string{a}, nil, nil, map[string]NARInfo{}, ""},
	} {
		if got := longNAR(tc.n, tc.missing, tc.done, tc.valid, tc.infos); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A NAR held until it fills the memory goes out once pick names its path, the rest
// as it is read; it never goes past the size its command announced, through Write
// or ReadFrom.
func TestNAROutStreamsWithinItsSize(t *testing.T) {
	const limit, size = 16, 40
	for _, more := range []int{0, 1} {
		for name, write := range map[string]func(o *narOut, data []byte) error{
			"Write":    func(o *narOut, data []byte) error { _, err := o.Write(data); return err },
			"ReadFrom": func(o *narOut, data []byte) error { _, err := o.ReadFrom(bytes.NewReader(data)); return err },
		} {
			var node bytes.Buffer
			direct := bufio.NewWriter(&node)
			buf := &narBuffer{limit: limit}
			o := &narOut{buf: buf, direct: direct,
				pick:   func(n int64) string { return "/nix/store/p" },
				sizeOf: func(string) int64 { return size },
				begin: func(string) error {
					direct.WriteString("header:")
					return buf.writeTo(direct)
				}}
			data := bytes.Repeat([]byte("x"), size+more)
			err := write(o, data)
			buf.close()
			if more == 0 {
				_ = direct.Flush()
				if err != nil || o.path != "/nix/store/p" || node.String() != "header:"+string(data) {
					t.Errorf("%s: %v, path %q, node got %q", name, err, o.path, node.String())
				}
				continue
			}
			if err == nil || !strings.Contains(err.Error(), "longer than the 40 bytes") {
				t.Errorf("%s, one byte too many: %v", name, err)
			}
			if direct.Buffered()+node.Len() > len("header:")+size {
				t.Errorf("%s: %d bytes went out past the announced size", name, direct.Buffered()+node.Len()-len("header:")-size)
			}
		}
	}
}
