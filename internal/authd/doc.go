// Package authd is a host's identity agent (`corral authd`, also run by
// `corral noded --authd-socket`): it tells the controllers which Unix user
// a request comes from, without a secret shared by the cluster's hosts.
//
// The agent listens on a Unix socket that every local user may open. For
// each connection it asks the kernel who is at the other end
// (SO_PEERCRED: the caller's effective uid and gid at connect time), looks
// the uid up in the host's passwd and group databases, and writes back one
// short-lived token (a minute by default) signed with the host's own key:
// the key of its certificate from the cluster's authority (package pki), a
// login host's (corral ca issue --role login) or a node's. The caller sends
// nothing: it cannot choose whom the token names. The CLI sends the token
// as "Authorization: Corral-Agent TOKEN" (Agent is its api.Credentials);
// the controllers check it with Verify against the authority and decide
// what the user may do.
//
// It owns the token format (Mint, Verify), the agent (Serve) and its
// client (Agent). It never decides what a user may do, never trusts a
// token whose host certificate is a client's or a member's, and keeps no
// state: a restarted agent needs nothing but its certificate and key.
//
// # The token
//
// A token is dot-separated fields, each unpadded base64url but the first:
//
//	v1 . PAYLOAD . SIGNATURE . CERT [. INTERMEDIATE ...]
//
// PAYLOAD is the claims as compact JSON, in this order and no other
// (Verify refuses any other encoding of the same claims, unknown fields
// and repeated ones):
//
//	{"user":"alice","uid":1000,"gid":1000,"groups":[1000,27],"host":"login1","iat":1767225600,"exp":1767225660,"nonce":"..."}
//
// groups is left out when empty; iat and exp are Unix seconds; nonce is
// 16 random bytes, base64url. SIGNATURE is ECDSA P-256 (ASN.1 DER) over
// SHA-256 of "corral agent identity token v1\x00" followed by the PAYLOAD
// bytes, made with the key of CERT, the host's certificate (DER), which
// any intermediates follow (at most 4 certificates). A token is at most
// MaxTokenBytes; with one certificate it is about 1 KiB.
//
// Verify accepts a token when CERT chains to the authority at the time
// given, names the role login or node (corral:login/NAME,
// corral:node/NAME) and the same host as the claims, the signature
// verifies, iat is no more than Skew ahead of the verifier's clock, the
// verifier's clock is before exp, and exp - iat is at most MaxLifetime.
// Its errors say what is wrong and what to do.
//
// # The socket
//
// The agent writes one JSON object and a newline on each connection,
// {"token":"..."} or {"error":"..."}, and closes it. The socket is
// DefaultSocket (/run/corral/authd.sock) unless --socket or CORRAL_AUTHD
// names another.
package authd
