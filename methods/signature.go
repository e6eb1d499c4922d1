package methods

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/switchyard-nix/switchyard/plan/definition"
	"github.com/switchyard-nix/switchyard/sshsig"
)

// SignatureNamespace is the namespace a submission is signed in:
// `ssh-keygen -Y sign -n switchyard-deployment` (SPEC 6.8).
const SignatureNamespace = "switchyard-deployment"

// SubmissionSignature reads the armored signature of the DEPLOYMENT bytes: the file
// --deployment-signature names, else the DEPLOYMENT_SIGNATURE variable; none: unsigned.
func SubmissionSignature(file string, getenv func(string) string) ([]byte, error) {
	if file == "" {
		return []byte(getenv("DEPLOYMENT_SIGNATURE")), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--deployment-signature: %w: %w", errors.Unwrap(err), ErrRefused)
	}
	return b, nil
}

// signed is who signed a submission, as its provenance names it: never key material.
type signed struct {
	Principal        string // the allowed_signers line's principals; "" unsigned
	SubmissionSHA256 string // hex
}

// checkSignature checks the submission's signature against the tree's submissions
// (SPEC 6.8) before anything reads the submission: a signature is checked whenever
// one is given, and required when the tree says so. A failure is a one-line refusal
// naming the reason; the key is named by its fingerprint only.
func checkSignature(def *definition.Definition, submission, sig []byte, now time.Time) (signed, error) {
	sum := sha256.Sum256(submission)
	out := signed{SubmissionSHA256: hex.EncodeToString(sum[:])}
	sub := def.Submissions
	if len(bytes.TrimSpace(sig)) == 0 {
		if sub.RequireSignature {
			return out, refuseSignature("unsigned while the tree requires a signature")
		}
		return out, nil
	}
	if sub.AllowedSigners == "" {
		return out, refuseSignature("the tree names no allowedSigners (submissions.allowedSigners)")
	}
	b, err := os.ReadFile(def.Tree.Path(sub.AllowedSigners))
	if err != nil {
		return out, fmt.Errorf("deployment signature: reading submissions.allowedSigners %s: %w", sub.AllowedSigners, errors.Unwrap(err))
	}
	allowed, err := sshsig.ParseAllowedSigners(bytes.NewReader(b))
	if err != nil {
		return out, refuseSignature(fmt.Sprintf("submissions.allowedSigners %s: %v", sub.AllowedSigners, err))
	}
	key, err := sshsig.Verify(submission, sig, SignatureNamespace)
	switch {
	case errors.Is(err, sshsig.ErrNamespace):
		return out, refuseSignature(fmt.Sprintf("namespace: %v", err))
	case err != nil:
		return out, refuseSignature(err.Error())
	}
	principal, err := sshsig.Find(allowed, key, SignatureNamespace, now)
	switch {
	case errors.Is(err, sshsig.ErrNamespaceNotAllowed):
		return out, refuseSignature(fmt.Sprintf("namespace: %v", err))
	case err != nil:
		return out, refuseSignature(err.Error())
	}
	out.Principal = principal
	return out, nil
}

func refuseSignature(reason string) error {
	return fmt.Errorf("deployment signature: %s: %w", reason, ErrRefused)
}
