package api

import (
	"context"
	"net/http"
)

// Credentials gives the Authorization header a client sends with each
// request: a personal or service token ("Bearer corral_..."), or an
// identity the host's agent vouched for ("Corral-Agent ..."). A source
// may cache what it hands out and renew it before it expires; it is
// called once per request, from any goroutine.
type Credentials interface {
	Authorization(ctx context.Context) (string, error)
}

// BearerToken is a personal or service token (corral token create),
// sent as it is with every request.
type BearerToken string

// Authorization returns "Bearer TOKEN".
func (t BearerToken) Authorization(context.Context) (string, error) {
	return "Bearer " + string(t), nil
}

// authorize sets the caller's credentials and claimed user on req.
func (c *Client) authorize(ctx context.Context, req *http.Request) error {
	if c.User != "" {
		req.Header.Set(UserHeader, c.User)
	}
	if c.Auth == nil {
		return nil
	}
	v, err := c.Auth.Authorization(ctx)
	if err != nil {
		return err
	}
	if v != "" {
		req.Header.Set("Authorization", v)
	}
	return nil
}
