package state

import (
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
)

// Scripts and exported environments are kept out of line: a job record
// points at a Blob, content-addressed and shared by every job with the same
// content, and a Raft entry carries a blob's content only when it
// introduces it (SubmitJobs.Blobs); later entries name it by key. An
// environment is split into chunks of lines (content-defined, so that two
// environments that differ in one variable share every chunk but one), and
// is itself a blob listing its chunks. A user's jobs, which share almost
// all of their environment, then cost a few pointers each instead of their
// kilobytes, in memory, in the log and in snapshots.

// Blob is content stored once for all the jobs that share it: a script (or
// one chunk of an environment's lines), or an environment (the list of its
// chunks). Blobs are immutable; the state counts the records using each and
// forgets one no record uses.
type Blob struct {
	key   blobKey
	refs  int32
	text  string
	parts []*Blob
}

// blobKey is a blob's content address: the SHA-256 of a text, or of an
// environment's chunk keys. It is held as bytes (a job's blobs cost no
// strings) and written as a prefix and the digest in unpadded URL-safe
// base64: "t..." for a text, "e..." for an environment.
type blobKey struct {
	env bool
	sum [sha256.Size]byte
}

const (
	textKeyPrefix = "t"
	envKeyPrefix  = "e"
)

func (k blobKey) String() string {
	p := textKeyPrefix
	if k.env {
		p = envKeyPrefix
	}
	return p + base64.RawURLEncoding.EncodeToString(k.sum[:])
}

// parseBlobKey reads a key written by blobKey.String.
func parseBlobKey(s string) (blobKey, error) {
	var k blobKey
	switch {
	case strings.HasPrefix(s, envKeyPrefix):
		k.env = true
	case !strings.HasPrefix(s, textKeyPrefix):
		return k, fmt.Errorf("blob key %q: want t or e and a SHA-256 in base64", s)
	}
	n, err := base64.RawURLEncoding.Decode(k.sum[:], []byte(s[1:]))
	if err != nil || n != sha256.Size || len(s) != 1+base64.RawURLEncoding.EncodedLen(sha256.Size) {
		return k, fmt.Errorf("blob key %q: want t or e and a SHA-256 in base64", s)
	}
	return k, nil
}

// Key returns the blob's content address.
func (b *Blob) Key() string {
	if b == nil {
		return ""
	}
	return b.key.String()
}

// Text returns a text blob's content ("" for nil).
func (b *Blob) Text() string {
	if b == nil {
		return ""
	}
	return b.text
}

// Lines returns an environment's KEY=VALUE lines (nil for nil).
func (b *Blob) Lines() []string {
	if b == nil || len(b.parts) == 0 {
		return nil
	}
	var out []string
	for _, p := range b.parts {
		out = append(out, strings.Split(p.text, envSep)...)
	}
	return out
}

// MarshalJSON writes a blob as its key: records and entries name blobs,
// and carry their content apart (BlobRecord).
func (b *Blob) MarshalJSON() ([]byte, error) { return json.Marshal(b.key.String()) }

// UnmarshalJSON reads a key into a placeholder that the state resolves to
// its blob when it takes the record (resolveBlobs). A key that does not
// parse fails the decoding: only a leader writes keys.
func (b *Blob) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	k, err := parseBlobKey(s)
	b.key = k
	return err
}

// BlobRecord is a blob's content as an entry or a snapshot carries it: a
// text, or an environment's chunk keys.
type BlobRecord struct {
	Key   string   `json:"key"`
	Text  string   `json:"text,omitempty"`
	Parts []string `json:"parts,omitempty"`
}

// InlineScript and InlineEnv are a script and an environment written
// inline, as entries and snapshots did before they were kept out of line;
// the state moves them out of line when it takes such an entry or record.
type InlineScript struct {
	Script string `json:"script"`
}

// InlineEnv: see InlineScript.
type InlineEnv struct {
	Env []string `json:"env,omitempty"`
}

// Inline returns sp with its script and environment written inline, to be
// moved out of line by OutOfLine or the apply.
func Inline(sp JobSpec, script string, env []string) JobSpec {
	sp.Script, sp.Env, sp.InlineScript, sp.InlineEnv = nil, nil, nil, nil
	if script != "" {
		sp.InlineScript = &InlineScript{Script: script}
	}
	if len(env) > 0 {
		sp.InlineEnv = &InlineEnv{Env: env}
	}
	return sp
}

// envSep joins an environment chunk's lines: no variable holds a NUL.
const envSep = "\x00"

// Chunking: a chunk ends after a line whose hash is 0 modulo chunkEvery
// (about chunkEvery lines a chunk, whatever their position) or once it
// holds maxChunkBytes.
const (
	chunkEvery    = 8
	maxChunkBytes = 1024
)

func textKey(text string) blobKey { return blobKey{sum: sha256.Sum256([]byte(text))} }

func envKey(parts []blobKey) blobKey {
	h := sha256.New()
	for _, p := range parts {
		h.Write(p.sum[:])
	}
	k := blobKey{env: true}
	h.Sum(k.sum[:0])
	return k
}

// envChunks splits an environment's lines into chunks.
func envChunks(lines []string) []string {
	var out []string
	start, size := 0, 0
	for i, l := range lines {
		size += len(l) + 1
		h := fnv.New32a()
		h.Write([]byte(l))
		if h.Sum32()%chunkEvery == 0 || size >= maxChunkBytes || i == len(lines)-1 {
			out = append(out, strings.Join(lines[start:i+1], envSep))
			start, size = i+1, 0
		}
	}
	return out
}

