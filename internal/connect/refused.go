package connect

import (
	"errors"
	"log/slog"

	"github.com/execstore/execstore"
)

// Refused returns err, having logged it to log (nil: not logged) as an error naming store
// when it is a refusal of the server or the deployment at Open (execstore.ErrInvalid): an
// operator must see why a process cannot start, whatever its caller does with the error.
func Refused(log *slog.Logger, store string, err error) error {
	if log != nil && errors.Is(err, execstore.ErrInvalid) {
		log.Error("execstore: server refused at Open", "store", store, "err", err)
	}
	return err
}
