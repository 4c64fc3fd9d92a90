package connect

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/auth"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/execstore/execstore/server"
)

// attemptTimeout bounds one ping of Ping.
const attemptTimeout = 2 * time.Second

// Ping pings the server of client, retrying with exponential backoff from first until ctx
// ends. Refused credentials are not retried. The error says why it gave up: it matches
// server.ErrConnectionRefused, ErrNoAnswer, ErrNotMongoDB or ErrAuthFailed when the last
// attempt tells which, wraps the last attempt's error, and ctx's error when ctx ended.
func Ping(ctx context.Context, client *mongo.Client, first time.Duration) error {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = first
	b.MaxInterval = 5 * time.Second
	b.MaxElapsedTime = 0
	var last error
	err := backoff.Retry(func() error {
		attempt, cancel := context.WithTimeout(ctx, attemptTimeout)
		defer cancel()
		last = client.Ping(attempt, nil)
		if errors.Is(reachFailure(last), server.ErrAuthFailed) {
			return backoff.Permanent(last)
		}
		return last
	}, backoff.WithContext(b, ctx))
	if err == nil {
		return nil
	}
	if last == nil { // ctx ended before the first attempt
		return err
	}
	why := reachFailure(last)
	ended := ctx.Err()
	switch {
	case why != nil && ended != nil:
		return fmt.Errorf("%w (%w; last attempt: %w)", why, ended, last)
	case why != nil:
		return fmt.Errorf("%w: %w", why, last)
	case ended != nil:
		return fmt.Errorf("%w (last attempt: %w)", ended, last)
	}
	return last
}

// reachFailure reads in a failed ping's error why the server could not be reached: one of
// server's reach errors, or nil when the error does not tell.
func reachFailure(err error) error {
	var authErr *auth.Error
	var sel topology.ServerSelectionError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &authErr):
		return server.ErrAuthFailed
	case errors.As(err, &sel):
	case errors.Is(err, syscall.ECONNREFUSED):
		return server.ErrConnectionRefused
	case errors.Is(err, context.DeadlineExceeded):
		return server.ErrNoAnswer
	default:
		return nil
	}
	var found []error
	for _, s := range sel.Desc.Servers {
		if s.LastError != nil {
			found = append(found, serverFailure(s.LastError))
		}
	}
	if len(found) == 0 { // no server has answered, nor failed, yet
		return server.ErrNoAnswer
	}
	for _, failure := range []error{server.ErrAuthFailed, server.ErrNotMongoDB, server.ErrConnectionRefused, server.ErrNoAnswer} {
		for _, f := range found {
			if f == failure {
				return failure
			}
		}
	}
	return nil
}

// serverFailure classifies the last error of one server the driver tried: refused, timed
// out (nothing answered), refused credentials, or an answer that is not the wire protocol. It
// is nil for an error that says none of these: a host name that does not resolve, or an
// error the server itself reported.
func serverFailure(err error) error {
	var authErr *auth.Error
	var dial *net.OpError
	var reported driver.Error
	switch {
	case errors.As(err, &authErr):
		return server.ErrAuthFailed
	case errors.Is(err, syscall.ECONNREFUSED):
		return server.ErrConnectionRefused
	case errors.As(err, &dial) && dial.Op == "dial":
		if dial.Timeout() {
			return server.ErrNoAnswer
		}
		return nil
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return server.ErrNoAnswer
	case errors.As(err, &reported) && reported.Code != 0:
		return nil
	}
	return server.ErrNotMongoDB
}

// isTimeout reports whether err is a network timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// bounded returns ctx bounded by timeout when it has no deadline of its own; bound reports
// whether it was.
func bounded(ctx context.Context, timeout time.Duration) (_ context.Context, cancel context.CancelFunc, bound bool) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}, false
	}
	ctx, cancel = context.WithTimeout(ctx, timeout)
	return ctx, cancel, true
}
