package server

import "errors"

// These errors say why Open gave up on a server it could not reach. Open's error matches one
// of them with errors.Is when the last attempt said which. It also wraps the driver's error.
// When Open ran out of time (Connection.ConnectTimeout or the caller's deadline), it wraps
// context.DeadlineExceeded too.
var (
	// ErrConnectionRefused means nothing listens at the address.
	ErrConnectionRefused = errors.New("connection refused: nothing listens at the address")
	// ErrNoAnswer means a connection was made, or is still being made, and nothing answered.
	ErrNoAnswer = errors.New("nothing answered")
	// ErrNotMongoDB means something answered that is not a MongoDB server: an HTTP server,
	// a TLS server to a client without TLS, anything that does not speak the wire protocol.
	ErrNotMongoDB = errors.New("something answered that is not a MongoDB server")
	// ErrAuthFailed means the server refused the credentials. Open does not retry it.
	ErrAuthFailed = errors.New("authentication failed")
)
