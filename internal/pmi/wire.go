package pmi

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Bounds of the wire.
const (
	// MaxMessage bounds one message (MPICH's client sends at most 64 KiB).
	MaxMessage = 64 << 10
	// MaxTokens bounds the key=value pairs of one message.
	MaxTokens = 64
)

// ErrWire marks a message that breaks the protocol.
var ErrWire = errors.New("not a PMI message")

// message is one PMI message: its command and its key=value pairs, in
// order (a key may come without a value: tokens of v1).
type message struct {
	cmd  string
	keys []string
	vals []string
	// v2 says the message came (or goes) on the PMI-2 wire.
	v2 bool
}

// get returns the value of key, and whether it was given.
func (m *message) get(key string) (string, bool) {
	for i, k := range m.keys {
		if k == key {
			return m.vals[i], true
		}
	}
	return "", false
}

// add appends a pair.
func (m *message) add(key, val string) *message {
	m.keys, m.vals = append(m.keys, key), append(m.vals, val)
	return m
}

// readMessage reads one message, on the wire its first bytes say: "cmd="
// (or "mcmd=") starts a PMI-1 line, anything else is a PMI-2 length.
func readMessage(r *bufio.Reader) (*message, error) {
	head, err := r.Peek(4)
	if err != nil {
		return nil, err
	}
	if string(head) == "cmd=" || string(head) == "mcmd" {
		line, err := readLine(r)
		if err != nil {
			return nil, err
		}
		return parseV1(line)
	}
	var size [6]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(size[:])))
	if err != nil || n < 4 || n > MaxMessage {
		return nil, fmt.Errorf("%w: the length %q is not one from 4 to %d", ErrWire, size[:], MaxMessage)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return parseV2(string(body))
}

// readLine reads a PMI-1 line, at most MaxMessage bytes, without its
// newline.
func readLine(r *bufio.Reader) (string, error) {
	var b strings.Builder
	for {
		frag, err := r.ReadSlice('\n')
		if b.Len()+len(frag) > MaxMessage {
			return "", fmt.Errorf("%w: a line over %d bytes", ErrWire, MaxMessage)
		}
		b.Write(frag)
		switch {
		case err == nil:
			return strings.TrimSuffix(b.String(), "\n"), nil
		case !errors.Is(err, bufio.ErrBufferFull):
			return "", err
		}
	}
}

// parseV1 parses a PMI-1 line: "cmd=NAME key=value ..." (space separated,
// a backslash escaping the next character of a value). "mcmd=" lines
// (PMI-1's spawn) parse too, and are refused by the server.
func parseV1(line string) (*message, error) {
	m := &message{}
	for i := 0; i < len(line); {
		for i < len(line) && line[i] == ' ' {
			i++
		}
		if i == len(line) {
			break
		}
		j := i
		for j < len(line) && isKeyByte(line[j]) {
			j++
		}
		if j == i {
			return nil, fmt.Errorf("%w: byte %d is %q where a key was expected", ErrWire, i, line[i])
		}
		key := line[i:j]
		val := ""
		if j < len(line) && line[j] == '=' {
			var sb strings.Builder
			j++
			for j < len(line) && line[j] != ' ' {
				if line[j] == '\\' && j+1 < len(line) {
					j++
				}
				sb.WriteByte(line[j])
				j++
			}
			val = sb.String()
		} else if j < len(line) && line[j] != ' ' {
			return nil, fmt.Errorf("%w: byte %d is %q after the key %q", ErrWire, j, line[j], key)
		}
		if err := m.take(key, val); err != nil {
			return nil, err
		}
		i = j
	}
	if m.cmd == "" {
		return nil, fmt.Errorf("%w: no cmd= in %q", ErrWire, clip(line))
	}
	return m, nil
}

// parseV2 parses a PMI-2 body: "cmd=NAME;key=value;...;" (no escapes: a
// value holds no ';').
func parseV2(body string) (*message, error) {
	if !strings.HasPrefix(body, "cmd=") {
		return nil, fmt.Errorf("%w: %q does not start with cmd=", ErrWire, clip(body))
	}
	m := &message{v2: true}
	for _, tok := range strings.Split(body, ";") {
		if tok == "" {
			continue
		}
		key, val, _ := strings.Cut(tok, "=")
		if key == "" || strings.IndexFunc(key, func(r rune) bool { return r > 0x7f || !isKeyByte(byte(r)) }) >= 0 {
			return nil, fmt.Errorf("%w: %q is not a key", ErrWire, clip(key))
		}
		if err := m.take(key, val); err != nil {
			return nil, err
		}
	}
	if m.cmd == "" {
		return nil, fmt.Errorf("%w: no command in %q", ErrWire, clip(body))
	}
	return m, nil
}

// take records a parsed pair: cmd (or mcmd) names the command.
func (m *message) take(key, val string) error {
	if key == "cmd" || key == "mcmd" {
		for i := 0; i < len(val); i++ {
			if !isKeyByte(val[i]) {
				return fmt.Errorf("%w: the command %q is not a name", ErrWire, clip(val))
			}
		}
		m.cmd = val
		return nil
	}
	if len(m.keys) >= MaxTokens {
		return fmt.Errorf("%w: more than %d pairs", ErrWire, MaxTokens)
	}
	m.add(key, val)
	return nil
}

func isKeyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '/'
}

// encode writes m on its wire.
func (m *message) encode() []byte {
	var b strings.Builder
	if !m.v2 {
		b.WriteString("cmd=" + m.cmd)
		for i, k := range m.keys {
			b.WriteString(" " + k + "=")
			for _, c := range []byte(m.vals[i]) {
				if c == ' ' || c == '\\' || c == '\n' {
					b.WriteByte('\\')
				}
				b.WriteByte(c)
			}
		}
		b.WriteByte('\n')
		return []byte(b.String())
	}
	b.WriteString("cmd=" + m.cmd + ";")
	for i, k := range m.keys {
		b.WriteString(k + "=" + strings.ReplaceAll(m.vals[i], ";", "") + ";")
	}
	return []byte(fmt.Sprintf("%6d", b.Len()) + b.String())
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
