package ctld

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"corral/api"
)

// HTTP limits. Every request passes limitRequests before it reaches a
// handler, or a follower forwards it: a client, careless or hostile, can
// neither hold a connection open for free nor make the server read more
// than a route needs.
const (
	// maxHeaderBytes bounds the request line and headers; it leaves room
	// for a query of maxQueryParams parameters and more, so that such a
	// query is refused with a JSON 400 rather than Go's plain 431.
	maxHeaderBytes = 256 << 10
	// maxQueryParams bounds the parameters of a query: more are refused,
	// never dropped (url.Values would drop them all past Go's own limit).
	maxQueryParams = 1000
	// maxSubmitBytes bounds POST /v1/jobs: one job at every limit of
	// package submit (a 4 MiB script, 1 MiB of environment, 1 MiB of
	// arguments) with JSON's escaping, or a batch of ordinary jobs.
	maxSubmitBytes = 16 << 20
	// maxWriteBytes is the body limit of the routes not listed in
	// bodyLimits.
	maxWriteBytes = 64 << 10
)

// bodyLimits are the body limits of the routes that take more than
// maxWriteBytes; a GET takes no body.
var bodyLimits = map[string]int64{
	"POST /v1/jobs":           maxSubmitBytes,
	"POST /v1/nodes/register": 4 << 20,
	"POST /v1/nodes/status":   4 << 20,
	"POST /v1/jobs/cancel":    4 << 20,
	"POST /v1/jobs/hold":      4 << 20,
	"POST /v1/jobs/suspend":   4 << 20,
	"POST /v1/jobs/update":    1 << 20,
}

// HTTPTimeouts bound how long a client may take; zero fields take the
// defaults in parentheses.
type HTTPTimeouts struct {
	// Header is the time to send the request line and headers (10s).
	Header time.Duration
	// Body is the time to send a request body (30s: 16 MiB at 0.5 MB/s).
	Body time.Duration
	// Idle is how long a kept-alive connection may wait for its next
	// request (120s).
	Idle time.Duration
	// Write is the time to take an answer; a long poll
	// (GET /v1/nodes/{name}/desired) gets its wait on top (60s).
	Write time.Duration
}

func (t HTTPTimeouts) withDefaults() HTTPTimeouts {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&t.Header, 10*time.Second)
	def(&t.Body, 30*time.Second)
	def(&t.Idle, 120*time.Second)
	def(&t.Write, 60*time.Second)
	return t
}

// newHTTPServer returns the API server with its timeouts and header limit.
// There is no ReadTimeout: it would also cut the long polls of node
// daemons; limitRequests gives each body its own deadline instead.
func (c *Controller) newHTTPServer(t HTTPTimeouts) *http.Server {
	return &http.Server{
		Handler:           splitJobIO(c.jobIORoutes(), c.limitRequests(c.routes(), t)),
		ReadHeaderTimeout: t.Header,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}

// limitRequests answers 404 and 405 (with Allow) in JSON, refuses a query
// with more than maxQueryParams parameters or a malformed one (400), a
// write that is not JSON (415), a body on a route that takes none (400) or
// larger than the route's limit (413), and gives every body a read
// deadline (408 when it passes), then hands the request to mux.
func (c *Controller) limitRequests(mux *http.ServeMux, t HTTPTimeouts) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern == "" {
			unrouted(w, r, h)
			return
		}
		rc := http.NewResponseController(w)
		wait := time.Duration(0)
		if strings.HasSuffix(pattern, "/desired") {
			wait = 5 * time.Minute
		}
		_ = rc.SetWriteDeadline(time.Now().Add(t.Write + wait))
		if err := checkQuery(r.URL.RawQuery); err != nil {
			refuseRequest(w, r, http.StatusBadRequest, "query", err.Error())
			return
		}
		if r.Method == http.MethodPost {
			if why := jsonContentType(r.Header.Get("Content-Type")); why != "" {
				refuseRequest(w, r, http.StatusUnsupportedMediaType, "Content-Type", why)
				return
			}
		}
		if hasBody(r) {
			limit := bodyLimit(r.Method, pattern)
			switch {
			case limit == 0:
				refuseRequest(w, r, http.StatusBadRequest, "body", fmt.Sprintf("%s %s takes no request body", r.Method, pattern[strings.IndexByte(pattern, ' ')+1:]))
				return
			case r.ContentLength > limit:
				refuseRequest(w, r, http.StatusRequestEntityTooLarge, "body",
					fmt.Sprintf("the request body is %d bytes; %s takes at most %d (submit fewer jobs per request)", r.ContentLength, pattern, limit))
				return
			}
			_ = rc.SetReadDeadline(time.Now().Add(t.Body))
			body := &deadlineBody{ReadCloser: http.MaxBytesReader(w, r.Body, limit), rc: rc}
			r.Body = &utf8Body{ReadCloser: body}
			defer func() {
				if body.n >= largeBody {
					largeBodies.release()
				}
			}()
		}
		// Served by the mux, not by h: the mux sets the path's values.
		mux.ServeHTTP(w, r)
	})
}

