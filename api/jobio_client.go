package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
)

// streamRequest sends a request whose body or answer is a stream (exec,
// files, output). It tries the next member only when one cannot be
// reached, before any byte of the body left: a stream is not replayed.
func (c *Client) streamRequest(ctx context.Context, method, p string, body io.Reader, hdr http.Header) (*http.Response, error) {
	var lastErr error
	for i := 0; i < len(c.addrs); i++ {
		k := (int(c.next.Load()) + i) % len(c.addrs)
		req, err := http.NewRequestWithContext(ctx, method, c.addrs[k]+p, body)
		if err != nil {
			return nil, err
		}
		for name, v := range hdr {
			req.Header[name] = v
		}
		if err := c.authorize(ctx, req); err != nil {
			return nil, err
		}
		sent := &countingReader{r: body}
		if body != nil {
			req.Body = io.NopCloser(sent)
		}
		resp, err := c.http.Do(req)
		if err != nil {
			lastErr = err
			if sent.n > 0 || ctx.Err() != nil {
				return nil, err
			}
			continue
		}
		if resp.StatusCode >= 300 && resp.StatusCode != http.StatusSwitchingProtocols {
			defer resp.Body.Close()
			data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			var e Error
			if json.Unmarshal(data, &e) != nil || e.Error == "" {
				e.Error = fmt.Sprintf("%s %s: %s: %s", method, p, resp.Status, strings.TrimSpace(string(data)))
			}
			return nil, &APIError{Status: resp.StatusCode, Message: e.Error, Field: e.Field, Errno: e.Errno}
		}
		return resp, nil
	}
	return nil, fmt.Errorf("no controller answered (tried %s): %w", strings.Join(c.addrs, ", "), lastErr)
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func jobPath(id uint64, what string) string {
	return "/v1/jobs/" + strconv.FormatUint(id, 10) + "/" + what
}

// SignalJob delivers a signal to a running job's processes.
func (c *Client) SignalJob(ctx context.Context, id uint64, req SignalRequest) error {
	return c.do(ctx, http.MethodPost, jobPath(id, "signal"), req, nil)
}

// ReadJobFile opens a file of a running job for reading (corral cp
// JOB:PATH LOCAL), as the job's user. It returns the file's permission
// bits.
func (c *Client) ReadJobFile(ctx context.Context, id uint64, path string) (io.ReadCloser, uint32, error) {
	resp, err := c.streamRequest(ctx, http.MethodGet, jobPath(id, "file")+"?path="+url.QueryEscape(path), nil, nil)
	if err != nil {
		return nil, 0, err
	}
	mode, _ := strconv.ParseUint(resp.Header.Get(FileModeHeader), 8, 32)
	return resp.Body, uint32(mode), nil
}

// WriteJobFile writes body to a file of a running job (corral cp LOCAL
// JOB:PATH), as the job's user, creating or truncating it with mode.
func (c *Client) WriteJobFile(ctx context.Context, id uint64, path string, mode uint32, body io.Reader) error {
	q := "?path=" + url.QueryEscape(path) + "&mode=" + strconv.FormatUint(uint64(mode), 8)
	hdr := http.Header{"Content-Type": {"application/octet-stream"}}
	resp, err := c.streamRequest(ctx, http.MethodPut, jobPath(id, "file")+q, body, hdr)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// JobOutput streams a running job's output (stderr: its error file) from
// its node until the job ends.
func (c *Client) JobOutput(ctx context.Context, id uint64, stderr bool) (io.ReadCloser, error) {
	q := "?stream=stdout"
	if stderr {
		q = "?stream=stderr"
	}
	resp, err := c.streamRequest(ctx, http.MethodGet, jobPath(id, "output")+q, nil, nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Exec starts a command in a running job and returns its stream.
func (c *Client) Exec(ctx context.Context, id uint64, req ExecRequest) (*ExecStream, error) {
	return c.exec(ctx, id, jobPath(id, "exec"), req)
}

// ExecTask runs req as a task of step step of job id on node, one of the
// nodes of the job's run (srun's tasks).
func (c *Client) ExecTask(ctx context.Context, id uint64, node string, step int, req ExecRequest) (*ExecStream, error) {
	q := url.Values{"node": {node}, "step": {strconv.Itoa(step)}}
	return c.exec(ctx, id, jobPath(id, "exec")+"?"+q.Encode(), req)
}

func (c *Client) exec(ctx context.Context, id uint64, path string, req ExecRequest) (*ExecStream, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hdr := http.Header{"Content-Type": {"application/json"}, "Connection": {"Upgrade"}, "Upgrade": {ExecUpgrade}}
	resp, err := c.streamRequest(ctx, http.MethodPost, path, bytes.NewReader(body), hdr)
	if err != nil {
		return nil, err
	}
	rw, ok := resp.Body.(io.ReadWriteCloser)
	if resp.StatusCode != http.StatusSwitchingProtocols || !ok {
		resp.Body.Close()
		return nil, fmt.Errorf("exec into job %d: the controller answered %s instead of switching to the exec stream", id, resp.Status)
	}
	return &ExecStream{rw: rw}, nil
}

// ExecStream is the client's end of an exec: frames both ways. Writes may
// come from several goroutines; Next from one.
type ExecStream struct {
	rw  io.ReadWriteCloser
	wmu sync.Mutex
}

func (e *ExecStream) send(t StreamType, p []byte) error {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	return WriteStreamFrame(e.rw, t, p)
}

// Write sends bytes to the command's stdin.
func (e *ExecStream) Write(p []byte) (int, error) {
	for off := 0; off < len(p); off += 64 << 10 {
		if err := e.send(StreamStdin, p[off:min(off+64<<10, len(p))]); err != nil {
			return off, err
		}
	}
	return len(p), nil
}

// CloseStdin sends the end of the command's stdin.
func (e *ExecStream) CloseStdin() error { return e.send(StreamStdinClose, nil) }

// Resize changes the command's terminal size.
func (e *ExecStream) Resize(rows, cols uint16) error {
	b, _ := json.Marshal(StreamResizeMsg{Rows: rows, Cols: cols})
	return e.send(StreamResize, b)
}

// Signal delivers a signal to the command's process group.
func (e *ExecStream) Signal(sig string) error {
	b, _ := json.Marshal(SignalRequest{Signal: sig})
	return e.send(StreamSignal, b)
}

// Next returns the next output frame: StreamStdout or StreamStderr with
// bytes, or StreamExit with the ExecExit, which is last.
func (e *ExecStream) Next() (StreamType, []byte, error) {
	t, p, err := ReadStreamFrame(e.rw)
	if err == nil && t != StreamStdout && t != StreamStderr && t != StreamExit {
		err = fmt.Errorf("exec stream: the node sent a frame of type %d", t)
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF // the exit frame comes before the end
	}
	return t, p, err
}

// Close ends the stream; a command still running is killed.
func (e *ExecStream) Close() error { return e.rw.Close() }
