package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"xce/adapters/tlsconf"
	"xce/adapters/wire"
	"xce/schema"
)

// DefaultClientTimeout is DialClient's timeout when given 0.
const DefaultClientTimeout = 5 * time.Second

// Client is a connection of the client protocol to one controller: an
// operator tool or a worker. Calls are serialised; it is safe for
// concurrent use. After an I/O error or a cancelled call the connection is
// closed and every later call fails: dial again.
type Client struct {
	raw     net.Conn
	tc      *tls.Conn
	timeout time.Duration

	mu     sync.Mutex
	nextID uint64
	err    error // sticky: the connection is unusable
}

// ReplyError is a non-zero status answered by the controller.
type ReplyError struct {
	Status int32
	Msg    string
}

func (e *ReplyError) Error() string {
	return fmt.Sprintf("controller refused: status %d: %s", e.Status, e.Msg)
}

// DialClient connects to the controller at addr, completes the mutual TLS
// handshake with m (the server must present a certificate signed by the
// cluster CA for server use; its name is not checked) and sends a CLIENT
// Hello named after m's certificate. timeout bounds the connect, the
// handshake and each later call, on top of ctx; 0 means
// DefaultClientTimeout.
//
// In TLS 1.3 a server that refuses our certificate says so only after our
// side of the handshake: DialClient then succeeds and the first call fails.
func DialClient(ctx context.Context, addr string, m *tlsconf.Material, timeout time.Duration) (*Client, error) {
	if m == nil {
		return nil, errors.New("transport: no TLS material")
	}
	if timeout <= 0 {
		timeout = DefaultClientTimeout
	}
	d := net.Dialer{Timeout: timeout}
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("transport: dial %s: %w", addr, err)
	}
	c := &Client{raw: raw, tc: tls.Client(raw, m.ClientConfig()), timeout: timeout}
	stop := c.deadline(ctx)
	defer stop()
	if err := c.tc.Handshake(); err != nil {
		raw.Close()
		return nil, fmt.Errorf("transport: %s: tls handshake: %w", addr, ctxErr(ctx, err))
	}
	name := m.Name()
	if len(name) > wire.MaxNameLen {
		name = strings.ToValidUTF8(name[:wire.MaxNameLen], "")
	}
	if err := wire.WriteHello(c.tc, &schema.Hello{Kind: schema.Hello_CLIENT, Name: name}); err != nil {
		raw.Close()
		return nil, fmt.Errorf("transport: %s: %w", addr, ctxErr(ctx, err))
	}
	return c, nil
}

// deadline sets the connection's deadline to the earlier of ctx's and
// now+timeout, and interrupts blocked I/O if ctx is cancelled. The
// returned func undoes the interruption hook.
func (c *Client) deadline(ctx context.Context) (stop func() bool) {
	dl := time.Now().Add(c.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	_ = c.raw.SetDeadline(dl)
	return context.AfterFunc(ctx, func() { _ = c.raw.SetDeadline(time.Unix(1, 0)) })
}

// ctxErr prefers ctx's error to the I/O error it caused.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	return err
}

// Call sends req (its id is assigned here) and returns the controller's
// reply, whatever its status.
func (c *Client) Call(ctx context.Context, req *schema.ClientRequest) (*schema.ClientReply, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return nil, c.err
	}
	c.nextID++
	req.Id = c.nextID
	if _, err := wire.EncodeClientRequest(req); err != nil {
		return nil, err // nothing was sent: the connection is still good
	}
	stop := c.deadline(ctx)
	defer stop()
	fail := func(err error) (*schema.ClientReply, error) {
		c.err = fmt.Errorf("transport: client connection to %s: %w", c.raw.RemoteAddr(), ctxErr(ctx, err))
		c.raw.Close()
		return nil, c.err
	}
	if err := wire.WriteClientRequest(c.tc, req); err != nil {
		// The request frame did not go out (in TLS 1.3 this is also how a
		// server's refusal of our certificate can show up first): the node
		// never read it.
		return fail(fmt.Errorf("%w: %w", ErrNotSent, err))
	}
	rep, err := wire.ReadClientReply(c.tc)
	if err != nil {
		return fail(err)
	}
	if rep.GetId() != req.Id {
		return fail(fmt.Errorf("reply id %d to request %d", rep.GetId(), req.Id))
	}
	return rep, nil
}

// ErrNotSent: the request could not be written, so the node never
// processed it (safe to send elsewhere).
var ErrNotSent = errors.New("request not sent")

// Status asks the controller for its status. A non-zero reply status is a
// *ReplyError.
func (c *Client) Status(ctx context.Context) (*schema.StatusReply, error) {
	rep, err := c.Call(ctx, &schema.ClientRequest{Op: &schema.ClientRequest_Status{Status: &schema.StatusRequest{}}})
	if err != nil {
		return nil, err
	}
	if rep.GetStatus() != wire.StatusOK {
		return nil, &ReplyError{Status: rep.GetStatus(), Msg: rep.GetError()}
	}
	st := rep.GetStatusReply()
	if st == nil {
		return nil, fmt.Errorf("transport: status reply from %s has no status body", c.raw.RemoteAddr())
	}
	return st, nil
}

// Close closes the connection, interrupting a call in progress.
func (c *Client) Close() error {
	err := c.raw.Close()
	c.mu.Lock()
	if c.err == nil {
		c.err = fmt.Errorf("transport: client: %w", net.ErrClosed)
	}
	c.mu.Unlock()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
