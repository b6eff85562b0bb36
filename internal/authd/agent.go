package authd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Scheme is the Authorization scheme of an agent's token: a request
// carries "Corral-Agent TOKEN".
const Scheme = "Corral-Agent"

// renewBefore is how long before its expiry a cached token is replaced:
// long enough for a request to reach a controller and be checked.
const renewBefore = 15 * time.Second

// fetchTimeout bounds one exchange with the agent when the caller's
// context has no earlier deadline.
const fetchTimeout = 5 * time.Second

// Agent asks the host's agent on Socket for the caller's identity token.
// It is the api.Credentials of a CLI on a host with an agent: it keeps the
// token it was given and asks again when less than 15 s of it are left.
// It is safe for concurrent use; use it by pointer.
type Agent struct {
	Socket string

	mu      sync.Mutex
	token   string
	expires time.Time
}

// Authorization returns "Corral-Agent TOKEN".
func (a *Agent) Authorization(ctx context.Context) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.token == "" || time.Until(a.expires) < renewBefore {
		token, c, err := a.fetch(ctx)
		if err != nil {
			return "", err
		}
		a.token, a.expires = token, c.Expires
	}
	return Scheme + " " + a.token, nil
}

// fetch asks the agent for a token and checks that it names the caller.
func (a *Agent) fetch(ctx context.Context) (string, Claims, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", a.Socket)
	if err != nil {
		return "", Claims{}, fmt.Errorf("no identity agent answers at %s: %w (is corral authd running? %s names another socket; CORRAL_TOKEN a token to use instead)", a.Socket, err, SocketEnv)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	var ans answer
	if err := json.NewDecoder(io.LimitReader(conn, MaxTokenBytes+4096)).Decode(&ans); err != nil {
		return "", Claims{}, fmt.Errorf("the identity agent at %s: no answer: %w", a.Socket, err)
	}
	if ans.Error != "" {
		return "", Claims{}, fmt.Errorf("the identity agent at %s refused: %s", a.Socket, ans.Error)
	}
	c, err := peek(ans.Token)
	if err != nil {
		return "", Claims{}, fmt.Errorf("the identity agent at %s answered with a token that is not one: %w", a.Socket, err)
	}
	// A socket that vouches for someone else would make this caller act
	// as that user (their jobs, their files): refuse it.
	if uid := uint32(os.Geteuid()); c.UID != uid {
		return "", Claims{}, fmt.Errorf("the identity agent at %s vouched for uid %d (%s), but you are uid %d: it is not this host's agent, refused", a.Socket, c.UID, c.User, uid)
	}
	return ans.Token, c, nil
}