// OutOfLine moves sp's inline script and environment out of line: sp then
// names them by key, and the records returned hold their content (texts
// first, then the environment that lists its chunks). The leader calls it
// for every job it proposes; the state for entries and records written
// inline.
func OutOfLine(sp *JobSpec) []BlobRecord {
	var recs []BlobRecord
	if in := sp.InlineScript; in != nil && in.Script != "" {
		k := textKey(in.Script)
		recs = append(recs, BlobRecord{Key: k.String(), Text: in.Script})
		sp.Script = &Blob{key: k}
	}
	if in := sp.InlineEnv; in != nil && len(in.Env) > 0 {
		var keys []blobKey
		var names []string
		for _, c := range envChunks(in.Env) {
			k := textKey(c)
			recs = append(recs, BlobRecord{Key: k.String(), Text: c})
			keys, names = append(keys, k), append(names, k.String())
		}
		k := envKey(keys)
		recs = append(recs, BlobRecord{Key: k.String(), Parts: names})
		sp.Env = &Blob{key: k}
	}
	sp.InlineScript, sp.InlineEnv = nil, nil
	return recs
}

// HasBlob reports whether the state holds the blob with key: an entry
// need not carry its content.
func (s *State) HasBlob(key string) bool {
	k, err := parseBlobKey(key)
	return err == nil && s.blobs[k] != nil
}

// BlobCount returns how many blobs the state holds.
func (s *State) BlobCount() int { return len(s.blobs) }

// blobFrom returns the state's blob with key, or makes it from the
// record in recs that carries it after checking that its content has that
// key; nil when neither has it. A blob made here is stored with no
// references: the job that needs it takes one, or dropUnused forgets it.
func (s *State) blobFrom(key blobKey, recs map[blobKey]*BlobRecord, made *[]*Blob) *Blob {
	if b := s.blobs[key]; b != nil {
		return b
	}
	r := recs[key]
	if r == nil {
		return nil
	}
	b := &Blob{key: key}
	switch {
	case !key.env && len(r.Parts) == 0 && textKey(r.Text) == key:
		b.text = r.Text
	case key.env && r.Text == "" && len(r.Parts) > 0:
		keys := make([]blobKey, len(r.Parts))
		for i, name := range r.Parts {
			pk, err := parseBlobKey(name)
			if err != nil || pk.env {
				return nil
			}
			keys[i] = pk
		}
		if envKey(keys) != key {
			return nil
		}
		b.parts = make([]*Blob, len(keys))
		for i, pk := range keys {
			if b.parts[i] = s.blobFrom(pk, recs, made); b.parts[i] == nil {
				return nil
			}
		}
	default:
		return nil
	}
	s.blobs[key] = b
	*made = append(*made, b)
	return b
}

// blobRecordMap indexes an entry's blob records by key; records whose key
// does not parse are left out (the jobs naming them are refused).
func blobRecordMap(recs []BlobRecord) map[blobKey]*BlobRecord {
	if len(recs) == 0 {
		return nil
	}
	m := make(map[blobKey]*BlobRecord, len(recs))
	for i := range recs {
		if k, err := parseBlobKey(recs[i].Key); err == nil {
			m[k] = &recs[i]
		}
	}
	return m
}

// resolveBlobs points sp's script and environment, inline or named by
// key, at the state's blobs, making those recs introduce. It returns an
// error naming what it cannot find; then it made nothing.
func (s *State) resolveBlobs(sp *JobSpec, recs map[blobKey]*BlobRecord) error {
	if sp.InlineScript != nil || sp.InlineEnv != nil {
		if inline := blobRecordMap(OutOfLine(sp)); len(inline) > 0 {
			maps.Copy(inline, recs)
			recs = inline
		}
	}
	var made []*Blob
	for _, f := range []struct {
		what string
		ref  **Blob
	}{{"script", &sp.Script}, {"environment", &sp.Env}} {
		if *f.ref == nil {
			continue
		}
		b := s.blobFrom((*f.ref).key, recs, &made)
		if b == nil {
			s.dropUnused(made)
			return fmt.Errorf("its %s (%s) is not known to the controllers: submit it again", f.what, (*f.ref).key.String())
		}
		*f.ref = b
	}
	return nil
}

// dropUnused forgets blobs that no record took.
func (s *State) dropUnused(made []*Blob) {
	for _, b := range made {
		if b.refs == 0 && s.blobs[b.key] == b {
			delete(s.blobs, b.key)
		}
	}
}

// retainBlob counts one more record using b (an environment counts once
// for its chunks).
func (s *State) retainBlob(b *Blob) {
	if b == nil {
		return
	}
	b.refs++
	if b.refs == 1 {
		s.blobs[b.key] = b
		for _, p := range b.parts {
			s.retainBlob(p)
		}
	}
}

// releaseBlob counts one record less using b and forgets it once none
// does.
func (s *State) releaseBlob(b *Blob) {
	if b == nil {
		return
	}
	if b.refs--; b.refs > 0 {
		return
	}
	if s.blobs[b.key] == b {
		delete(s.blobs, b.key)
	}
	for _, p := range b.parts {
		s.releaseBlob(p)
	}
}

// blobRecords lists the state's blobs as a snapshot writes them: texts,
// then environments, each by key.
func (s *State) blobRecords() []BlobRecord {
	keys := slices.SortedFunc(maps.Keys(s.blobs), func(a, b blobKey) int {
		if a.env != b.env {
			return cmp.Compare(boolInt(a.env), boolInt(b.env))
		}
		return slices.Compare(a.sum[:], b.sum[:])
	})
	out := make([]BlobRecord, len(keys))
	for i, k := range keys {
		b := s.blobs[k]
		out[i] = BlobRecord{Key: k.String(), Text: b.text}
		for _, p := range b.parts {
			out[i].Parts = append(out[i].Parts, p.key.String())
		}
	}
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
