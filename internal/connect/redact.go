package connect

import (
	"net/url"
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"
)

// redactedHosts returns the hosts of uri without credentials, for error messages.
func redactedHosts(uri string) string {
	cs, err := connstring.Parse(uri)
	if err != nil || len(cs.Hosts) == 0 {
		return "(unparsable URI)"
	}
	return strings.Join(cs.Hosts, ",")
}

// secrets returns the texts of uri that no message may show: its password as written and as
// decoded, longest first. A URI without a password, or without credentials at all, has none.
// The user information is read the way the driver reads it (up to the first "@" after the
// scheme), whether or not the rest of the URI parses.
func secrets(uri string) []string {
	_, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return nil
	}
	userinfo, _, ok := strings.Cut(rest, "@")
	if !ok {
		return nil
	}
	_, password, ok := strings.Cut(userinfo, ":")
	if !ok || password == "" {
		return nil
	}
	out := []string{password}
	if decoded, err := url.PathUnescape(password); err == nil && decoded != "" && decoded != password {
		out = append(out, decoded)
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// redactText returns msg with every secret of uri replaced by "xxxxx".
func redactText(msg, uri string) string {
	for _, s := range secrets(uri) {
		msg = strings.ReplaceAll(msg, s, "xxxxx")
	}
	return msg
}

// redactedError is an error whose text had the URI's password removed.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redactErr removes the URI's password from an error's text, should the driver quote it; err
// is returned as is when its text shows no secret.
func redactErr(err error, uri string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if red := redactText(msg, uri); red != msg {
		return &redactedError{msg: red, err: err}
	}
	return err
}