// unrouted answers a request no route takes: 405 with the methods the path
// allows, 404 otherwise, both as JSON. A redirect (a path to clean) is
// passed on as the mux writes it.
func unrouted(w http.ResponseWriter, r *http.Request, h http.Handler) {
	rec := &headerRecorder{header: http.Header{}}
	h.ServeHTTP(rec, r)
	switch rec.status {
	case http.StatusMethodNotAllowed:
		allow := rec.header.Get("Allow")
		w.Header().Set("Allow", allow)
		refuseRequest(w, r, http.StatusMethodNotAllowed, "method", fmt.Sprintf("%s is not allowed on %s; use %s (see docs/api.md)", r.Method, r.URL.Path, allow))
	case http.StatusNotFound, 0:
		refuseRequest(w, r, http.StatusNotFound, "", fmt.Sprintf("no API endpoint %s %s (see docs/api.md)", r.Method, r.URL.Path))
	default:
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.status)
		_, _ = w.Write(rec.body)
	}
}

// refuseRequest answers an error before the body is read; the connection
// is closed after it, so the server does not wait for a body it refused.
func refuseRequest(w http.ResponseWriter, r *http.Request, status int, field, msg string) {
	if hasBody(r) {
		w.Header().Set("Connection", "close")
	}
	writeError(w, status, field, msg)
}

// headerRecorder keeps what the mux's 404, 405 and redirect handlers
// write.
type headerRecorder struct {
	header http.Header
	status int
	body   []byte
}

func (h *headerRecorder) Header() http.Header { return h.header }
func (h *headerRecorder) WriteHeader(s int) {
	if h.status == 0 {
		h.status = s
	}
}
func (h *headerRecorder) Write(b []byte) (int, error) {
	h.WriteHeader(http.StatusOK)
	if len(h.body) < 4096 {
		h.body = append(h.body, b...)
	}
	return len(b), nil
}

// checkQuery parses a query as url.ParseQuery does, refusing what
// r.URL.Query() would silently drop: too many parameters, or a malformed
// escape.
func checkQuery(raw string) error {
	if raw == "" {
		return nil
	}
	if n := strings.Count(raw, "&") + strings.Count(raw, ";") + 1; n > maxQueryParams {
		return fmt.Errorf("the query has %d parameters; the most is %d", n, maxQueryParams)
	}
	if _, err := url.ParseQuery(raw); err != nil {
		return fmt.Errorf("malformed query: %v", err)
	}
	return nil
}

// jsonContentType says why a write's Content-Type is not JSON, or "":
// application/json, with an optional charset that must be UTF-8. A form
// or text/plain body (what a browser may POST cross-site without asking)
// is refused.
func jsonContentType(ct string) string {
	const want = "send the body as Content-Type: application/json"
	if ct == "" {
		return "no Content-Type; " + want
	}
	mt, params, err := mime.ParseMediaType(ct)
	switch {
	case err != nil:
		return fmt.Sprintf("malformed Content-Type %q; %s", ct, want)
	case mt != "application/json":
		return fmt.Sprintf("Content-Type %s is not accepted; %s", mt, want)
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return fmt.Sprintf("Content-Type parameter %s=%s is not accepted; %s (charset=utf-8 is allowed)", k, v, want)
		}
	}
	return ""
}

