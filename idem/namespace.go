package idem

import (
	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
)

// ClientPrefix begins the stored key of every key Do and Middleware are given: they store
// key k as ClientKey(k), ClientPrefix+k. A key a request sends (an Idempotency-Key header, or
// a key a caller of Do took from a request) thus names a record under ClientPrefix and
// nothing else. The records of the store's other users stay out of its reach: the relays'
// leases (package relay refuses an Options.LeaseKey under ClientPrefix) and the keys a
// program passes to Claim, ClaimAs, Complete, Renew, RenewAll and Release itself, which must
// not start with ClientPrefix unless they are ClientKey of a request's key.
const ClientPrefix = "client/"

// MaxClientKeyBytes bounds a key given to Do or sent to Middleware: its stored key,
// ClientPrefix and the key, must fit execstore.MaxIDBytes.
const MaxClientKeyBytes = execstore.MaxIDBytes - len(ClientPrefix)

// ClientKey is the key under which Do and Middleware store key: ClientPrefix+key. Pass it to
// Get, List, Claim and the rest to reach their record, and to `execstore idem get`.
func ClientKey(key string) string { return ClientPrefix + key }

// validateClientKey refuses a key Do or Middleware cannot store: empty, not UTF-8, with a
// NUL, or longer than MaxClientKeyBytes.
func validateClientKey(key string) error {
	if err := contract.ValidateID("key", key); err != nil {
		return err
	}
	if len(key) > MaxClientKeyBytes {
		return contract.Invalid("key", "is %d bytes, more than the %d allowed (MaxClientKeyBytes: its stored key, ClientKey(key), must fit execstore.MaxIDBytes)", len(key), MaxClientKeyBytes)
	}
	return nil
}
