// Package attest proves to the controller what a node booted, with the
// node's TPM 2.0: which TPM it is (its endorsement key is on an allow list),
// that a signing key lives in that same TPM, and that the TPM's boot
// measurements (PCRs) are the ones a policy expects, now rather than at some
// earlier time.
//
// The flow, node on the left, controller on the right:
//
//	Open(/dev/tpmrm0), EK(), NewAK()
//	send EK.Public, AK.Public()  ───────▶ Policy.CheckEK(ek)              allow list
//	                                       MakeChallenge(ek, akPublic)     AK attributes, name
//	Activate(ak, challenge)  ◀─────────── challenge (keeps secret)
//	send recovered secret  ────────────▶ CheckActivation(secret, got)    AK and EK share a TPM
//	                                       nonce := NewNonce()
//	Quote(ak, nonce, policy PCRs) ◀────── nonce, PCR list (keeps nonce)
//	send Quote  ───────────────────────▶ Policy.VerifyQuote(akPublic, q, nonce)
//
// Step by step:
//
//  1. The endorsement key (EK) identifies the TPM. It is the endorsement
//     hierarchy's primary key made from the TCG's default ECC P-256 EK
//     template (tpm2.ECCEKTemplate), so a TPM always derives the same one.
//     An administrator puts its Fingerprint — the hex SHA-256 of its PKIX
//     public key, the same value an EK certificate's key hashes to — on the
//     policy's allow list. The controller also accepts the RSA-2048 EK
//     template's keys; the node side makes ECC ones.
//  2. The attestation key (AK) signs quotes. It is an ECC P-256 restricted
//     signing key (ECDSA over SHA-256; fixedTPM, fixedParent,
//     sensitiveDataOrigin), the owner hierarchy's primary key from a fixed
//     template, so the same TPM gives the same AK after a restart until the
//     TPM is cleared. Restricted means the TPM signs with it only structures
//     the TPM made itself (they begin with TPM_GENERATED), so a quote cannot
//     be forged with it.
//  3. Credential activation proves the AK is in the EK's TPM. MakeChallenge
//     refuses a key without those attributes, then encrypts a random secret
//     to the EK, bound to the AK's name (a hash over its public area,
//     attributes included). Only the TPM holding that EK, with that AK
//     loaded, releases the secret (TPM2_ActivateCredential, the EK
//     authorised by its PolicySecret(endorsement) policy).
//  4. A quote binds the PCRs to the controller's fresh nonce: TPM2_Quote over
//     the SHA-256 bank with the nonce as qualifying data, plus the PCR
//     values (TPM2_PCR_Read) from which the verifier recomputes the quoted
//     digest. VerifyQuote checks the signature, TPM_GENERATED and the quote
//     type, the nonce, the digest and each PCR the policy names, and says
//     which check failed (errors.Is with ErrSignature, ErrNonce,
//     ErrPCRDigest, ErrPCR, ErrUnboundKey, ErrUnknownEK, ErrMalformed).
//
// What the controller keeps: the AK public bytes it activated (and verifies
// every later quote with those bytes, never with AK bytes a node sends
// again — bytes that differ only in attributes verify the same signature),
// the EK fingerprint, the secret until the activation answer, and each
// nonce until its quote, used once.
//
// Node side: Open, (*TPM).EK, (*TPM).NewAK, (*TPM).Activate, (*TPM).Quote,
// against /dev/tpmrm0 or an swtpm Unix socket. Controller side, pure Go with
// no TPM: Policy and ParsePolicy, Policy.CheckEK, MakeChallenge,
// CheckActivation, NewNonce, VerifyQuote and Policy.VerifyQuote. Everything
// the controller decodes from a node is length-bounded, must be in canonical
// TPM encoding, and is covered by a fuzz target.
//
// This package must never hold cluster state, talk to the network or read
// the clock; the node daemon and the controller carry its values. Its tests
// run a real TPM: Debian's swtpm, one fresh instance per test (they are
// skipped, saying so, where swtpm is not installed). EK certificates are not
// checked: the allow list of fingerprints is the trust anchor.
package attest
