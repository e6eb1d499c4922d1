package receipt

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"

	"golang.org/x/crypto/ssh"
)

// Key is the deployer's receipt key: an OpenSSH ed25519 private key (dsse.Signer).
type Key struct {
	priv ed25519.PrivateKey
}

// ErrKey is a receipt key that cannot be used. Its messages never name the file or
// show its bytes: the caller names the flag or variable it came from.
var ErrKey = errors.New("not an unencrypted OpenSSH ed25519 private key")

// LoadKey reads the private key file.
func LoadKey(file string) (*Key, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("cannot be read: %w", ErrKey)
	}
	raw, err := ssh.ParseRawPrivateKey(b)
	if err != nil {
		return nil, ErrKey
	}
	switch k := raw.(type) {
	case *ed25519.PrivateKey:
		return &Key{priv: *k}, nil
	case ed25519.PrivateKey:
		return &Key{priv: k}, nil
	}
	return nil, ErrKey
}

// Public is the key's public half.
func (k *Key) Public() ed25519.PublicKey { return k.priv.Public().(ed25519.PublicKey) }

// Sign signs the DSSE pre-authentication encoding.
func (k *Key) Sign(_ context.Context, data []byte) ([]byte, error) {
	return ed25519.Sign(k.priv, data), nil
}

// KeyID is the key's SSH SHA256 fingerprint.
func (k *Key) KeyID() (string, error) { return KeyID(k.Public()), nil }

// KeyID is an ed25519 public key's SSH SHA256 fingerprint, "SHA256:...".
func KeyID(pub ed25519.PublicKey) string {
	p, err := ssh.NewPublicKey(pub)
	if err != nil {
		return ""
	}
	return ssh.FingerprintSHA256(p)
}

// LoadPublicKey reads an OpenSSH public key file (one authorized_keys line) holding
// an ed25519 key.
func LoadPublicKey(file string) (ed25519.PublicKey, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, errors.New("cannot be read")
	}
	p, _, _, _, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		return nil, errors.New("not an OpenSSH public key")
	}
	c, ok := p.(ssh.CryptoPublicKey)
	if !ok {
		return nil, errors.New("not an ed25519 key")
	}
	pub, ok := c.CryptoPublicKey().(ed25519.PublicKey)
	if !ok {
		return nil, errors.New("not an ed25519 key")
	}
	return pub, nil
}
