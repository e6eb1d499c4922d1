package receipt

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/switchyard-nix/switchyard/localcmd"
)

// narHashes keeps the NAR hashes asked in this process: a valid store path's never
// changes, and the nodes of a fleet that share a toplevel need it once, not per node.
var narHashes sync.Map // store path -> hex

// NARHash is a store path's NAR hash as this machine's store records it
// (nix-store --query --hash, the narHash of nix path-info), SHA-256 hex.
func NARHash(ctx context.Context, path string) (string, error) {
	if h, ok := narHashes.Load(path); ok {
		return h.(string), nil
	}
	h, err := queryNARHash(ctx, path)
	if err == nil {
		narHashes.Store(path, h)
	}
	return h, err
}

func queryNARHash(ctx context.Context, path string) (string, error) {
	out, err := localcmd.Output(ctx, nil, "nix-store", "--query", "--hash", "--", path)
	if err != nil {
		return "", err
	}
	return HexSHA256(strings.TrimSpace(string(out)))
}

// HexSHA256 turns a Nix SHA-256 hash as Nix prints it ("sha256:" and Nix's base32,
// or SRI "sha256-" and base64, or hex) into hex.
func HexSHA256(h string) (string, error) {
	var raw []byte
	var err error
	switch {
	case strings.HasPrefix(h, "sha256-"):
		raw, err = base64.StdEncoding.DecodeString(strings.TrimPrefix(h, "sha256-"))
	case strings.HasPrefix(h, "sha256:"):
		s := strings.TrimPrefix(h, "sha256:")
		if len(s) == 64 {
			raw, err = hex.DecodeString(s)
		} else {
			raw, err = nixBase32(s, 32)
		}
	default:
		return "", fmt.Errorf("not a sha256 hash: %q", h)
	}
	if err == nil && len(raw) != 32 {
		err = fmt.Errorf("%d bytes", len(raw))
	}
	if err != nil {
		return "", fmt.Errorf("hash %q: %w", h, err)
	}
	return hex.EncodeToString(raw), nil
}

// nixBase32 decodes Nix's base32 (its own alphabet, least significant digit last).
func nixBase32(s string, size int) ([]byte, error) {
	const alphabet = "0123456789abcdfghijklmnpqrsvwxyz"
	if len(s) != (size*8+4)/5 {
		return nil, fmt.Errorf("%d base32 digits, want %d", len(s), (size*8+4)/5)
	}
	out := make([]byte, size)
	for n := 0; n < len(s); n++ {
		c := s[len(s)-n-1]
		digit := strings.IndexByte(alphabet, c)
		if digit < 0 {
			return nil, fmt.Errorf("bad base32 digit %q", c)
		}
		b := n * 5
		i, j := b/8, uint(b%8)
		out[i] |= byte(digit << j)
		if i+1 < size {
			out[i+1] |= byte(digit >> (8 - j))
		} else if digit>>(8-j) != 0 {
			return nil, fmt.Errorf("base32 overflow")
		}
	}
	return out, nil
}
