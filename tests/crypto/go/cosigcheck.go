// cosigcheck opens a signed note with golang.org/x/mod/sumdb/note: the log's Ed25519
// verifier key (note.NewVerifier) plus a cosignature/v1 verifier per witness vkey.
// Usage: cosigcheck NOTE-FILE LOG-VKEY [WITNESS-VKEY...]; prints each verified key name.
package main

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

type cosigVerifier struct {
	name string
	hash uint32
	key  ed25519.PublicKey
}

func (v cosigVerifier) Name() string    { return v.name }
func (v cosigVerifier) KeyHash() uint32 { return v.hash }
func (v cosigVerifier) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	t := binary.BigEndian.Uint64(sig[:8])
	m := "cosignature/v1\ntime " + strconv.FormatUint(t, 10) + "\n" + string(msg)
	return ed25519.Verify(v.key, []byte(m), sig[8:])
}

func newCosigVerifier(vkey string) (note.Verifier, error) {
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 {
		return nil, fmt.Errorf("malformed vkey")
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 33 || raw[0] != 0x04 {
		return nil, fmt.Errorf("not a cosignature/v1 key")
	}
	h := sha256.Sum256(append([]byte(parts[0]+"\n"), raw...))
	hash := binary.BigEndian.Uint32(h[:4])
	if fmt.Sprintf("%08x", hash) != parts[1] {
		return nil, fmt.Errorf("key hash mismatch")
	}
	return cosigVerifier{parts[0], hash, ed25519.PublicKey(raw[1:])}, nil
}

func main() {
	msg, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	log, err := note.NewVerifier(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "log vkey:", err)
		os.Exit(2)
	}
	verifiers := []note.Verifier{log}
	for _, vk := range os.Args[3:] {
		v, err := newCosigVerifier(vk)
		if err != nil {
			fmt.Fprintln(os.Stderr, "witness vkey:", err)
			os.Exit(2)
		}
		verifiers = append(verifiers, v)
	}
	n, err := note.Open(msg, note.VerifierList(verifiers...))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(1)
	}
	for _, s := range n.Sigs {
		fmt.Println("verified", s.Name)
	}
	for _, s := range n.UnverifiedSigs {
		fmt.Println("ignored", s.Name)
	}
}
