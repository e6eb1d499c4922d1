package nixserve

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The wire encoding of Nix's serve protocol and export format: every integer a
// uint64, little-endian; a string its length as an integer, then its bytes, padded
// with zero bytes to a multiple of 8; a list of strings its count, then each.

const (
	serveMagic1 = 0x390c9deb // client greeting
	serveMagic2 = 0x5452eecb // server greeting
	// clientVersion is the protocol version this client speaks (2.6). It only uses
	// commands that are the same in every 2.x version that has them; the server
	// answers every command the same whatever version the client gives.
	clientVersion = 0x206

	cmdQueryValidPaths = 1
	cmdImportPaths     = 4
	// cmdAddToStoreNar adds one path from its NAR, told its hash and size first
	// (opServe in nix-store.cc). A server of protocol 2.5 or later has it
	// (legacy-ssh-store.cc's addToStore makes the same choice); an older one
	// gets cmdImportPaths.
	cmdAddToStoreNar      = 9
	addToStoreNarMinorMin = 5

	// exportMagic follows a path's NAR in the export format.
	exportMagic = 0x4558494e

	// maxToken bounds a string of the protocol other than a file's contents: store
	// paths, NAR tokens, entry names, symlink targets.
	maxToken = 4096
)

// encoder writes the wire encoding to a buffered writer. The first error sticks;
// later writes are skipped.
type encoder struct {
	w   *bufio.Writer
	err error
}

func (e *encoder) uint64(n uint64) {
	if e.err != nil {
		return
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], n)
	_, e.err = e.w.Write(b[:])
}

func (e *encoder) string(s string) {
	e.uint64(uint64(len(s)))
	if e.err != nil {
		return
	}
	if _, e.err = e.w.WriteString(s); e.err != nil {
		return
	}
	e.padding(uint64(len(s)))
}

// padding writes the zero bytes that follow n bytes of string data.
func (e *encoder) padding(n uint64) {
	if e.err != nil {
		return
	}
	var zero [8]byte
	if p := pad(n); p > 0 {
		_, e.err = e.w.Write(zero[:p])
	}
}

func (e *encoder) strings(list []string) {
	e.uint64(uint64(len(list)))
	for _, s := range list {
		e.string(s)
	}
}

func (e *encoder) flush() error {
	if e.err == nil {
		e.err = e.w.Flush()
	}
	return e.err
}

// pad is how many zero bytes follow n bytes of string data.
func pad(n uint64) int { return int((8 - n%8) % 8) }

// errTooLong is a string longer than its bound.
var errTooLong = errors.New("string too long")

func readUint64(r io.Reader) (uint64, error) {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// readString reads a string of at most limit bytes.
func readString(r io.Reader, limit int) (string, error) {
	n, err := readUint64(r)
	if err != nil {
		return "", err
	}
	if n > uint64(limit) {
		return "", fmt.Errorf("%w: %d bytes, at most %d expected", errTooLong, n, limit)
	}
	buf := make([]byte, int(n)+pad(n))
	if _, err := io.ReadFull(r, buf); err != nil {
		return "", noEOF(err)
	}
	if !zeros(buf[n:]) {
		return "", errors.New("string padding is not zero")
	}
	return string(buf[:n]), nil
}

// readStrings reads a list of at most count strings of at most limit bytes each.
func readStrings(r io.Reader, count, limit int) ([]string, error) {
	n, err := readUint64(r)
	if err != nil {
		return nil, err
	}
	if n > uint64(count) {
		return nil, fmt.Errorf("a list of %d strings, at most %d expected", n, count)
	}
	list := make([]string, 0, int(n))
	for i := uint64(0); i < n; i++ {
		s, err := readString(r, limit)
		if err != nil {
			return nil, noEOF(err)
		}
		list = append(list, s)
	}
	return list, nil
}

func zeros(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// noEOF turns io.EOF inside an item into io.ErrUnexpectedEOF: only a stream that
// ends between items ends cleanly.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