// hasBody reports whether a request declares a body.
func hasBody(r *http.Request) bool {
	return r.ContentLength != 0 || len(r.TransferEncoding) > 0
}

func bodyLimit(method, pattern string) int64 {
	if method != http.MethodPost {
		return 0
	}
	if n, ok := bodyLimits[pattern]; ok {
		return n
	}
	return maxWriteBytes
}

// deadlineBody lifts the body's read deadline once the body is read to its
// end: the connection's next read is the server's own wait for the client
// to go away, which must not time out while a handler still works.
type deadlineBody struct {
	io.ReadCloser
	rc *http.ResponseController
	n  int64 // bytes read
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	if errors.Is(err, io.EOF) {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// utf8Body refuses a body that is not valid UTF-8 as it is read, in
// chunks: JSON is UTF-8, and Go's decoder would otherwise replace each
// invalid byte with U+FFFD, so that what is stored (a script, a name) is
// not what was sent.
type utf8Body struct {
	io.ReadCloser
	carry  [utf8.UTFMax]byte // the start of a character split between reads
	nc     int
	offset int64
	// err is sticky: json.Decoder may not look at an error that comes
	// with the bytes that complete its value, so every later read
	// repeats it.
	err *errNotUTF8
}

// errNotUTF8 is the error of a body that is not valid UTF-8.
type errNotUTF8 struct{ offset int64 }

func (e *errNotUTF8) Error() string {
	return fmt.Sprintf("the request body is not valid UTF-8 (byte %d); JSON text must be UTF-8", e.offset)
}

func (b *utf8Body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.check(p)
	if nu, ok := err.(*errNotUTF8); ok {
		b.err = nu
	}
	return n, err
}

func (b *utf8Body) check(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	chunk := p[:n]
	if b.nc > 0 {
		// Complete the character carried from the last read.
		k := 0
		for b.nc < utf8.UTFMax && k < len(chunk) && !utf8.FullRune(b.carry[:b.nc]) {
			b.carry[b.nc] = chunk[k]
			b.nc, k = b.nc+1, k+1
		}
		switch {
		case utf8.FullRune(b.carry[:b.nc]):
			if r, size := utf8.DecodeRune(b.carry[:b.nc]); (r == utf8.RuneError && size == 1) || size != b.nc {
				return n, &errNotUTF8{offset: b.offset}
			}
			b.offset += int64(b.nc)
			b.nc, chunk = 0, chunk[k:]
		case err != nil:
			return n, &errNotUTF8{offset: b.offset}
		default:
			return n, nil // still incomplete: wait for more
		}
	}
	tail := incompleteTail(chunk)
	if !utf8.Valid(chunk[:len(chunk)-tail]) {
		bad := len(chunk[:len(chunk)-tail])
		for i, size := 0, 0; i < bad; i += size {
			var r rune
			if r, size = utf8.DecodeRune(chunk[i:]); r == utf8.RuneError && size == 1 {
				return n, &errNotUTF8{offset: b.offset + int64(i)}
			}
		}
	}
	b.offset += int64(len(chunk) - tail)
	if tail > 0 {
		if err != nil {
			return n, &errNotUTF8{offset: b.offset}
		}
		b.nc = copy(b.carry[:], chunk[len(chunk)-tail:])
	}
	return n, err
}

// incompleteTail returns how many bytes at b's end begin a character that
// continues past it.
func incompleteTail(b []byte) int {
	for k := 1; k < utf8.UTFMax && k <= len(b); k++ {
		if c := b[len(b)-k]; utf8.RuneStart(c) {
			if c >= utf8.RuneSelf && !utf8.FullRune(b[len(b)-k:]) {
				return k
			}
			return 0
		}
	}
	return 0
}

// bodyError maps an error reading a body to its answer: 413 past the
// route's limit, 408 past the body's deadline, 400 for a body that is not
// UTF-8; nil for other errors.
func bodyError(err error) error {
	var mbe *http.MaxBytesError
	var ne net.Error
	var nu *errNotUTF8
	switch {
	case errors.As(err, &nu):
		return &httpError{status: http.StatusBadRequest, field: "body", msg: nu.Error()}
	case errors.As(err, &mbe):
		return &httpError{status: http.StatusRequestEntityTooLarge, field: "body", msg: fmt.Sprintf("the request body exceeds %d bytes, this endpoint's limit; submit fewer jobs per request", mbe.Limit)}
	case errors.As(err, &ne) && ne.Timeout():
		return &httpError{status: http.StatusRequestTimeout, field: "body", msg: "the request body was not sent in time; send it at once"}
	}
	return nil
}

// decodeSubmit reads a POST /v1/jobs body ({"jobs": [...]}) one job at a
// time, so that a request with more than maxJobsPerRequest jobs is refused
// at the first job too many instead of after decoding them all. It is as
// strict as decode: unknown fields and trailing data are refused.
func decodeSubmit(r *http.Request) (api.SubmitRequest, error) {
	var req api.SubmitRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	malformed := func(err error) error {
		if be := bodyError(err); be != nil {
			return be
		}
		return &httpError{status: http.StatusBadRequest, field: "body", msg: fmt.Sprintf("malformed JSON request body: %v (send {\"jobs\": [JobSpec, ...]})", err)}
	}
	delim := func(want json.Delim) error {
		tok, err := dec.Token()
		if err != nil {
			return malformed(err)
		}
		if d, ok := tok.(json.Delim); !ok || d != want {
			return malformed(fmt.Errorf("found %v where %q belongs", tok, want))
		}
		return nil
	}
	if err := delim('{'); err != nil {
		return req, err
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return req, malformed(err)
		}
		key, _ := tok.(string)
		if (key != "jobs" && key != "test_only") || seen[key] {
			return req, malformed(fmt.Errorf("unknown or repeated field %v", tok))
		}
		seen[key] = true
		if key == "test_only" {
			if err := dec.Decode(&req.TestOnly); err != nil {
				return req, malformed(fmt.Errorf("test_only: %w", err))
			}
			continue
		}
		if err := decodeJobs(dec, &req, malformed); err != nil {
			return req, err
		}
	}
	if err := delim('}'); err != nil {
		return req, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if be := bodyError(err); be != nil {
			return req, be
		}
		return req, malformed(errors.New("unexpected data after the JSON value"))
	}
	return req, nil
}

// decodeJobs reads the jobs array (or null) of a submission.
func decodeJobs(dec *json.Decoder, req *api.SubmitRequest, malformed func(error) error) error {
	tok, err := dec.Token()
	if err != nil {
		return malformed(err)
	}
	if tok == nil {
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return malformed(fmt.Errorf("jobs is %v, not a list", tok))
	}
	for dec.More() {
		if len(req.Jobs) == maxJobsPerRequest {
			return &fieldError{Field: "jobs", Msg: fmt.Sprintf("more than %d jobs in one request: send several requests", maxJobsPerRequest)}
		}
		req.Jobs = append(req.Jobs, api.JobSpec{})
		if err := dec.Decode(&req.Jobs[len(req.Jobs)-1]); err != nil {
			return malformed(fmt.Errorf("job %d: %w", len(req.Jobs), err))
		}
	}
	_, err = dec.Token() // ']'
	if err != nil {
		return malformed(err)
	}
	return nil
}

// largeBody is the body size past which the memory a request needed is
// handed back to the system once it is answered.
const largeBody = 1 << 20

// largeBodies hands back, soon after it is answered, the memory a large
// request body needed (its JSON buffer and decoded strings can be three
// times its size): the Go runtime otherwise keeps it until a later
// collection, and a leader that refused a few large requests would hold
// tens of MB for minutes. It forces at most one collection per
// releaseEvery, the last one after the last large request, so a stream
// of large requests costs a bounded share of the CPU.
var largeBodies memReleaser

const releaseEvery = 5 * time.Second

type memReleaser struct {
	mu      sync.Mutex
	pending bool
	last    time.Time
}

func (m *memReleaser) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pending {
		return
	}
	m.pending = true
	time.AfterFunc(max(0, time.Until(m.last.Add(releaseEvery))), func() {
		debug.FreeOSMemory()
		m.mu.Lock()
		m.pending, m.last = false, time.Now()
		m.mu.Unlock()
	})
}
