package sshsig

import (
	"bytes"
	"errors"
	"fmt"

	lib "github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
)

// Errors of Verify, each wrapped with its detail.
var (
	// ErrMalformed is a signature that is not an armored SSH signature.
	ErrMalformed = errors.New("not an SSH signature")
	// ErrNamespace is a signature made for another namespace (ssh-keygen -Y sign -n).
	ErrNamespace = errors.New("signed in another namespace")
	// ErrBadSignature is a signature that does not verify: made over other bytes, or
	// not by the key it names.
	ErrBadSignature = errors.New("signed over other bytes")
)

// hash is the message hash Sign uses; ssh-keygen's default too.
const hash = lib.HashSHA512

// Verify checks the armored signature (-----BEGIN SSH SIGNATURE-----) over message in
// namespace and returns the key that made it. Who may sign is Find's question.
func Verify(message, armored []byte, namespace string) (ssh.PublicKey, error) {
	sig, err := lib.Unarmor(armored)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if sig.Namespace != namespace {
		return nil, fmt.Errorf("%w: %q, want %q", ErrNamespace, sig.Namespace, namespace)
	}
	// The library checks the signature against the key the blob names (which Find then
	// looks up), the namespace and the hash algorithm it names (sha256 or sha512).
	if err := lib.Verify(bytes.NewReader(message), sig, sig.PublicKey, sig.HashAlgorithm, namespace); err != nil {
		if errors.Is(err, lib.ErrUnsupportedHashAlgorithm) || errors.Is(err, lib.ErrUnavailableHashAlgorithm) {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		return nil, fmt.Errorf("%w (%s key %s)", ErrBadSignature, sig.PublicKey.Type(), ssh.FingerprintSHA256(sig.PublicKey))
	}
	return sig.PublicKey, nil
}

// Sign signs message in namespace with signer, as `ssh-keygen -Y sign -n namespace`
// does (sha512; rsa-sha2-512 for RSA keys), and returns the armored signature.
func Sign(message []byte, signer ssh.Signer, namespace string) ([]byte, error) {
	sig, err := lib.Sign(bytes.NewReader(message), signer, hash, namespace)
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	return lib.Armor(sig), nil
}
