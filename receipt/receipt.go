package receipt

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// PredicateType names switchyard's receipt predicate; PayloadType is DSSE's for an
// in-toto statement.
const (
	PredicateType = "https://switchyard.dev/receipt/v1"
	PayloadType   = "application/vnd.in-toto+json"
)

// Predicate is what a receipt says of one apply on one node.
type Predicate struct {
	Node string `json:"node"`
	// Tree is the operator tree's digest (SHA-256 hex of its files, the one nixos_conf covers).
	Tree       string     `json:"tree_sha256"`
	Submission Submission `json:"submission"`
	PlanJSON   string     `json:"plan_json_sha256"` // the node's plan.json, SHA-256 hex
	NixosConf  string     `json:"nixos_conf"`
	Drv        string     `json:"drv"`
	Toplevel   string     `json:"toplevel"`
	Previous   string     `json:"previous"` // the toplevel the node ran before
	Phases     []Phase    `json:"phases"`
	// Verdict is the node's verdict object as the run reported it (SPEC 2.2).
	Verdict json.RawMessage `json:"verdict"`
	Time    time.Time       `json:"time"` // when the receipt was made, UTC
}

// Submission is the DEPLOYMENT the apply ran with: its hash and who signed it ("":
// unsigned). Never key material.
type Submission struct {
	SHA256 string `json:"sha256"`
	Signer string `json:"signer,omitempty"`
}

// Phase is one phase of the deploy body as its last event reported it.
type Phase struct {
	Name    string  `json:"name"`
	State   string  `json:"state"`
	Seconds float64 `json:"seconds"`
}

// Seal makes the receipt of p, whose toplevel's NAR hash is narSHA256 (hex): the
// statement in a DSSE envelope signed with key; a nil key leaves the envelope
// without signatures (SPEC 6.8: written unsigned).
func Seal(ctx context.Context, p Predicate, narSHA256 string, key *Key) ([]byte, error) {
	pred, err := toStruct(p)
	if err != nil {
		return nil, err
	}
	st := &v1.Statement{
		Type:          v1.StatementTypeUri,
		Subject:       []*v1.ResourceDescriptor{{Name: p.Toplevel, Digest: map[string]string{"sha256": narSHA256}}},
		PredicateType: PredicateType,
		Predicate:     pred,
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("receipt statement: %w", err)
	}
	body, err := protojson.Marshal(st)
	if err != nil {
		return nil, err
	}
	env := &dsse.Envelope{PayloadType: PayloadType, Payload: base64.StdEncoding.EncodeToString(body), Signatures: []dsse.Signature{}}
	if key != nil {
		s, err := dsse.NewEnvelopeSigner(key)
		if err != nil {
			return nil, err
		}
		if env, err = s.SignPayload(ctx, PayloadType, body); err != nil {
			return nil, fmt.Errorf("signing the receipt: %w", err)
		}
	}
	return json.MarshalIndent(env, "", "  ")
}

func toStruct(p Predicate) (*structpb.Struct, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return structpb.NewStruct(m)
}

// Opened is a receipt read back: its predicate, its subject, and how it is signed.
type Opened struct {
	Predicate
	Subject   string // the toplevel the statement names
	NARSHA256 string // its digest
	Signed    bool   // the envelope has signatures (checked when Open was given a key)
	KeyIDs    []string
}

// ErrUnsigned is a receipt written without a key.
var ErrUnsigned = errors.New("unsigned (no --receipt-key when it was written)")

// Open reads an envelope and its statement. With pub, every signature must be
// pub's and valid; an unsigned receipt is returned with ErrUnsigned. Without pub,
// the signatures are not checked.
func Open(ctx context.Context, envelope []byte, pub ed25519.PublicKey) (Opened, error) {
	var o Opened
	var env dsse.Envelope
	dec := json.NewDecoder(strings.NewReader(string(envelope)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		return o, fmt.Errorf("not a DSSE envelope: %w", err)
	}
	if env.PayloadType != PayloadType {
		return o, fmt.Errorf("payloadType %q, want %q", env.PayloadType, PayloadType)
	}
	body, err := env.DecodeB64Payload()
	if err != nil {
		return o, fmt.Errorf("payload: %w", err)
	}
	var st v1.Statement
	if err := protojson.Unmarshal(body, &st); err != nil {
		return o, fmt.Errorf("not an in-toto statement: %w", err)
	}
	if err := st.Validate(); err != nil {
		return o, fmt.Errorf("in-toto statement: %w", err)
	}
	if st.GetPredicateType() != PredicateType {
		return o, fmt.Errorf("predicateType %q, want %q", st.GetPredicateType(), PredicateType)
	}
	b, err := protojson.Marshal(st.GetPredicate())
	if err != nil {
		return o, err
	}
	if err := json.Unmarshal(b, &o.Predicate); err != nil {
		return o, fmt.Errorf("predicate: %w", err)
	}
	if len(st.GetSubject()) != 1 {
		return o, fmt.Errorf("%d subjects, want 1", len(st.GetSubject()))
	}
	sub := st.GetSubject()[0]
	o.Subject, o.NARSHA256 = sub.GetName(), sub.GetDigest()["sha256"]
	if o.Subject != o.Toplevel || o.NARSHA256 == "" {
		return o, fmt.Errorf("subject %q (sha256 %q) is not the predicate's toplevel %q", o.Subject, o.NARSHA256, o.Toplevel)
	}
	for _, s := range env.Signatures {
		o.KeyIDs = append(o.KeyIDs, s.KeyID)
	}
	o.Signed = len(env.Signatures) > 0
	if pub == nil {
		return o, nil
	}
	if !o.Signed {
		return o, ErrUnsigned
	}
	v, err := dsse.NewEnvelopeVerifier(verifier{pub})
	if err != nil {
		return o, err
	}
	for _, s := range env.Signatures {
		// Every signature must be the key's: one by another key is no receipt of ours.
		one := env
		one.Signatures = []dsse.Signature{s}
		if _, err := v.Verify(ctx, &one); err != nil {
			return o, fmt.Errorf("signature by %s does not verify with the receipt key %s", s.KeyID, KeyID(pub))
		}
	}
	return o, nil
}

// verifier checks a signature with an ed25519 public key (dsse.Verifier).
type verifier struct{ pub ed25519.PublicKey }

func (v verifier) Verify(_ context.Context, data, sig []byte) error {
	if !ed25519.Verify(v.pub, data, sig) {
		return errors.New("bad signature")
	}
	return nil
}
func (v verifier) KeyID() (string, error)   { return KeyID(v.pub), nil }
func (v verifier) Public() crypto.PublicKey { return v.pub }

// FileName is a receipt's file name, from when it was made: names sort by time.
func FileName(t time.Time) string { return t.UTC().Format("20060102T150405.000000000Z") + ".json" }
